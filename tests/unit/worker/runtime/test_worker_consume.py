"""The worker's consume loop across rebalances (pure: fake consumer and engine, no broker).

aiokafka's ``getmany`` waits for a running rebalance to finish and only hands
over records that start at a partition's *current* position, advancing it.
So records drained after the restore's seek are valid even if the rebalance
began while ``getmany`` was waiting, and dropping them loses them for good;
records drained before the seek are stale and must be dropped (the seek puts
the position back). These tests script both orders deterministically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition

from worker.config.settings import Settings
from worker.runtime.worker import Worker
from worker.runtime.worker import listener_for as _Listener

TP = TopicPartition("in", 0)


class FakeEngine:
    """Records batches; ``assign`` returns the checkpointed offset ``restored_at``."""

    def __init__(self, restored_at: int, fail: bool = False) -> None:
        self.restored_at, self.fail = restored_at, fail
        self.batches: list[list[int]] = []
        self.by_topic: dict[str, list[Any]] = {}
        self.log_ends: list[tuple[str, int, int, int]] = []  # (topic, p, at, batches seen)

    def partners(self, topic: str, partition: int) -> list[tuple[str, int]]:
        return [(topic, partition)]  # no repartition topic in these tests

    def log_end(self, topic: str, partition: int, at_ms: int) -> None:
        self.log_ends.append((topic, partition, at_ms, len(self.batches)))

    async def assign(self, tps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        if self.fail:
            raise RuntimeError("checkpoint store unavailable")
        return {tp: self.restored_at for tp in tps}

    async def revoke(self, tps: Sequence[tuple[str, int]]) -> None:
        return None

    async def process_batch(self, topic: str, partition: int, records: Sequence[Any]) -> int:
        self.batches.append([r[0] for r in records])
        return len(records)


class FakeConsumer:
    """Each ``getmany`` runs the next scripted step (which may call the listener)."""

    def __init__(self, worker: Worker,
                 steps: list[Callable[[], Awaitable[dict[TopicPartition, list[Any]]]]]) -> None:
        self.worker, self.steps = worker, steps
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.high: int | None = None  # highwater of TP (None: no fetch answered yet)
        self.pos = 0

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.high

    def last_poll_timestamp(self, tp: TopicPartition) -> int | None:
        return None if self.high is None else 123_000

    async def position(self, tp: TopicPartition) -> int:
        return self.pos

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        if not self.steps:
            self.worker.request_stop()
            return {}
        return await self.steps.pop(0)()


def _records(start: int, n: int) -> list[Any]:
    """What the input consumer hands over: ``(offset, key, value, timestamp)`` tuples."""
    return [(o, b"k", b"v", 0) for o in range(start, start + n)]


def _worker(engine: FakeEngine) -> Worker:
    w = Worker(Settings(broker="127.0.0.1:1"), [])
    w.engine = engine  # type: ignore[assignment]
    return w


def test_records_drained_after_the_seek_are_applied() -> None:
    """A rebalance completes inside one ``getmany``; its records (from the seek) count.

    The old loop compared a generation taken before ``getmany`` and dropped
    these records although aiokafka had already advanced the position past them.
    """
    engine = FakeEngine(restored_at=1000)
    w = _worker(engine)
    listener = _Listener(w)

    async def rebalance_then_records() -> dict[TopicPartition, list[Any]]:
        await listener.on_partitions_revoked({TP})
        await listener.on_partitions_assigned({TP})
        return {TP: _records(1000, 10)}  # aiokafka: records start at the seeked position

    w.rebalancing = False
    w.consumer = FakeConsumer(w, [rebalance_then_records])
    asyncio.run(w._consume())
    assert w.consumer.seeks == [(TP, 1000)]
    assert engine.batches == [list(range(1000, 1010))]


def test_records_drained_before_the_seek_are_dropped() -> None:
    """Records handed over between revocation and the restore's seek are stale: dropped."""
    engine = FakeEngine(restored_at=1000)
    w = _worker(engine)
    listener = _Listener(w)

    async def revoke_then_stale() -> dict[TopicPartition, list[Any]]:
        await listener.on_partitions_revoked({TP})
        return {TP: _records(0, 10)}  # from auto_offset_reset, before the restore

    async def assign_then_valid() -> dict[TopicPartition, list[Any]]:
        await listener.on_partitions_assigned({TP})
        return {TP: _records(1000, 5)}

    w.consumer = FakeConsumer(w, [revoke_then_stale, assign_then_valid])
    asyncio.run(w._consume())
    assert engine.batches == [list(range(1000, 1005))]


