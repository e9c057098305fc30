"""A worker's lifecycle: connect and start, run, stop with a final checkpoint.

:meth:`Lifecycle.start`

1. loads the mechanism plugins and serves the metrics and probes first, so
   ``/healthz`` answers while the worker connects;
2. declares and checks the topics (:mod:`worker.kafka.admin`);
3. starts the producer (idempotence disabled, ``acks=all``: the idempotent
   producer does not work against every Kafka-protocol broker; crash
   consistency comes from checkpoints, not from transactions), the
   checkpoint consumer and the engine over them, then the input consumer;
4. joins the consumer group (``assignment=group``: the
   :class:`~worker.runtime.assignment.RebalanceListener` restores what the
   group assigns) or assigns itself every partition and restores them
   (``assignment=static``);
5. starts the tasks: the consume loop, the release timer and the broker watch
   (:class:`worker.kafka.broker_watch.BrokerWatch`). A task that ends with an
   exception fails the worker.

A broker that does not answer during the start is one line,
:class:`~worker.kafka.broker_watch.BrokerUnavailable`, naming the address and
the fix. :meth:`Lifecycle.stop` cancels the tasks, checkpoints every owned
partition (unless the worker failed: then the state since the last checkpoint
is read again from the input on restart), leaves the group and closes the
clients, each bounded in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from worker.config.mechanism_loader import load_mechanisms
from worker.engine.checkpoint import CheckpointStore, MemoryCheckpointStore
from worker.engine.engine import Engine
from worker.engine.partition import Store
from worker.ingest.repartition import repartition_topic
from worker.kafka.admin import check_partitions, declare_topics
from worker.kafka.broker_watch import BrokerUnavailable, BrokerWatch, install_rate_limit
from worker.kafka.client_config import aiokafka_kwargs
from worker.kafka.record_tuples import input_consumer_class
from worker.kafka.sink import KafkaSink
from worker.observe.health import Probe, liveness, readiness
from worker.runtime.assignment import Assignment, RebalanceListener
from worker.runtime.poison import BROKER_ERRORS
from worker.runtime.state import RunState

log = logging.getLogger(__name__)

TaskFactory = Callable[[], Coroutine[Any, Any, None]]
"""Starts one of the worker's long-running tasks (the consume loop, the timer)."""


