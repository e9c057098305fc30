"""dpstream hosted by Faust: the worker as a Faust app, or inside a Faust user's own app.

:func:`create_faust_app` builds the Faust app that ``dpstream run`` and
``dpstream demo`` run by default: Faust owns the process (signals, logging,
crash handling) and the worker is its one service. :func:`add_dpstream` adds
the worker to a user's own app: one process, one lifecycle.

::

    import faust
    from worker.runtime.faust_host import add_dpstream

    app = faust.App("shop", broker="kafka://127.0.0.1:9092", web_port=6066)
    dp = add_dpstream(app, ["topologies/netmon.yaml"])   # before the app starts

    @app.agent(app.topic("clicks"))
    async def my_agent(stream):                           # the user's own agents
        async for event in stream: ...

:func:`add_dpstream` adds the dpstream worker to ``app`` as a ``mode``
service dependency: it starts after the app's own services and stops (with a
final checkpoint of every owned partition) when the app stops; a worker
failure crashes the app (non-zero exit, like any Faust service crash).
Topologies are consumed by the worker's batched ``getmany`` path (its own
consumer group, ``DPSTREAM_GROUP_ID``), never by a per-record Faust agent:
docs/INGESTION.md measured the per-record agent at 1-2% of that rate.

When the app's web server is enabled, dpstream serves on it (no second port):

- ``{prefix}/metrics``: the worker's Prometheus metrics (operator-only, like
  the app's own web server: bind it to loopback or protect it);
- ``{prefix}/`` (and ``{prefix}/api/...``): the dashboard
  (:mod:`worker.dashboard`) over the release topics, with throughput and lag.

**The agent path.** A Faust agent can feed a topology too, through
:meth:`DPStream.feed`: ``await feed.send(shard, event)`` per event (JSON
topologies; for low-rate topics) or ``await feed.send_columnar(shard, items)``
per batch (columnar topologies; one message for many events, so the
per-message cost of Faust's consumer and of Kafka is amortised), or
``await feed.send_columnar_many({shard: items, ...})`` for a batch of several
shards (all messages in flight together). A feed
writes to the topology's input topic, keyed by shard and in the partition
the default partitioner picks (what ``worker/ingest/routing.py`` requires), and
waits for the broker's acknowledgement before it returns, so an event the
agent's message was acknowledged for is on the input topic. The worker then
ingests that topic with its checkpointed offsets (no event counted twice
from the topic, none lost). Delivery from the agent's source into the input
topic is Faust's (at least once): after a crash, an agent may re-send events
of messages it had not committed; each such copy is one more event on the
input topic (event-level DP protects every record; a user-level topology
caps each unit exactly, duplicates included). Throughput of both paths:
docs/INGESTION.md, "dpstream inside a Faust app".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sketches.errors import SpecError
from worker.config.settings import Settings
from worker.config.state_dir import state_dir
from worker.config.topology import Topology
from worker.kafka.client_config import aiokafka_kwargs
from worker.runtime.worker import Worker, create_worker

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "/dpstream"


class Feed:
    """Send events from a Faust agent into one topology's input topic.

    Obtained from :meth:`DPStream.feed`; usable once the app runs (the
    worker's producer is started with it).
    """

    def __init__(self, dp: DPStream, topology: Topology) -> None:
        self._dp, self.topology = dp, topology
        self.topic = topology.input.topic
        self._parts = list(range(topology.input.partitions))

    def _partition(self, key: bytes) -> int:
        from aiokafka.partitioner import DefaultPartitioner

        return int(DefaultPartitioner()(key, self._parts, self._parts))

    async def _send(self, shard: str, value: bytes) -> None:
        await self._send_all([(shard, value)])

    async def _send_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Enqueue every message, then wait for every acknowledgement."""
        producer = self._dp.worker.producer
        if producer is None:
            raise RuntimeError("the app has not started: the dpstream worker has no producer yet")
        futures = []
        for shard, value in messages:
            key = shard.encode()
            futures.append(await producer.send(self.topic, value, key=key,
                                               partition=self._partition(key)))
        await asyncio.gather(*futures)

    async def send(self, shard: str, event: Mapping[str, Any] | bytes) -> None:
        """One event (a dict, JSON-encoded here, or the JSON bytes) of ``shard``.

        The event must carry the topology's fields (``input.fields``) like any
        producer's; a bad event becomes a dead letter in the worker, as always.
        """
        if self.topology.input.encoding != "json":
            raise SpecError(f"{self.topology.source}: input.encoding is "
                            f"{self.topology.input.encoding!r}; use send_columnar() for "
                            "columnar topologies")
        value = event if isinstance(event, bytes) else json.dumps(
            event, separators=(",", ":")).encode()
        await self._send(shard, value)

    async def send_columnar(self, shard: str, items: Sequence[Any], *,
                            weights: Sequence[Any] | None = None,
                            units: Sequence[Any] | None = None) -> None:
        """Many events of ``shard`` as columnar messages (worker/ingest/columnar.py), of at
        most ``input.max_events_per_message`` rows each."""
        self._columnar()
        await self._send_all([(shard, _columnar_doc(shard, items[a:b],
                                                    None if weights is None else weights[a:b],
                                                    None if units is None else units[a:b]))
                              for a, b in self._chunks(len(items))])

    async def send_columnar_many(self, batches: Mapping[str, Sequence[Any]]) -> None:
        """One columnar message per shard of ``{shard: items}``, acknowledged together.

        Faster than one :meth:`send_columnar` per shard: the messages are in
        flight at the same time instead of one acknowledgement after another.
        """
        self._columnar()
        await self._send_all([(shard, _columnar_doc(shard, items[a:b], None, None))
                              for shard, items in batches.items()
                              for a, b in self._chunks(len(items))])

    def _chunks(self, n: int) -> list[tuple[int, int]]:
        """Row ranges of at most ``input.max_events_per_message`` rows (all in one message
        without a bound): a longer message would be dead-lettered whole."""
        m = self.topology.input.max_events_per_message or max(n, 1)
        return [(a, min(a + m, n)) for a in range(0, n, m)]

    def _columnar(self) -> None:
        if self.topology.input.encoding != "columnar":
            raise SpecError(f"{self.topology.source}: input.encoding is "
                            f"{self.topology.input.encoding!r}; columnar sends need a "
                            "topology with input.encoding: columnar")


def _columnar_doc(shard: str, items: Sequence[Any], weights: Sequence[Any] | None,
                  units: Sequence[Any] | None) -> bytes:
    doc: dict[str, Any] = {"v": 1, "shard": shard, "item": list(items)}
    if weights is not None:
        doc["weight"] = list(weights)
    if units is not None:
        doc["unit"] = list(units)
    return json.dumps(doc, separators=(",", ":")).encode()


class DPStream:
    """What :func:`add_dpstream` added to an app: the worker, its feeds, the dashboard."""

    def __init__(self, worker: Worker, dashboard: Any | None, prefix: str) -> None:
        self.worker, self.dashboard, self.prefix = worker, dashboard, prefix

    def feed(self, topology: str) -> Feed:
        """A :class:`Feed` into the input topic of the topology named ``topology``."""
        for t in self.worker.topologies:
            if t.name == topology:
                return Feed(self, t)
        raise SpecError(f"no topology named {topology!r}; known: "
                        f"{sorted(t.name for t in self.worker.topologies)}")

    def metrics_text(self) -> str:
        """The worker's metrics in the Prometheus text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.worker.metrics.registry).decode()


def broker_of(app: Any) -> str:
    """``host:port[,host:port]`` of a Faust app's ``broker`` setting."""
    urls = app.conf.broker
    hosts = [f"{u.host}:{u.port or 9092}" for u in urls]
    if not hosts:
        raise SpecError("the Faust app has no broker; set broker='kafka://host:port'")
    return ",".join(hosts)


def add_dpstream(app: Any, topologies: Sequence[str], *, settings: Settings | None = None,
                 web_prefix: str = DEFAULT_PREFIX, dashboard: bool = True) -> DPStream:
    """Add dpstream topologies to a Faust app (call before the app starts).

    ``settings``: default :meth:`Settings.from_env` with the app's broker when
    ``DPSTREAM_BROKER`` is unset. When the app's web server is enabled the
    metrics move onto it (``{web_prefix}/metrics``) and the worker opens no
    port of its own; the dashboard is served at ``{web_prefix}/``.
    """
    from mode import Service

    s = settings or Settings.from_env()
    if not s.broker:
        s = s.with_broker(broker_of(app))
    on_web = bool(app.conf.web_enabled)
    if on_web:
        s = dataclasses.replace(s, metrics_port=0)
    worker = create_worker(s, topologies)
    dash = None
    if dashboard:
        from worker.dashboard.server import Dashboard

        dash = Dashboard(s.broker or "", [t.release.topic for t in worker.topologies],
                         client_options=aiokafka_kwargs(s, "dashboard"))
    dp = DPStream(worker, dash, web_prefix.rstrip("/"))
    if dash is not None:
        dash.metrics_text = dp.metrics_text

    class DPStreamService(Service):
        """The dpstream worker (and dashboard follower) in the app's lifecycle."""

        _task: asyncio.Task[None] | None = None
        _app_stops = False

        async def on_start(self) -> None:
            await worker.start()
            if dash is not None:
                await dash.start_background()

        async def on_started(self) -> None:
            self._task = asyncio.create_task(self._run(), name="dpstream-worker")

        async def _run(self) -> None:
            try:
                await worker.run_until_stopped()
            except Exception as exc:
                if not self._app_stops:
                    await self.crash(exc)

        async def on_stop(self) -> None:
            self._app_stops = True
            if dash is not None:
                await dash.stop()
            worker.request_stop()
            if self._task is not None:
                with contextlib.suppress(BaseException):
                    await self._task

    app.add_dependency(DPStreamService())
    if on_web:
        _mount(app, dp)
    return dp


def _mount(app: Any, dp: DPStream) -> None:
    """Serve metrics and the dashboard on the app's web server (Faust views)."""
    from faust.web import View

    prefix = dp.prefix

    class MetricsView(View):
        async def get(self, request: Any) -> Any:
            from aiohttp import web
            from prometheus_client import CONTENT_TYPE_LATEST

            return web.Response(body=dp.metrics_text().encode(),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.page(f"{prefix}/metrics", name="dpstream-metrics")(MetricsView)
    dash = dp.dashboard
    if dash is None:
        return
    for path, handler, name in ((f"{prefix}/", dash.page, "dpstream-dashboard"),
                                (f"{prefix}/api/state", dash.api_state, "dpstream-state"),
                                (f"{prefix}/api/query", dash.api_query, "dpstream-query")):
        app.page(path, name=name)(_view(View, handler))


def _view(base: Any, handler: Any) -> Any:
    class Delegate(base):
        async def get(self, request: Any) -> Any:
            return await handler(request)

    return Delegate


def create_faust_app(settings: Settings, topology_paths: Sequence[str] | None = None, *,
                     extras: Sequence[Callable[[Worker], Awaitable[None]]] = (),
                     crash_on_failure: bool = True, memory_checkpoints: bool = False) -> Any:
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
    ``memory_checkpoints=True`` (``dpstream demo`` only) keeps the worker's
    checkpoints in memory (:func:`~worker.runtime.worker.create_worker`).
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

    worker = create_worker(settings, topology_paths, memory_checkpoints=memory_checkpoints)

    class WorkerService(Service):
        """Starts and stops the dpstream worker with the Faust app."""

        async def on_start(self) -> None:
            await worker.start()

        async def on_started(self) -> None:
            for extra in extras:
                self.add_future(extra(worker))
            self.add_future(self._watch())

        async def _watch(self) -> None:
            await worker.wait_stop()
            if worker.failed is not None and crash_on_failure:
                await self.crash(worker.failed)
            else:  # e.g. the demo's time limit: stop the whole app like Ctrl-C does
                os.kill(os.getpid(), signal.SIGTERM)

        async def on_stop(self) -> None:
            await worker.stop()

    options: dict[str, Any] = {}
    if not os.environ.get("FAUST_DATADIR"):  # the operator's own choice wins
        env = {**os.environ, "DPSTREAM_STATE_DIR": settings.state_dir} \
            if settings.state_dir else None
        faust_dir = state_dir(env) / "faust"
        faust_dir.mkdir(exist_ok=True)  # Faust creates only the last component
        options["datadir"] = str(faust_dir / "{conf.name}-data")
    app = faust.App(
        f"{settings.group_id}-faust",
        **options,
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
