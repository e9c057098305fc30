"""Issue 9: broker faults. The embedded broker's death is detected and named; it
dies with its parent; an external broker's outage keeps metrics served, shows
``dpstream_broker_connected 0`` and ends in a clear exit after the limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.kafka import ROOT
from tests.support.processes import wait_for, worker_env
from worker.kafka.embedded import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker




def _start(topo: Path, log: Path, env: dict[str, str],
           faust: bool = False) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", "worker.cli.main", "run",
                                 *(() if faust else ("--no-faust",)),
                                 "--topology", str(topo)], cwd=ROOT, env=env, stdout=f,
                                stderr=subprocess.STDOUT)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]




def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat


@pytest.fixture
def proc_cleanup():
    procs: list[subprocess.Popen[bytes]] = []
    pids: list[int] = []
    yield procs, pids
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("faust", [False, True], ids=["asyncio", "faust"])
def test_embedded_broker_death_is_detected_and_named(make_topology, tmp_path,
                                                     proc_cleanup, faust: bool) -> None:
    procs, pids = proc_cleanup
    log = tmp_path / "run.log"
    proc = _start(make_topology(partitions=1), log, worker_env(), faust=faust)
    procs.append(proc)
    assert wait_for(lambda: "worker started" in log.read_text(errors="replace"), 60), \
        log.read_text(errors="replace")
    (child,) = _children(proc.pid)
    pids.append(child)
    lines_before = len(log.read_text(errors="replace").splitlines())
    os.kill(child, signal.SIGKILL)
    t0 = time.monotonic()
    assert wait_for(lambda: proc.poll() is not None, 20), "the worker must stop at once"
    text = log.read_text(errors="replace")
    assert proc.returncode != 0
    assert "embedded broker" in text and "died (killed by signal 9)" in text
    assert "in-memory data" in text
    assert time.monotonic() - t0 < 20
    assert len(text.splitlines()) - lines_before < 60, text[-3000:]
    # the last line is the one-line report, in either runner (no Faust crash dump)
    last = text.strip().splitlines()[-1]
    assert last.startswith("dpstream: the embedded broker") and "died" in last, text[-3000:]
    for noise in ("Traceback", "NoneType: None", "Crashed reason", "experienced a crash"):
        assert noise not in text, text[-3000:]


def test_embedded_broker_dies_with_its_parent(make_topology, tmp_path, proc_cleanup) -> None:
    procs, pids = proc_cleanup
    log = tmp_path / "run.log"
    proc = _start(make_topology(partitions=1), log, worker_env())
    procs.append(proc)
    assert wait_for(lambda: "worker started" in log.read_text(errors="replace"), 60)
    (child,) = _children(proc.pid)
    pids.append(child)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_for(lambda: not _alive(child), 10), "the embedded broker outlived kill -9"


def test_external_broker_outage_metrics_served_then_clear_exit(make_topology, tmp_path,
                                                               proc_cleanup) -> None:
    procs, _ = proc_cleanup
    b = EmbeddedBroker()
    b.start()
    try:
        port = free_port()
        log = tmp_path / "run.log"
        proc = _start(make_topology(partitions=1), log, worker_env(
            DPSTREAM_BROKER=b.bootstrap, DPSTREAM_METRICS_PORT=str(port),
            DPSTREAM_BROKER_OUTAGE_LIMIT_S="8", DPSTREAM_GROUP_ID="outage"))
        procs.append(proc)
        assert wait_for(lambda: "worker started" in log.read_text(errors="replace"), 60)
        b.stop()
        t0 = time.monotonic()

        def scrape() -> str:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return r.read().decode()
            except OSError:
                return ""

        assert wait_for(lambda: "dpstream_broker_connected 0.0" in scrape(), 15), \
            log.read_text(errors="replace")[-3000:]
        assert wait_for(lambda: proc.poll() is not None, 40)
        elapsed = time.monotonic() - t0
        text = log.read_text(errors="replace")
        assert proc.returncode != 0 and 8 <= elapsed < 40, (elapsed, text[-3000:])
        assert "unreachable for" in text and "DPSTREAM_BROKER_OUTAGE_LIMIT_S" in text
        outage_lines = text.split("unreachable (", 1)[1].splitlines()
        assert len(outage_lines) < 80, text[-4000:]
    finally:
        b.stop()


def test_broker_freeze_is_survived_with_exact_counts(make_topology, tmp_path, unique,
                                                     proc_cleanup) -> None:
    """SIGSTOP of the broker for 10 s (longer than a probe's timeout, shorter than the
    outage limit): readiness drops and comes back, nothing is lost or counted twice."""
    import asyncio
    import json
    from collections import Counter

    from tests.support.kafka import create_topic, latest_by_shard, produce, read_all

    procs, _ = proc_cleanup
    b = EmbeddedBroker()
    b.start()
    try:
        port = free_port()
        log = tmp_path / "run.log"
        topo = make_topology(partitions=1)
        asyncio.run(create_topic(b.bootstrap, f"{unique}-in", 1))
        proc = _start(topo, log, worker_env(DPSTREAM_BROKER=b.bootstrap,
                                            DPSTREAM_METRICS_PORT=str(port),
                                            DPSTREAM_GROUP_ID=unique, DPSTREAM_ASSIGNMENT="static"))
        procs.append(proc)
        exact: Counter[str] = Counter()

        def batch(n: int) -> list[tuple[bytes | None, bytes]]:
            out = []
            for i in range(n):
                src = f"10.0.0.{i % 9}"
                exact[src] += 1
                out.append((b"r0", json.dumps({"router": "r0", "src": src}).encode()))
            return out

        asyncio.run(produce(b.bootstrap, f"{unique}-in", batch(300)))
        assert wait_for(lambda: "worker started" in log.read_text(errors="replace"), 60)

        def scrape() -> str:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    return r.read().decode()
            except OSError:
                return ""

        assert b.pid is not None
        os.kill(b.pid, signal.SIGSTOP)
        try:
            assert wait_for(lambda: "dpstream_broker_connected 0.0" in scrape(), 10)
            time.sleep(max(0.0, 10 - 3))  # the freeze itself (not a wait for a condition)
        finally:
            os.kill(b.pid, signal.SIGCONT)
        assert wait_for(lambda: "dpstream_broker_connected 1.0" in scrape(), 30)
        asyncio.run(produce(b.bootstrap, f"{unique}-in", batch(200)))

        def done(msgs) -> bool:
            latest = latest_by_shard(msgs)
            return "r0" in latest and latest["r0"]["payload"]["counts"] == dict(exact)

        out = asyncio.run(read_all(b.bootstrap, f"{unique}-out", done, 90))
        assert done(out), log.read_text(errors="replace")[-3000:]
        assert proc.poll() is None
    finally:
        b.stop()
