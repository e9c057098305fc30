"""Partitions arriving and leaving: claim, restore, reconcile, repair; revoke and discard.

On assignment a partition is claimed in the store (the Kafka store fences the
previous writer), restored from its latest checkpoint, and the checkpoint's
pending releases are re-published byte-identically (a crash between checkpoint
and publication: :mod:`~worker.engine.commit`). The offsets returned to the
driver are the checkpointed ones, never group commits. A fenced writer's
records found on the claim's read-back are repaired by a checkpoint at once.

Restoring reconciles every shard's checkpointed epoch parameters with the
current topology (docs/OPERATIONS.md "Editing"): structural changes are
refused, privacy knobs keep their checkpointed values until the epoch ends.

On revocation a partition is checkpointed, then dropped; after a record
raised mid-batch it is *discarded* (dropped without a checkpoint) and restored
again, exactly as after a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterable

from sketches.errors import SpecError
from worker.config.topology import Topology
from worker.engine.checkpoint import check_deployment
from worker.engine.commit import Commit
from worker.engine.composition import share_of
from worker.engine.gauges import Gauges
from worker.engine.partition import PartitionState, boundary_ms
from worker.engine.schedule import Schedule
from worker.engine.shard_state import ShardState
from worker.engine.state import EngineState, log
from worker.ingest.repartition import Inbox, repartition_topic
from worker.ingest.routing import ShardGate
from worker.release.envelope import release_key
from worker.release.epoch_params import check_hard, epoch_params, soft_changes, topology_at


class Restore:
    """Brings partitions in (claim, restore, repair) and takes them out (revoke, discard)."""

    def __init__(self, state: EngineState, schedule: Schedule, gauges: Gauges,
                 commit: Commit) -> None:
        self.s, self.schedule, self.gauges, self.commit = state, schedule, gauges, commit

    async def assign(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """See :meth:`worker.engine.engine.Engine.assign` (the caller holds the lock)."""
        # partition p of an input topic and of its repartition topic are one state
        asked = set(tps := list(tps))
        tps = list(dict.fromkeys((src, p) for src, p in (
            (self.s.input_of(t), p) for t, p in tps) if src is not None))
        if not tps:
            return {}
        store, m = self.s.store, self.s.metrics
        await store.refresh()
        out: dict[tuple[str, int], int | None] = {}
        for topic, p in tps:
            for topo in self.s.by_topic[topic]:
                ps = self.s.parts.get((topo.name, p))
                if ps is None:
                    # the Kafka store claims a partition before restoring it (fences the
                    # previous writer: worker.engine.checkpoint)
                    await store.claim(topo.name, p)
                    ps = await self._restore(topo, p)
                    await self.schedule.add_allowed_shards(ps)
                    self.s.parts[(topo.name, p)] = ps
                    if store.needs_repair(topo.name, p):
                        # a fenced writer's records are last on some keys: repair them
                        # now, not at the next release (second review of issue 19)
                        await self.commit.commit(ps, force=True)
                if m.value("dpstream_last_release_timestamp_seconds",
                           topology=topo.name) is None:
                    # the "no release for N periods" alert counts from the assignment
                    m.last_release.labels(topology=topo.name).set(self.s.now_ms() / 1000)
                off = ps.next_offset if ps.next_offset > 0 else None
                if (topic, p) not in asked:
                    pass
                elif (topic, p) not in out:
                    out[(topic, p)] = off
                else:
                    prev = out[(topic, p)]
                    out[(topic, p)] = None if prev is None or off is None else min(prev, off)
                rtp = (repartition_topic(topic), p)
                if rtp not in asked:  # the driver seeks what it asked for
                    continue
                roff = ps.inbox.next_offset if ps.inbox.next_offset > 0 else None
                if rtp not in out:
                    out[rtp] = roff
                else:
                    prev = out[rtp]
                    out[rtp] = None if prev is None or roff is None else min(prev, roff)
        return out

    async def _restore(self, topo: Topology, p: int) -> PartitionState:
        ps = PartitionState(topo, p, ShardGate(p, topo.input.partitions, topo.allowed_shards,
                                               self.s.budgets.get(topo.name)))
        # a thread: assembling 10,000 shard records (zlib) took ~1.5 s of the loop; the
        # store is only used under the engine lock, which assign holds
        cp = await asyncio.to_thread(self.s.store.load, topo.name, p)
        if cp is None:
            log.info("topology %s partition %d: no checkpoint, starting fresh", topo.name, p)
            if ps.events is not None:  # the schedule starts at wall clock - lateness
                ps.events.resume(None, self.s.now_ms())
            return ps
        check_deployment(cp.deployment, self.s.deployment, self.s.takeover_from, topo.name, p)
        entry = self.s.entries[topo.name]
        every = self.s.yield_every
        for i, blob in enumerate(cp.shards):
            if i % every == every - 1:
                # ~2 ms a shard: let the group heartbeat run (10,000 shards held the loop
                # 17-34 s); records wait on the engine lock, and the partition joins
                # the owned partitions only once restored
                await asyncio.sleep(0)
            st = ShardState.from_bytes(
                blob, topo, entry.from_bytes,
                lambda shard, epoch, t=topo: self.s.noise_for(t, shard, epoch))
            self._reconcile(topo, st)
            # per-shard records hold exactly this state; a version-1 full snapshot is
            # rewritten shard by shard at the next checkpoint
            st.changed = not cp.incremental
            ps.shards[st.shard] = st
            ps.gate.admit(st.shard)
            self.gauges.shard(topo, st)
        ps.next_offset = ps.covered_offset = cp.next_offset
        if cp.repartition is not None:  # absent in checkpoints written before it: empty
            rep = cp.repartition
            ps.inbox = Inbox(rep["seen"], rep["next"])
            if ps.forwarded is not None:
                ps.forwarded.done = set(rep["done"])
        if ps.events is not None:
            ps.events.done = set(cp.done)
            # never below a tick a restored clock has closed (a version-1 checkpoint of a
            # processing-time state has no watermark but may have closed ticks up to now)
            closed = [boundary_ms(topo, st.epoch, st.rounds) for st in ps.shards.values()
                      if st.is_tick]
            wm = max([w for w in (cp.watermark, *closed) if w is not None], default=None)
            ps.events.resume(wm, self.s.now_ms())
        for raw in cp.pending:
            doc = json.loads(raw)
            await self.s.sink.publish(topo.release.topic, release_key(topo.name, doc["shard"]),
                                      raw, timestamp_ms=int(doc["published_at"]))
        if cp.pending:
            await self.commit.flush()
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
            spec = st.mechanism.spec
            try:
                ours = self.s.specs[topo.name]
                if "counter" not in topo.mechanism_params and st.capabilities.counters:
                    # an unpinned counter is a default of new specs (issue 20): a checkpoint
                    # keeps the counter it recorded (a tree, if it has no such field)
                    ours = dataclasses.replace(ours, counter=spec.counter)
                if st.capabilities.aligned_rounds and topo.release_rounds() is not None:
                    # so are aligned rounds (issue 20): the checkpoint keeps its own
                    ours = dataclasses.replace(ours, round_ticks=spec.round_ticks)
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
            if self.s.composition.raise_share(topo, share_of(old)):
                self.s.composition.check()
            log.warning(
                "topology %s shard %s: %s changed mid-epoch %d; the epoch finishes on the "
                "checkpointed values (its noise was drawn with them; releases state them), the "
                "new values apply from the next epoch", topo.name, st.shard,
                ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in sorted(changed.items())),
                st.epoch)

    async def leave(self, tps: Iterable[tuple[str, int]], *, checkpoint: bool) -> None:
        """Drop every state of the given input partitions, checkpointing it first if
        ``checkpoint`` (revoke) or not (discard: the state may be half-updated)."""
        tps = list(dict.fromkeys((src, p) for src, p in (
            (self.s.input_of(t), p) for t, p in tps) if src is not None))
        for topic, p in tps:
            for topo in self.s.by_topic.get(topic, []):
                ps = self.s.parts.pop((topo.name, p), None)
                if ps is not None:
                    # never past a lost forward: the next owner reads from the checkpoint
                    if checkpoint and ps.forward_error is None:
                        await self.commit.commit(ps, force=True)
                    self.commit.drop(ps)
