"""The release timer: clocks advance, due releases are published, lag is reported.

Releases are due on the wall clock, not on input: :class:`ReleaseTimer` wakes
every quarter of the shortest ``privacy.tick_ms`` (between 20 ms and 1 s) and

- runs the engine's timer round (advance clocks, checkpoint first, publish
  second: :meth:`worker.engine.engine.Engine.on_timer`), and fails the worker
  once another deployment took its partitions over;
- resets the partitions whose held event-time records failed to drain
  (:func:`worker.runtime.poison.reset_failed`);
- sets the consumer lag gauges (high watermark minus position);
- every :data:`GROUP_COMMIT_INTERVAL_S`, commits the checkpoint-covered
  offsets to the consumer group, for lag tools only (restores never read them).

A broker error leaves the pending releases queued for the next round; any other
error of a round is counted (``timer_errors``), logged at most once a minute
with its traceback, and the timer goes on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math

from aiokafka import TopicPartition

from worker.runtime.assignment import Assignment
from worker.runtime.poison import BROKER_ERRORS, reset_failed
from worker.runtime.state import RunState

log = logging.getLogger(__name__)

GROUP_COMMIT_INTERVAL_S = 5.0
"""How often checkpoint-covered offsets are committed to the group (monitoring only)."""


class ReleaseTimer:
    """The worker's timer task (see the module docstring)."""

    def __init__(self, state: RunState, assignment: Assignment) -> None:
        self.state, self.assignment = state, assignment
        self.committed: dict[TopicPartition, int] = {}
        """The offsets last committed to the group, per partition."""

    async def run(self) -> None:
        """Timer rounds until a stop is requested (or the worker is taken over)."""
        state = self.state
        period = max(0.02, min(1.0, min(t.privacy.tick_ms for t in state.topologies) / 4000))
        loop, logged = asyncio.get_running_loop(), -math.inf
        committed_at = -math.inf
        while not state.stopping:
            try:
                if not await self._round():  # taken over: the worker failed
                    return
                if loop.time() - committed_at >= GROUP_COMMIT_INTERVAL_S:
                    committed_at = loop.time()
                    await self.commit_group_offsets()
            except BROKER_ERRORS as exc:  # pending releases stay queued: retried next round
                state.broker_error(exc)
            except Exception as exc:  # outside a partition's work (the engine contains those)
                state.metrics.timer_errors.labels(topology="").inc()
                if loop.time() - logged >= 60.0:  # with its traceback, once a minute
                    logged = loop.time()
                    log.exception("release timer round failed (%s); the timer goes on", exc)
            await state.wait_stop(period)

    async def _round(self) -> bool:
        """The engine's timer round, failed drains reset, lag gauges set; False once
        another deployment took the partitions over (the worker failed)."""
        state = self.state
        engine = state.engine
        await engine.on_timer()
        if engine.taken_over is not None:  # another deployment fenced us
            state.fail(engine.taken_over, "timer (taken over)")
            return False
        for failed in engine.take_failed_drains():  # event time: held records
            tp = TopicPartition(failed.topic, failed.partition)
            if not state.rebalancing and tp in state.consumer.assignment():
                await reset_failed(state.guard, engine, failed.topic, failed.partition,
                                   failed.records, failed.__cause__ or failed,
                                   functools.partial(self.assignment.restore_and_seek, [tp]),
                                   held=True)
        for topic, p in engine.lost_forwards():  # a flush failed: restore, forward again
            tp = TopicPartition(topic, p)
            if not state.rebalancing and tp in state.consumer.assignment():
                await self.assignment.reset_after_outage(tp)
        await self.update_lag()
        return True

    async def commit_group_offsets(self) -> None:
        """Commit each assigned partition's checkpoint-covered offset to the consumer group.

        Purely for monitoring: lag tools (``kafka-consumer-groups``, Burrow) and KEDA's
        Kafka scaler read the group's committed offsets; with none, KEDA counts the whole
        retained log as lag and holds the maximum replica count. Restores seek to the
        checkpointed offsets and never read these. A failed commit (e.g. mid-rebalance)
        is skipped and retried next interval.
        """
        state = self.state
        covered = state.engine.covered_offsets()
        offsets = {}
        for tp in state.consumer.assignment():
            off = covered.get((tp.topic, tp.partition), 0)
            if off > 0 and self.committed.get(tp) != off:
                offsets[tp] = off
        if not offsets or state.rebalancing:
            return
        try:
            await state.consumer.commit(offsets)
        except Exception as exc:  # informational: never fail the worker for it
            log.debug("group offset commit skipped (%s); retried in %ss", exc,
                      GROUP_COMMIT_INTERVAL_S)
            return
        self.committed.update(offsets)

    async def update_lag(self) -> None:
        """Set the lag gauge of every assigned partition (high watermark minus position)."""
        state = self.state
        consumer = state.consumer
        for tp in consumer.assignment():
            # The awaits below let a rebalance run: re-check before aiokafka asserts.
            if state.rebalancing or tp not in consumer.assignment():
                return
            high = consumer.highwater(tp)
            if high is None:
                continue
            try:
                pos = await asyncio.wait_for(consumer.position(tp), 0.1)
            except Exception:  # position unknown (e.g. during a rebalance): skip this round
                continue
            for t in state.engine.by_topic.get(tp.topic, []):
                state.metrics.lag.labels(topology=t.name, partition=str(tp.partition)).set(
                    max(0, high - pos))
