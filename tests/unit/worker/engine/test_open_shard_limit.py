"""DPSTREAM_MAX_OPEN_SHARDS is enforced: a worker holds at most that many shards of one
open-set topology; records of further new shards are dead-lettered ``shard_limit``.

Without it, a producer that sends records with ever new shard keys makes the worker build
one state per key (448 KiB for netmon's LazyCMS) until it runs out of memory.
"""

from __future__ import annotations

import asyncio
import json

from tests.support.shards import TEXT, shard_keys
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.ingest.routing import ShardBudget, ShardGate


def test_gate_admits_up_to_the_budget_across_partitions_and_gives_back() -> None:
    budget = ShardBudget(3)
    g0, g1 = ShardGate(0, 2, None, budget), ShardGate(1, 2, None, budget)
    a, b = shard_keys(0, 3), shard_keys(1, 2)
    assert [g0(a[0]), g0(a[1]), g1(b[0])] == [None, None, None]
    assert g1(b[1]) == "shard_limit" and g0(a[2]) == "shard_limit"
    assert g0(a[0]) is None  # an admitted shard stays admitted
    assert budget.held == 3
    g0.release()  # partition 0 revoked: its two shards no longer count
    assert budget.held == 1
    assert g1(b[1]) is None  # a refused shard is not cached as refused


def test_restored_shards_count_even_beyond_the_budget() -> None:
    budget = ShardBudget(1)
    g = ShardGate(0, 2, None, budget)
    a = shard_keys(0, 3)
    g.admit(a[0])
    g.admit(a[1])  # restored state is held whatever the limit (dropping it loses accounting)
    assert budget.held == 2
    assert g(a[0]) is None and g(a[2]) == "shard_limit"


def test_no_budget_means_no_limit() -> None:
    g = ShardGate(0, 2, None)
    assert all(g(k) is None for k in shard_keys(0, 50))


def test_engine_dead_letters_records_of_shards_beyond_the_limit() -> None:
    from tests.support.engine import Clock, MemSink, MemStore
    from worker.engine.engine import Engine

    load_mechanisms()
    t = parse_topology(TEXT, "o.yaml")
    clock = Clock(1_000_000.0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock, max_open_shards=4)
    keys = shard_keys(0, 10)

    async def go() -> None:
        await eng.assign([("in", 0)])
        recs = [(i, k.encode(), json.dumps({"r": k, "i": 7}).encode(), 0)
                for i, k in enumerate(keys)]
        await eng.process_batch("in", 0, recs)
        clock.t += 1.0
        await eng.process_batch("in", 0, [(10, keys[0].encode(),
                                           json.dumps({"r": keys[0], "i": 8}).encode(), 0)])

    asyncio.run(go())
    sent = eng.sink.sent  # type: ignore[attr-defined]
    dead = [json.loads(v) for topic, _, v, _ in sent if topic == "dlq"]
    assert [d["reason"] for d in dead] == ["shard_limit"] * 6
    assert sorted(d["offset"] for d in dead) == list(range(4, 10))
    assert "DPSTREAM_MAX_OPEN_SHARDS" in dead[0]["detail"]
    assert eng.metrics.value("dpstream_dead_letters_total", topology="o",
                             reason="shard_limit") == 6
    assert eng.open_shards() == {"o": 4}
