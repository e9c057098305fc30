"""The timer round: drain, schedule, release, commit, partition by partition; errors contained.

Every round visits every owned partition: event time first applies what the
watermark reached (:meth:`worker.engine.ingest.Ingest.drain`); then the tick
schedule runs to the round's time (O(1) unless a boundary was crossed), the
arrival clock releases the slots that ended, and the partition is checkpointed
and its releases published (:mod:`~worker.engine.commit`) if it has pending
releases or changes older than one release period.

Error containment: an exception of one partition's work that is not one of
``reraise`` (the driver's broker errors, which end the round) is logged with
its traceback (then at most once a minute per partition), counted in
``dpstream_timer_errors_total``, and leaves that partition's releases queued
(checkpoint first, so nothing unreleased is published) to be made and
published again next round; every other partition releases on schedule. A
drain of held event-time records that raised marks its partition failed
(:class:`~worker.ingest.event_time.HeldRecordsFailed`): the round skips it
until the worker has reset it (:meth:`Timer.take_failed_drains`).
"""

from __future__ import annotations

import time

from worker.engine.commit import Commit
from worker.engine.ingest import Ingest
from worker.engine.partition import PartitionState
from worker.engine.schedule import Schedule, schedule_ms
from worker.engine.state import EngineState, log
from worker.errors import HeldRecordsFailed
from worker.observe.logs import log_context


class Timer:
    """One timer round over the owned partitions, with per-partition error containment."""

    def __init__(self, state: EngineState, schedule: Schedule, ingest: Ingest,
                 commit: Commit) -> None:
        self.s, self.schedule, self.ingest, self.commit = state, schedule, ingest, commit
        self._error_logged: dict[tuple[str, int], float] = {}
        self._failed_drains: dict[tuple[str, int], HeldRecordsFailed] = {}
        """Drains a timer round found failing, for :meth:`take_failed_drains`."""

    async def round(self) -> None:
        """See :meth:`worker.engine.engine.Engine.on_timer` (the caller holds the lock)."""
        now = self.s.now_ms()
        for ps in list(self.s.parts.values()):
            if ps.failed is not None or ps.forward_error is not None:
                continue  # waiting for the worker's reset (take_failed_drains, lost_forwards)
            with log_context(topology=ps.topology.name, partition=ps.partition):
                try:
                    await self._partition(ps, now)
                except self.s.reraise:
                    raise
                except HeldRecordsFailed as exc:
                    self._failed_drains[(ps.topology.name, ps.partition)] = exc
                except Exception as exc:
                    self._failed(ps, exc)

    def take_failed_drains(self) -> list[HeldRecordsFailed]:
        """The failed drains found since the last call (each returned once)."""
        out = list(self._failed_drains.values())
        self._failed_drains.clear()
        return out

    def forget_failed_drain(self, topology: str, partition: int) -> None:
        """The partition's failure is raised by the ingest path instead: not reported here."""
        self._failed_drains.pop((topology, partition), None)

    def _failed(self, ps: PartitionState, exc: Exception) -> None:
        topo = ps.topology
        self.s.metrics.timer_errors.labels(topology=topo.name).inc()
        key, mono = (topo.name, ps.partition), time.monotonic()
        last = self._error_logged.get(key)
        if last is None or mono - last >= 60.0:
            self._error_logged[key] = mono
            log.error("topology %s partition %d: release timer failed (%s: %s); its releases "
                      "stay queued and are retried every round, the other partitions go on "
                      "(dpstream_timer_errors_total counts every failure)", topo.name,
                      ps.partition, type(exc).__name__, exc, exc_info=last is None)

    async def _partition(self, ps: PartitionState, now: int) -> None:
        topo = ps.topology
        every = topo.release.every_ticks
        if ps.events is not None:  # apply what the watermark reached, then close
            await self.ingest.drain(ps, topo.input.topic, now)
            await self.ingest.send_marks(ps, now)  # how far this partition was read
        at = schedule_ms(ps, now)
        await self.schedule.run(ps, at)  # O(1) unless a boundary was crossed
        if topo.privacy.clock != "tick":
            self.schedule.release_arrival(ps, now)
        period = topo.privacy.tick_ms * every
        if ps.pending or (ps.dirty and now - ps.last_commit_ms >= period):
            await self.commit.commit(ps)
