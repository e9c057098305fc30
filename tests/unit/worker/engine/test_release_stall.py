"""The release tick must not hold the event loop for the whole shard set (issue 12, target 3).

At a release boundary every shard of a partition releases (a data-independent schedule:
docs/PRIVACY.md), and today the engine does all of it in one synchronous stretch: the
schedule run, then the checkpoint's serialization. The Kafka group consumer (aiokafka)
heartbeats from a task on the same event loop with ``session_timeout_ms`` 6000, so a
stretch longer than that gets the worker evicted from its group at every release
boundary. Measured (2026-11-23, load ~2.5 on 2 shared cores, LazyCMS depth 4, hourly
epoch of 1 s ticks, seeded fast noise): 1,000 shards of width 256 stall the loop 2.1 s,
3,000 shards 7.3 s, 1,000 shards of width 1024 12.3 s (about 2.5-12 ms per shard:
tree-node noise, zlib of the checkpoint record, state and envelope serialization).

The property tested here is structural, not a timing: while the engine releases and
checkpoints a partition of many shards, another task on the loop (the heartbeat) gets to
run at least once per ``BATCH`` shards. A fix must also keep the partition's releases
contiguous and in (published_at, shard) order (test_release_order.py): ingestion of that
partition must wait for the release run, not interleave with it.

It failed on the code before the engine yielded every 64 shards inside the release run
and the checkpoint's serialization (engine.YIELD_EVERY).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from tests.support.engine import Clock, MemSink, MemStore
from tests.support.schedule import T0, make
from worker.engine.engine import Engine

N_SHARDS = 256
BATCH = 64


async def turns_during(work: Awaitable[object]) -> int:
    """How many times another task (the heartbeat) got the loop while ``work`` ran."""
    turns = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    turns = 0
    await work
    during = turns
    stop.set()
    await beat
    return during


def test_release_tick_lets_other_tasks_run() -> None:
    names = ", ".join(f"s{i:04d}" for i in range(N_SHARDS))
    topo = make(every=5, shards=f"shards: {{allowed: [{names}]}}")
    clock = Clock(T0)
    sink = MemSink()
    eng = Engine([topo], MemStore(), sink, clock=clock)

    async def run() -> int:
        await eng.assign([("in", 0)])
        clock.t += 0.15  # tick 1: nothing due
        await eng.on_timer()
        clock.t = T0 + 0.51  # tick 5: the slot-1 boundary, every shard releases
        return await turns_during(eng.on_timer())

    during = asyncio.run(run())
    released = sum(1 for t, *_ in sink.sent if t == "out")
    assert released == N_SHARDS  # the boundary was crossed: every shard released once
    assert during >= N_SHARDS // BATCH, (
        f"the heartbeat task ran {during} times while {N_SHARDS} shards released; "
        f"it must get the loop at least once per {BATCH} shards")


def test_restore_lets_other_tasks_run() -> None:
    """Restoring a partition of many shards (an assignment after a rebalance or restart)
    must not hold the loop either: measured ~1.5-2.7 ms per shard, 10,000 shards stalled the
    loop 17-34 s inside the assignment callback, far past the 6 s session timeout, so the
    member was evicted and the next rebalance restored again. Failed before ``_restore``
    yielded every ``YIELD_EVERY`` shards."""
    names = ", ".join(f"s{i:04d}" for i in range(N_SHARDS))
    topo = make(every=5, shards=f"shards: {{allowed: [{names}]}}")
    clock = Clock(T0)
    store = MemStore()
    first = Engine([topo], store, MemSink(), clock=clock)

    async def seed() -> None:
        await first.assign([("in", 0)])
        clock.t = T0 + 0.51
        await first.on_timer()  # a release run: every shard's state is checkpointed
        await first.revoke([("in", 0)])

    asyncio.run(seed())
    eng = Engine([topo], store, MemSink(), clock=clock)

    async def run() -> int:
        return await turns_during(eng.assign([("in", 0)]))

    during = asyncio.run(run())
    assert len(eng.parts[(topo.name, 0)].shards) == N_SHARDS  # restored, not fresh
    assert during >= N_SHARDS // BATCH, (
        f"the heartbeat task ran {during} times while {N_SHARDS} shards were restored; "
        f"it must get the loop at least once per {BATCH} shards")


def test_a_fresh_closed_set_assignment_lets_other_tasks_run() -> None:
    """A closed shard set builds every listed shard's state at assignment (~0.45 ms each):
    10,000 shards held the loop 4.5 s (bench_shards, 2026-11-24). Failed before
    ``_add_allowed_shards`` yielded every ``YIELD_EVERY`` shards."""
    names = ", ".join(f"s{i:04d}" for i in range(N_SHARDS))
    topo = make(every=5, shards=f"shards: {{allowed: [{names}]}}")
    eng = Engine([topo], MemStore(), MemSink(), clock=Clock(T0))

    async def run() -> int:
        return await turns_during(eng.assign([("in", 0)]))

    during = asyncio.run(run())
    assert len(eng.parts[(topo.name, 0)].shards) == N_SHARDS
    assert during >= N_SHARDS // BATCH, (
        f"the heartbeat task ran {during} times while {N_SHARDS} fresh shards were built; "
        f"it must get the loop at least once per {BATCH} shards")
