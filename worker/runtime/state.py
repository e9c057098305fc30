"""What the parts of one running worker share: settings, clients, engine and status.

A running worker is a few cooperating parts (:mod:`worker.runtime.lifecycle`
connects and stops, :mod:`worker.runtime.assignment` owns partitions across
rebalances, :mod:`worker.runtime.consume` applies fetched records,
:mod:`worker.runtime.timers` publishes releases); :class:`RunState` is what they
all read and change, and only through its public attributes and methods:

- the configuration (``settings``, ``topologies``), the metrics, the poison
  guard, the input consumer's fetch mode and the event-time timestamp guard;
- the Kafka clients and the engine, ``None`` until :meth:`Worker.start
  <worker.runtime.worker.Worker.start>` created them (:attr:`engine` and
  :attr:`consumer` raise before);
- the status that liveness and readiness read (:mod:`worker.observe.health`):
  ``started``, ``rebalancing``, ``failed``, :attr:`stopping`,
  :attr:`broker_connected`.

Examples
--------
>>> from worker.config.settings import Settings
>>> s = RunState(Settings(broker="127.0.0.1:1"), [])
>>> s.rebalancing, s.stopping, s.has_engine       # group mode: nothing assigned yet
(True, False, False)
>>> s.fail(RuntimeError("boom"), "test")
>>> s.stopping, type(s.failed).__name__
(True, 'RuntimeError')
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from sketches.errors import SpecError
from worker.config.settings import Settings
from worker.config.topology import Topology
from worker.engine.engine import Engine
from worker.ingest.event_time import TimestampTypeGuard
from worker.kafka.broker_watch import BrokerUnavailable, BrokerWatch
from worker.kafka.record_tuples import TupleMode
from worker.observe.metrics import Metrics
from worker.runtime.poison import PoisonGuard

log = logging.getLogger(__name__)


class RunState:
    """The shared state of one worker (see the module docstring)."""

    def __init__(self, settings: Settings, topologies: Sequence[Topology],
                 metrics: Metrics | None = None, *, memory_checkpoints: bool = False) -> None:
        if not settings.broker:
            raise SpecError("DPSTREAM_BROKER: no broker configured; set host:port "
                            "(the `dpstream run` CLI starts an embedded broker instead)")
        self.settings, self.topologies = settings, list(topologies)
        self.timestamps = TimestampTypeGuard(self.topologies)  # event time: LogAppendTime
        self.fetch_mode = TupleMode(settings.poison_attempts)
        """The input consumer's ``value_deserializer``: record tuples, timestamp types."""
        self.metrics = metrics or Metrics()
        self.metrics_port: int | None = None
        self.guard = PoisonGuard(settings.poison_attempts)
        self.embedded_exit: Callable[[], str | None] | None = None
        """Set by the CLI for an embedded broker: None while it runs, else how it ended."""
        self.watch: BrokerWatch | None = None
        self.failed: BaseException | None = None
        self.started = False
        """``start`` completed (clients connected, topics declared, subscribed)."""
        self.rebalancing = settings.assignment != "static"
        """True from a revocation until the assigned partitions are restored and seeked.

        Records that ``getmany`` hands over while it is true come from positions
        the restore has not set yet (committed offset or ``auto_offset_reset``);
        they are dropped and fetched again from the checkpointed offsets. Any
        other records are applied, even if a rebalance ran while ``getmany``
        waited: aiokafka only returns records that start at the partition's
        current position and advances it, so dropping them would lose them.
        """
        self.memory_checkpoints = memory_checkpoints
        """Keep checkpoints in this process (``dpstream demo`` only: its embedded broker
        dies with the worker anyway and never compacts); False: the checkpoint topic."""
        self.producer: AIOKafkaProducer | None = None
        self.ck_consumer: AIOKafkaConsumer | None = None
        """Reads the checkpoint topic (restores)."""
        self._consumer: AIOKafkaConsumer | None = None
        self._engine: Engine | None = None
        self._stop = asyncio.Event()

    @property
    def engine(self) -> Engine:
        """The engine (created by ``start``; RuntimeError before)."""
        if self._engine is None:
            raise RuntimeError("the worker has not started: no engine yet")
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def has_engine(self) -> bool:
        """``start`` got as far as creating the engine."""
        return self._engine is not None

    @property
    def consumer(self) -> AIOKafkaConsumer:
        """The input consumer (created by ``start``; RuntimeError before)."""
        if self._consumer is None:
            raise RuntimeError("the worker has not started: no input consumer yet")
        return self._consumer

    @consumer.setter
    def consumer(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer

    def clients(self) -> list[AIOKafkaConsumer | AIOKafkaProducer]:
        """The Kafka clients created so far (input consumer, checkpoint consumer, producer)."""
        return [c for c in (self._consumer, self.ck_consumer, self.producer) if c is not None]

    @property
    def stopping(self) -> bool:
        """A stop was requested (signal, failure or time limit)."""
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Ask the worker to stop (signal-handler safe)."""
        self._stop.set()

    async def wait_stop(self, timeout: float | None = None) -> None:
        """Return once a stop is requested, or after ``timeout`` seconds (None: no limit)."""
        if timeout is None:
            await self._stop.wait()
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout)

    @property
    def broker_connected(self) -> bool:
        """True unless the broker is currently unreachable (readiness; kafka.broker_watch)."""
        return self.watch is None or self.watch.connected

    def broker_error(self, exc: BaseException) -> None:
        """Tell the broker watch about a broker error (it judges outages)."""
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
        self._stop.set()
