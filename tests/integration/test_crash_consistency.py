"""7a: kill -9 the worker during ingestion and during release; nothing lost or doubled.

The worker runs with zero noise and the exact-count test mechanism, so the
final release of every shard must equal the exact counts of every produced
event. Half of the incarnations also run with crash points that SIGKILL the
worker between "checkpoint written" and "release published" (the window the
checkpoint-first protocol exists for); the others are killed by the test at a
random moment while a chunk of events is being ingested. Finally no
``(topology, shard, epoch, seq)`` may have been published with two payloads.
The random kill delays are seeded (``random.Random(7)``); there is no
statistical assertion, so the test has no false-failure rate beyond timeouts.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.conftest import (
    conflicting_ids,
    create_topic,
    latest_by_shard,
    produce,
    read_all,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]

KILLS = 12


def _wait_started(log_path: Path, proc, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_path.exists() and "worker started" in log_path.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def test_kill9_during_ingestion_and_release(broker, workers, make_topology, unique,
                                            tmp_path) -> None:
    rng = random.Random(7)
    topo = make_topology(partitions=2, tick_ms=100, every_ticks=1, epoch_ticks=10_000_000)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    routers = [f"r{i}" for i in range(6)]
    exact: dict[str, Counter[str]] = {r: Counter() for r in routers}
    self_killed = 0
    for k in range(KILLS):
        crash = "after_checkpoint:0.15,mid_publish:0.15" if k % 2 else ""
        proc = workers.start(topo, group=unique, assignment="static", crash_points=crash)
        log_path = tmp_path / f"worker-{len(workers.procs) - 1}.log"
        started = _wait_started(log_path, proc)
        chunk = []
        for _ in range(400):
            r = rng.choice(routers)
            src = f"10.1.{rng.randrange(4)}.{int(rng.paretovariate(1.2)) % 40}"
            exact[r][src] += 1
            chunk.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
        asyncio.run(produce(broker.bootstrap, f"{unique}-in", chunk))
        if started:
            deadline = time.monotonic() + rng.uniform(0.0, 0.6)
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)  # the kill moment itself is what is random here
        if proc.poll() is not None:
            self_killed += 1
        workers.kill9(proc)
    final = workers.start(topo, group=unique, assignment="static")

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                   for r, c in exact.items() if c)

    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 90,
                                give_up=lambda: final.poll() is not None))
    latest = latest_by_shard(msgs)
    for r, c in exact.items():
        got = Counter(latest.get(r, {}).get("payload", {}).get("counts", {}))
        assert got == c, (r, sum(got.values()), sum(c.values()), workers.logs()[-3000:])
    assert conflicting_ids(msgs) == []
    logs = workers.logs()
    assert "crash point" in logs or self_killed > 0, "no kill landed inside the release path"
    assert workers.terminate(final) == 0
