"""The ingest step: one fetched batch of a partition -> decode -> dead letters -> update.

Processing time: the batch is decoded and routed by shard
(:func:`worker.ingest.decode.decode_batch`, :func:`worker.ingest.routing.group_by_shard`),
the schedule is moved to ``now`` (releases due before these events' tick are
made first) and every shard's ``update_batch`` takes its events at the open tick.

Event time (``privacy.time: event``, :mod:`worker.ingest.event_time`): records
wait in the partition's queue until the watermark reaches their tick; then they
are applied tick by tick (:meth:`Ingest.drain`), the schedule run to each
tick's start before its records. Late and future records are dead-lettered.

Event bounds: a mechanism whose spec has ``event_horizon`` (LazyHH on the tick
clock) takes at most that many events per epoch; the engine truncates at the
exact event position (later events of the epoch are dropped one by one and
counted in ``dpstream_events_over_horizon_total``), never a whole batch.

Arrival clock: an epoch ends by event count, so a batch is split at epoch
boundaries (:meth:`worker.engine.schedule.Schedule.roll` makes the final
release in between).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from worker.config.topology import Topology
from worker.engine.partition import PartitionState, event_limit
from worker.engine.schedule import Schedule
from worker.engine.shard_state import ShardState
from worker.engine.state import EngineState, log
from worker.errors import HeldRecordsFailed
from worker.ingest.decode import DeadLetter, Decoded, Record, decode_batch
from worker.ingest.records import accept_all
from worker.ingest.repartition import (
    KIND_MARK,
    frame,
    mark_frame,
    producer_hint,
    repartition_topic,
    unframe,
)
from worker.ingest.routing import group_by_shard, partition_for


class Ingest:
    """Applies records to the shard states of a partition (no release is published here)."""

    def __init__(self, state: EngineState, schedule: Schedule) -> None:
        self.s, self.schedule = state, schedule
        self._held_suspects: dict[tuple[str, int], set[int]] = {}
        """Event time: offsets of held groups that raised, applied one by one next time."""
        self._over_logged: dict[tuple[str, str], tuple[int | None, float, int]] = {}

    async def batch(self, ps: PartitionState, recs: Sequence[Record], topic: str) -> int:
        """Ingest ``recs`` (all at or after ``ps.next_offset``); return events applied."""
        topo, m = ps.topology, self.s.metrics
        if ps.events is not None:  # event time (worker/ingest/event_time.py)
            m.messages_in.labels(topology=topo.name).inc(len(recs))
            now = self.s.now_ms()
            recs = await self._forward_misplaced(ps, recs, topic)
            self.set_cap(ps)  # the other partitions' marks bound this watermark
            late, future = ps.events.add(recs, now)
            dead = [DeadLetter(r[0], r[1], r[2], r[3], "late",
                               f"tick {r[3] // topo.privacy.tick_ms} already closed (allowed "
                               f"lateness {topo.privacy.allowed_lateness_ms} ms)") for r in late]
            dead += [DeadLetter(r[0], r[1], r[2], r[3], "future",
                                f"timestamp {r[3]} is ahead of the wall clock {now} by more "
                                "than the allowed lateness plus one tick") for r in future]
            await self.dead_letters(ps, topic, dead)
            return await self.drain(ps, topic, now)
        split = self._split_json(ps, recs) if topo.input.encoding == "json" else None
        if split is None:
            decoded = decode_batch(topo.input, recs, ps.gate)
        else:  # records of other partitions' shards go first (no gate fallback decode)
            decoded, misplaced = split
            if misplaced:
                await self._send_forwards(ps, misplaced)
        m.messages_in.labels(topology=topo.name).inc(len(recs))
        now = self.s.now_ms()
        await self.schedule.run(ps, now)  # processing time: releases due before this tick
        return await self._apply(ps, topic, decoded, now, now, recs)

    async def forwarded(self, ps: PartitionState, recs: Sequence[Record], topic: str) -> int:
        """Ingest records of the repartition topic ``topic`` (all at or after the inbox's
        offset): this topology's forwards, deduplicated by source offset, are applied as
        if read from the input (event time: at their source timestamp's tick); marks
        move the event-time cap. A forwarded record is never forwarded again."""
        topo, m, inbox = ps.topology, self.s.metrics, ps.inbox
        take: list[Record] = []
        dead: list[DeadLetter] = []
        dups = 0
        for off, key, value, ts in recs:
            fw = unframe(value)
            if fw is None:
                dead.append(DeadLetter(off, key, value, ts, "bad_forward",
                                       f"not a dpstream forwarded record (topic {topic} is "
                                       "internal: only dpstream workers may write to it)"))
                continue
            if fw.topology != topo.name:
                continue
            if fw.kind == KIND_MARK:
                inbox.mark(fw.partition, fw.timestamp)
                continue
            if not inbox.accept(off, fw.partition, fw.offset, fw.prev):
                dups += 1
                continue
            take.append((off, key, fw.value, fw.timestamp))
        if dups:
            m.repartition_deduplicated.labels(topology=topo.name).inc(dups)
        await self.dead_letters(ps, topic, dead)
        if ps.forwarded is not None:  # event time: held by source timestamp
            assert ps.events is not None
            m.messages_in.labels(topology=topo.name).inc(len(take))
            now = self.s.now_ms()
            self.set_cap(ps)
            late, future = ps.forwarded.add(take, now)
            dl = [DeadLetter(r[0], r[1], r[2], r[3], "late",
                             f"tick {r[3] // topo.privacy.tick_ms} already closed (forwarded "
                             "record)") for r in late]
            dl += [DeadLetter(r[0], r[1], r[2], r[3], "future",
                              f"timestamp {r[3]} is ahead of the wall clock {now}")
                   for r in future]
            await self.dead_letters(ps, topic, dl)
            return await self.drain(ps, topo.input.topic, now)
        if not take:
            return 0
        decoded = decode_batch(topo.input, take, ps.gate)
        m.messages_in.labels(topology=topo.name).inc(len(take))
        now = self.s.now_ms()
        await self.schedule.run(ps, now)
        return await self._apply(ps, topic, decoded, now, now, None)

    async def _forward_misplaced(self, ps: PartitionState, recs: Sequence[Record],
                                 topic: str) -> Sequence[Record]:
        """Event time: forward records of other partitions' shards as they are read (not
        when their tick is due), so this partition's marks, its read progress, cover
        them (worker/ingest/repartition.py); return the records that stay here."""
        assert ps.events is not None
        split = self._split_json(ps, recs) if ps.topology.input.encoding == "json" else None
        if split is not None:
            if not split[1]:
                return recs
            await self._send_forwards(ps, split[1])
            wrong = {r[0] for r, _ in split[1]}
        else:
            decoded = decode_batch(ps.topology.input, recs, ps.gate)
            wrong = {d.offset for d in decoded.dead if d.reason == "wrong_partition"}
            if not wrong:
                return recs
            await self.dead_letters(ps, topic,
                                    await self.forward(ps, [r for r in recs if r[0] in wrong]))
        ps.events.done.update(wrong)  # handled: not read again after a restore above them
        return [r for r in recs if r[0] not in wrong]

    async def send_marks(self, ps: PartitionState, now: int) -> None:
        """Event time: tell every other partition of the repartition topic how far this
        partition has been read (everything before it was forwarded already); at most
        every quarter second, and only when it moved."""
        n = ps.topology.input.partitions
        if ps.events is None or n <= 1:
            return
        progress = ps.events.read_progress(now)
        mono = self.s.clock()
        if progress is None or (ps.last_mark is not None and (
                progress <= ps.last_mark[0] or mono - ps.last_mark[1] < 0.25)):
            return
        rtopic = repartition_topic(ps.topology.input.topic)
        raw = mark_frame(ps.topology.name, ps.partition, progress)
        for p in range(n):
            if p != ps.partition:
                await self.s.sink.publish(rtopic, b"", raw, partition=p)
        ps.last_mark = (progress, mono)

    def set_cap(self, ps: PartitionState) -> None:
        """Event time: the input partition's watermark waits for the marks of every other
        partition (:meth:`worker.ingest.repartition.Inbox.marks_floor`)."""
        if ps.events is None:
            return
        n = ps.topology.input.partitions
        if n <= 1:
            return
        floor = ps.inbox.marks_floor(ps.partition, n)
        ps.events.cap = -(1 << 62) if floor is None else floor

    async def forward(self, ps: PartitionState, recs: Sequence[Record]) -> list[DeadLetter]:
        """Send records of ``ps``'s input partition that belong to another partition's
        shard to that partition of the repartition topic (keyed by the shard); return
        the dead letters of records that cannot be forwarded (no row decodes)."""
        topo = ps.topology
        dead: list[DeadLetter] = []
        placed: list[tuple[Record, str]] = []
        if topo.input.encoding == "json":  # one event per message: rows follow records
            d = decode_batch(topo.input, recs, accept_all)
            bad = {x.offset for x in d.dead}
            dead.extend(d.dead)
            placed = list(zip([r for r in recs if r[0] not in bad], d.shards.tolist(),
                              strict=True))
        else:  # many events per message, one shard each: the message's first row
            for rec in recs:
                d = decode_batch(topo.input, [rec], accept_all)
                if len(d) == 0:  # no row decodes: its rows are dead letters here, not there
                    dead.extend(d.dead)
                else:
                    placed.append((rec, str(d.shards[0])))
        await self._send_forwards(ps, placed)
        return dead

    async def _send_forwards(self, ps: PartitionState, placed: Sequence[tuple[Record, str]]
                             ) -> None:
        """Send records with their shards to the shards' repartition-topic partitions."""
        topo, m = ps.topology, self.s.metrics
        rtopic = repartition_topic(topo.input.topic)
        n = topo.input.partitions
        where: dict[str, int] = {}
        by_target: dict[int, list[tuple[bytes, bytes]]] = {}
        chain = ps.forward_prev
        for (off, _key, value, ts), shard in placed:
            target = where.get(shard)
            if target is None:
                target = where[shard] = partition_for(shard, n)
            by_target.setdefault(target, []).append(
                (shard.encode(), frame(topo.name, ps.partition, off, ts, -1, value,
                                       chain.get(target, -1))))
            chain[target] = off
        many = getattr(self.s.sink, "publish_batch", None)  # optional (KafkaSink has it)
        for target, rows in by_target.items():  # source-offset order within each target
            if many is not None:
                await many(rtopic, target, rows)
                continue
            for key, raw in rows:
                await self.s.sink.publish(rtopic, key, raw, partition=target)
        sent = len(placed)
        if sent:
            ps.unflushed_forwards = True
            m.repartition_forwarded.labels(topology=topo.name).inc(sent)
            if topo.input.topic not in self.s.hinted:
                self.s.hinted.add(topo.input.topic)
                log.warning("%s", producer_hint(topo.input.topic, n))

    def _split_json(self, ps: PartitionState, recs: Sequence[Record]
                    ) -> tuple[Decoded, list[tuple[Record, str]]] | None:
        """JSON (one event per message): decode once without the gate, then split by the
        gate's verdict per shard into this partition's events and the records of other
        partitions' shards (with their shards). None when another verdict (unknown shard,
        shard limit) occurs: the caller decodes with the gate (its dead letters)."""
        d = decode_batch(ps.topology.input, recs, accept_all)
        shards = d.shards.tolist()
        verdict = {sh: ps.gate(sh) for sh in dict.fromkeys(shards)}
        if all(v is None for v in verdict.values()):
            return d, []  # what the gated decode gives
        if any(v not in (None, "wrong_partition") for v in verdict.values()):
            return None
        bad = {x.offset for x in d.dead}
        survivors = [r for r in recs if r[0] not in bad]
        keep = np.fromiter((verdict[sh] is None for sh in shards), dtype=bool, count=len(shards))
        misplaced = [(r, sh) for r, sh, k in zip(survivors, shards, keep.tolist(), strict=True)
                     if not k]
        idx = np.flatnonzero(keep)
        kept = Decoded(d.items[idx], d.shards[idx],
                       None if d.units is None else d.units[idx],
                       None if d.weights is None else d.weights[idx], d.dead)
        return kept, misplaced

    async def drain(self, ps: PartitionState, topic: str, now: int) -> int:
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
        self.set_cap(ps)
        groups = [(g, group, True) for g, group in ps.events.due(now)]
        if ps.forwarded is not None and len(ps.forwarded):
            rtopic = repartition_topic(ps.topology.input.topic)
            groups += [(g, group, False) for g, group in ps.forwarded.due(now)]
            groups.sort(key=lambda x: (x[0], not x[2]))
        for g, group, own in groups:
            at = g * ps.topology.privacy.tick_ms
            await self.schedule.run(ps, at)  # releases before tick g
            if not own:  # forwarded records (repartition offsets): applied, never forwarded
                try:
                    decoded = decode_batch(ps.topology.input, group, ps.gate)
                    applied += await self._apply(ps, rtopic, decoded, at, now, None)
                except self.s.reraise:
                    raise
                except Exception as exc:  # popped already: reset to the checkpoint
                    ps.failed = HeldRecordsFailed(rtopic, ps.partition, group, exc)
                    raise ps.failed from exc
                continue
            one_by_one = bool(suspect) and any(r[0] in suspect for r in group)
            for chunk in ([r] for r in group) if one_by_one else (group,):
                try:
                    decoded = decode_batch(ps.topology.input, chunk, ps.gate)
                    # misplaced records were forwarded when read (_forward_misplaced)
                    applied += await self._apply(ps, topic, decoded, at, now, None)
                except self.s.reraise:
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
                     now: int, source: Sequence[Record] | None) -> int:
        """Apply decoded events; tick clock: all at the tick of time ``at`` (ms).

        Processing time: ``at == now``. Event time: ``at`` is the start of the
        records' own tick, which no clock has closed yet (the engine advances
        clocks only to the watermark, after draining what it reached). The
        caller has run the schedule to ``at`` for every shard; this method
        never makes a tick-clock release (a new shard of an open set starts at ``at``).
        """
        topo, m = ps.topology, self.s.metrics
        dead = decoded.dead
        if source is not None and any(d.reason == "wrong_partition" for d in dead):
            # records of another partition's shard (any producer's partitioner): forwarded
            # through the repartition topic, counted once there (worker/ingest/repartition.py)
            wrong = {d.offset for d in dead if d.reason == "wrong_partition"}
            dead = [d for d in dead if d.reason != "wrong_partition"]
            dead += await self.forward(ps, [r for r in source if r[0] in wrong])
        await self.dead_letters(ps, topic, dead)
        dropped = applied = over_total = 0
        for shard, idx in group_by_shard(decoded.shards):
            st = ps.shards.get(shard)
            if st is None:
                st = ps.shards[shard] = self.schedule.new_state(ps, shard, at)
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
                    self.schedule.roll(ps, st, st.epoch + 1, now)
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
        key, now = (topo.name, st.shard), self.s.clock()
        epoch, at, total = self._over_logged.get(key, (None, -math.inf, 0))
        if epoch != st.epoch:
            at, total = -math.inf, 0
        total += over
        if now - at >= 60.0:
            at = now
            log.warning("topology %s shard %s epoch %d: %d events beyond the epoch's public "
                        "event bound dropped so far (truncated at the exact event; logged "
                        "once a minute, dpstream_events_over_horizon_total counts each)",
                        topo.name, st.shard, st.epoch, total,
                        extra={"topology": topo.name, "shard": st.shard})
        self._over_logged[key] = (st.epoch, at, total)

    async def dead_letters(self, ps: PartitionState, topic: str,
                           dead: Sequence[DeadLetter]) -> None:
        """Publish ``dead`` (decode errors are counted per reason; late/future are not)."""
        topo, m = ps.topology, self.s.metrics
        for d in dead:
            if d.reason not in ("late", "future"):
                m.decode_errors.labels(topology=topo.name, reason=d.reason).inc()
            await self.dead_letter(ps, topic, d)

    async def dead_letter(self, ps: PartitionState, topic: str, d: DeadLetter) -> None:
        """Publish one dead letter, truncated to fit the producer's limit."""
        topo = ps.topology
        self.s.metrics.dead_letters.labels(topology=topo.name, reason=d.reason).inc()
        self.s.dead_letter_log.add(topo.name, d.reason, topic=topo.dead_letter_topic)
        log.debug("dead letter %s at %s/%d@%d", d.reason, topic, ps.partition, d.offset,
                  extra={"topology": topo.name, "partition": ps.partition})
        await self.s.sink.publish(topo.dead_letter_topic, (d.key or b"")[:256],
                                  d.to_json(topo.name, topic, ps.partition,
                                            self.s.dead_letter_max_bytes))
