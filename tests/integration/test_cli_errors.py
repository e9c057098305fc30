"""Every ``dpstream`` command ends on a bad broker address or a taken port with one
line ``dpstream: <what>; <fix>`` on stderr, exit code 2 and no traceback (issue 23).

Each command runs as a subprocess against a closed port (an ephemeral port bound
and released) or a port held by a listening test socket on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPO = str(ROOT / "topologies/netmon.yaml")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def closed() -> str:
    return f"127.0.0.1:{_closed_port()}"


@pytest.fixture(scope="module")
def held() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def dpstream(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "DPSTREAM_EMBEDDED_BROKER": "false",
               **(env or {})}
    environ.pop("DPSTREAM_BROKER", None)
    return subprocess.run([sys.executable, "-m", "worker.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, env=environ, timeout=120)


def assert_one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dpstream: ") and "; " in lines[0], lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("faust", [False, True], ids=["no-faust", "faust"])
def test_run_bad_broker(closed: str, faust: bool) -> None:
    flags = [] if faust else ["--no-faust"]
    proc = dpstream("run", *flags, "--broker", closed, "--metrics-port", "0",
                    "--topology", TOPO)
    assert_one_line(proc, f"cannot reach the broker at {closed}", "--broker")


def test_run_taken_metrics_port(closed: str, held: int) -> None:
    proc = dpstream("run", "--no-faust", "--broker", closed, "--metrics-port", str(held),
                    "--topology", TOPO)
    assert_one_line(proc, f"127.0.0.1:{held}", "--metrics-port")


def test_demo_taken_ports(held: int) -> None:
    assert_one_line(dpstream("demo", "--no-faust", "--metrics-port", str(held),
                             "--seconds", "1"), "--metrics-port")
    assert_one_line(dpstream("demo", "--no-faust", "--metrics-port", "0", "--dashboard-port",
                             str(held), "--seconds", "1"), "dashboard port", "--dashboard-port")


def test_validate_and_plan(closed: str) -> None:
    # no broker needed: a bad DPSTREAM_BROKER changes nothing; a bad file is one line
    env = {"DPSTREAM_BROKER": closed}
    assert dpstream("validate", TOPO, env=env).returncode == 0
    assert_one_line(dpstream("validate", "/nonexistent/t.yaml", env=env), "cannot read")
    assert_one_line(dpstream("plan", "/nonexistent/t.yaml", env=env), "cannot read")
    assert_one_line(dpstream("validate", TOPO, env={"DPSTREAM_LOG_FORMAT": "xml"}),
                    "DPSTREAM_LOG_FORMAT")


@pytest.mark.parametrize("broker", ["closed", "unresolvable"])
def test_tail_query_dashboard_bad_broker(closed: str, broker: str) -> None:
    addr = closed if broker == "closed" else "no-such-host.invalid:9092"
    msg = f"cannot reach the broker at {addr}"
    assert_one_line(dpstream("tail", "--topic", "t", "--broker", addr, "--seconds", "2"), msg)
    assert_one_line(dpstream("query", "--topic", "t", "--shard", "r1", "--broker", addr,
                             "--wait", "1"), msg)
    assert_one_line(dpstream("dashboard", "--topic", "t", "--broker", addr, "--port", "0",
                             "--seconds", "2"), msg)


def test_tail_without_broker() -> None:
    assert_one_line(dpstream("tail", "--topic", "t"), "--broker", "DPSTREAM_BROKER")


def test_dashboard_taken_port(closed: str, held: int) -> None:
    assert_one_line(dpstream("dashboard", "--topic", "t", "--broker", closed, "--port",
                             str(held), "--seconds", "1"), f"127.0.0.1:{held}", "--port")
