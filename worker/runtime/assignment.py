"""The partitions a worker owns: restored from checkpoints, seeked, handed back.

Which input partitions a worker owns changes on group rebalances
(``assignment=group``) or is fixed at the start (``assignment=static``). For
every partition it gets, the worker restores the engine's state from the
partition's checkpoint and seeks the consumer to the offset that checkpoint
covers (the group's committed offsets are never trusted: they are written
for monitoring only, :mod:`worker.runtime.timers`). For every partition it
loses, the engine checkpoints it first.

:class:`Assignment` does the restore and seek and keeps count of the restores
per partition, so the consume loop can tell a fetch taken before a restore of
its partition (stale: its records are read again from the restored offset)
from a current one. :class:`RebalanceListener` connects it to aiokafka's
rebalance callbacks; a failing callback fails the worker, because aiokafka only
logs a listener's exception and carries on with partitions assigned but never
restored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka import TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from worker.runtime.poison import BROKER_ERRORS
from worker.runtime.state import RunState

log = logging.getLogger(__name__)


class Assignment:
    """Restores and seeks owned partitions; tells stale fetches from current ones."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.repositioned: dict[TopicPartition, int] = {}
        """Restores per partition: a fetch taken before one is stale for that partition."""
        self.stamp: dict[TopicPartition, int] = {}
        """:attr:`repositioned` when the fetch being applied was taken."""

    async def restore_and_seek(self, tps: Sequence[TopicPartition]) -> None:
        """Restore assigned partitions from checkpoints and seek to the covered offsets."""
        state = self.state
        state.rebalancing = True
        # partition p of an input topic and of its repartition topic are one state:
        # restored and seeked together
        tps = list(dict.fromkeys(TopicPartition(t, p) for tp in tps
                                 for t, p in state.engine.partners(tp.topic, tp.partition)))
        for tp in tps:  # records fetched before now are stale for these partitions
            self.repositioned[tp] = self.repositioned.get(tp, 0) + 1
        offsets = await state.engine.assign([(tp.topic, tp.partition) for tp in tps])
        owned = state.consumer.assignment()
        for (topic, p), off in offsets.items():
            tp = TopicPartition(topic, p)
            if tp not in owned:
                log.error("%s/%d is not assigned to this worker with its co-partition: the "
                          "group's assignor must be the range assignor on every member "
                          "(docs/OPERATIONS.md \"Repartition topic\")", topic, p)
                continue
            # No checkpoint: offset 0; if retention removed it, auto_offset_reset=earliest
            # moves to the first available record (seek_to_beginning would block here).
            state.consumer.seek(tp, 0 if off is None else off)
        state.rebalancing = False  # no await since the seeks: every later record is valid
        log.info("assigned %s", sorted(f"{t}/{p}@{o}" for (t, p), o in offsets.items()))

    def forget_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Metrics and poison bookkeeping of revoked partitions go (they moved away)."""
        state = self.state
        for tp in tps:
            state.guard.forget(tp.topic, tp.partition)
            for t in state.engine.by_topic.get(tp.topic, []):
                state.metrics.forget_partition(t.name, tp.partition)

    def take_stamp(self) -> dict[TopicPartition, int]:
        """Note the restore counts as those of the fetch about to be applied; returns them."""
        self.stamp = dict(self.repositioned)
        return self.stamp

    def stale(self, tp: TopicPartition, stamp: dict[TopicPartition, int]) -> bool:
        """True if ``tp`` was restored (and seeked) since the fetch ``stamp`` was taken."""
        return self.repositioned.get(tp, 0) != stamp.get(tp, 0)

    def batch_is_current(self, topic: str, partition: int) -> bool:
        """:attr:`worker.engine.engine.Engine.batch_is_current`: the partition was not restored
        since the fetch being applied was taken (checked under the engine lock)."""
        return not self.stale(TopicPartition(topic, partition), self.stamp)

    async def reset_after_outage(self, tp: TopicPartition) -> None:
        """Discard ``tp``'s state and restore it from its checkpoint once the broker answers.

        A broker error while applying a batch may leave it half-applied; the
        checkpoint is on the broker, so this retries every second until stopping.
        """
        state = self.state
        while not state.stopping:
            try:
                await state.engine.discard([(tp.topic, tp.partition)])
                await self.restore_and_seek([tp])
                return
            except BROKER_ERRORS as exc:
                state.broker_error(exc)
                await state.wait_stop(1.0)


class RebalanceListener(ConsumerRebalanceListener):
    """Rebalance callbacks; a failing callback fails the worker.

    aiokafka only logs an exception raised by a listener and carries on
    consuming, which would leave partitions assigned but never restored.
    """

    def __init__(self, assignment: Assignment) -> None:
        self.assignment = assignment
        self.state = assignment.state

    async def on_partitions_revoked(self, revoked: Any) -> None:
        """Checkpoint the revoked partitions (the engine drops them) and forget them."""
        self.state.rebalancing = True
        try:
            await self.state.engine.revoke([(tp.topic, tp.partition) for tp in revoked])
            self.assignment.forget_partitions(revoked)
        except Exception as exc:
            self._failed(exc)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        """Restore the assigned partitions and seek to their checkpointed offsets."""
        try:
            await self.assignment.restore_and_seek(list(assigned))
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self.state.stopping:  # stopping: stop() checkpoints what is owned
            log.warning("rebalance callback failed while stopping: %r", exc)
        else:
            self.state.fail(exc)
