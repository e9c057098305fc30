"""Engine building blocks: the release sink, per-partition state, noise per (shard, epoch).

Split out of :mod:`worker.engine.engine` so the engine's modules hold only the
ingest/release/checkpoint flow.

Examples
--------
>>> from worker.config.topology import parse_topology
>>> topo = parse_topology('''
... name: demo
... input: {topic: in, partitions: 1, fields: {shard: r, item: i}}
... mechanism: {name: lazy_cms}
... privacy: {eps: 1.0, delta: 1.0e-6, tick_ms: 500, epoch_ticks: 100}
... noise: {kind: fast, seed: 3, allow_insecure_noise: true}
... release: {every_ticks: 10, topic: out}
... dead_letter: {topic: dlq}''')
>>> boundary_ms(topo, epoch=2, local_tick=10)   # (2 * 100 + 10) ticks of 500 ms
105000
>>> noise = NoiseFactory()
>>> a, b = noise(topo, "r1", 0), noise(topo, "r1", 0)   # seeded per (shard, epoch)
>>> a.gaussian(1.0, 3).tolist() == b.gaussian(1.0, 3).tolist()
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import xxhash

from worker.config.topology import Topology
from worker.engine.checkpoint import PartitionCheckpoint
from worker.engine.shard_state import ShardState
from worker.errors import HeldRecordsFailed
from worker.ingest.event_time import EventTimeQueue
from worker.ingest.repartition import Inbox
from worker.ingest.routing import ShardGate


class Store(Protocol):
    """Where checkpoints go (``worker.engine.checkpoint.CheckpointStore`` in production).

    Besides writing and loading, a store may own its partitions (the Kafka store
    fences a previous writer: docs/OPERATIONS.md "One writer"); a store without
    owners (in memory, in tests) implements :meth:`claim` as a no-op,
    :meth:`take_damaged` as an empty set and :meth:`needs_repair` as False.
    """

    async def write(self, cp: PartitionCheckpoint) -> int:
        """Write ``cp``; return the bytes written."""
    async def refresh(self) -> None:
        """Read everything written so far (call before :meth:`load` and :meth:`claim`)."""
    def load(self, topology: str, partition: int) -> PartitionCheckpoint | None:
        """The latest checkpoint of ``(topology, partition)``, None if there is none."""
    async def claim(self, topology: str, partition: int) -> None:
        """Take ownership of ``(topology, partition)`` before restoring it."""
    def take_damaged(self, topology: str, partition: int) -> set[str]:
        """Shards a fenced writer wrote over, to rewrite in the next checkpoint."""
    def needs_repair(self, topology: str, partition: int) -> bool:
        """A fenced writer's records of the partition still need a checkpoint."""


class Sink(Protocol):
    """Where releases and dead letters go (a Kafka producer in production)."""

    async def publish(self, topic: str, key: bytes, value: bytes,
                      timestamp_ms: int | None = None, partition: int | None = None) -> None:
        """Send one record; ``timestamp_ms`` (releases: ``published_at``) sets its
        Kafka timestamp, None lets the producer stamp the send time; ``partition`` (the
        repartition topic: the shard's) None lets the producer's partitioner choose."""
    async def flush(self) -> None: ...


@dataclass
class PartitionState:
    """All shards of one topology on one input partition, plus what they cover.

    ``pending`` holds ``(topic, key, envelope bytes, oldest event ms, published_at ms)``
    of releases made but not yet published (they go into the next checkpoint first).
    """

    topology: Topology
    partition: int
    gate: ShardGate
    next_offset: int = 0
    covered_offset: int = 0
    """The input offset the last checkpoint resumes from (what a restart reads again from)."""
    shards: dict[str, ShardState] = field(default_factory=dict)
    pending: list[tuple[str, bytes, bytes, float | None, int]] = field(default_factory=list)
    dirty: bool = False
    last_commit_ms: float = 0.0
    events: EventTimeQueue | None = None
    """Event time (``privacy.time: event``): records waiting for the watermark."""
    next_due_ms: int = 0
    """Tick clock: no shard has a release due before this time (the next slot or epoch
    boundary after the last schedule run); 0 = unknown, visit every shard."""
    failed: HeldRecordsFailed | None = None
    """Event time: a drain of held records raised; the state is suspect (records were popped
    from the queue) and must be discarded and restored, never checkpointed."""
    inbox: Inbox = field(default_factory=Inbox)
    """What this partition took from the repartition topic (dedup by source offset)."""
    forwarded: EventTimeQueue | None = None
    """Event time: forwarded records (repartition offsets, source timestamps) waiting for
    the watermark of this partition (they follow :attr:`events`' watermark)."""
    unflushed_forwards: bool = False
    """Records were forwarded since the last flush: flush before the next checkpoint."""
    forward_prev: dict[int, int] = field(default_factory=dict)
    """Repartition partition -> the last source offset forwarded to it by this state (the
    chain a receiver checks; a restored partition starts a new one)."""
    forward_error: BaseException | None = None
    """The flush of this partition's forwards failed: it is never checkpointed again; the
    next record of it raises this, and the driver restores the partition (re-forwards)."""
    last_mark: tuple[int, float] | None = None
    """Event time: ``(watermark, wall clock s)`` of the last marks this partition sent."""

    def __post_init__(self) -> None:
        p = self.topology.privacy
        if self.events is None and p.clock == "tick" and p.time == "event":
            self.events = EventTimeQueue(p.tick_ms, p.allowed_lateness_ms)
        if self.events is not None and self.topology.input.partitions > 1:
            # no mark of the other partitions yet: the watermark holds (Ingest.set_cap)
            self.events.cap = -(1 << 62)
        if self.events is not None and self.forwarded is None:
            self.forwarded = EventTimeQueue(p.tick_ms, p.allowed_lateness_ms,
                                            follow=self.events)


class NoiseFactory:
    """The noise source of a ``(topology, shard, epoch)``.

    ``secure`` and ``zero`` sources are stateless (one per topology); ``fast``
    (seeded, benchmarks/tests only) derives a seed per shard and epoch from the
    topology's base seed, so a restored state draws what a fresh one would.
    """

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __call__(self, topo: Topology, shard: str, epoch: int) -> Any:
        from sketches import make_noise

        kind, allow = topo.noise.kind, topo.noise.allow_insecure_noise
        if kind != "fast":
            if topo.name not in self._cache:
                self._cache[topo.name] = make_noise(kind, None, allow_insecure=allow)
            return self._cache[topo.name]
        base = topo.noise.seed or 0
        seed = xxhash.xxh64_intdigest(f"{base}/{topo.name}/{shard}/{epoch}".encode()) >> 1
        return make_noise(kind, seed, allow_insecure=allow)


def boundary_ms(topo: Topology, epoch: int, local_tick: int) -> int:
    """Wall-clock ms where local tick ``local_tick`` of ``epoch`` starts (tick clock)."""
    return (epoch * topo.privacy.epoch_ticks + local_tick) * topo.privacy.tick_ms


def event_limit(st: ShardState) -> int | None:
    """Public bound on events per epoch of the shard's mechanism (its ``event_horizon``
    capability, e.g. LazyHH's truncation).

    Only on the tick clock (the arrival clock's epoch is the event count itself).
    """
    horizon = st.capabilities.event_horizon
    if horizon is None or not st.is_tick:
        return None
    limit = horizon(st.mechanism.spec)
    return int(limit) if isinstance(limit, int) and limit > 0 else None
