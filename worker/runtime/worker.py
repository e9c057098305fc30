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
  partition (``assignment=static``);
- seeks each assigned partition to the offset its checkpoint covers (group
  offsets are never trusted);
- runs a timer that advances clocks and publishes due releases
  (checkpoint first, publish second);
- exposes Prometheus metrics on ``metrics_host:metrics_port`` (``/metrics``),
  next to the probes ``/healthz`` and ``/readyz`` (:mod:`worker.observe.health`).

The Kafka producer runs with idempotence disabled and ``acks=all`` (the
idempotent producer does not work against every Kafka-protocol broker; crash
consistency comes from checkpoints, not from transactions).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import IllegalStateError

from sketches.errors import SpecError
from worker.config.mechanism_loader import load_mechanisms
from worker.config.settings import Settings
from worker.config.topology import Topology, check_topics, load_topologies
from worker.engine.checkpoint import CheckpointStore
from worker.engine.composition import compose
from worker.engine.engine import Engine
from worker.ingest.event_time import TimestampTypeGuard
from worker.ingest.records import Record
from worker.kafka.admin import check_partitions, client_options, declare_topics
from worker.kafka.broker_watch import BrokerUnavailable, BrokerWatch, install_rate_limit
from worker.kafka.record_tuples import SkippedBatch, TupleMode, install
from worker.kafka.sink import KafkaSink
from worker.observe.health import Probe, liveness, readiness
from worker.observe.metrics import Metrics
from worker.runtime.poison import BROKER_ERRORS, PoisonGuard, process_guarded, reset_failed

log = logging.getLogger(__name__)

GROUP_COMMIT_INTERVAL_S = 5.0
"""How often checkpoint-covered offsets are committed to the group (monitoring only)."""

"""A consumer record as the engine's ``(offset, key, value, timestamp_ms)`` tuple (one C call)."""


