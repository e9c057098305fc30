"""Event time: a record that raises when its held group is applied is isolated and skipped.

Records wait in the partition's queue until the watermark reaches their tick, so the
group that raises holds records of *earlier* batches (or is applied by a timer, with no
batch at all). Before 2026-11-24 the poison guard blamed the current batch: an innocent
later record was dead-lettered as ``poison`` while the culprit kept raising; and a drain
that raised in a timer round had already popped its records (marked done), so the next
checkpoint dropped them silently. Pure: engine + guard + a simulated consumer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.integration.exact_mechanism import POISON
from tests.support.engine import Clock, MemSink, MemStore
from tests.support.event_time import T0_MS, topo
from worker.engine.engine import Engine
from worker.runtime.poison import PoisonGuard, process_guarded, reset_failed


def _rec(off: int, item: str, ts: int) -> tuple[int, bytes, bytes, int]:
    return (off, b"r1", json.dumps({"r": "r1", "i": item}).encode(), ts)


def _drive(log: list[Any], script: list[tuple[str, float]],
           cuts: list[int]) -> tuple[Engine, list[dict[str, Any]]]:
    """Run ``script``: ``("read", n)`` makes ``log[:n]`` available, ``("timer", dt)`` advances
    the clock and runs a timer round (reporting the end of the log when all that is
    available was read). Before each step the consumer reads what is available, in batches
    ending at ``cuts``; resets seek back to the checkpoint as the worker does."""
    clock = Clock(T0_MS / 1000)
    eng = Engine([topo()], MemStore(), MemSink(), clock=clock)
    guard = PoisonGuard(attempts=2)
    pos = avail = 0

    async def restore() -> None:
        nonlocal pos
        offs = await eng.assign([("in", 0)])
        pos = offs[("in", 0)] or 0

    async def catch_up() -> None:
        nonlocal pos
        for _ in range(20):  # bounded: resets re-read from the checkpoint
            if pos >= avail:
                return
            end = min(next(c for c in cuts if c > pos), avail)
            if await process_guarded(guard, eng, "in", 0, log[pos:end], restore):
                pos = end

    async def run() -> None:
        nonlocal avail
        await restore()
        for kind, x in script:
            if kind == "read":
                avail = int(x)
            await catch_up()
            if kind == "timer":
                clock.t += x
                if pos >= avail:
                    eng.log_end("in", 0, eng.now_ms())
                await eng.on_timer()
                for f in eng.take_failed_drains():
                    await reset_failed(guard, eng, f.topic, f.partition, f.records,
                                       f.__cause__ or f, restore, held=True)
        await catch_up()

    asyncio.run(run())
    dead = [json.loads(v) for t, _, v, _ in eng.sink.sent if t == "dlq"]  # type: ignore[attr-defined]
    return eng, dead


def _counts(eng: Engine) -> dict[str, int]:
    return dict(eng.parts[("et", 0)].shards["r1"].mechanism.counts)


# a checkpointed first record, then three records of one later tick, one of them poison
LOG = [_rec(0, "a", T0_MS + 10), _rec(1, "b", T0_MS + 600), _rec(2, POISON, T0_MS + 610),
       _rec(3, "c", T0_MS + 620)]


def test_a_held_record_that_raises_in_a_timer_drain_is_isolated_and_skipped() -> None:
    script = [("read", 1), ("timer", 0.6), ("read", 4)] + [("timer", 0.5)] * 8
    eng, dead = _drive(LOG, script, [1, 4])
    assert {(d["reason"], d["offset"]) for d in dead} == {("poison", 2)}
    assert "test poison item" in dead[0]["detail"]
    assert _counts(eng) == {"a": 1, "b": 1, "c": 1}  # nothing lost, nothing twice


def test_the_culprit_is_blamed_not_the_batch_whose_arrival_drained_it() -> None:
    log = [*LOG, _rec(4, "d", T0_MS + 1_000)]  # its arrival moves the watermark past 1..3
    script = [("read", 1), ("timer", 0.6), ("read", 4), ("read", 5)] + [("timer", 0.05)] * 6
    script += [("timer", 0.5)] * 3  # the watermark passes d's tick
    eng, dead = _drive(log, script, [1, 4, 5])
    assert {(d["reason"], d["offset"]) for d in dead} == {("poison", 2)}
    assert dead[0]["detail"].count("RuntimeError: test poison item") == 1
    assert _counts(eng) == {"a": 1, "b": 1, "c": 1, "d": 1}
