"""Fast batch ingestion: an aiokafka group consumer run as a Faust (mode) service.

A plain Faust agent moves every record through several event-loop round trips
(two tasks and an ``asyncio.wait`` per message in ``Consumer._drain_messages``,
a channel queue, an ``Event`` object, an ack), which caps it at a few thousand
messages per second here; see ``docs/INGESTION.md`` for the measurements.
:class:`BatchIngestor` keeps Faust as the application framework (lifecycle,
timers, web, metrics) but reads input topics itself with aiokafka ``getmany``
and hands the worker **one batch per partition** with its offsets.

Guarantees
----------
- Records of a partition are delivered in offset order, each at most once per
  assignment, in batches of at most ``max_batch`` records.
- After every assignment the position of each partition is what
  ``on_assigned`` seeked to (the worker's checkpoint), else the group's
  committed offset, else ``auto_offset_reset``; records fetched before a
  rebalance are dropped, never delivered.
- ``on_batch`` is never running while ``on_revoked`` / ``on_assigned`` run: a
  lock serialises delivery with rebalance callbacks, and batches fetched for a
  partition that was revoked meanwhile are dropped, not delivered.
- Offsets are never committed behind the worker's back (auto-commit is off);
  the worker checkpoints offsets with its state, seeks on assignment
  (:meth:`BatchIngestor.seek`) and may call :meth:`BatchIngestor.commit` for
  offsets covered by a durable checkpoint (lag metrics, external tools).
- ``on_revoked`` is also called with the current assignment on a graceful
  :meth:`BatchIngestor.stop`, so the worker checkpoints before leaving.

Example (needs a running broker, so it is not run as a doctest)::

    async def main(bootstrap):
        async def on_batch(batch):
            print(batch.partition, batch.first_offset, len(batch))
        ing = BatchIngestor(IngestSettings(bootstrap, "dpstream"), ["events"],
                            on_batch=on_batch)
        await ing.start()
        ...
        await ing.stop()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from mode import Service

from sketches.errors import SpecError

log = logging.getLogger(__name__)

__all__ = ["Batch", "BatchIngestor", "IngestSettings", "TopicPartition"]


@dataclass(frozen=True)
class IngestSettings:
    """Consumer settings of :class:`BatchIngestor` (all plain values).

    Parameters
    ----------
    bootstrap
        ``host:port[,host:port]`` of the Kafka cluster.
    group_id
        Consumer group; workers of one deployment share it and split partitions.
    client_id
        Client id shown by the broker.
    max_batch
        Most records one ``getmany`` returns (over all partitions).
    poll_timeout_s
        How long one ``getmany`` waits for data when nothing is buffered.
    session_timeout_s, heartbeat_s
        Group session timeout and heartbeat interval. Short values make joins
        fast (Tansu holds a join for half the session timeout).
    auto_offset_reset
        ``"earliest"`` (default) or ``"latest"``: where a partition without a
        checkpoint and without a committed offset starts.
    fetch_max_bytes, max_partition_fetch_bytes
        Fetch sizes; large values keep aiokafka's prefetch ahead of the worker.
    client_options
        Passed unchanged to :class:`aiokafka.AIOKafkaConsumer` (SASL/TLS:
        ``security_protocol``, ``sasl_mechanism``, ``ssl_context`` ...).

    Examples
    --------
    >>> IngestSettings("127.0.0.1:9092", "g").max_batch
    50000
    >>> IngestSettings("127.0.0.1:9092", "g", max_batch=0)
    Traceback (most recent call last):
    ...
    sketches.errors.SpecError: IngestSettings.max_batch must be >= 1, got 0; use a positive size
    """

    bootstrap: str
    group_id: str
    client_id: str = "dpstream-ingest"
    max_batch: int = 50_000
    poll_timeout_s: float = 0.2
    session_timeout_s: float = 6.0
    heartbeat_s: float = 1.0
    auto_offset_reset: str = "earliest"
    fetch_max_bytes: int = 64 * 1024 * 1024
    max_partition_fetch_bytes: int = 8 * 1024 * 1024
    client_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise SpecError(
                f"IngestSettings.max_batch must be >= 1, got {self.max_batch}; "
                "use a positive size"
            )
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise SpecError(
                f"IngestSettings.auto_offset_reset must be 'earliest' or 'latest', "
                f"got {self.auto_offset_reset!r}"
            )
        if not 0 < self.heartbeat_s < self.session_timeout_s:
            raise SpecError(
                "IngestSettings.heartbeat_s must be positive and below session_timeout_s "
                f"(got {self.heartbeat_s} and {self.session_timeout_s}); e.g. 1.0 and 6.0"
            )


@dataclass(frozen=True)
class Batch:
    """Consecutive records of one partition, in offset order.

    ``next_offset`` is the offset to resume from once this batch is in the
    state (checkpoint it together with the state).

    Examples
    --------
    >>> r = [ConsumerRecord("t", 0, o, 0, 0, b"k", b"v", None, 1, 1, ()) for o in (5, 6)]
    >>> b = Batch(TopicPartition("t", 0), r)
    >>> (b.first_offset, b.next_offset, len(b), b.values)
    (5, 7, 2, [b'v', b'v'])
    """

    tp: TopicPartition
    records: Sequence[ConsumerRecord]

    @property
    def topic(self) -> str:
        """Topic name."""
        return str(self.tp.topic)

    @property
    def partition(self) -> int:
        """Partition number."""
        return int(self.tp.partition)

    @property
    def first_offset(self) -> int:
        """Offset of the first record."""
        return int(self.records[0].offset)

    @property
    def next_offset(self) -> int:
        """Offset after the last record (the position to checkpoint)."""
        return int(self.records[-1].offset) + 1

    @property
    def values(self) -> list[bytes | None]:
        """Message values (raw bytes), in order."""
        return [r.value for r in self.records]

    @property
    def keys(self) -> list[bytes | None]:
        """Message keys (raw bytes), in order."""
        return [r.key for r in self.records]

    def __len__(self) -> int:
        return len(self.records)


OnBatch = Callable[[Batch], Awaitable[None]]
OnPartitions = Callable[[set[TopicPartition]], Awaitable[None]]


class _Listener(ConsumerRebalanceListener):
    def __init__(self, owner: BatchIngestor) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._owner._handle_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._owner._handle_assigned(set(assigned))


class BatchIngestor(Service):
    """Consume ``topics`` in a consumer group and deliver per-partition batches.

    A :class:`mode.Service`: start it alone (``await ing.start()``) or with a
    Faust app (``app.add_dependency(ing)`` before the worker starts, or
    ``await app.add_runtime_dependency(ing)`` while it runs).

    Parameters
    ----------
    settings
        Consumer settings.
    topics
        Input topics (create them with explicit partition counts first).
    on_batch
        ``async (Batch) -> None``; called for each non-empty partition batch,
        in offset order per partition. Raising stops the ingestor (the service
        crashes; Faust logs it) without committing anything.
    on_assigned, on_revoked
        ``async (set[TopicPartition]) -> None``; rebalance callbacks. Seek to
        checkpointed offsets in ``on_assigned``; checkpoint in ``on_revoked``.
    """

    def __init__(
        self,
        settings: IngestSettings,
        topics: Sequence[str],
        *,
        on_batch: OnBatch,
        on_assigned: OnPartitions | None = None,
        on_revoked: OnPartitions | None = None,
        **kwargs: Any,
    ) -> None:
        if not topics:
            raise SpecError("BatchIngestor.topics is empty; pass at least one input topic")
        super().__init__(**kwargs)
        self.settings = settings
        self.topics = list(topics)
        self._on_batch = on_batch
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()
        self._assigned: set[TopicPartition] = set()
        self._generation = 0  # bumped on every assignment: stale fetches are dropped
        self._fetcher: asyncio.Future[Any] | None = None
        self.batches_delivered = 0
        self.records_delivered = 0

    # ------------------------------------------------------------ lifecycle

    async def on_start(self) -> None:
        """Create the consumer, join the group and start the fetch loop."""
        s = self.settings
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=s.bootstrap,
            group_id=s.group_id,
            client_id=s.client_id,
            enable_auto_commit=False,
            auto_offset_reset=s.auto_offset_reset,
            session_timeout_ms=int(s.session_timeout_s * 1000),
            heartbeat_interval_ms=int(s.heartbeat_s * 1000),
            fetch_max_bytes=s.fetch_max_bytes,
            max_partition_fetch_bytes=s.max_partition_fetch_bytes,
            **dict(s.client_options),
        )
        await self._consumer.start()
        self._consumer.subscribe(self.topics, listener=_Listener(self))
        self._fetcher = self.add_future(self._fetch_loop())

    async def on_stop(self) -> None:
        """Finish the batch in flight, ``on_revoked`` of the current assignment, leave."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        async with self._lock:  # waits for an on_batch in flight; never interrupts one
            if self._fetcher is not None:
                self._fetcher.cancel()  # it is in getmany or waiting for this lock
                await asyncio.gather(self._fetcher, return_exceptions=True)
                self._fetcher = None
            if self._assigned and self._on_revoked is not None:
                await self._on_revoked(set(self._assigned))
            self._assigned = set()
        await consumer.stop()

    # ------------------------------------------------------------ public API

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions this ingestor currently delivers."""
        return set(self._assigned)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Resume ``tp`` at ``offset`` (call in ``on_assigned`` with the checkpointed offset)."""
        self._require_consumer().seek(tp, offset)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read) to the group.

        Only commit offsets whose events are in a durable checkpoint.
        """
        if offsets:
            await self._require_consumer().commit(dict(offsets))

    def highwater(self, tp: TopicPartition) -> int | None:
        """Last known end offset of ``tp`` (from the latest fetch), for lag metrics."""
        return self._require_consumer().highwater(tp)

    # ------------------------------------------------------------ internals

    def _require_consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("BatchIngestor is not running; call await ingestor.start() first")
        return self._consumer

    async def _handle_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self._lock:
            mine = revoked & self._assigned
            self._assigned -= revoked
            log.info("ingest: partitions revoked: %s", sorted(map(tuple, mine)))
            if mine and self._on_revoked is not None:
                await self._on_revoked(mine)

    async def _handle_assigned(self, assigned: set[TopicPartition]) -> None:
        async with self._lock:
            self._generation += 1
            self._assigned = set(assigned)
            log.info("ingest: partitions assigned: %s", sorted(map(tuple, assigned)))
            if self._on_assigned is not None:
                await self._on_assigned(set(assigned))

    async def _fetch_loop(self) -> None:
        timeout_ms = int(self.settings.poll_timeout_s * 1000)
        max_records = self.settings.max_batch
        while not self.should_stop:
            consumer = self._consumer
            if consumer is None:
                return
            fetched = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
            # No await between getmany's own assignment check and this line: the
            # records belong to the assignment of this generation.
            generation = self._generation
            if not fetched:
                continue
            async with self._lock:
                if generation != self._generation:
                    # A rebalance ran while we waited for the lock: on_assigned has set
                    # the positions again (seek to checkpoint); these records are stale
                    # and will be fetched again from the new positions.
                    continue
                for tp, records in fetched.items():
                    if not records or tp not in self._assigned or self._consumer is None:
                        continue  # revoked while we waited for the lock: not ours any more
                    await self._on_batch(Batch(tp, records))
                    self.batches_delivered += 1
                    self.records_delivered += len(records)
