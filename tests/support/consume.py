"""Fakes of the input consumer and the engine for the consume loop's pure tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import TopicPartition

from worker.config.settings import Settings
from worker.runtime.worker import Worker

TP = TopicPartition("in", 0)


class FakeEngine:
    """Records batches; ``assign`` returns the checkpointed offset ``restored_at``."""

    def __init__(self, restored_at: int, fail: bool = False) -> None:
        self.restored_at, self.fail = restored_at, fail
        self.batches: list[list[int]] = []
        self.by_topic: dict[str, list[Any]] = {}
        self.log_ends: list[tuple[str, int, int, int]] = []  # (topic, p, at, batches seen)

    def log_end(self, topic: str, partition: int, at_ms: int) -> None:
        self.log_ends.append((topic, partition, at_ms, len(self.batches)))

    def partners(self, topic: str, partition: int) -> list[tuple[str, int]]:
        return [(topic, partition)]  # no repartition topic in these tests

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


def records(start: int, n: int) -> list[Any]:
    """What the input consumer hands over: ``(offset, key, value, timestamp)`` tuples."""
    return [(o, b"k", b"v", 0) for o in range(start, start + n)]


def make_worker(engine: FakeEngine) -> Worker:
    w = Worker(Settings(broker="127.0.0.1:1"), [])
    w.engine = engine  # type: ignore[assignment]
    return w

