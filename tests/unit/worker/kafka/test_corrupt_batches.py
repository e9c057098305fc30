"""A Kafka record batch that fails on every fetch is skipped and dead-lettered (pure).

``worker.kafka.record_tuples`` reads a failing batch again up to ``attempts`` times, then
reports it as a :class:`~worker.kafka.record_tuples.SkippedBatch` instead of raising out
of ``getmany`` (which failed the consume task and crash-looped the worker). These
tests cover the worker's side: the consume loop hands the skip to the engine after
the fetch's records, and the engine dead-letters the range as ``corrupt_batch`` and
moves the partition's offset past it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiokafka import TopicPartition

from tests.support.consume import TP, FakeConsumer, FakeEngine
from tests.support.consume import make_worker as _worker
from tests.support.shards import TEXT
from tests.support.shards import shard_keys as _keys
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.kafka.record_tuples import SkippedBatch


def test_engine_dead_letters_the_range_and_moves_past_it() -> None:
    from tests.support.engine import Clock, MemSink, MemStore
    from worker.engine.engine import Engine

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


def test_consume_loop_skips_between_the_records_and_keeps_running() -> None:
    """Records before the range (same fetch, attempts = 1) are applied first, then the
    skip is reported, then the records after it; the loop goes on to the next fetch
    (no failed worker)."""
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
    assert engine.calls == [("batch", [3, 4]), ("skip", "in", 0, 5, 10, "Invalid CRC"),
                            ("batch", [10, 11]), ("batch", [12])]
    assert w.failed is None


def test_skips_drained_during_a_rebalance_are_read_again() -> None:
    """Met again (and skipped again) from the restored offsets, or from the skip's
    first offset; never reported for a partition the restore has not set up."""
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
    assert w.consumer.seeks == [(TP, 5)]  # read again (a restore's own seek comes later)


class TwoPartitions(FakeConsumer):
    """Two assigned partitions of ``in``."""

    def assignment(self) -> set[TopicPartition]:
        return {TP, TP1}


TP1 = TopicPartition("in", 1)


class FailingEngine(SkipEngine):
    """``process_batch`` raises once for offset ``fail_at`` of partition 0; ``skip_batch``
    raises ``broker`` if set; ``assign`` restores at 0."""

    def __init__(self, fail_at: int | None = None, broker: BaseException | None = None
                 ) -> None:
        super().__init__()
        self.restored_at, self.fail_at, self.broker = 0, fail_at, broker

    async def process_batch(self, topic: str, partition: int, records: Any) -> int:
        if partition == 0 and any(r[0] == self.fail_at for r in records):
            self.fail_at = None
            self.calls.append(("raised", [r[0] for r in records]))
            raise ValueError("a mechanism bug")
        return await super().process_batch(topic, partition, records)

    async def skip_batch(self, topic: str, partition: int, first: int, end: int,
                         detail: str) -> None:
        if self.broker is not None:
            raise self.broker
        await super().skip_batch(topic, partition, first, end, detail)

    async def discard(self, tps: Any) -> None:
        self.calls.append(("discard", list(tps)))


def test_no_skip_after_the_partition_was_reset_in_the_same_round() -> None:
    """Review finding: a record before the range raised, the partition was restored and
    seeked to 0; applying the skip then moved the restored offset to 10 and the re-read
    records 0..4 were dropped for good. Now the rest of that partition's fetch is
    dropped (read again from 0, where the batch is met and skipped again)."""
    from tests.support.consume import records as _records

    engine = FailingEngine(fail_at=2)
    w = _worker(engine)
    w.rebalancing = False

    async def fetch() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 0, 5, 10, "Invalid CRC"))
        return {TP: _records(0, 5) + _records(10, 2)}

    w.consumer = FakeConsumer(w, [fetch])
    asyncio.run(w._consume())
    assert ("raised", [0, 1, 2, 3, 4]) in engine.calls
    assert not any(c[0] == "skip" for c in engine.calls)
    assert (TP, 0) in w.consumer.seeks  # the restore's seek
    assert w.failed is None


def test_a_broker_error_while_dead_lettering_a_skip_is_a_broker_fault() -> None:
    """Review finding: the dead letter's publish failing (broker outage) failed the worker;
    it is handled like a broker error while applying records: reset once it answers."""
    from aiokafka.errors import KafkaTimeoutError

    engine = FailingEngine(broker=KafkaTimeoutError())
    w = _worker(engine)
    w.rebalancing = False
    reset: list[TopicPartition] = []

    async def fake_reset(tp: TopicPartition) -> None:
        reset.append(tp)

    w._reset_after_outage = fake_reset  # type: ignore[method-assign]

    async def fetch() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 0, 5, 10, "Invalid CRC"))
        return {}

    w.consumer = FakeConsumer(w, [fetch])
    asyncio.run(w._consume())
    assert reset == [TP] and w.failed is None


def _outage_worker() -> Any:
    """A worker whose engine raises a broker error on every batch (reset: a no-op)."""
    from aiokafka.errors import KafkaTimeoutError

    class Outage(SkipEngine):
        async def process_batch(self, topic: str, partition: int, records: Any) -> int:
            raise KafkaTimeoutError()

    w = _worker(Outage())
    w.rebalancing = False

    async def fake_reset(tp: TopicPartition) -> None:
        return None

    w._reset_after_outage = fake_reset
    return w


def test_a_broker_error_on_one_partition_sets_the_others_aside() -> None:
    """Review finding (older than the skip): the loop broke out after a broker error on
    one partition and the other partitions' records of the same fetch, already past
    their positions, were never applied nor read again. Now they are seeked back."""
    from tests.support.consume import records as _records

    w = _outage_worker()

    async def fetch() -> dict[Any, list[Any]]:
        return {TP: _records(0, 3), TP1: _records(7, 3)}

    w.consumer = TwoPartitions(w, [fetch])
    asyncio.run(w._consume())
    assert w.consumer.seeks == [(TP1, 7)]


def test_records_drained_during_one_partitions_restore_are_read_again() -> None:
    """Review finding (older than the skip): the timer's reset of one partition sets
    ``rebalancing`` across an await; a fetch returned meanwhile was dropped for every
    partition, although only the restored one is seeked again. Now every partition of
    that fetch is seeked back to its first record (the restore's seek comes later)."""
    from tests.support.consume import records as _records

    w = _worker(SkipEngine())
    w.rebalancing = True  # a restore of one partition is awaiting its checkpoint

    async def fetch() -> dict[Any, list[Any]]:
        return {TP: _records(4, 2), TP1: _records(7, 3)}

    w.consumer = TwoPartitions(w, [fetch])
    asyncio.run(w._consume())
    assert sorted(w.consumer.seeks) == [(TP, 4), (TP1, 7)]


def test_engine_refuses_a_batch_fetched_before_a_restore_of_its_partition() -> None:
    """The check runs under the engine lock: a restore (timer reset, rebalance) that ran
    while process_batch waited for the lock makes the fetched records stale; applying
    them would move the restored offset past records that are read again."""
    from tests.support.engine import Clock, MemSink, MemStore
    from worker.engine.engine import Engine

    load_mechanisms()
    eng = Engine([parse_topology(TEXT, "o.yaml")], MemStore(), MemSink(),
                 clock=Clock(1_000_000.0))
    key = _keys(0, 1)[0]
    recs = [(o, key.encode(), json.dumps({"r": key, "i": o}).encode(), 0) for o in range(3)]
    current = {"ok": False}
    eng.batch_is_current = lambda topic, p: current["ok"]

    async def go() -> list[int]:
        await eng.assign([("in", 0)])
        out = [await eng.process_batch("in", 0, recs)]
        current["ok"] = True
        out.append(await eng.process_batch("in", 0, recs))
        return out

    assert asyncio.run(go()) == [0, 3]


def test_worker_marks_a_fetch_stale_once_its_partition_is_restored() -> None:
    engine = FakeEngine(restored_at=5)
    w = _worker(engine)
    w._stamp = dict(w._repositioned)
    assert w.batch_is_current("in", 0)
    w.consumer = FakeConsumer(w, [])
    asyncio.run(w.restore_and_seek([TP]))
    assert not w.batch_is_current("in", 0) and w.batch_is_current("in", 1)


def test_a_skip_drained_during_another_partitions_restore_is_read_again() -> None:
    """Review finding (2026-11-27): a fetch set aside while the timer restored one
    partition lost the skips of the others: a partition whose only content was a
    skipped batch got no seek back, so its unreadable range passed without the
    ``corrupt_batch`` dead letter. Now the skip's first offset is sought too."""
    w = _worker(SkipEngine())
    w.rebalancing = True  # a restore of TP is awaiting its checkpoint

    async def fetch() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 1, 5, 10, "Invalid CRC"))
        return {}

    w.consumer = TwoPartitions(w, [fetch])
    asyncio.run(w._consume())
    assert w.consumer.seeks == [(TP1, 5)]


def test_a_broker_error_sets_aside_the_other_partitions_skips() -> None:
    """Same finding, broker-error path: TP1 held only a skipped batch in the fetch."""
    from tests.support.consume import records as _records

    w = _outage_worker()

    async def fetch() -> dict[Any, list[Any]]:
        w.fetch_mode.skipped.append(SkippedBatch("in", 1, 7, 9, "Invalid CRC"))
        return {TP: _records(0, 3)}

    w.consumer = TwoPartitions(w, [fetch])
    asyncio.run(w._consume())
    assert w.consumer.seeks == [(TP1, 7)]
