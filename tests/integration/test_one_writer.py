"""Issue 19: one writer per release, on the real (embedded) broker with worker processes.

Each test reads everything the release topic received and checks it with
:func:`privacy_audit.duplicates.duplicate_report`: no ``(topology, shard, epoch, seq)``
may carry two different payloads (byte-identical re-publications are allowed). What each
proves is in its docstring; the mechanism is broker-independent (claims and owner
headers on the single-partition checkpoint topic, read back after every head), so the
same code fences on Kafka. Before this change, the second-deployment scenario published
42 of 58 release ids twice with different payloads in a 50 s run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from privacy_audit.duplicates import duplicate_report
from tests.support.kafka import create_topic, produce, read_all

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROUTERS = [f"r{i}" for i in range(6)]


def _events(start: int, n: int) -> list[tuple[bytes | None, bytes]]:
    return [(ROUTERS[i % len(ROUTERS)].encode(),
             json.dumps({"router": ROUTERS[i % len(ROUTERS)], "src": f"s{i % 7}"}).encode())
            for i in range(start, start + n)]


class Feeder:
    """Produces a few events every 100 ms in a thread until stopped (the input keeps
    changing, so two writers of one release would draw different payloads)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic, self.sent = bootstrap, topic, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            asyncio.run(produce(self.bootstrap, self.topic, _events(self.sent, 12)))
            self.sent += 12
            self._stop.wait(0.1)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(30)


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def _log(tmp_path: Path, i: int) -> str:
    path = tmp_path / f"worker-{i}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _releases(bootstrap: str, topic: str) -> list[Any]:
    return asyncio.run(read_all(bootstrap, topic, lambda m: False, 4))


def test_second_deployment_refuses_the_first_ones_checkpoint(broker, workers, make_topology,
                                                             unique, tmp_path) -> None:
    """A second deployment (another DPSTREAM_GROUP_ID) pointed at the first one's
    checkpoint topic refuses to start, naming both ids, topology, partition and the fix;
    it writes no claim (the first one is not fenced) and publishes nothing: 0 conflicting
    releases while the first one goes on publishing."""
    topo = make_topology(partitions=2, tick_ms=200, every_ticks=2)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    ck = {"DPSTREAM_CHECKPOINT_TOPIC": f"{unique}-ck"}
    out = f"{unique}-out"
    with Feeder(broker.bootstrap, f"{unique}-in"):
        blue = workers.start(topo, group=f"{unique}-blue", extra_env=ck, args=("--no-faust",))
        assert _wait(lambda: "restored" in _log(tmp_path, 0) or "starting fresh" in
                     _log(tmp_path, 0), 60), workers.logs()
        assert len(_releases(broker.bootstrap, out)) > 0, workers.logs()
        green = workers.start(topo, group=f"{unique}-green", extra_env=ck,
                              args=("--no-faust",))
        rc = green.wait(timeout=90)
        time.sleep(2)  # blue keeps publishing
    msgs = _releases(broker.bootstrap, out)
    text = _log(tmp_path, 1)
    assert rc != 0, text
    assert f"written by deployment '{unique}-blue'" in text, text
    assert f"this worker is deployment '{unique}-green'" in text, text
    assert f"topology {unique} partition" in text and "DPSTREAM_TAKEOVER_FROM=" in text, text
    assert "claimed the partition" not in _log(tmp_path, 0), _log(tmp_path, 0)
    assert blue.poll() is None, workers.logs()
    report = duplicate_report([m.value for m in msgs])
    assert report.conflicting == [], str(report)
    assert workers.terminate(blue) == 0


def test_takeover_fences_the_old_deployment(broker, workers, make_topology, unique,
                                            tmp_path) -> None:
    """Blue/green switch: green starts with DPSTREAM_TAKEOVER_FROM=<blue>, restores
    blue's checkpoints and claims the partitions; blue's next checkpoint is fenced, its
    pending releases are withheld and it stops with an error naming green. Every release
    id keeps one payload across the switch, and seq continues (no restart from 0)."""
    topo = make_topology(partitions=2, tick_ms=200, every_ticks=2)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    ck = {"DPSTREAM_CHECKPOINT_TOPIC": f"{unique}-ck"}
    out = f"{unique}-out"
    with Feeder(broker.bootstrap, f"{unique}-in"):
        blue = workers.start(topo, group=f"{unique}-blue", extra_env=ck, args=("--no-faust",))
        assert _wait(lambda: len(_releases(broker.bootstrap, out)) > 0, 60), workers.logs()
        green = workers.start(topo, group=f"{unique}-green", args=("--no-faust",), extra_env={
            **ck, "DPSTREAM_TAKEOVER_FROM": f"{unique}-blue"})
        rc = blue.wait(timeout=90)
        time.sleep(3)  # green publishes on
    msgs = _releases(broker.bootstrap, out)
    assert rc != 0 and f"deployment '{unique}-green' claimed the partition" in _log(
        tmp_path, 0), workers.logs()
    assert green.poll() is None, workers.logs()
    report = duplicate_report([m.value for m in msgs])
    assert report.conflicting == [], str(report)
    seqs: dict[tuple[str, int], set[int]] = {}
    for m in msgs:
        doc = json.loads(m.value)
        seqs.setdefault((doc["shard"], doc["epoch"]), set()).add(doc["seq"])
    for key, s in seqs.items():  # one epoch, no gap, no restart
        assert s == set(range(max(s) + 1)), (key, sorted(s)[:20])
    assert workers.terminate(green) == 0


def test_paused_zombie_is_fenced_after_its_partitions_moved(broker, workers, make_topology,
                                                            unique, tmp_path) -> None:
    """Worker A owns both partitions and is SIGSTOPped (a long GC pause, a partition);
    B (same deployment) takes them over after A's session expires, restores A's last
    checkpoint and publishes on; A is resumed with its old state and its timer and
    rebalance callbacks run at once. A's first checkpoint after B's claim is fenced
    (logged, counted): it publishes nothing drawn after the claim. 0 release ids with two
    payloads over the whole run (while the input kept changing)."""
    topo = make_topology(partitions=2, tick_ms=200, every_ticks=2)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    out = f"{unique}-out"
    with Feeder(broker.bootstrap, f"{unique}-in"):
        a = workers.start(topo, group=unique, args=("--no-faust",))
        assert _wait(lambda: len(_releases(broker.bootstrap, out)) > 0, 60), workers.logs()
        os.kill(a.pid, signal.SIGSTOP)
        try:
            b = workers.start(topo, group=unique, args=("--no-faust",))
            assert _wait(lambda: _log(tmp_path, 1).count("restored") >= 2, 90), workers.logs()
            time.sleep(2)  # B publishes releases A also has state for
        finally:
            os.kill(a.pid, signal.SIGCONT)
        assert _wait(lambda: "claimed the partition" in _log(tmp_path, 0), 30), workers.logs()
        time.sleep(8)  # A rejoins; the partitions are split again (a normal handover)
    msgs = _releases(broker.bootstrap, out)
    report = duplicate_report([m.value for m in msgs])
    assert report.conflicting == [], str(report) + workers.logs()
    assert a.poll() is None and b.poll() is None, workers.logs()
    assert workers.terminate(a) == 0 and workers.terminate(b) == 0