class _Listener(ConsumerRebalanceListener):
    """Rebalance callbacks; a failing callback fails the worker.

    aiokafka only logs an exception raised by a listener and carries on
    consuming, which would leave partitions assigned but never restored.
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.worker.rebalancing = True
        try:
            await self.worker.engine.revoke([(tp.topic, tp.partition) for tp in revoked])
            self.worker.forget_partitions(revoked)
        except Exception as exc:
            self._failed(exc)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        try:
            await self.worker.restore_and_seek(list(assigned))
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self.worker._stopping.is_set():  # stopping: stop() checkpoints what is owned
            log.warning("rebalance callback failed while stopping: %r", exc)
        else:
            self.worker.fail(exc)


class Worker:
    """A running dpstream worker (see the module docstring)."""

    def __init__(self, settings: Settings, topologies: Sequence[Topology],
                 metrics: Metrics | None = None) -> None:
        if not settings.broker:
            raise SpecError("DPSTREAM_BROKER: no broker configured; set host:port "
                            "(the `dpstream run` CLI starts an embedded broker instead)")
        self.settings, self.topologies = settings, list(topologies)
        self.timestamps = TimestampTypeGuard(self.topologies)  # event time: LogAppendTime
        self.fetch_mode = TupleMode(settings.poison_attempts)
        """The input consumer's ``value_deserializer``: record tuples, timestamp types."""
        self.metrics = metrics or Metrics()
        self.metrics_port: int | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopping = asyncio.Event()
        self.engine: Engine
        self.guard = PoisonGuard(settings.poison_attempts)
        self.embedded_exit: Callable[[], str | None] | None = None
        """Set by the CLI for an embedded broker: None while it runs, else how it ended."""
        self.watch: BrokerWatch | None = None
        self.failed: BaseException | None = None
        self.started = False
        """:meth:`start` completed (clients connected, topics declared, subscribed)."""
        self.rebalancing = settings.assignment != "static"
        self._committed: dict[TopicPartition, int] = {}
        self._repositioned: dict[TopicPartition, int] = {}
        """Restores per partition: a fetch taken before one is stale for that partition."""
        self._stamp: dict[TopicPartition, int] = {}
        """``_repositioned`` when the fetch being applied was taken."""
        """True from a revocation until the assigned partitions are restored and seeked.

        Records that ``getmany`` hands over while it is true come from positions
        the restore has not set yet (committed offset or ``auto_offset_reset``);
        they are dropped and fetched again from the checkpointed offsets. Any
        other records are applied, even if a rebalance ran while ``getmany``
        waited: aiokafka only returns records that start at the partition's
        current position and advances it, so dropping them would lose them.
        """

    @property
    def stopping(self) -> bool:
        """A stop was requested (signal, failure or time limit)."""
        return self._stopping.is_set()

    def liveness(self) -> Probe:
        """``/healthz`` (see :mod:`worker.observe.health`)."""
        return liveness(self)

    def readiness(self) -> Probe:
        """``/readyz`` (see :mod:`worker.observe.health`)."""
        return readiness(self)

    @property
    def broker_connected(self) -> bool:
        """True unless the broker is currently unreachable (readiness; kafka.broker_watch)."""
        return self.watch is None or self.watch.connected

    def forget_partitions(self, tps: Any) -> None:
        """Metrics and poison bookkeeping of revoked partitions go (they moved away)."""
        for tp in tps:
            self.guard.forget(tp.topic, tp.partition)
            for t in self.engine.by_topic.get(tp.topic, []):
                self.metrics.forget_partition(t.name, tp.partition)

    async def start(self) -> None:
        """Connect, declare topics, join (or assign) and start consuming and the timer.

        Raises
        ------
        BrokerUnavailable
            The broker does not answer (one line naming the address and the fix).
        """
        install_rate_limit(self.settings.log_interval_s)
        try:
            await self._start()
        except BROKER_ERRORS as exc:
            self.failed = None
            await self._close_clients()
            raise BrokerUnavailable(
                f"cannot reach the broker at {self.settings.broker} ({type(exc).__name__}: "
                f"{exc}); check --broker / DPSTREAM_BROKER and that the broker runs") from None
        except BaseException:
            self.failed = None
            await self._close_clients()
            raise

    async def _start(self) -> None:
        s = self.settings
        load_mechanisms(s.plugins)
        if s.metrics_port:  # first, so /healthz answers while the worker connects
            self.metrics_port = self.metrics.serve(s.metrics_host, s.metrics_port,
                                                   live=self.liveness, ready=self.readiness)
        await declare_topics(s, self.topologies)
        install()  # the input consumer's record tuples (worker/kafka/record_tuples.py)
        self.producer = AIOKafkaProducer(
            enable_idempotence=False, acks="all", linger_ms=2,
            max_request_size=s.producer_max_request_bytes, **client_options(s))
        await self.producer.start()
        self.ck_consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None,
                                            auto_offset_reset="earliest", **client_options(s))
        await self.ck_consumer.start()
        ck_tp = TopicPartition(s.checkpoint_topic, 0)
        self.ck_consumer.assign([ck_tp])
        await self.ck_consumer.seek_to_beginning(ck_tp)
        store = CheckpointStore(self.producer, self.ck_consumer, s.checkpoint_topic,
                                deployment=s.deployment, takeover=s.takeover_from)
        self.engine = Engine(self.topologies, store, KafkaSink(self.producer), self.metrics,
                             crash_points=s.crash_probabilities(),
                             dead_letter_max_bytes=s.producer_max_request_bytes - 4096,
                             reraise=BROKER_ERRORS, max_open_shards=s.max_open_shards,
                             deployment=s.deployment, takeover_from=s.takeover_from)
        self.engine.batch_is_current = self.batch_is_current
        self.consumer = AIOKafkaConsumer(
            group_id=s.group_id, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
            max_poll_interval_ms=300_000, rebalance_timeout_ms=60_000,
            max_partition_fetch_bytes=8 * 1024 * 1024, value_deserializer=self.fetch_mode,
            **client_options(s))
        await self.consumer.start()
        await check_partitions(self.consumer, self.topologies)
        topics = sorted({t.input.topic for t in self.topologies})
        if s.assignment == "static":
            tps = [TopicPartition(t.input.topic, p) for t in self.topologies
                   for p in range(t.input.partitions)]
            self.consumer.assign(sorted(set(tps)))
            await self.restore_and_seek(tps)
        else:
            self.consumer.subscribe(topics, listener=_Listener(self))
        self.watch = BrokerWatch(self._probe, s.broker, outage_limit_s=s.broker_outage_limit_s,
                                 on_fatal=lambda exc: self.fail(exc, "broker watch"),
                                 embedded_exit=self.embedded_exit,
                                 on_change=self._on_broker_change)
        self.metrics.broker_connected.set(1)
        self._tasks = [asyncio.create_task(self._consume(), name="dpstream-consume"),
                       asyncio.create_task(self._timer(), name="dpstream-timer"),
                       asyncio.create_task(self.watch.run(), name="dpstream-broker-watch")]
        for task in self._tasks:
            task.add_done_callback(self._on_task_done)
        self.started = True
        log.info("worker started: %d topologies, group %s, deployment %s, assignment %s",
                 len(self.topologies), s.group_id, s.deployment, s.assignment)

    def _on_task_done(self, task: asyncio.Task[Any]) -> None:
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            self.fail(exc, task.get_name())

    def _on_broker_change(self, up: bool) -> None:
        self.metrics.broker_connected.set(int(up))
        if not up:
            self.metrics.broker_outages.inc()

    async def _probe(self) -> bool:
        await self.producer.client.fetch_all_metadata()
        return True

    def _broker_error(self, exc: BaseException) -> None:
        if self.watch is not None:
            self.watch.report_error(exc)

    def fail(self, exc: BaseException, where: str = "rebalance callback") -> None:
        """Record ``exc`` as the worker's failure and stop it (first failure wins)."""
        if isinstance(exc, BrokerUnavailable):
            log.error("%s", exc)
        else:
            log.error("worker %s failed: %r", where, exc)
        if self.failed is None:
            self.failed = exc
        self._stopping.set()

    async def restore_and_seek(self, tps: Sequence[TopicPartition]) -> None:
        """Restore assigned partitions from checkpoints and seek to the covered offsets."""
        self.rebalancing = True
        for tp in tps:  # records fetched before now are stale for these partitions
            self._repositioned[tp] = self._repositioned.get(tp, 0) + 1
        offsets = await self.engine.assign([(tp.topic, tp.partition) for tp in tps])
        for (topic, p), off in offsets.items():
            tp = TopicPartition(topic, p)
            # No checkpoint: offset 0; if retention removed it, auto_offset_reset=earliest
            # moves to the first available record (seek_to_beginning would block here).
            self.consumer.seek(tp, 0 if off is None else off)
        self.rebalancing = False  # no await since the seeks: every later record is valid
        log.info("assigned %s", sorted(f"{t}/{p}@{o}" for (t, p), o in offsets.items()))

    async def _consume(self) -> None:
        s = self.settings
        while not self._stopping.is_set():
            batches = await self.consumer.getmany(timeout_ms=100, max_records=s.max_batch)
            skips = self.fetch_mode.take_skipped()
            skipped: dict[TopicPartition, list[SkippedBatch]] = {}
            for sk in skips:
                skipped.setdefault(TopicPartition(sk.topic, sk.partition), []).append(sk)
            pending = dict(batches)  # (offset, key, value, timestamp) tuples
            for tp in skipped:
                pending.setdefault(tp, [])
            if self.rebalancing:
                # Drained before a restore's seeks (no await between the drain and this
                # check): these records are read again, from the restored offsets for
                # the partitions being restored (their seeks come after this one) and
                # from where they were for the others (a timer's restore of one
                # partition must not cost the others their records).
                self._set_aside(pending, "a restore is running", skipped)
                continue
            stamp = self._stamp = dict(self._repositioned)
            # Every batch read (not only the first record of each list): a CreateTime
            # batch on a production event-time topic fails the worker before any of
            # this round's records is applied.
            for topic, timestamp_type in self.fetch_mode.take_timestamp_types():
                reason = self.timestamps.check(topic, timestamp_type)
                if reason is not None:  # non-production: its releases stop claiming privacy
                    self.engine.mark_input_not_private(topic, reason)
            while pending:
                tp = next(iter(pending))
                records = pending.pop(tp)
                if self.rebalancing:
                    pending[tp] = records
                    self._set_aside(pending, "a restore started meanwhile", skipped)
                    break
                try:
                    await self._apply(tp, records, skipped.get(tp, []), stamp)
                except BROKER_ERRORS as exc:
                    # The batch may be half-applied: reset to the checkpoint once the
                    # broker answers again (the checkpoint is on the broker); the other
                    # partitions' records of this fetch are read again.
                    self._broker_error(exc)
                    self._set_aside(pending, "the broker failed", skipped)
                    await self._reset_after_outage(tp)
                    break
            await self._report_log_ends()

    def _stale(self, tp: TopicPartition, stamp: dict[TopicPartition, int]) -> bool:
        """True if ``tp`` was restored (and seeked) since the fetch ``stamp`` was taken."""
        return self._repositioned.get(tp, 0) != stamp.get(tp, 0)

    def batch_is_current(self, topic: str, partition: int) -> bool:
        """:attr:`worker.engine.engine.Engine.batch_is_current`: the partition was not restored
        since the fetch being applied was taken (checked under the engine lock)."""
        return not self._stale(TopicPartition(topic, partition), self._stamp)

    async def _apply(self, tp: TopicPartition, records: list[Record],
                     skips: list[SkippedBatch], stamp: dict[TopicPartition, int]) -> None:
        """One partition's records of a fetch, and the record batches skipped in it
        (:mod:`worker.kafka.record_tuples`: dead-lettered ``corrupt_batch`` in offset order
        between the records around them). Stops at a reset of the partition: the rest
        is read again from the restored offset."""
        restore = functools.partial(self.restore_and_seek, [tp])
        rest = records
        for sk in sorted(skips, key=lambda k: k.first):
            before = [r for r in rest if r[0] < sk.first]
            rest = [r for r in rest if r[0] >= sk.end]
            if self._stale(tp, stamp) or (before and not await process_guarded(
                    self.guard, self.engine, tp.topic, tp.partition, before, restore)):
                return
            if self._stale(tp, stamp):
                return
            await self.engine.skip_batch(sk.topic, sk.partition, sk.first, sk.end, sk.detail)
        if rest and not self._stale(tp, stamp):
            await process_guarded(self.guard, self.engine, tp.topic, tp.partition, rest,
                                  restore)

    def _set_aside(self, pending: dict[TopicPartition, list[Record]], why: str,
                   skipped: dict[TopicPartition, list[SkippedBatch]]) -> None:
        """Seek each partition of ``pending`` back to its first record, or to the first
        batch skipped in it (``skipped``: those of the same fetch), to be read again.

        aiokafka has already moved the positions past them; without the seek they
        would be lost (a skipped batch: its range passed without its dead letter). A
        partition no longer assigned is left (its new owner reads it from the
        checkpoint); a restore that seeks it later wins."""
        seeks = []
        for tp, records in pending.items():
            starts = [sk.first for sk in skipped.get(tp, ())]
            if records:
                starts.append(records[0][0])
            if not starts or tp not in self.consumer.assignment():
                continue
            offset = min(starts)
            with contextlib.suppress(IllegalStateError, AssertionError):
                self.consumer.seek(tp, offset)
                seeks.append(f"{tp.topic}/{tp.partition}@{offset}")
        if seeks:
            log.info("%s: %d fetched records set aside, read again (nothing is lost): %s",
                     why, sum(map(len, pending.values())), sorted(seeks))

    async def _report_log_ends(self) -> None:
        """Event time, condition (b) of worker/ingest/event_time.py: after this round's batches
        were handed to the engine, tell it which partitions are read to their end of log
        (position == high watermark) and when (the fetch response's wall-clock time)."""
        for tp in self.consumer.assignment():
            if self.rebalancing or tp not in self.consumer.assignment():
                return
            high, at = self.consumer.highwater(tp), self.consumer.last_poll_timestamp(tp)
            if high is None or at is None:
                continue
            try:
                pos = await asyncio.wait_for(self.consumer.position(tp), 0.1)
            except Exception:  # position unknown (e.g. during a rebalance): next round
                continue
            if pos >= high and not self.rebalancing:
                self.engine.log_end(tp.topic, tp.partition, int(at))

    async def _reset_after_outage(self, tp: TopicPartition) -> None:
        while not self._stopping.is_set():
            try:
                await self.engine.discard([(tp.topic, tp.partition)])
                await self.restore_and_seek([tp])
                return
            except BROKER_ERRORS as exc:
                self._broker_error(exc)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), 1.0)

    async def _timer(self) -> None:
        period = max(0.02, min(1.0, min(t.privacy.tick_ms for t in self.topologies) / 4000))
        loop, logged = asyncio.get_running_loop(), -math.inf
        committed_at = -math.inf
        while not self._stopping.is_set():
            try:
                await self.engine.on_timer()
                if self.engine.taken_over is not None:  # another deployment fenced us
                    self.fail(self.engine.taken_over, "timer (taken over)")
                    return
                for failed in self.engine.take_failed_drains():  # event time: held records
                    tp = TopicPartition(failed.topic, failed.partition)
                    if not self.rebalancing and tp in self.consumer.assignment():
                        await reset_failed(self.guard, self.engine, failed.topic,
                                           failed.partition, failed.records,
                                           failed.__cause__ or failed,
                                           functools.partial(self.restore_and_seek, [tp]),
                                           held=True)
                await self._update_lag()
                if loop.time() - committed_at >= GROUP_COMMIT_INTERVAL_S:
                    committed_at = loop.time()
                    await self._commit_group_offsets()
            except BROKER_ERRORS as exc:  # pending releases stay queued: retried next round
                self._broker_error(exc)
            except Exception as exc:  # outside a partition's work (the engine contains those)
                self.metrics.timer_errors.labels(topology="").inc()
                if loop.time() - logged >= 60.0:  # with its traceback, once a minute
                    logged = loop.time()
                    log.exception("release timer round failed (%s); the timer goes on", exc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), period)

    async def _commit_group_offsets(self) -> None:
        """Commit each assigned partition's checkpoint-covered offset to the consumer group.

        Purely for monitoring: lag tools (``kafka-consumer-groups``, Burrow) and KEDA's
        Kafka scaler read the group's committed offsets; with none, KEDA counts the whole
        retained log as lag and holds the maximum replica count. Restores seek to the
        checkpointed offsets and never read these. A failed commit (e.g. mid-rebalance)
        is skipped and retried next interval.
        """
        covered = self.engine.covered_offsets()
        offsets = {}
        for tp in self.consumer.assignment():
            off = covered.get((tp.topic, tp.partition), 0)
            if off > 0 and self._committed.get(tp) != off:
                offsets[tp] = off
        if not offsets or self.rebalancing:
            return
        try:
            await self.consumer.commit(offsets)
        except Exception as exc:  # informational: never fail the worker for it
            log.debug("group offset commit skipped (%s); retried in %ss", exc,
                      GROUP_COMMIT_INTERVAL_S)
            return
        self._committed.update(offsets)

    async def _update_lag(self) -> None:
        for tp in self.consumer.assignment():
            # The awaits below let a rebalance run: re-check before aiokafka asserts.
            if self.rebalancing or tp not in self.consumer.assignment():
                return
            high = self.consumer.highwater(tp)
            if high is None:
                continue
            try:
                pos = await asyncio.wait_for(self.consumer.position(tp), 0.1)
            except Exception:  # position unknown (e.g. during a rebalance): skip this round
                continue
            for t in self.engine.by_topic.get(tp.topic, []):
                self.metrics.lag.labels(topology=t.name, partition=str(tp.partition)).set(
                    max(0, high - pos))

    async def run_until_stopped(self) -> None:
        """Block until :meth:`request_stop` (or a task failure), then stop cleanly."""
        await self._stopping.wait()
        await self.stop()
        if self.failed is not None:
            raise self.failed

    def request_stop(self) -> None:
        """Ask the worker to stop (signal-handler safe)."""
        self._stopping.set()

    async def stop(self) -> None:
        """Stop consuming, checkpoint everything owned, leave the group, close clients."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self.failed is None and hasattr(self, "engine"):
            with contextlib.suppress(Exception):
                await self.engine.checkpoint_all()
        await self._close_clients()
        if self.failed is None:
            log.info("worker stopped (owned partitions checkpointed)")
        else:
            log.info("worker stopped after a failure (state since the last checkpoint is "
                     "re-read from the input on restart)")

    async def _close_clients(self) -> None:
        for client in (getattr(self, "consumer", None), getattr(self, "ck_consumer", None),
                       getattr(self, "producer", None)):
            if client is not None:
                # Bounded: with the broker gone, leaving the group or flushing can hang,
                # and aiokafka's fetcher may end in CancelledError.
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(client.stop(), 10)
        self.metrics.close()


def create_worker(settings: Settings, topology_paths: Sequence[str] | None = None,
                  metrics: Metrics | None = None) -> Worker:
    """Factory: load mechanisms and topologies, validate, and build a :class:`Worker`."""
    load_mechanisms(settings.plugins)
    topologies = load_topologies(topology_paths or settings.topologies)
    check_topics(topologies, settings.checkpoint_topic)
    # topologies reading one input topic compose: totals, budgets, stated in releases
    topologies = compose(topologies)
    from worker.engine.memory_model import check_memory_limit  # issue 12: refuse at start-up

    check_memory_limit(topologies, settings.memory_limit_bytes, settings.max_open_shards)
    return Worker(settings, topologies, metrics)


def create_faust_app(settings: Settings, topology_paths: Sequence[str] | None = None, *,
                     extras: Sequence[Callable[[Worker], Awaitable[None]]] = (),
                     crash_on_failure: bool = True) -> Any:
    """Factory: a Faust app hosting the dpstream worker as a Faust-managed service.

    This is how ``dpstream run`` and ``dpstream demo`` run by default
    (``--no-faust`` selects the plain asyncio runner). The app owns the
    process lifecycle (signals, logging, crash handling); the dpstream
    :class:`Worker` is a ``mode.Service`` dependency started and stopped with
    it. Ingestion does **not** go through per-record Faust agents: Faust's
    consumer creates several asyncio tasks per record and reached about 2% of
    raw aiokafka throughput here (docs/INGESTION.md); the hosted worker
    consumes with batched ``getmany`` instead. The app itself starts no
    Kafka client (its boot strategy disables Faust's consumer, producer,
    topic conductor and tables): it never joins a consumer group, so only the
    worker's group rebalances.

    ``extras`` are coroutines started (with the worker) once it runs, e.g.
    the demo's producer; a worker failure crashes the app (non-zero exit).
    ``crash_on_failure=False`` (the CLI) stops the app like SIGTERM instead,
    without Faust's crash report; the runner then reports
    ``app.dpstream_worker.failed`` in one line and exits non-zero
    (``worker.cli.main``).

    Example (needs a running broker, so it is not run as a doctest)::

        app = create_faust_app(Settings(broker="127.0.0.1:9092"),
                               ["topologies/netmon.yaml"])
        faust.Worker(app).execute_from_commandline()
    """
    import faust
    from faust.app.base import BootStrategy
    from mode import Service

    worker = create_worker(settings, topology_paths)

    class WorkerService(Service):
        """Starts and stops the dpstream worker with the Faust app."""

        async def on_start(self) -> None:
            await worker.start()

        async def on_started(self) -> None:
            for extra in extras:
                self.add_future(extra(worker))
            self.add_future(self._watch())

        async def _watch(self) -> None:
            await worker._stopping.wait()
            if worker.failed is not None and crash_on_failure:
                await self.crash(worker.failed)
            else:  # e.g. the demo's time limit: stop the whole app like Ctrl-C does
                os.kill(os.getpid(), signal.SIGTERM)

        async def on_stop(self) -> None:
            await worker.stop()

    app = faust.App(
        f"{settings.group_id}-faust",
        broker=f"kafka://{settings.broker}",
        store="memory://",
        web_enabled=False,
        autodiscover=False,
        broker_session_timeout=settings.session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.heartbeat_interval_ms / 1000,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
    )
    # No Faust consumer, producer, topic conductor or tables: the app consumes no
    # Faust topic, and its consumer would join a second group ("<group>-faust")
    # whose rebalances suspend/resume Faust's flow for nothing (docs/OPERATIONS.md).
    app.boot_strategy = BootStrategy(app, enable_kafka=False, enable_web=False)
    app.add_dependency(WorkerService())
    app.dpstream_worker = worker  # type: ignore[attr-defined]
    return app
