"""The release schedule: ticks, slots and epochs, and when a release is due.

Tick clock (docs/OPERATIONS.md "Release schedule"). A release's content and its
timestamp never depend on *when* events arrive:

- the release of slot ``s`` covers exactly the ticks before its boundary
  ``s * every_ticks`` and is stamped ``published_at`` = that boundary's time;
  an epoch's final release covers the whole epoch and is stamped with the
  epoch's end;
- the schedule (:meth:`Schedule.run`) moves *every* shard of a partition
  to a time ``at``, making one release for **every** slot boundary crossed
  (and a final release for every epoch crossed), shard by shard; it runs
  before events of a later tick are applied (all shards, not only the one
  with the events) and from the timer; releases are only *queued* in
  ``PartitionState.pending``, and only the timer checkpoints and publishes
  them, in the canonical order ``(published_at, shard)``
  (:mod:`~worker.engine.commit`). So the number, order and content-coverage of
  releases are a function of time alone, never of which shard had data or of
  when the timer ran;
- with ``shards.allowed`` every allowed shard of an assigned partition gets its
  state at assignment and releases on schedule, events or not.

Arrival clock: a slot is ``now // tick_ms // every_ticks`` of the wall clock
(:func:`arrival_slot`), and an epoch ends by event count (:meth:`Schedule.roll`
from the ingest step).

Windowed mechanisms (``continual=False``): a window is one epoch; the
mechanism sees the events of its window and ``release()`` is called exactly
once, at the epoch's end (the final release), then a fresh instance (fresh
noise and keys) starts.

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
>>> next_due_ms(topo, 4_999), next_due_ms(topo, 5_000)   # slots of 10 ticks of 500 ms
(5000, 10000)
>>> next_due_ms(topo, 49_999)   # the last slot of epoch 0 ends with the epoch
50000
>>> arrival_slot(topo, 12_345)
2
"""

from __future__ import annotations

import asyncio
from typing import Any

from worker.config.topology import Topology
from worker.engine.gauges import Gauges
from worker.engine.partition import PartitionState, boundary_ms
from worker.engine.shard_state import ShardState
from worker.engine.state import EngineState
from worker.release.envelope import envelope_bytes, release_key
from worker.release.epoch_params import epoch_params