def test_first_assignment_drops_records_fetched_before_the_restore() -> None:
    """In group mode the worker starts 'rebalancing': nothing is applied before the restore."""
    engine = FakeEngine(restored_at=7)
    w = _worker(engine)
    assert w.rebalancing  # assignment=group is the default

    async def early() -> dict[TopicPartition, list[Any]]:
        return {TP: _records(0, 3)}

    async def assigned() -> dict[TopicPartition, list[Any]]:
        await _Listener(w).on_partitions_assigned({TP})
        return {TP: _records(7, 2)}

    w.consumer = FakeConsumer(w, [early, assigned])
    asyncio.run(w._consume())
    assert engine.batches == [[7, 8]]


def test_failing_restore_fails_the_worker() -> None:
    """aiokafka only logs listener exceptions; the worker must stop with the error instead."""
    w = _worker(FakeEngine(restored_at=0, fail=True))
    w.consumer = FakeConsumer(w, [])
    asyncio.run(_Listener(w).on_partitions_assigned({TP}))
    assert isinstance(w.failed, RuntimeError) and w._stopping.is_set()
    assert w.rebalancing  # no record is applied from unrestored positions


def test_lag_update_survives_a_rebalance_between_partitions() -> None:
    """A partition revoked while the lag loop awaits is skipped, not asserted on.

    aiokafka's ``highwater`` asserts the partition is assigned; the timer task
    used to die with 'Partition is not assigned' (and crash the worker).
    """
    tp1 = TopicPartition("in", 1)
    w = _worker(FakeEngine(restored_at=0))
    w.rebalancing = False

    class LagConsumer:
        def __init__(self) -> None:
            self.assigned = {TP, tp1}
            self.highwater_calls: list[TopicPartition] = []

        def assignment(self) -> set[TopicPartition]:
            return set(self.assigned)

        def highwater(self, tp: TopicPartition) -> int:
            assert tp in self.assigned, "Partition is not assigned"
            self.highwater_calls.append(tp)
            return 10

        async def position(self, tp: TopicPartition) -> int:
            self.assigned = set()  # a rebalance revokes everything meanwhile
            w.rebalancing = True
            return 5

    c = LagConsumer()
    w.consumer = c
    asyncio.run(w._update_lag())
    assert len(c.highwater_calls) == 1


def test_create_time_records_on_a_production_event_time_topic_fail_the_worker() -> None:
    """The loop checks each batch's timestamp type before the engine sees it.

    A production event-time topology needs the broker's LogAppendTime; a
    CreateTime batch (producer-chosen ticks) must stop the worker with the
    guard's error, and none of its records may reach the engine. A failing
    consume task fails the worker (no silent dead loop).
    """
    from sketches.errors import SpecError

    topo = SimpleNamespace(source="t.yaml", production=True, input=SimpleNamespace(topic="in"),
                           privacy=SimpleNamespace(clock="tick", time="event"))
    engine = FakeEngine(restored_at=0)
    w = Worker(Settings(broker="127.0.0.1:1"), [topo])  # type: ignore[list-item]
    w.engine = engine  # type: ignore[assignment]
    w.rebalancing = False

    async def create_time() -> dict[TopicPartition, list[Any]]:
        w.fetch_mode.note_timestamp_type("in", 0)  # what RecordTuples notes for the batch
        return {TP: [(0, b"k", b"v", 0)]}

    async def main() -> None:
        w.consumer = FakeConsumer(w, [create_time])
        task = asyncio.create_task(w._consume(), name="dpstream-consume")
        task.add_done_callback(w._on_task_done)
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert engine.batches == []
    assert isinstance(w.failed, SpecError) and "LogAppendTime" in str(w.failed)
    assert w.stopping


def test_end_of_log_is_reported_only_after_the_batch_and_at_the_high_watermark() -> None:
    """Event time, condition (b): the consume loop tells the engine a partition is read to
    its end (position == high watermark, with the fetch's time) after the round's batches
    were applied, never while records below the high watermark are still unread."""
    engine = FakeEngine(restored_at=0)
    worker = _worker(engine)
    worker.rebalancing = False

    async def behind() -> dict[TopicPartition, list[Any]]:
        consumer.high, consumer.pos = 10, 5  # records 5..9 not fetched yet
        return {TP: _records(0, 5)}

    async def caught_up() -> dict[TopicPartition, list[Any]]:
        consumer.high, consumer.pos = 10, 10
        return {TP: _records(5, 5)}

    consumer = FakeConsumer(worker, [behind, caught_up])
    worker.consumer = consumer  # type: ignore[assignment]
    asyncio.run(worker._consume())
    assert engine.batches == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    # reported once per round at the end (the last, empty round too), after batch 2 only
    assert engine.log_ends and all(e == ("in", 0, 123_000, 2) for e in engine.log_ends)
