"""Issue 23: a worker restarts at once on the same metrics port.

Scrapes leave TIME-WAIT sockets on the metrics port (the server closes each
HTTP/1.0 connection first); the start-up port check and the HTTP server must
bind with ``SO_REUSEADDR`` like any server, so only a port another process
truly listens on is refused.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request

import pytest

from sketches.errors import DPStreamError, SpecError
from worker.cli.run import _check_metrics_port
from worker.config.settings import Settings
from worker.observe.metrics import Metrics


def _time_wait_on(port: int) -> bool:
    """True if a TCP socket on local ``port`` is in TIME-WAIT (``ss``, else /proc)."""
    try:
        out = subprocess.run(["ss", "-tanH", "state", "time-wait", f"( sport = :{port} )"],
                             capture_output=True, text=True, timeout=5).stdout
        return bool(out.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[1].endswith(want) and cols[3] == "06":  # 06 = TIME_WAIT
                    return True
    return False


def _settings(port: int) -> Settings:
    import dataclasses

    return dataclasses.replace(Settings.from_env(), metrics_host="127.0.0.1",
                               metrics_port=port)


def test_restart_on_the_same_port_right_after_scrapes() -> None:
    m = Metrics()
    port = m.serve("127.0.0.1", 0)
    for _ in range(5):  # HTTP/1.0 scrapes read to EOF: the server closes first (TIME-WAIT
        # is then on the server's port, as after Prometheus' scrapes; a client that closed
        # first would leave it on its own ephemeral port instead)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            reply = b""
            while chunk := c.recv(65536):
                reply += chunk
            assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200")
    m.close()
    deadline = time.monotonic() + 5
    while not _time_wait_on(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _time_wait_on(port), "the scrapes should have left TIME-WAIT sockets"
    # the CLI's start-up check and the server itself, at once
    _check_metrics_port(_settings(port))
    again = Metrics()
    try:
        assert again.serve("127.0.0.1", port) == port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200
    finally:
        again.close()


def test_a_port_another_listener_holds_is_still_refused_in_one_line() -> None:
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # even with it set
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(DPStreamError) as check:
            _check_metrics_port(_settings(port))
        with pytest.raises(SpecError) as serve:
            Metrics().serve("127.0.0.1", port)
    for exc in (check.value, serve.value):
        text = str(exc)
        assert "\n" not in text and f"127.0.0.1:{port} is already in use" in text
        assert "--metrics-port" in text