def next_due_ms(topo: Topology, at: int) -> int:
    """The first slot or epoch boundary strictly after time ``at`` (tick clock)."""
    g = at // topo.privacy.tick_ms
    epoch = g // topo.privacy.epoch_ticks
    local = g - epoch * topo.privacy.epoch_ticks
    every = topo.release.every_ticks
    return min(boundary_ms(topo, epoch, (local // every + 1) * every),
               boundary_ms(topo, epoch + 1, 0))


def schedule_ms(ps: PartitionState, now: int) -> int:
    """The time the tick schedule runs at: the watermark (event time) or ``now``."""
    return now if ps.events is None else ps.events.watermark_ms(now)


def arrival_slot(topo: Topology, now: int) -> int:
    """Arrival clock: the release slot of wall-clock time ``now``."""
    return now // topo.privacy.tick_ms // topo.release.every_ticks


class Schedule:
    """Builds shard states and makes the releases that are due (queued, not published)."""

    def __init__(self, state: EngineState, gauges: Gauges) -> None:
        self.s, self.gauges = state, gauges

    def new_state(self, ps: PartitionState, shard: str, now: int) -> ShardState:
        """A fresh state of ``shard`` starting at time ``now`` (nothing due before it)."""
        topo = ps.topology
        epoch = 0
        st = ShardState(topo, shard, ps.partition, epoch, None)
        if st.is_tick:
            epoch, local = st.tick_of(now)
            st.epoch = epoch
            st.released_slot = local // topo.release.every_ticks
        else:
            st.released_slot = arrival_slot(topo, now)
        st.mechanism = self._mechanism(topo, shard, st.epoch)
        st.params = self.epoch_params(topo)
        self.gauges.shard(topo, st)
        return st

    def _mechanism(self, topo: Topology, shard: str, epoch: int) -> Any:
        return self.s.entries[topo.name].build(self.s.specs[topo.name],
                                               self.s.noise_for(topo, shard, epoch))

    def epoch_params(self, topo: Topology) -> dict[str, Any]:
        """A new epoch's privacy block, not private if its input was found unfit."""
        p = epoch_params(topo)
        reason = self.s.input_not_private.get(topo.name)
        if reason is not None:
            p["input_not_private"] = p.get("input_not_private") or reason
            p["private"] = False
        return p

    def mark_input_not_private(self, topic: str, reason: str) -> None:
        """See :meth:`worker.engine.engine.Engine.mark_input_not_private`."""
        for topo in self.s.by_topic.get(topic, ()):
            if topo.privacy.clock != "tick" or topo.privacy.time != "event" \
                    or topo.name in self.s.input_not_private:
                continue
            self.s.input_not_private[topo.name] = reason
            self.s.composition.mark_not_private(topo)  # its topic's total is not private
            for (name, _), ps in self.s.parts.items():
                if name != topo.name:
                    continue
                for st in ps.shards.values():
                    if st.params is not None and st.params.get("private", True):
                        st.params = {**st.params, "private": False,
                                     "input_not_private": reason}
                        st.changed = True

    async def add_allowed_shards(self, ps: PartitionState) -> None:
        """Closed shard set: every allowed shard of this partition exists from assignment
        (yielding the loop every ``yield_every`` new states: ~0.45 ms each)."""
        if ps.topology.allowed_shards is None:
            return
        now = schedule_ms(ps, self.s.now_ms())
        built = 0
        for shard in sorted(ps.topology.allowed_shards):
            if shard not in ps.shards and ps.gate(shard) is None:
                ps.shards[shard] = self.new_state(ps, shard, now)
                ps.dirty = True
                built += 1
                if built % self.s.yield_every == 0:
                    await asyncio.sleep(0)

    async def run(self, ps: PartitionState, at: int) -> None:
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
        every = self.s.yield_every
        for i, shard in enumerate(sorted(ps.shards)):
            st = ps.shards[shard]
            if st.is_tick:
                self.catch_up(ps, st, at)
            if i % every == every - 1:
                # let the loop's other tasks run (the group heartbeat: a release run of
                # thousands of shards takes seconds); ingestion waits on the engine lock,
                # so the run stays contiguous for the partition
                await asyncio.sleep(0)
        ps.next_due_ms = next_due_ms(ps.topology, at)

    def catch_up(self, ps: PartitionState, st: ShardState, now: int) -> None:
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
            self.roll(ps, st, st.epoch + 1, boundary_ms(topo, st.epoch + 1, 0))
        self._release_slots(ps, st, local)

    def _release_slots(self, ps: PartitionState, st: ShardState, local: int) -> None:
        """Release every slot of the current epoch whose boundary is at or before ``local``."""
        topo = ps.topology
        every = topo.release.every_ticks
        for slot in range(st.released_slot + 1, local // every + 1):
            if slot * every >= topo.horizon:
                break  # the epoch's end: its final release (``roll``)
            st.advance(slot * every)
            self.release(ps, st, boundary_ms(topo, st.epoch, slot * every), final=False)
            st.released_slot = slot  # after: a release() that raised is made again

    def release_arrival(self, ps: PartitionState, now: int) -> None:
        """Arrival clock: release every shard whose slot ended by wall-clock ``now``."""
        slot = arrival_slot(ps.topology, now)
        for st in ps.shards.values():
            if slot > st.released_slot:
                self.release(ps, st, now, final=False)
                st.released_slot = slot  # only once the release was made

    def release(self, ps: PartitionState, st: ShardState, now: int, final: bool) -> None:
        """Make one release of ``st`` stamped ``now`` and queue it on ``ps.pending``."""
        topo = ps.topology
        payload = st.mechanism.release()
        raw = envelope_bytes(topo, st.shard, epoch=st.epoch, seq=st.seq, rounds=st.rounds,
                             final=final, payload=payload, published_at_ms=now,
                             params=st.params, topic_total=self.s.composition.block(topo))
        st.seq += 1
        st.touch()
        ps.pending.append((topo.release.topic, release_key(topo.name, st.shard), raw,
                           st.oldest_unreleased_ms, now))
        st.oldest_unreleased_ms = None
        self.gauges.shard(topo, st)  # per release, not per tick (a quiet tick visits no shard)

    def roll(self, ps: PartitionState, st: ShardState, epoch: int, now: int) -> None:
        """Close the epoch (final release), start ``epoch`` with a fresh mechanism and noise.

        ``now`` stamps the final release (tick clock: the epoch's end). For a
        windowed mechanism this final release is its one and only release.
        """
        topo = ps.topology
        if st.is_tick:
            st.advance(topo.horizon)
        self.release(ps, st, now, final=True)
        st.mechanism = self._mechanism(topo, st.shard, epoch)
        st.epoch, st.seq, st.rounds, st.events_in_epoch = epoch, 0, 0, 0
        st.touch()
        st.unit_counts = {}
        st.params = self.epoch_params(topo)  # an edited topology applies from the new epoch
        st.released_slot = 0 if st.is_tick else arrival_slot(topo, now)
