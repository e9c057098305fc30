"""The worker's core, independent of how records arrive: batch -> state -> release.

:class:`Engine` owns the per-(topology, partition) state of the partitions
assigned to this worker. A driver (``worker.runtime.worker``) calls

- :meth:`Engine.assign` when partitions arrive: restore from the latest
  checkpoint, re-publish its pending releases byte-identically, and return the
  offsets to seek to (checkpointed offsets, never group commits);
- :meth:`Engine.process_batch` for every fetched batch of one partition
  (decode -> dead letters -> route by shard -> ``update_batch``);
- :meth:`Engine.on_timer` periodically: advance clocks, roll epochs, make the
  scheduled releases, then *checkpoint first and publish second*;
- :meth:`Engine.revoke` when partitions leave: checkpoint, then drop them.

Every call holds one asyncio lock, so a release never interleaves with a batch.
The engine contains no DP maths; mechanisms come from the registry.

:class:`Engine` is a facade: it holds the lock and the shared
:class:`~worker.engine.state.EngineState`, and hands each call to the module of
its concept:

- :mod:`~worker.engine.schedule`: ticks, slots and epochs, when a release is
  due; releases are made and queued there (the release schedule's rules);
- :mod:`~worker.engine.ingest`: one batch -> decode -> dead letters -> shard
  updates (event time's held records, event bounds);
- :mod:`~worker.engine.commit`: checkpoint-then-publish, fencing of a writer
  that lost its partition;
- :mod:`~worker.engine.restore`: claim, restore, reconcile and repair on
  assignment; revoke and discard;
- :mod:`~worker.engine.timer`: the timer round and its per-partition error
  containment;
- :mod:`~worker.engine.gauges`: the metrics the above update.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sketches import lookup
from worker.config.topology import Topology
from worker.engine.checkpoint import Fenced
from worker.engine.commit import Commit
from worker.engine.composition import Composition
from worker.engine.gauges import Gauges
from worker.engine.ingest import Ingest
from worker.engine.partition import PartitionState, Sink, Store
from worker.engine.restore import Restore
from worker.engine.schedule import Schedule
from worker.engine.shard_state import ShardState
from worker.engine.state import YIELD_EVERY, EngineState, log
from worker.engine.timer import Timer
from worker.errors import HeldRecordsFailed
from worker.ingest.decode import DEAD_LETTER_MAX_BYTES, DeadLetter, Record
from worker.ingest.repartition import repartition_topic
from worker.ingest.routing import ShardBudget
from worker.observe.dead_letters import DeadLetterSummary
from worker.observe.logs import log_context
from worker.observe.metrics import Metrics

__all__ = ["YIELD_EVERY", "Engine"]


class Engine:
    """Decode, route, update, release and checkpoint for the assigned partitions."""

    def __init__(self, topologies: Sequence[Topology], store: Store, sink: Sink,
                 metrics: Metrics | None = None, *, crash_points: dict[str, float] | None = None,
                 clock: Callable[[], float] = time.time,
                 dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES,
                 reraise: tuple[type[BaseException], ...] = (),
                 max_open_shards: int = 0, deployment: str = "",
                 takeover_from: tuple[str, ...] = (),
                 dead_letter_log_interval_s: float = 30.0) -> None:
        by_topic: dict[str, list[Topology]] = {}
        for t in topologies:
            by_topic.setdefault(t.input.topic, []).append(t)
        entries = {t.name: lookup(t.mechanism) for t in topologies}
        specs = {t.name: entries[t.name].build_spec(t.spec_params()) for t in topologies}
        metrics = metrics or Metrics()
        budgets = {t.name: ShardBudget(max_open_shards) for t in topologies
                   if t.allowed_shards is None}
        self.state = EngineState(
            topologies={t.name: t for t in topologies}, by_topic=by_topic, entries=entries,
            specs=specs, store=store, sink=sink, metrics=metrics, clock=clock,
            composition=Composition(topologies), budgets=budgets, deployment=deployment,
            takeover_from=tuple(takeover_from), crash_points=crash_points or {},
            dead_letter_max_bytes=dead_letter_max_bytes, reraise=reraise,
            yield_every=YIELD_EVERY,  # this module's, read now: benchmarks set it
            dead_letter_log=DeadLetterSummary(dead_letter_log_interval_s,
                                              clock=lambda: self.state.clock()),
            repartition={repartition_topic(topic): topic for topic in by_topic})
        self.lock = asyncio.Lock()
        self.batch_is_current: Callable[[str, int], bool] | None = None
        """Set by the driver: False when a fetched batch of ``(topic, partition)`` became
        stale (the partition was restored and seeked since the fetch); checked under the
        engine lock, so a restore that ran while :meth:`process_batch` waited for the lock
        is seen (the stale records would otherwise move the restored offset past
        records that are read again)."""
        s = self.state
        self.gauges = Gauges(metrics)
        self.schedule = Schedule(s, self.gauges)
        self.ingest = Ingest(s, self.schedule)
        self.commit = Commit(s, self.gauges)
        self.restore = Restore(s, self.schedule, self.gauges, self.commit)
        self.timer = Timer(s, self.schedule, self.ingest, self.commit)
        self.gauges.init_topologies(topologies)

    # ---- the shared state, as attributes -----------------------------------
    @property
    def topologies(self) -> dict[str, Topology]:
        return self.state.topologies

    @property
    def by_topic(self) -> dict[str, list[Topology]]:
        return self.state.by_topic

    @property
    def entries(self) -> dict[str, Any]:
        return self.state.entries

    @property
    def specs(self) -> dict[str, Any]:
        return self.state.specs

    @property
    def parts(self) -> dict[tuple[str, int], PartitionState]:
        """``(topology name, input partition)`` -> the state of an assigned partition."""
        return self.state.parts

    @property
    def store(self) -> Store:
        return self.state.store

    @property
    def sink(self) -> Sink:
        return self.state.sink

    @sink.setter
    def sink(self, sink: Sink) -> None:
        self.state.sink = sink

    @property
    def metrics(self) -> Metrics:
        return self.state.metrics

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.state.clock = clock

    @property
    def composition(self) -> Composition:
        """Live budget per input topic: what every release's ``topic_total`` states."""
        return self.state.composition

    @property
    def input_not_private(self) -> dict[str, str]:
        """Topology name -> why its input makes releases not private (found at run time:
        :meth:`mark_input_not_private`)."""
        return self.state.input_not_private

    @property
    def budgets(self) -> dict[str, ShardBudget]:
        return self.state.budgets

    @property
    def deployment(self) -> str:
        return self.state.deployment

    @property
    def takeover_from(self) -> tuple[str, ...]:
        return self.state.takeover_from

    @property
    def taken_over(self) -> Fenced | None:
        """Set when another *deployment* fenced a partition of this worker: the driver
        stops the worker (it has been replaced)."""
        return self.state.taken_over

    @property
    def reraise(self) -> tuple[type[BaseException], ...]:
        """Exceptions :meth:`on_timer` leaves to the driver (broker errors: an outage);
        any other exception of one partition's timer work is contained (see there)."""
        return self.state.reraise

    def now_ms(self) -> int:
        """Wall-clock milliseconds (the tick clock's processing time)."""
        return self.state.now_ms()

    def _release(self, ps: PartitionState, st: ShardState, now: int, final: bool) -> None:
        """Make and queue one release of ``st`` (tests simulate a crash after it)."""
        self.schedule.release(ps, st, now, final)

    # ---- driver API --------------------------------------------------------
    def mark_input_not_private(self, topic: str, reason: str) -> None:
        """Releases of every event-time topology reading ``topic`` say ``private: false``
        with ``reason`` from now on, for the running epochs (their checkpointed block)
        and every later one (a non-production topology whose records carry producer
        CreateTime timestamps: one record can move the watermark and make later records
        late, docs/PRIVACY.md section 11 B5). Called before any record of the fetch that
        revealed it is applied, so no release counts such a record and says private."""
        self.schedule.mark_input_not_private(topic, reason)

    async def assign(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """Restore the given input partitions; return ``{(topic, p): offset or None}``.

        ``None`` means no checkpoint: start from the beginning of the partition.
        """
        async with self.lock:
            return await self.restore.assign(tps)

    def partners(self, topic: str, partition: int) -> list[tuple[str, int]]:
        """The topic-partitions restored, seeked and revoked together with ``topic``/
        ``partition``: partition ``p`` of an input topic and of its repartition topic
        (one state; a worker owns both or neither)."""
        source = self.state.input_of(topic)
        if source is None:
            return [(topic, partition)]
        return [(source, partition), (repartition_topic(source), partition)]

    def log_end(self, topic: str, partition: int, at_ms: int) -> None:
        """Event time: the driver has handed over every record ``topic``/``partition``
        held at wall-clock ``at_ms`` (consumer position == high watermark of a fetch
        answered at ``at_ms``); ticks ending by ``at_ms - allowed_lateness_ms`` may close.

        Call it only after :meth:`process_batch` has returned for every record
        below that position (worker/ingest/event_time.py, condition (b)).
        """
        for topo in self.by_topic.get(topic, []):
            ps = self.parts.get((topo.name, partition))
            if ps is not None and ps.events is not None:
                ps.events.reached_end(at_ms)

    async def revoke(self, tps: Iterable[tuple[str, int]]) -> None:
        """Checkpoint, then drop, every state of the given input partitions."""
        async with self.lock:
            await self.restore.leave(tps, checkpoint=True)

    def open_shards(self) -> dict[str, int]:
        """Per open-set topology, the shards this worker holds (``DPSTREAM_MAX_OPEN_SHARDS``
        bounds the new ones)."""
        return {name: b.held for name, b in self.budgets.items()}

    def covered_offsets(self) -> dict[tuple[str, int], int]:
        """Per owned input partition, the offset its checkpoints resume from (the minimum
        over the topologies reading it): where a worker restarted now would read again.

        Informational: the worker commits it to its consumer group so lag monitors and
        KEDA's Kafka scaler see real progress; restores never read committed offsets.
        """
        out: dict[tuple[str, int], int] = {}
        for (_name, p), ps in self.parts.items():
            key = (ps.topology.input.topic, p)
            out[key] = min(out.get(key, ps.covered_offset), ps.covered_offset)
            rkey, roff = (repartition_topic(key[0]), p), ps.inbox.covered_offset
            out[rkey] = min(out.get(rkey, roff), roff)
        return out

    async def checkpoint_all(self) -> None:
        """Checkpoint every owned partition (graceful shutdown)."""
        async with self.lock:
            for ps in list(self.parts.values()):  # a fenced partition leaves self.parts
                if ps.forward_error is None:  # never past a lost forward
                    await self.commit.commit(ps, force=True)

    async def process_batch(self, topic: str, partition: int, records: Sequence[Record]) -> int:
        """Ingest one fetched batch of ``topic``/``partition``; return events applied."""
        t0 = time.perf_counter()
        applied = 0
        async with self.lock:
            if self.batch_is_current is not None and not self.batch_is_current(topic,
                                                                              partition):
                return 0  # restored since the fetch: read again from the restored offset
            source = self.state.repartition.get(topic)
            for topo in self.by_topic.get(source or topic, []):
                if source is not None:  # the repartition topic: forwarded records
                    applied += await self._forwarded(topo, topic, partition, records)
                    continue
                ps = self.parts.get((topo.name, partition))
                if ps is not None and ps.forward_error is not None:
                    raise ps.forward_error  # a forward was lost: the driver restores it
                if ps is not None and ps.failed is not None:  # a drain raised: reset first
                    self.timer.forget_failed_drain(topo.name, partition)
                    raise ps.failed
                if ps is None or not records:
                    continue
                recs = records
                if recs[0][0] < ps.next_offset:
                    recs = [r for r in records if r[0] >= ps.next_offset]
                    if not recs:
                        continue
                with log_context(topology=topo.name, partition=partition):
                    applied += await self.ingest.batch(ps, recs, topic)
                ps.next_offset = recs[-1][0] + 1
                ps.dirty = True
                self.metrics.batch_latency.labels(topology=topo.name).observe(
                    time.perf_counter() - t0)
            for ps in list(self.parts.values()):  # a fenced partition leaves self.parts
                # Arrival clock (replace: the stream length is public): epochs end by
                # event count, so their final releases go out now. Tick-clock releases
                # are published only by the timer (their timing is data-independent).
                if ps.pending and ps.topology.privacy.clock != "tick":
                    await self.commit.commit(ps)
        return applied

    async def _forwarded(self, topo: Topology, topic: str, partition: int,
                         records: Sequence[Record]) -> int:
        """Records of the repartition topic for ``topo``'s partition (caller holds the lock)."""
        ps = self.parts.get((topo.name, partition))
        if ps is not None and ps.forward_error is not None:
            raise ps.forward_error  # a forward was lost: the driver restores the partition
        if ps is not None and ps.failed is not None:
            self.timer.forget_failed_drain(topo.name, partition)
            raise ps.failed
        if ps is None or not records:
            return 0
        recs = [r for r in records if r[0] >= ps.inbox.next_offset]
        if not recs:
            return 0
        applied = await self.ingest.forwarded(ps, recs, topic)
        ps.inbox.next_offset = recs[-1][0] + 1
        ps.dirty = True
        return applied

    async def discard(self, tps: Iterable[tuple[str, int]]) -> None:
        """Drop the in-memory state of these input partitions *without* checkpointing.

        Used after a record raised mid-batch (the state may be half-updated): the
        partitions are then restored from their last checkpoint (:meth:`assign`),
        exactly as after a crash of this worker.
        """
        async with self.lock:
            await self.restore.leave(tps, checkpoint=False)

    async def skip(self, topic: str, partition: int, record: Record, detail: str) -> None:
        """Dead-letter ``record`` as ``poison`` and move past its offset without applying it."""
        offset, key, value, ts = record
        async with self.lock:
            source = self.state.repartition.get(topic)
            for topo in self.by_topic.get(source or topic, []):
                ps = self.parts.get((topo.name, partition))
                if ps is not None and source is not None:  # a forwarded record
                    if offset >= ps.inbox.next_offset:
                        await self.ingest.dead_letter(ps, topic, DeadLetter(
                            offset, key, value, ts, "poison", detail))
                        ps.inbox.next_offset, ps.dirty = offset + 1, True
                    continue
                if ps is None or offset < ps.next_offset:
                    continue
                log.error("topology %s: record %s/%d@%d skipped as poison: %s", topo.name,
                          topic, partition, offset, detail)
                await self.ingest.dead_letter(ps, topic, DeadLetter(offset, key, value, ts,
                                                                    "poison", detail))
                ps.next_offset, ps.dirty = offset + 1, True

    async def skip_batch(self, topic: str, partition: int, first: int, end: int,
                         detail: str) -> None:
        """Dead-letter the record batch at offsets ``[first, end)`` as ``corrupt_batch``
        (it failed on every fetch: :mod:`worker.kafka.record_tuples`) and move past it.

        Called after the fetch's records were applied (some may precede the range).
        The records were never read, so the dead letter names the range, not their
        bytes; after a restart from an earlier checkpoint the range is met, retried
        and dead-lettered again (at least once). Held event-time records keep the
        checkpoint offset where it is
        (:meth:`worker.ingest.event_time.EventTimeQueue.resume_offset`)."""
        async with self.lock:
            source = self.state.repartition.get(topic)
            for topo in self.by_topic.get(source or topic, []):
                ps = self.parts.get((topo.name, partition))
                if ps is None:
                    continue
                await self.ingest.dead_letters(ps, topic, [DeadLetter(
                    first, None, None, -1, "corrupt_batch",
                    f"record batch at offsets {first}..{end - 1} skipped: {detail}")])
                if source is not None:
                    ps.inbox.next_offset, ps.dirty = max(ps.inbox.next_offset, end), True
                else:
                    ps.next_offset, ps.dirty = max(ps.next_offset, end), True

    async def on_timer(self) -> None:
        """Advance clocks, roll epochs, make due releases; checkpoint, then publish.

        Partition by partition. An exception of one partition's work that is
        not one of :attr:`reraise` (the driver's broker errors, which end the
        round) is logged with its traceback (then at most once a minute per
        partition), counted in ``dpstream_timer_errors_total``, and leaves
        that partition's releases queued (checkpoint first, so nothing
        unreleased is published) to be made and published again next round;
        every other partition releases on schedule. One bad partition never
        stops the release path of the others, nor the worker
        (:mod:`worker.engine.timer`).
        """
        async with self.lock:
            await self.timer.round()
        self.state.dead_letter_log.flush_due()

    def flush_logs(self) -> None:
        """Log the pending dead-letter summaries now (the worker calls it at stop)."""
        self.state.dead_letter_log.flush()

    def lost_forwards(self) -> list[tuple[str, int]]:
        """Input partitions whose forwards to the repartition topic may have been lost (a
        sink flush failed): never checkpointed again; the driver restores them from their
        checkpoints (discard, assign, seek), which forwards those records again."""
        return sorted({(ps.topology.input.topic, p) for (_n, p), ps in self.parts.items()
                       if ps.forward_error is not None})

    def take_failed_drains(self) -> list[HeldRecordsFailed]:
        """Event time: the drains of held records that raised in a timer round (each
        partition is marked failed and must be reset: :func:`worker.runtime.poison.reset_failed`).
        Returned once; a partition's next :meth:`process_batch` raises the same error."""
        return self.timer.take_failed_drains()