class Lifecycle:
    """Starts and stops one worker (see the module docstring).

    ``tasks`` maps a task name to what runs it; the broker watch is added at start.
    """

    def __init__(self, state: RunState, assignment: Assignment,
                 tasks: Mapping[str, TaskFactory]) -> None:
        self.state, self.assignment, self.task_factories = state, assignment, dict(tasks)
        self.tasks: list[asyncio.Task[Any]] = []

    def liveness(self) -> Probe:
        """``/healthz`` (see :mod:`worker.observe.health`)."""
        return liveness(self.state)

    def readiness(self) -> Probe:
        """``/readyz`` (see :mod:`worker.observe.health`)."""
        return readiness(self.state)

    async def start(self) -> None:
        """Connect, declare topics, join (or assign) and start consuming and the timer.

        Raises
        ------
        BrokerUnavailable
            The broker does not answer (one line naming the address and the fix).
        """
        state = self.state
        install_rate_limit(state.settings.log_interval_s)
        try:
            await self._start()
        except BROKER_ERRORS as exc:
            state.failed = None
            await self.close_clients()
            raise BrokerUnavailable(
                f"cannot reach the broker at {state.settings.broker} ({type(exc).__name__}: "
                f"{exc}); check --broker / DPSTREAM_BROKER and that the broker runs") from None
        except BaseException:
            state.failed = None
            await self.close_clients()
            raise

    async def _start(self) -> None:
        state = self.state
        s = state.settings
        load_mechanisms(s.plugins)
        if s.metrics_port:  # first, so /healthz answers while the worker connects
            state.metrics_port = state.metrics.serve(s.metrics_host, s.metrics_port,
                                                     live=self.liveness, ready=self.readiness)
        await declare_topics(s, state.topologies)
        # every client's arguments: worker/kafka/client_config.py
        producer = state.producer = AIOKafkaProducer(**aiokafka_kwargs(s, "producer", {
            "enable_idempotence": False, "acks": "all", "linger_ms": 2,
            "max_request_size": s.producer_max_request_bytes}))
        await producer.start()
        store: Store
        if state.memory_checkpoints:  # dpstream demo only (RunState.memory_checkpoints)
            store = MemoryCheckpointStore()
            log.info("checkpoints are kept in memory (dpstream demo: the embedded broker "
                     "dies with the worker, and it never compacts the checkpoint topic)")
        else:
            ck_consumer = state.ck_consumer = AIOKafkaConsumer(**aiokafka_kwargs(
                s, "checkpoint", {"enable_auto_commit": False, "group_id": None,
                                  "auto_offset_reset": "earliest"}))
            await ck_consumer.start()
            ck_tp = TopicPartition(s.checkpoint_topic, 0)
            ck_consumer.assign([ck_tp])
            await ck_consumer.seek_to_beginning(ck_tp)
            store = CheckpointStore(producer, ck_consumer, s.checkpoint_topic,
                                    deployment=s.deployment, takeover=s.takeover_from)
        state.engine = Engine(state.topologies, store, KafkaSink(producer), state.metrics,
                              crash_points=s.crash_probabilities(),
                              dead_letter_max_bytes=s.producer_max_request_bytes - 4096,
                              reraise=BROKER_ERRORS, max_open_shards=s.max_open_shards,
                              deployment=s.deployment, takeover_from=s.takeover_from,
                              dead_letter_log_interval_s=s.log_interval_s)
        state.engine.batch_is_current = self.assignment.batch_is_current
        # record tuples: the fast fetch path, or the public getmany path (record_tuples.py)
        consumer = state.consumer = input_consumer_class()(**aiokafka_kwargs(s, "input", {
            "group_id": s.group_id, "enable_auto_commit": False,
            "auto_offset_reset": "earliest", "value_deserializer": state.fetch_mode,
            # range: partition p of an input topic and of its repartition topic (same
            # count) go to the same member (co-partitioned: worker/ingest/repartition.py)
            "partition_assignment_strategy": (RangePartitionAssignor,)}))
        await consumer.start()
        await check_partitions(consumer, state.topologies)
        # every input topic and its repartition topic (records forwarded to their shard's
        # partition: worker/ingest/repartition.py)
        topics = sorted({x for t in state.topologies
                         for x in (t.input.topic, repartition_topic(t.input.topic))})
        if s.assignment == "static":
            tps = [TopicPartition(x, p) for t in state.topologies
                   for x in (t.input.topic, repartition_topic(t.input.topic))
                   for p in range(t.input.partitions)]
            consumer.assign(sorted(set(tps)))
            await self.assignment.restore_and_seek(tps)
        else:
            consumer.subscribe(topics, listener=RebalanceListener(self.assignment))
        watch = state.watch = BrokerWatch(
            self._probe, s.broker, outage_limit_s=s.broker_outage_limit_s,
            on_fatal=lambda exc: state.fail(exc, "broker watch"),
            embedded_exit=state.embedded_exit, on_change=self._on_broker_change)
        state.metrics.broker_connected.set(1)
        self.tasks = [asyncio.create_task(run(), name=name)
                      for name, run in self.task_factories.items()]
        self.tasks.append(asyncio.create_task(watch.run(), name="dpstream-broker-watch"))
        for task in self.tasks:
            task.add_done_callback(self.on_task_done)
        state.started = True
        log.info("worker started: %d topologies, group %s, deployment %s, assignment %s",
                 len(state.topologies), s.group_id, s.deployment, s.assignment)

    def on_task_done(self, task: asyncio.Task[Any]) -> None:
        """A task that ended with an exception fails the worker."""
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            self.state.fail(exc, task.get_name())

    def _on_broker_change(self, up: bool) -> None:
        self.state.metrics.broker_connected.set(int(up))
        if not up:
            self.state.metrics.broker_outages.inc()

    async def _probe(self) -> bool:
        if self.state.producer is None:
            return False
        await self.state.producer.client.fetch_all_metadata()
        return True

    async def run_until_stopped(self) -> None:
        """Block until a stop is requested (or a task failure), then stop cleanly."""
        await self.state.wait_stop()
        await self.stop()
        if self.state.failed is not None:
            raise self.state.failed

    async def stop(self) -> None:
        """Stop consuming, checkpoint everything owned, leave the group, close clients."""
        state = self.state
        state.request_stop()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks = []
        if state.failed is None and state.has_engine:
            with contextlib.suppress(Exception):
                await state.engine.checkpoint_all()
        if state.has_engine:
            state.engine.flush_logs()  # the dead-letter summary of the last interval
        await self.close_clients()
        if state.failed is None:
            log.info("worker stopped (owned partitions checkpointed)")
        else:
            log.info("worker stopped after a failure (state since the last checkpoint is "
                     "re-read from the input on restart)")

    async def close_clients(self) -> None:
        """Stop every Kafka client created so far and close the metrics server."""
        for client in self.state.clients():
            # Bounded: with the broker gone, leaving the group or flushing can hang,
            # and aiokafka's fetcher may end in CancelledError.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(client.stop(), 10)
        self.state.metrics.close()
