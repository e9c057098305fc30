"""The worker process: Kafka clients around :class:`worker.engine.engine.Engine`.

:func:`create_worker` is the factory: typed :class:`~worker.config.settings.Settings`
plus validated topologies in, a :class:`Worker` out. The worker

- declares every topic with an explicit partition count (input topics with
  the topology's ``input.partitions``; the checkpoint topic compacted, one
  partition) and refuses an input topic that exists with another count;
  event-time input topics are declared ``LogAppendTime`` and release topics
  ``CreateTime``, and the reported timestamp types are checked
  (:mod:`worker.kafka.admin`);
- consumes the input topics in batches (``getmany``, handing over
  ``(offset, key, value, timestamp)`` tuples read straight from the record
  batches: :mod:`worker.kafka.record_tuples`) in a consumer group
  (``assignment=group``; workers split the partitions, a rebalance
  checkpoints revoked partitions and restores assigned ones) or owning every
  partition (``assignment=static``): :mod:`worker.runtime.consume`;
- seeks each assigned partition to the offset its checkpoint covers (group
  offsets are never trusted): :mod:`worker.runtime.assignment`;
- runs a timer that advances clocks and publishes due releases
  (checkpoint first, publish second): :mod:`worker.runtime.timers`;
- exposes Prometheus metrics on ``metrics_host:metrics_port`` (``/metrics``),
  next to the probes ``/healthz`` and ``/readyz`` (:mod:`worker.observe.health`).

How it starts and stops is :mod:`worker.runtime.lifecycle`; what these parts
share is :class:`worker.runtime.state.RunState`, which :class:`Worker` extends
with the parts themselves: it is the facade the CLI, the Faust hosts
(:mod:`worker.runtime.faust_host`), the benchmarks and the tests drive.

The Kafka producer runs with idempotence disabled and ``acks=all`` (the
idempotent producer does not work against every Kafka-protocol broker; crash
consistency comes from checkpoints, not from transactions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition

from worker.config.settings import Settings
from worker.config.topology import Topology
from worker.engine.startup import load_checked
from worker.observe.health import Probe, liveness, readiness
from worker.observe.metrics import Metrics
from worker.runtime.assignment import Assignment, RebalanceListener
from worker.runtime.consume import ConsumeLoop
from worker.runtime.lifecycle import Lifecycle
from worker.runtime.state import RunState
from worker.runtime.timers import ReleaseTimer


class Worker(RunState):
    """A running dpstream worker (see the module docstring).

    Its state (:class:`RunState`: settings, clients, engine, status) is shared
    by its parts: :attr:`assignment` (owned partitions), :attr:`timer` (the
    release timer), :attr:`lifecycle` (start and stop) and the consume loop.
    """

    def __init__(self, settings: Settings, topologies: Sequence[Topology],
                 metrics: Metrics | None = None, *, memory_checkpoints: bool = False) -> None:
        super().__init__(settings, topologies, metrics, memory_checkpoints=memory_checkpoints)
        self.assignment = Assignment(self)
        self.timer = ReleaseTimer(self, self.assignment)
        self.lifecycle = Lifecycle(self, self.assignment, {"dpstream-consume": self._consume,
                                                           "dpstream-timer": self.timer.run})

    def liveness(self) -> Probe:
        """``/healthz`` (see :mod:`worker.observe.health`)."""
        return liveness(self)

    def readiness(self) -> Probe:
        """``/readyz`` (see :mod:`worker.observe.health`)."""
        return readiness(self)

    async def start(self) -> None:
        """Connect, declare topics, join (or assign) and start consuming and the timer.

        Raises
        ------
        BrokerUnavailable
            The broker does not answer (one line naming the address and the fix).
        """
        await self.lifecycle.start()

    async def run_until_stopped(self) -> None:
        """Block until :meth:`request_stop` (or a task failure), then stop cleanly."""
        await self.lifecycle.run_until_stopped()

    async def stop(self) -> None:
        """Stop consuming, checkpoint everything owned, leave the group, close clients."""
        await self.lifecycle.stop()

    async def restore_and_seek(self, tps: Sequence[TopicPartition]) -> None:
        """Restore assigned partitions from checkpoints and seek to the covered offsets."""
        await self.assignment.restore_and_seek(tps)

    def forget_partitions(self, tps: Sequence[TopicPartition]) -> None:
        """Metrics and poison bookkeeping of revoked partitions go (they moved away)."""
        self.assignment.forget_partitions(tps)

    def batch_is_current(self, topic: str, partition: int) -> bool:
        """:attr:`worker.engine.engine.Engine.batch_is_current` (see
        :meth:`worker.runtime.assignment.Assignment.batch_is_current`)."""
        return self.assignment.batch_is_current(topic, partition)

    def rebalance_listener(self) -> RebalanceListener:
        """The consumer group's rebalance callbacks for this worker."""
        return RebalanceListener(self.assignment)

    # The parts' entry points under the names the white-box tests drive
    # (tests/unit/worker/test_worker_consume.py and test_corrupt_batches.py).

    async def _consume(self) -> None:
        """The consume loop (:class:`~worker.runtime.consume.ConsumeLoop`) until stopped."""
        await ConsumeLoop(self, self.assignment, self._reset_after_outage).run()

    async def _reset_after_outage(self, tp: TopicPartition) -> None:
        await self.assignment.reset_after_outage(tp)

    async def _update_lag(self) -> None:
        await self.timer.update_lag()

    def _on_task_done(self, task: Any) -> None:
        self.lifecycle.on_task_done(task)

    @property
    def _stopping(self) -> asyncio.Event:
        return self._stop

    @property
    def _repositioned(self) -> dict[TopicPartition, int]:
        return self.assignment.repositioned

    @property
    def _stamp(self) -> dict[TopicPartition, int]:
        return self.assignment.stamp

    @_stamp.setter
    def _stamp(self, stamp: dict[TopicPartition, int]) -> None:
        self.assignment.stamp = stamp


def listener_for(worker: Worker) -> RebalanceListener:
    """``worker``'s rebalance listener (:meth:`Worker.rebalance_listener`)."""
    return worker.rebalance_listener()


def create_worker(settings: Settings, topology_paths: Sequence[str] | None = None,
                  metrics: Metrics | None = None, *, memory_checkpoints: bool = False,
                  ) -> Worker:
    """Factory: load mechanisms and topologies, run every start-up check
    (:func:`worker.engine.startup.load_checked`: the checks ``dpstream validate``
    makes too) and build a :class:`Worker`.

    ``memory_checkpoints=True`` keeps checkpoints in the process
    (:class:`~worker.engine.checkpoint.MemoryCheckpointStore`): for ``dpstream demo``
    only, whose embedded broker dies with the worker; ``dpstream run`` never sets it."""
    return Worker(settings, load_checked(settings, topology_paths), metrics,
                  memory_checkpoints=memory_checkpoints)
