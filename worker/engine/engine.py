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

Schedule (tick clock; docs/OPERATIONS.md "Release schedule"). A release's
content and its timestamp never depend on *when* events arrive:

- the release of slot ``s`` covers exactly the ticks before its boundary
  ``s * every_ticks`` and is stamped ``published_at`` = that boundary's time;
  an epoch's final release covers the whole epoch and is stamped with the
  epoch's end;
- the schedule (:meth:`Engine._schedule`) moves *every* shard of a partition
  to a time ``at``, making one release for **every** slot boundary crossed
  (and a final release for every epoch crossed), shard by shard; it runs
  before events of a later tick are applied (all shards, not only the one
  with the events) and from the timer; releases are only *queued*, and only
  :meth:`Engine.on_timer` checkpoints and publishes them, in the canonical
  order ``(published_at, shard)`` (:meth:`Engine._commit`). So the number,
  order and content-coverage of releases are a function of time alone, never
  of which shard had data or of when the timer ran (docs/OPERATIONS.md
  "Release schedule");
- with ``shards.allowed`` every allowed shard of an assigned partition gets its
  state at assignment and releases on schedule, events or not.

Windowed mechanisms (``continual=False``): a window is one epoch; the
mechanism sees the events of its window and ``release()`` is called exactly
once, at the epoch's end (the final release), then a fresh instance (fresh
noise and keys) starts.

Event bounds: a mechanism whose spec has ``event_horizon`` (LazyHH on the tick
clock) takes at most that many events per epoch; the engine truncates at the
exact event position (later events of the epoch are dropped one by one and
counted in ``dpstream_events_over_horizon_total``), never a whole batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from sketches import lookup
from sketches.errors import SpecError
from worker.config.topology import Topology
from worker.engine.checkpoint import Fenced, PartitionCheckpoint, check_deployment
from worker.engine.composition import Composition, share_of
from worker.engine.partition import (
    NoiseFactory,
    PartitionState,
    Sink,
    Store,
    boundary_ms,
    event_limit,
)
from worker.engine.shard_state import ShardState
from worker.ingest.decode import (
    DEAD_LETTER_MAX_BYTES,
    REASONS,
    DeadLetter,
    Decoded,
    Record,
    decode_batch,
)
from worker.ingest.event_time import HeldRecordsFailed
from worker.ingest.routing import ShardBudget, ShardGate, group_by_shard
from worker.observe.metrics import Metrics
from worker.release.envelope import envelope_bytes, release_key, split_release_key
from worker.release.epoch_params import check_hard, epoch_params, soft_changes, topology_at

log = logging.getLogger(__name__)

YIELD_EVERY = 64
"""Shards between two yields to the event loop in a release run or a checkpoint."""


