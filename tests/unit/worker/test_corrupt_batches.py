"""A Kafka record batch that fails on every fetch is skipped and dead-lettered (pure).

``worker.record_tuples`` reads a failing batch again up to ``attempts`` times, then
reports it as a :class:`~worker.record_tuples.SkippedBatch` instead of raising out
of ``getmany`` (which failed the consume task and crash-looped the worker). These
tests cover the worker's side: the consume loop hands the skip to the engine after
the fetch's records, and the engine dead-letters the range as ``corrupt_batch`` and
moves the partition's offset past it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.unit.worker.test_open_shard_limit import TEXT, _keys
from tests.unit.worker.test_worker_consume import TP, FakeConsumer, FakeEngine, _worker
from worker.mechanisms import load_mechanisms
from worker.record_tuples import SkippedBatch
from worker.topology import parse_topology


def test_engine_dead_letters_the_range_and_moves_past_it() -> None:
    from tests.unit.worker.test_worker_state import Clock, MemSink, MemStore
    from worker.engine import Engine

    load_mechanisms()
    t = parse_topology(TEXT, "o.yaml")
    eng = Engine([t], MemStore(), MemSink(), clock=Clock(1_000_000.0))
    key = _keys(0, 1)[0]

    def rec(off: int) -> tuple[int, bytes, bytes, int]:
        return (off, key.encode(), json.dumps({"r": key, "i": off}).encode(), 0)

    async def go() -> list[int]:
        await eng.assign([("in", 0)])
        applied = [await eng.process_batch("in", 0, [rec(o) for o in range(5)])]
        await eng.skip_batch("in", 0, 5, 10, "CorruptRecordException: Invalid CRC")
        applied.append(await eng.process_batch("in", 0, [rec(o) for o in range(3, 13)]))
        return applied

    assert asyncio.run(go()) == [5, 3]  # 3..4 already in, 5..9 skipped: only 10..12
    dead = [json.loads(v) for topic, _, v, _ in eng.sink.sent  # type: ignore[attr-defined]
            if topic == "dlq"]
    assert [(d["reason"], d["offset"]) for d in dead] == [("corrupt_batch", 5)]
    assert "5..9" in dead[0]["detail"] and "Invalid CRC" in dead[0]["detail"]
    assert eng.metrics.value("dpstream_dead_letters_total", topology="o",
                             reason="corrupt_batch") == 1


class SkipEngine(FakeEngine):
    """Also records ``skip_batch`` calls, in order with the batches."""

    def __init__(self) -> None:
        super().__init__(restored_at=0)
        self.calls: list[Any] = []

    async def process_batch(self, topic: str, partition: int, records: Any) -> int:
        self.calls.append(("batch", [r[0] for r in records]))
        return await super().process_batch(topic, partition, records)

    async def skip_batch(self, topic: str, partition: int, first: int, end: int,
                         detail: str) -> None:
        self.calls.append(("skip", topic, partition, first, end, detail))


def test_consume_loop_skips_after_the_records_and_keeps_running() -> None:
    """Records before the range (same fetch, attempts = 1) are applied first, then the
    skip is reported; the loop goes on to the next fetch (no failed worker)."""
    engine = SkipEngine()
    w = _worker(engine)
    w.rebalancing = False

    async def fetch_with_skip() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 0, 5, 10, "Invalid CRC"))
        return {TP: [(o, b"k", b"v", 0) for o in [3, 4, 10, 11]]}

    async def next_fetch() -> dict[Any, list[Any]]:
        return {TP: [(12, b"k", b"v", 0)]}

    w.consumer = FakeConsumer(w, [fetch_with_skip, next_fetch])
    asyncio.run(w._consume())
    assert engine.calls == [("batch", [3, 4, 10, 11]), ("skip", "in", 0, 5, 10, "Invalid CRC"),
                            ("batch", [12])]
    assert w.failed is None


def test_skips_drained_during_a_rebalance_are_dropped() -> None:
    """Met again (and skipped again) from the restored offsets; never reported for a
    partition the restore has not set up."""
    engine = SkipEngine()
    w = _worker(engine)
    w.rebalancing = True

    async def during_rebalance() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 0, 5, 10, "Invalid CRC"))
        return {}

    async def after() -> dict[Any, list[Any]]:
        w.rebalancing = False
        return {}

    w.consumer = FakeConsumer(w, [during_rebalance, after])
    asyncio.run(w._consume())
    assert engine.calls == []
