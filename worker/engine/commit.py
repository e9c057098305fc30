"""Checkpoint first, publish second; one writer per partition.

A release is made (queued on ``PartitionState.pending``) by the schedule and
published only here, after a checkpoint that holds it:

1. the checkpoint records the changed shard states (incremental, issue 12),
   the offset a restart reads again from, event time's done ticks and
   watermark, and the pending releases themselves;
2. then the pending releases are published in the canonical order
   ``(published_at, shard)`` and the sink is flushed.

A crash between 1 and 2 is repaired by the restore, which re-publishes the
checkpointed releases byte-identically (:mod:`~worker.engine.restore`): every
release goes out at least once, and every copy is the same bytes.

Ownership: the Kafka store claims a partition before it is restored and fences
the previous writer (:class:`~worker.engine.checkpoint.Fenced` on its next
write). A fenced partition is dropped here with its pending releases
unpublished; if the claimant is another *deployment*, the worker has been
replaced (:attr:`~worker.engine.state.EngineState.taken_over`). A fenced
writer's records found on read-back are repaired by up to two more checkpoints
at once, before anything is published.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import numpy as np

from worker.engine.checkpoint import Fenced, PartitionCheckpoint
from worker.engine.gauges import Gauges
from worker.engine.partition import PartitionState
from worker.engine.state import EngineState, log


class Commit:
    """Checkpoints a partition and publishes its pending releases; drops lost partitions."""

    def __init__(self, state: EngineState, gauges: Gauges) -> None:
        self.s, self.gauges = state, gauges
        self._rng = np.random.default_rng()

    def crash(self, point: str) -> None:
        """Testing only: SIGKILL ourselves at ``point`` with the configured probability."""
        p = self.s.crash_points.get(point)
        if p and self._rng.random() < p:
            log.warning("crash point %s reached: killing the worker (testing only)", point)
            os.kill(os.getpid(), signal.SIGKILL)

    async def flush(self) -> None:
        """Flush the sink. A failure may hide a lost forward of any partition with
        unflushed forwards (one flush waits for every send): each of them is marked
        (:attr:`PartitionState.forward_error`), never checkpointed again, and restored."""
        try:
            await self.s.sink.flush()
        except BaseException as exc:
            for ps in self.s.parts.values():
                if ps.unflushed_forwards:
                    ps.forward_error = exc
            raise

    def drop(self, ps: PartitionState) -> None:
        """``ps`` left this worker (already out of ``parts``): free its shards and series."""
        ps.gate.release()
        for shard in ps.shards:
            self.gauges.forget_shard(ps.topology, shard)

    async def commit(self, ps: PartitionState, force: bool = False) -> None:
        """Checkpoint ``ps`` (state + offsets + pending releases), then publish pending.

        Never a failed partition (:attr:`PartitionState.failed`): its last checkpoint
        stands, and the records read since are read again."""
        if ps.failed is not None or not (force or ps.pending or ps.dirty):
            return
        topo, store = ps.topology, self.s.store
        t0 = time.perf_counter()
        # canonical publication order: (published_at, shard), seq order within a shard
        # (stable sort), whatever order the schedule queued them in
        ps.pending.sort(key=lambda r: (r[4], r[1]))
        if ps.forward_error is not None:  # never checkpoint past a lost forward
            raise ps.forward_error
        if ps.unflushed_forwards:
            # forwarded records are durable before the checkpoint moves the input offset
            # past them: a crash after this re-forwards them and the receiver skips the
            # copies (worker/ingest/repartition.py); never the other way round (lost)
            await self.flush()
            ps.unflushed_forwards = False
            self.crash("after_forward")
        resume, done, wm = ps.next_offset, [], None
        if ps.events is not None:  # event time: records still waiting are read again
            resume = ps.events.resume_offset(ps.next_offset)
            done, wm = ps.events.covered_above(resume), ps.events.watermark
        rresume, rdone = ps.inbox.next_offset, []
        if ps.forwarded is not None:
            rresume = ps.forwarded.resume_offset(ps.inbox.next_offset)
            rdone = ps.forwarded.covered_above(rresume)
        seen = ps.inbox.checkpoint_seen(rresume)
        repartition = None if not (rresume or seen) else {
            "next": rresume, "seen": {str(q): o for q, o in sorted(seen.items())},
            "done": rdone}
        # the Kafka store's read-back may find a fenced writer's records of this partition
        # (a zombie's last write): they are repaired by up to two more checkpoints at once
        # (rewrite the shards, then tombstone the keys), before anything is published
        written = 0
        for _ in range(3):
            for shard in store.take_damaged(topo.name, ps.partition):
                if shard in ps.shards:
                    ps.shards[shard].changed = True
            # incremental: only the shards changed since the last checkpoint (issue 12)
            changed = [st for st in ps.shards.values() if st.changed]
            states = []
            for i, st in enumerate(changed):
                states.append(st.to_bytes())
                if i % self.s.yield_every == self.s.yield_every - 1:
                    await asyncio.sleep(0)  # the heartbeat, as in the schedule
            cp = PartitionCheckpoint(topo.name, ps.partition, resume, states,
                                     [raw for _, _, raw, _, _ in ps.pending], done, wm,
                                     names=[st.shard for st in changed], incremental=True,
                                     held=len(ps.shards), deployment=self.s.deployment or None,
                                     repartition=repartition)
            try:
                written += await store.write(cp)
            except Fenced as exc:
                self._fenced(ps, exc)
                return
            except Exception:
                self.s.metrics.checkpoint_failures.labels(topology=topo.name).inc()
                raise
            for st in changed:
                st.changed = False
            if not store.needs_repair(topo.name, ps.partition):
                break
        self.s.metrics.checkpoint_latency.labels(topology=topo.name).observe(
            time.perf_counter() - t0)
        self.s.metrics.checkpoint_bytes.labels(topology=topo.name).inc(written)
        ps.dirty, ps.last_commit_ms, ps.covered_offset = False, self.s.now_ms(), resume
        ps.inbox.covered_offset = rresume
        if not ps.pending:
            return
        self.crash("after_checkpoint")
        for topic, key, raw, _, published_at in ps.pending:
            # Kafka timestamp = the data-independent published_at (release topics: CreateTime)
            await self.s.sink.publish(topic, key, raw, timestamp_ms=published_at)
        self.crash("mid_publish")
        await self.flush()
        self.gauges.published(topo, ps.pending, self.s.now_ms(),
                              sum(len(p.shards) for p in self.s.parts.values()
                                  if p.topology is topo))
        ps.pending.clear()

    def _fenced(self, ps: PartitionState, exc: Fenced) -> None:
        """Another writer claimed ``ps`` (this worker is a zombie, or was replaced by
        another deployment): drop its state and its pending releases unpublished. The
        claimant restored a checkpoint this worker wrote before the claim and publishes
        from there (one writer per release: docs/PRIVACY.md)."""
        topo = ps.topology
        self.s.metrics.fenced.labels(topology=topo.name).inc()
        log.error("%s; its %d pending releases are withheld (never published by this "
                  "worker) and its state is dropped", exc, len(ps.pending))
        if self.s.parts.get((topo.name, ps.partition)) is ps:
            del self.s.parts[(topo.name, ps.partition)]
        ps.pending.clear()
        self.drop(ps)
        if exc.deployment != self.s.deployment and self.s.taken_over is None:
            self.s.taken_over = exc