class Engine:
    """Decode, route, update, release and checkpoint for the assigned partitions."""

    def __init__(self, topologies: Sequence[Topology], store: Store, sink: Sink,
                 metrics: Metrics | None = None, *, crash_points: dict[str, float] | None = None,
                 clock: Callable[[], float] = time.time,
                 dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES,
                 reraise: tuple[type[BaseException], ...] = (),
                 max_open_shards: int = 0, deployment: str = "",
                 takeover_from: tuple[str, ...] = ()) -> None:
        self.topologies = {t.name: t for t in topologies}
        self.by_topic: dict[str, list[Topology]] = {}
        for t in topologies:
            self.by_topic.setdefault(t.input.topic, []).append(t)
        self.entries = {t.name: lookup(t.mechanism) for t in topologies}
        self.specs = {t.name: self.entries[t.name].build_spec(t.spec_params())
                      for t in topologies}
        self.store, self.sink = store, sink
        self.deployment, self.takeover_from = deployment, tuple(takeover_from)
        """This deployment's id, written into every checkpoint; a checkpoint of another
        one is refused on restore unless named in ``takeover_from`` (issue 19)."""
        self.taken_over: Fenced | None = None
        """Set when another *deployment* fenced a partition of this worker: the driver
        stops the worker (it has been replaced)."""
        self.metrics = metrics or Metrics()
        self.crash_points = crash_points or {}
        self.clock = clock
        self.parts: dict[tuple[str, int], PartitionState] = {}
        self.lock = asyncio.Lock()
        self._rng = np.random.default_rng()
        self._noise_for = NoiseFactory()
        self.dead_letter_max_bytes = dead_letter_max_bytes
        self.reraise = reraise
        self.batch_is_current: Callable[[str, int], bool] | None = None
        """Set by the driver: False when a fetched batch of ``(topic, partition)`` became
        stale (the partition was restored and seeked since the fetch); checked under the
        engine lock, so a restore that ran while :meth:`process_batch` waited for the lock
        is seen (the stale records would otherwise move the restored offset past
        records that are read again)."""
        self.budgets = {t.name: ShardBudget(max_open_shards) for t in topologies
                        if t.allowed_shards is None}
        """Open shard sets: the shards this worker holds, at most ``max_open_shards`` new
        ones per topology (``DPSTREAM_MAX_OPEN_SHARDS``; 0: no limit)."""
        """Exceptions :meth:`on_timer` leaves to the driver (broker errors: an outage);
        any other exception of one partition's timer work is contained (see there)."""
        self._timer_error_logged: dict[tuple[str, int], float] = {}
        self._held_suspects: dict[tuple[str, int], set[int]] = {}
        self._failed_drains: dict[tuple[str, int], HeldRecordsFailed] = {}
        """Drains a timer round found failing, for :meth:`take_failed_drains`."""
        """Event time: offsets of held groups that raised, applied one by one next time."""
        self._over_logged: dict[tuple[str, str], tuple[int | None, float, int]] = {}
        self._children: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.composition = Composition(topologies)
        """Live budget per input topic: what every release's ``topic_total`` states."""
        self.input_not_private: dict[str, str] = {}
        """Topology name -> why its input makes releases not private (found at run time:
        :meth:`mark_input_not_private`)."""
        for t in topologies:
            self.metrics.init_topology(t.name, REASONS)
            self.metrics.privacy_info.labels(topology=t.name).info({
                "mechanism": t.mechanism, "relation": t.privacy.relation,
                "unit": t.privacy.unit_field or "event", "clock": t.privacy.clock,
                "unit_cap": str(t.privacy.unit_cap if t.privacy.unit_field else 1),
                "noise": t.noise.kind})

    # ---- helpers -----------------------------------------------------------
    def now_ms(self) -> int:
        """Wall-clock milliseconds (the tick clock's processing time)."""
        return int(self.clock() * 1000)

    def _crash(self, point: str) -> None:
        """Testing only: SIGKILL ourselves at ``point`` with the configured probability."""
        p = self.crash_points.get(point)
        if p and self._rng.random() < p:
            log.warning("crash point %s reached: killing the worker (testing only)", point)
            os.kill(os.getpid(), signal.SIGKILL)

    def _new_state(self, ps: PartitionState, shard: str, now: int) -> ShardState:
        topo = ps.topology
        epoch = 0
        st = ShardState(topo, shard, ps.partition, epoch, None)
        if st.is_tick:
            epoch, local = st.tick_of(now)
            st.epoch = epoch
            st.released_slot = local // topo.release.every_ticks
        else:
            st.released_slot = self._arrival_slot(topo, now)
        st.mechanism = self.entries[topo.name].build(self.specs[topo.name],
                                                     self._noise_for(topo, shard, st.epoch))
        st.params = self._epoch_params(topo)
        self._gauges(topo, st)
        return st

    def _epoch_params(self, topo: Topology) -> dict[str, Any]:
        """A new epoch's privacy block, not private if its input was found unfit."""
        p = epoch_params(topo)
        reason = self.input_not_private.get(topo.name)
        if reason is not None:
            p["input_not_private"] = p.get("input_not_private") or reason
            p["private"] = False
        return p

    def mark_input_not_private(self, topic: str, reason: str) -> None:
        """Releases of every event-time topology reading ``topic`` say ``private: false``
        with ``reason`` from now on, for the running epochs (their checkpointed block)
        and every later one (a non-production topology whose records carry producer
        CreateTime timestamps: one record can move the watermark and make later records
        late, docs/PRIVACY.md section 11 B5). Called before any record of the fetch that
        revealed it is applied, so no release counts such a record and says private."""
        for topo in self.by_topic.get(topic, ()):
            if topo.privacy.clock != "tick" or topo.privacy.time != "event" \
                    or topo.name in self.input_not_private:
                continue
            self.input_not_private[topo.name] = reason
            self.composition.mark_not_private(topo)  # its topic's total is not private
            for (name, _), ps in self.parts.items():
                if name != topo.name:
                    continue
                for st in ps.shards.values():
                    if st.params is not None and st.params.get("private", True):
                        st.params = {**st.params, "private": False,
                                     "input_not_private": reason}
                        st.changed = True

    async def _add_allowed_shards(self, ps: PartitionState) -> None:
        """Closed shard set: every allowed shard of this partition exists from assignment
        (yielding the loop every ``YIELD_EVERY`` new states: ~0.45 ms each)."""
        if ps.topology.allowed_shards is None:
            return
        now = self._schedule_ms(ps, self.now_ms())
        built = 0
        for shard in sorted(ps.topology.allowed_shards):
            if shard not in ps.shards and ps.gate(shard) is None:
                ps.shards[shard] = self._new_state(ps, shard, now)
                ps.dirty = True
                built += 1
                if built % YIELD_EVERY == 0:
                    await asyncio.sleep(0)

    async def _schedule(self, ps: PartitionState, at: int) -> None:
        """Tick clock: move every shard of ``ps`` to time ``at`` (releases queued).

        Called with the same times for every shard, whatever their data, so
        which releases exist depends on time only (module docstring). After a
        run every shard has made every release due at ``at``, so nothing is due
        before the next slot (or epoch) boundary ``ps.next_due_ms``: until then
        the call returns at once, whatever the number of shards (a quiet shard's
        clock is caught up lazily, at its next release or event; shards created
        in between start at the current slot, so they have nothing due either).
        """
        if ps.topology.privacy.clock != "tick" or at < ps.next_due_ms:
            return
        for i, shard in enumerate(sorted(ps.shards)):
            st = ps.shards[shard]
            if st.is_tick:
                self._catch_up(ps, st, at)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                # let the loop's other tasks run (the group heartbeat: a release run of
                # thousands of shards takes seconds); ingestion waits on self.lock, so the
                # run stays contiguous for the partition
                await asyncio.sleep(0)
        ps.next_due_ms = self._next_due_ms(ps.topology, at)

    @staticmethod
    def _next_due_ms(topo: Topology, at: int) -> int:
        """The first slot or epoch boundary strictly after time ``at`` (tick clock)."""
        g = at // topo.privacy.tick_ms
        epoch = g // topo.privacy.epoch_ticks
        local = g - epoch * topo.privacy.epoch_ticks
        every = topo.release.every_ticks
        return min(boundary_ms(topo, epoch, (local // every + 1) * every),
                   boundary_ms(topo, epoch + 1, 0))

    def _catch_up(self, ps: PartitionState, st: ShardState, now: int) -> None:
        """Tick clock: make every release due at ``now`` (queued, published by the timer).

        One release per slot boundary crossed, each covering exactly the ticks
        before its boundary and stamped with the boundary's time; every epoch
        that ended gets its remaining slots and its final release (covering the
        whole epoch, stamped with the epoch's end), so an idle stretch of
        several slots or epochs yields the same releases as a busy one.
        """
        topo = ps.topology
        epoch, local = st.tick_of(now)
        if epoch < st.epoch:
            return  # wall clock stepped back: nothing is due
        while st.epoch < epoch:
            self._release_slots(ps, st, topo.horizon - 1)
            self._roll(ps, st, st.epoch + 1, boundary_ms(topo, st.epoch + 1, 0))
        self._release_slots(ps, st, local)

    def _release_slots(self, ps: PartitionState, st: ShardState, local: int) -> None:
        """Release every slot of the current epoch whose boundary is at or before ``local``."""
        topo = ps.topology
        every = topo.release.every_ticks
        for slot in range(st.released_slot + 1, local // every + 1):
            if slot * every >= topo.horizon:
                break  # the epoch's end: its final release (``_roll``)
            st.advance(slot * every)
            self._release(ps, st, boundary_ms(topo, st.epoch, slot * every), final=False)
            st.released_slot = slot  # after: a release() that raised is made again

    @staticmethod
    def _schedule_ms(ps: PartitionState, now: int) -> int:
        """The time the tick schedule runs at: the watermark (event time) or ``now``."""
        return now if ps.events is None else ps.events.watermark_ms(now)

    @staticmethod
    def _arrival_slot(topo: Topology, now: int) -> int:
        return now // topo.privacy.tick_ms // topo.release.every_ticks

    def _release(self, ps: PartitionState, st: ShardState, now: int, final: bool) -> None:
        topo = ps.topology
        payload = st.mechanism.release()
        raw = envelope_bytes(topo, st.shard, epoch=st.epoch, seq=st.seq, rounds=st.rounds,
                             final=final, payload=payload, published_at_ms=now,
                             params=st.params, topic_total=self.composition.block(topo))
        st.seq += 1
        st.touch()
        ps.pending.append((topo.release.topic, release_key(topo.name, st.shard), raw,
                           st.oldest_unreleased_ms, now))
        st.oldest_unreleased_ms = None
        self._gauges(topo, st)  # per release, not per tick (a quiet tick visits no shard)

    def _roll(self, ps: PartitionState, st: ShardState, epoch: int, now: int) -> None:
        """Close the epoch (final release), start ``epoch`` with a fresh mechanism and noise.

        ``now`` stamps the final release (tick clock: the epoch's end). For a
        windowed mechanism this final release is its one and only release.
        """
        topo = ps.topology
        if st.is_tick:
            st.advance(topo.horizon)
        self._release(ps, st, now, final=True)
        st.mechanism = self.entries[topo.name].build(self.specs[topo.name],
                                                     self._noise_for(topo, st.shard, epoch))
        st.epoch, st.seq, st.rounds, st.events_in_epoch = epoch, 0, 0, 0
        st.touch()
        st.unit_counts = {}
        st.params = self._epoch_params(topo)  # an edited topology applies from the new epoch
        st.released_slot = 0 if st.is_tick else self._arrival_slot(topo, now)

    # ---- driver API --------------------------------------------------------
    async def assign(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """Restore the given input partitions; return ``{(topic, p): offset or None}``.

        ``None`` means no checkpoint: start from the beginning of the partition.
        """
        async with self.lock:
            tps = [tp for tp in tps if tp[0] in self.by_topic]
            if not tps:
                return {}
            await self.store.refresh()
            out: dict[tuple[str, int], int | None] = {}
            # the Kafka store claims a partition before restoring it (fences the previous
            # writer: worker.engine.checkpoint); in-memory test stores have no claims
            claim = getattr(self.store, "claim", None)
            for topic, p in tps:
                for topo in self.by_topic[topic]:
                    ps = self.parts.get((topo.name, p))
                    if ps is None:
                        if claim is not None:
                            await claim(topo.name, p)
                        ps = await self._restore(topo, p)
                        await self._add_allowed_shards(ps)
                        self.parts[(topo.name, p)] = ps
                        needs_repair = getattr(self.store, "needs_repair", None)
                        if needs_repair is not None and needs_repair(topo.name, p):
                            # a fenced writer's records are last on some keys: repair them
                            # now, not at the next release (second review of issue 19)
                            await self._commit(ps, force=True)
                    if self.metrics.value("dpstream_last_release_timestamp_seconds",
                                          topology=topo.name) is None:
                        # the "no release for N periods" alert counts from the assignment
                        self.metrics.last_release.labels(topology=topo.name).set(
                            self.now_ms() / 1000)
                    off = ps.next_offset if ps.next_offset > 0 else None
                    if (topic, p) not in out:
                        out[(topic, p)] = off
                    else:
                        prev = out[(topic, p)]
                        out[(topic, p)] = None if prev is None or off is None else min(prev, off)
            return out

    async def _restore(self, topo: Topology, p: int) -> PartitionState:
        ps = PartitionState(topo, p, ShardGate(p, topo.input.partitions, topo.allowed_shards,
                                               self.budgets.get(topo.name)))
        # a thread: assembling 10,000 shard records (zlib) took ~1.5 s of the loop; the
        # store is only used under self.lock, which assign holds
        cp = await asyncio.to_thread(self.store.load, topo.name, p)
        if cp is None:
            log.info("topology %s partition %d: no checkpoint, starting fresh", topo.name, p)
            if ps.events is not None:  # the schedule starts at wall clock - lateness
                ps.events.resume(None, self.now_ms())
            return ps
        check_deployment(cp.deployment, self.deployment, self.takeover_from, topo.name, p)
        entry = self.entries[topo.name]
        for i, blob in enumerate(cp.shards):
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                # ~2 ms a shard: let the group heartbeat run (10,000 shards held the loop
                # 17-34 s); records wait on self.lock, and the partition joins self.parts
                # only once restored
                await asyncio.sleep(0)
            st = ShardState.from_bytes(
                blob, topo, entry.from_bytes,
                lambda shard, epoch, t=topo: self._noise_for(t, shard, epoch))
            self._reconcile(topo, st)
            # per-shard records hold exactly this state; a version-1 full snapshot is
            # rewritten shard by shard at the next checkpoint
            st.changed = not cp.incremental
            ps.shards[st.shard] = st
            ps.gate.admit(st.shard)
            self._gauges(topo, st)
        ps.next_offset = ps.covered_offset = cp.next_offset
        if ps.events is not None:
            ps.events.done = set(cp.done)
            # never below a tick a restored clock has closed (a version-1 checkpoint of a
            # processing-time state has no watermark but may have closed ticks up to now)
            closed = [boundary_ms(topo, st.epoch, st.rounds) for st in ps.shards.values()
                      if st.is_tick]
            wm = max([w for w in (cp.watermark, *closed) if w is not None], default=None)
            ps.events.resume(wm, self.now_ms())
        for raw in cp.pending:
            doc = json.loads(raw)
            await self.sink.publish(topo.release.topic, release_key(topo.name, doc["shard"]),
                                    raw, timestamp_ms=int(doc["published_at"]))
        if cp.pending:
            await self.sink.flush()
        log.info("topology %s partition %d: restored %d shards at offset %d, re-published %d "
                 "pending releases", topo.name, p, len(ps.shards), cp.next_offset,
                 len(cp.pending))
        return ps

    def _reconcile(self, topo: Topology, st: ShardState) -> None:
        """Checkpointed epoch parameters vs. the topology (docs/OPERATIONS.md "Editing").

        Structural changes are refused (SpecError naming field and fix);
        privacy knobs (eps, delta, relation, unit_cap, mechanism params) keep
        their checkpointed values until the epoch ends. A version-1 state has
        no block: it restores only if its mechanism's spec equals the
        topology's (the spec holds eps, delta and the cap), else it is refused.
        """
        current = epoch_params(topo)
        if st.params is None:
            spec = getattr(st.mechanism, "spec", None)
            try:
                ours = self.specs[topo.name]
                if "counter" not in topo.mechanism_params and hasattr(ours, "counter") \
                        and hasattr(spec, "counter"):
                    # an unpinned counter is a default of new specs (issue 20): a checkpoint
                    # keeps the counter it recorded (a tree, if it has no such field)
                    ours = dataclasses.replace(ours, counter=spec.counter)  # type: ignore[union-attr]
                same = spec is not None and bool(spec == ours)
            except (TypeError, ValueError):  # not comparable: treat as different
                same = False
            if not same:
                raise SpecError(
                    f"{topo.source}: shard {st.shard!r}: its checkpoint (shard state version 1) "
                    "does not record the privacy parameters of its epoch, and its mechanism's "
                    "spec differs from this topology's (or cannot be compared), so the "
                    "guarantee of the epoch is unknown; run the topology the checkpoint was "
                    "written with until the epoch ends, or give the topology a new `name` "
                    "to start fresh state")
            # The state does not record its noise kind (it may have been written with
            # `fast` or `zero` noise): its epoch is never stamped private, nor covering shard
            # presence (unknown); the next epoch gets the topology's block.
            st.params = {**current, "private": False, "closed_shards": False}
            log.warning(
                "topology %s shard %s: restored from a version-1 checkpoint, which does not "
                "record its noise kind; the releases of epoch %d say `private: false` "
                "(the noise may not have been secure); the next epoch is stamped normally",
                topo.name, st.shard, st.epoch)
            return
        check_hard(st.params, current, topo.source, st.shard)
        changed = soft_changes(st.params, current)
        if changed:
            # the epoch finishes on its checkpointed parameters: its topic's total must
            # count them (and stay within the budget) until the worker restarts
            old = topology_at(topo, st.params)
            if self.composition.raise_share(topo, share_of(old)):
                self.composition.check()
            log.warning(
                "topology %s shard %s: %s changed mid-epoch %d; the epoch finishes on the "
                "checkpointed values (its noise was drawn with them; releases state them), the "
                "new values apply from the next epoch", topo.name, st.shard,
                ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in sorted(changed.items())),
                st.epoch)

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
            for topic, p in tps:
                for topo in self.by_topic.get(topic, []):
                    ps = self.parts.pop((topo.name, p), None)
                    if ps is not None:
                        await self._commit(ps, force=True)
                        ps.gate.release()
                        for shard in ps.shards:
                            self._forget_shard(topo, shard)

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
        return out

    async def checkpoint_all(self) -> None:
        """Checkpoint every owned partition (graceful shutdown)."""
        async with self.lock:
            for ps in list(self.parts.values()):  # a fenced partition leaves self.parts
                await self._commit(ps, force=True)

    async def process_batch(self, topic: str, partition: int, records: Sequence[Record]) -> int:
        """Ingest one fetched batch of ``topic``/``partition``; return events applied."""
        t0 = time.perf_counter()
        applied = 0
        async with self.lock:
            if self.batch_is_current is not None and not self.batch_is_current(topic,
                                                                              partition):
                return 0  # restored since the fetch: read again from the restored offset
            for topo in self.by_topic.get(topic, []):
                ps = self.parts.get((topo.name, partition))
                if ps is not None and ps.failed is not None:  # a drain raised: reset first
                    self._failed_drains.pop((topo.name, partition), None)
                    raise ps.failed
                if ps is None or not records:
                    continue
                recs = records
                if recs[0][0] < ps.next_offset:
                    recs = [r for r in records if r[0] >= ps.next_offset]
                    if not recs:
                        continue
                applied += await self._ingest(ps, recs, topic)
                ps.next_offset = recs[-1][0] + 1
                ps.dirty = True
                self.metrics.batch_latency.labels(topology=topo.name).observe(
                    time.perf_counter() - t0)
            for ps in list(self.parts.values()):  # a fenced partition leaves self.parts
                # Arrival clock (replace: the stream length is public): epochs end by
                # event count, so their final releases go out now. Tick-clock releases
                # are published only by the timer (their timing is data-independent).
                if ps.pending and ps.topology.privacy.clock != "tick":
                    await self._commit(ps)
        return applied

    async def _ingest(self, ps: PartitionState, recs: Sequence[Record], topic: str) -> int:
        topo, m = ps.topology, self.metrics
        if ps.events is not None:  # event time (worker/ingest/event_time.py)
            m.messages_in.labels(topology=topo.name).inc(len(recs))
            now = self.now_ms()
            late, future = ps.events.add(recs, now)
            dead = [DeadLetter(r[0], r[1], r[2], r[3], "late",
                               f"tick {r[3] // topo.privacy.tick_ms} already closed (allowed "
                               f"lateness {topo.privacy.allowed_lateness_ms} ms)") for r in late]
            dead += [DeadLetter(r[0], r[1], r[2], r[3], "future",
                                f"timestamp {r[3]} is ahead of the wall clock {now} by more "
                                "than the allowed lateness plus one tick") for r in future]
            await self._dead_letters(ps, topic, dead)
            return await self._drain(ps, topic, now)
        decoded = decode_batch(topo.input, recs, ps.gate)
        m.messages_in.labels(topology=topo.name).inc(len(recs))
        now = self.now_ms()
        await self._schedule(ps, now)  # processing time: releases due before these events' tick
        return await self._apply(ps, topic, decoded, now, now)

    async def _dead_letters(self, ps: PartitionState, topic: str,
                            dead: Sequence[DeadLetter]) -> None:
        topo, m = ps.topology, self.metrics
        for d in dead:
            if d.reason not in ("late", "future"):
                m.decode_errors.labels(topology=topo.name, reason=d.reason).inc()
            await self._dead_letter(ps, topic, d)

    async def _drain(self, ps: PartitionState, topic: str, now: int) -> int:
        """Event time: apply held records the watermark has reached, tick by tick.

        A group that raises is reported as :class:`HeldRecordsFailed` naming its records
        (they were read in earlier batches); the partition is then reset to its checkpoint
        by the caller's poison guard, and on the way back a group holding such suspect
        offsets is applied one record at a time, so the guard can isolate the culprit.
        The partition is marked failed until then: no checkpoint may record the popped
        records as done.
        """
        assert ps.events is not None
        applied = 0
        suspect = self._held_suspects.get((topic, ps.partition), set())
        for g, group in ps.events.due(now):
            at = g * ps.topology.privacy.tick_ms
            await self._schedule(ps, at)  # releases before tick g
            one_by_one = bool(suspect) and any(r[0] in suspect for r in group)
            for chunk in ([r] for r in group) if one_by_one else (group,):
                try:
                    decoded = decode_batch(ps.topology.input, chunk, ps.gate)
                    applied += await self._apply(ps, topic, decoded, at, now)
                except self.reraise:
                    raise
                except Exception as exc:
                    if len(chunk) > 1:
                        self._held_suspects.setdefault((topic, ps.partition), set()).update(
                            r[0] for r in chunk)
                    ps.failed = HeldRecordsFailed(topic, ps.partition, chunk, exc)
                    raise ps.failed from exc
                if one_by_one:
                    suspect.discard(chunk[0][0])
        return applied

    async def _apply(self, ps: PartitionState, topic: str, decoded: Decoded, at: int,
                     now: int) -> int:
        """Apply decoded events; tick clock: all at the tick of time ``at`` (ms).

        Processing time: ``at == now``. Event time: ``at`` is the start of the
        records' own tick, which no clock has closed yet (the engine advances
        clocks only to the watermark, after draining what it reached). The
        caller has run :meth:`_schedule` to ``at`` for every shard; this method
        never makes a release (a new shard of an open set starts at ``at``).
        """
        topo, m = ps.topology, self.metrics
        await self._dead_letters(ps, topic, decoded.dead)
        dropped = applied = over_total = 0
        for shard, idx in group_by_shard(decoded.shards):
            st = ps.shards.get(shard)
            if st is None:
                st = ps.shards[shard] = self._new_state(ps, shard, at)
            items = decoded.items[idx]
            units = None if decoded.units is None else decoded.units[idx]
            weights = None if decoded.weights is None else decoded.weights[idx]
            if st.is_tick:
                epoch, local = st.tick_of(at)
                if epoch < st.epoch or local < st.rounds:  # wall clock stepped back
                    local = st.rounds  # the open tick: time never runs backwards for a shard
                capped, over = st.apply(items, units, weights, local, now,
                                        limit=event_limit(st))
                if over:
                    m.over_horizon.labels(topology=topo.name).inc(over)
                    self._log_over_bound(topo, st, over)
                dropped += capped + over
                over_total += over
                applied += len(items)
                continue
            start = 0
            while start < len(items):  # arrival clock: split at epoch boundaries
                if st.room() == 0:
                    self._roll(ps, st, st.epoch + 1, now)
                stop = min(len(items), start + st.room())
                sl = slice(start, stop)
                dropped += st.apply(items[sl], None if units is None else units[sl],
                                    None if weights is None else weights[sl], 0, now)[0]
                start = stop
            applied += len(items)
        applied -= dropped
        m.events_in.labels(topology=topo.name).inc(applied)
        m.batch_size.labels(topology=topo.name).observe(len(decoded))
        if dropped - over_total:
            m.dropped.labels(topology=topo.name).inc(dropped - over_total)
        return applied

    def _log_over_bound(self, topo: Topology, st: ShardState, over: int) -> None:
        """Warn at an epoch's first drop over its event bound, then at most once a minute
        (every batch drops events once the bound is reached; the metric counts each)."""
        key, now = (topo.name, st.shard), self.clock()
        epoch, at, total = self._over_logged.get(key, (None, -math.inf, 0))
        if epoch != st.epoch:
            at, total = -math.inf, 0
        total += over
        if now - at >= 60.0:
            at = now
            log.warning("topology %s shard %s epoch %d: %d events beyond the epoch's public "
                        "event bound dropped so far (truncated at the exact event; logged "
                        "once a minute, dpstream_events_over_horizon_total counts each)",
                        topo.name, st.shard, st.epoch, total)
        self._over_logged[key] = (st.epoch, at, total)

    async def _dead_letter(self, ps: PartitionState, topic: str, d: DeadLetter) -> None:
        """Publish one dead letter, truncated to fit the producer's limit."""
        topo = ps.topology
        self.metrics.dead_letters.labels(topology=topo.name, reason=d.reason).inc()
        log.debug("dead letter %s at %s/%d@%d", d.reason, topic, ps.partition, d.offset)
        await self.sink.publish(topo.dead_letter_topic, (d.key or b"")[:256],
                                d.to_json(topo.name, topic, ps.partition,
                                          self.dead_letter_max_bytes))

    async def discard(self, tps: Iterable[tuple[str, int]]) -> None:
        """Drop the in-memory state of these input partitions *without* checkpointing.

        Used after a record raised mid-batch (the state may be half-updated): the
        partitions are then restored from their last checkpoint (:meth:`assign`),
        exactly as after a crash of this worker.
        """
        async with self.lock:
            for topic, p in tps:
                for topo in self.by_topic.get(topic, []):
                    ps = self.parts.pop((topo.name, p), None)
                    if ps is not None:
                        ps.gate.release()
                        for shard in ps.shards:
                            self._forget_shard(topo, shard)

    async def skip(self, topic: str, partition: int, record: Record, detail: str) -> None:
        """Dead-letter ``record`` as ``poison`` and move past its offset without applying it."""
        offset, key, value, ts = record
        async with self.lock:
            for topo in self.by_topic.get(topic, []):
                ps = self.parts.get((topo.name, partition))
                if ps is None or offset < ps.next_offset:
                    continue
                log.error("topology %s: record %s/%d@%d skipped as poison: %s", topo.name,
                          topic, partition, offset, detail)
                await self._dead_letter(ps, topic, DeadLetter(offset, key, value, ts, "poison",
                                                              detail))
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
            for topo in self.by_topic.get(topic, []):
                ps = self.parts.get((topo.name, partition))
                if ps is None:
                    continue
                await self._dead_letters(ps, topic, [DeadLetter(
                    first, None, None, -1, "corrupt_batch",
                    f"record batch at offsets {first}..{end - 1} skipped: {detail}")])
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
        stops the release path of the others, nor the worker.
        """
        async with self.lock:
            now = self.now_ms()
            for ps in list(self.parts.values()):
                if ps.failed is not None:
                    continue  # waiting for the worker's reset (take_failed_drains)
                try:
                    await self._timer_partition(ps, now)
                except self.reraise:
                    raise
                except HeldRecordsFailed as exc:
                    self._failed_drains[(ps.topology.name, ps.partition)] = exc
                except Exception as exc:
                    self._timer_failed(ps, exc)

    def take_failed_drains(self) -> list[HeldRecordsFailed]:
        """Event time: the drains of held records that raised in a timer round (each
        partition is marked failed and must be reset: :func:`worker.runtime.poison.reset_failed`).
        Returned once; a partition's next :meth:`process_batch` raises the same error."""
        out = list(self._failed_drains.values())
        self._failed_drains.clear()
        return out

    def _timer_failed(self, ps: PartitionState, exc: Exception) -> None:
        topo = ps.topology
        self.metrics.timer_errors.labels(topology=topo.name).inc()
        key, mono = (topo.name, ps.partition), time.monotonic()
        last = self._timer_error_logged.get(key)
        if last is None or mono - last >= 60.0:
            self._timer_error_logged[key] = mono
            log.error("topology %s partition %d: release timer failed (%s: %s); its releases "
                      "stay queued and are retried every round, the other partitions go on "
                      "(dpstream_timer_errors_total counts every failure)", topo.name,
                      ps.partition, type(exc).__name__, exc, exc_info=last is None)

    async def _timer_partition(self, ps: PartitionState, now: int) -> None:
        topo = ps.topology
        every = topo.release.every_ticks
        if ps.events is not None:  # apply what the watermark reached, then close
            await self._drain(ps, topo.input.topic, now)
        at = self._schedule_ms(ps, now)
        await self._schedule(ps, at)  # O(1) unless a boundary was crossed
        if topo.privacy.clock != "tick":
            slot = self._arrival_slot(topo, now)
            for st in ps.shards.values():
                if slot > st.released_slot:
                    self._release(ps, st, now, final=False)
                    st.released_slot = slot  # only once the release was made
        period = topo.privacy.tick_ms * every
        if ps.pending or (ps.dirty and now - ps.last_commit_ms >= period):
            await self._commit(ps)

    def _fenced(self, ps: PartitionState, exc: Fenced) -> None:
        """Another writer claimed ``ps`` (this worker is a zombie, or was replaced by
        another deployment): drop its state and its pending releases unpublished. The
        claimant restored a checkpoint this worker wrote before the claim and publishes
        from there (one writer per release: docs/PRIVACY.md)."""
        topo = ps.topology
        self.metrics.fenced.labels(topology=topo.name).inc()
        log.error("%s; its %d pending releases are withheld (never published by this "
                  "worker) and its state is dropped", exc, len(ps.pending))
        if self.parts.get((topo.name, ps.partition)) is ps:
            del self.parts[(topo.name, ps.partition)]
        ps.pending.clear()
        ps.gate.release()
        for shard in ps.shards:
            self._forget_shard(topo, shard)
        if exc.deployment != self.deployment and self.taken_over is None:
            self.taken_over = exc

    def _gauge_children(self, topo: Topology, shard: str) -> tuple[Any, ...]:
        """The shard's gauge children, looked up once (``labels()`` costs ~15 us each;
        10,000 shards release together). Dropped with :meth:`_forget_shard`."""
        key = (topo.name, shard)
        got = self._children.get(key)
        if got is None:
            m, labels = self.metrics, {"topology": topo.name, "shard": shard}
            got = self._children[key] = tuple(
                g.labels(**labels) for g in (m.memory, m.eps, m.delta, m.epoch,
                                             m.epoch_progress, m.epoch_length))
        return got

    def _forget_shard(self, topo: Topology, shard: str) -> None:
        self._children.pop((topo.name, shard), None)
        self.metrics.forget_shard(topo.name, shard)

    def _gauges(self, topo: Topology, st: ShardState) -> None:
        memory, eps_g, delta_g, epoch_g, progress_g, length_g = self._gauge_children(
            topo, st.shard)
        m = self.metrics
        memory.set(st.mechanism.memory_bytes())
        params = st.params or epoch_params(topo)  # the epoch's (checkpointed) parameters
        eps, delta = params["eps"], params["delta"]
        stated = getattr(st.mechanism, "privacy", None)
        if stated is not None:  # LazyHH: the guarantee is (eps, delta_tilde), delta_tilde > delta
            guarantee = stated()
            eps, delta = guarantee["eps"], guarantee.get("delta_tilde", guarantee["delta"])
        eps_g.set(eps)
        delta_g.set(delta)
        epoch_g.set(st.epoch)
        progress_g.set(st.rounds)
        length_g.set(topo.horizon)
        m.release_period.labels(topology=topo.name).set(
            topo.privacy.tick_ms * topo.release.every_ticks / 1000)

    async def _commit(self, ps: PartitionState, force: bool = False) -> None:
        """Checkpoint ``ps`` (state + offsets + pending releases), then publish pending.

        Never a failed partition (:attr:`PartitionState.failed`): its last checkpoint
        stands, and the records read since are read again."""
        if ps.failed is not None or not (force or ps.pending or ps.dirty):
            return
        topo = ps.topology
        t0 = time.perf_counter()
        # canonical publication order: (published_at, shard), seq order within a shard
        # (stable sort), whatever order the schedule queued them in
        ps.pending.sort(key=lambda r: (r[4], r[1]))
        resume, done, wm = ps.next_offset, [], None
        if ps.events is not None:  # event time: records still waiting are read again
            resume = ps.events.resume_offset(ps.next_offset)
            done, wm = ps.events.covered_above(resume), ps.events.watermark
        # the Kafka store's read-back may find a fenced writer's records of this partition
        # (a zombie's last write): they are repaired by up to two more checkpoints at once
        # (rewrite the shards, then tombstone the keys), before anything is published
        take_damaged = getattr(self.store, "take_damaged", None)
        written = 0
        for _ in range(3):
            if take_damaged is not None:
                for shard in take_damaged(topo.name, ps.partition):
                    if shard in ps.shards:
                        ps.shards[shard].changed = True
            # incremental: only the shards changed since the last checkpoint (issue 12)
            changed = [st for st in ps.shards.values() if st.changed]
            states = []
            for i, st in enumerate(changed):
                states.append(st.to_bytes())
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # the heartbeat, as in _schedule
            cp = PartitionCheckpoint(topo.name, ps.partition, resume, states,
                                     [raw for _, _, raw, _, _ in ps.pending], done, wm,
                                     names=[st.shard for st in changed], incremental=True,
                                     held=len(ps.shards), deployment=self.deployment or None)
            try:
                written += await self.store.write(cp)
            except Fenced as exc:
                self._fenced(ps, exc)
                return
            except Exception:
                self.metrics.checkpoint_failures.labels(topology=topo.name).inc()
                raise
            for st in changed:
                st.changed = False
            if take_damaged is None or not self.store.needs_repair(  # type: ignore[attr-defined]
                    topo.name, ps.partition):
                break
        self.metrics.checkpoint_latency.labels(topology=topo.name).observe(
            time.perf_counter() - t0)
        self.metrics.checkpoint_bytes.labels(topology=topo.name).inc(written)
        ps.dirty, ps.last_commit_ms, ps.covered_offset = False, self.now_ms(), resume
        if not ps.pending:
            return
        self._crash("after_checkpoint")
        for topic, key, raw, _, published_at in ps.pending:
            # Kafka timestamp = the data-independent published_at (release topics: CreateTime)
            await self.sink.publish(topic, key, raw, timestamp_ms=published_at)
        self._crash("mid_publish")
        await self.sink.flush()
        now = self.now_ms()
        for _, key, _, oldest, _ in ps.pending:
            shard = split_release_key(key)[1]
            self.metrics.releases.labels(topology=topo.name, shard=shard).inc()
            self.metrics.last_release.labels(topology=topo.name).set(now / 1000)
            if oldest is not None:
                self.metrics.release_latency.labels(topology=topo.name).observe(
                    max(0.0, (now - oldest) / 1000))
        ps.pending.clear()
        self.metrics.shards_owned.labels(topology=topo.name).set(
            sum(len(p.shards) for p in self.parts.values() if p.topology is topo))

