"""Issue 22 item 3: ``tail``, ``query`` and ``dashboard --broker`` keep the security
settings and fail on a bad or unreachable broker in one line, exit code 2.

Before: ``--broker`` dropped every ``DPSTREAM_SASL_*``/``SSL_*`` setting, and a
closed port ended in a traceback (aiokafka's ``KafkaConnectionError`` out of
``query``, librdkafka's ``KafkaException`` out of ``tail``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from worker.cli.read import read_settings

ROOT = Path(__file__).resolve().parents[4]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed once the block ends: nothing listens


@pytest.mark.parametrize("argv", [
    ["tail", "--topic", "rel", "--seconds", "1"],
    ["query", "--topic", "rel", "--shard", "r0"],
    ["dashboard", "--topic", "rel", "--port", "0", "--seconds", "1"],
])
def test_unreachable_broker_is_one_line_exit_2(argv: list[str]) -> None:
    port = closed_port()
    proc = subprocess.run([sys.executable, "-m", "worker.cli.main", *argv,
                           "--broker", f"127.0.0.1:{port}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                      "PYTHONPATH": str(ROOT)})
    err = [ln for ln in proc.stderr.splitlines() if "WARNING" not in ln and "INFO" not in ln]
    assert proc.returncode == 2, proc.stderr
    assert len(err) == 1 and err[0].startswith("dpstream: cannot reach the broker at "
                                               f"127.0.0.1:{port}"), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("broker", ["nohost", "h:port", "h:0", "a:1,:2"])
def test_malformed_broker_is_one_line_exit_2(broker: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli.read import query_main, tail_main

    for main in (tail_main, query_main):
        args = ["--topic", "rel", "--broker", broker] + (["--shard", "r0"]
                                                         if main is query_main else [])
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is not host:port" in err[0]


def test_broker_flag_keeps_the_security_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSTREAM_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("DPSTREAM_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("DPSTREAM_SASL_USERNAME", "reader")
    monkeypatch.setenv("DPSTREAM_SASL_PASSWORD", "pw")
    monkeypatch.setenv("DPSTREAM_BROKER", "env:9092")
    s = read_settings("flag:9093")
    assert s.broker == "flag:9093"
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_password) == (
        "SASL_SSL", "SCRAM-SHA-256", "pw")
