"""The dashboard server: follows release topics, serves the page and a JSON API.

The command line is ``dpstream dashboard`` (:mod:`worker.cli.dashboard`): ``--topic T
[--topic T2 ...] [--broker H:P] [--port 8050] [--metrics URL [--metrics URL2 ...]]
[--prometheus URL [--prometheus-job JOB]]``; ``--topology FILE`` takes the release
topics (and release intervals, for staleness) from topology files instead. Binds
127.0.0.1 by default (``--host`` to change it: the page shows operator metrics
when a metrics source is given).

Every ``metrics_every_s`` the server reads every worker's metrics endpoint (or
one Prometheus instant query, split per ``instance``) and records the round in
the state (:class:`worker.dashboard.health.Operations`: per-worker status,
history); the follower's broker checks go to the state too, so the page can
say what stopped and since when.

Routes (relative, so they can be mounted under a prefix, e.g. on a Faust
app's web server by :mod:`worker.runtime.faust_host`):

- ``GET /`` the page (:mod:`worker.dashboard.page`), polling ``api/state``;
- ``GET /api/state`` the view (:meth:`DashboardState.view` at the server's wall
  clock: releases, overview, ``health`` alerts, ``workers``, ``metrics``, ``history``);
- ``GET /api/query?topology=T&shard=S&item=X`` a point query on the latest
  sketch release of ``T/S``, with its error bound and time series.

The follower (:func:`worker.kafka.release_follower.follow_release_topics`)
reads every partition of the release topics (no consumer group, nothing
committed) with aiokafka into the state
(:class:`~worker.dashboard.state.DashboardState`, which answers the reader API
:class:`worker.release.reader.ReleaseView`), starting ``replay`` records before each
partition's end (``--replay``, default 5000; 0 replays everything), so a
dashboard started on a topic with days of releases is ready at once; topics
that do not exist yet are looked for (an all-topics metadata request every
0.5 s) until they do, and then every 10 s for added partitions. A follower
error (e.g. the broker is gone) is shown on the page and retried every 2 s;
a broker that stops answering while the follower runs is reported by its
periodic metadata check (``on_broker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientSession, ClientTimeout, web

from sketches.errors import SpecError
from worker.dashboard.health import Scrape
from worker.dashboard.metrics_probe import MetricsProbe, prometheus_query, prometheus_samples
from worker.dashboard.page import PAGE
from worker.dashboard.state import DashboardState, dumps
from worker.kafka.client_config import aiokafka_kwargs
from worker.kafka.release_follower import follow_release_topics

log = logging.getLogger(__name__)

DEFAULT_PORT = 8050
FOLLOW_RETRY_S = 2.0


class Dashboard:
    """Follower + metrics poller + HTTP handlers (mountable) + optional own server."""

    def __init__(self, bootstrap: str, topics: Sequence[str], *,
                 metrics_url: str | None = None, client_options: Mapping[str, Any] | None = None,
                 history: int = 720, metrics_every_s: float = 2.0, replay: int = 5000,
                 metrics_text: Callable[[], str] | None = None,
                 sketch_history: int = 120, public: bool = False,
                 metrics_urls: Sequence[str] = (), prometheus_url: str | None = None,
                 prometheus_job: str | None = None,
                 release_periods: Mapping[str, float] | None = None,
                 stale_after: float = 3.0, metrics_history: int = 1800) -> None:
        if not topics:
            raise SpecError("dashboard: no release topic; pass --topic T or --topology FILE")
        self.bootstrap, self.topics = bootstrap, sorted(set(topics))
        urls = list(dict.fromkeys([*([metrics_url] if metrics_url else []), *metrics_urls]))
        if public and (urls or metrics_text or prometheus_url):
            raise SpecError("dashboard: a public page (for release readers) never reads the "
                            "worker's metrics (exact counts, docs/PRIVACY.md section 1)")
        self.public = public
        """Release readers' page: no metrics, and no count of the records read (on a topic
        that is not a release topic those would be exact private counts)."""
        self.metrics_urls = urls
        self.metrics_url = urls[0] if urls else None
        self.metrics_text = metrics_text  # in-process exposition text (Faust embedding)
        self.prometheus_url = prometheus_url.rstrip("/") if prometheus_url else None
        self.prometheus_job = prometheus_job
        self.metrics_every_s = metrics_every_s
        if replay < 0:
            raise SpecError(f"dashboard: replay must be >= 0 records, got {replay}")
        self.replay = replay
        self.state = DashboardState(history=history, sketch_history=sketch_history,
                                    stale_after=stale_after, metrics_history=metrics_history)
        self.state.release_periods.update(release_periods or {})
        self.probes: dict[str, MetricsProbe] = {}
        for url in urls:
            self.state.ops.expect(worker_name(url), url)
        if metrics_text is not None:
            self.state.ops.expect("this process", "in-process registry")
        self.follower_error: str | None = None
        self._client_options = dict(client_options or {})
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """Per topology, the metrics of the workers that answer, summed."""
        return self.state.ops.metrics_view()

    # ---------------------------------------------------------------- HTTP
    async def page(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=PAGE, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    async def api_state(self, request: web.Request) -> web.StreamResponse:
        view = self.state.view(now_ms=_now_ms(), broker=self.bootstrap)
        if self.public:
            view = {**view, "seen": None, "rejected": None}
        body = dumps({"broker": self.bootstrap, "topics": self.topics,
                      "view": view, "metrics": view["metrics"],
                      "metrics_url": self.metrics_url, "metrics_urls": self.metrics_urls,
                      "prometheus_url": self.prometheus_url,
                      "follower_error": self.follower_error, "health": view["health"],
                      "workers": view["workers"], "history": view["history"]})
        return web.Response(text=body, content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    async def api_query(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        missing = [k for k in ("topology", "shard", "item") if not q.get(k)]
        if missing:
            return _error(400, f"query: missing parameter(s) {missing}; "
                               "pass topology=, shard= and item=")
        try:
            answer = self.state.query_series(q["topology"], q["shard"], q["item"])
        except KeyError as exc:
            return _error(404, str(exc.args[0]) if exc.args else "unknown shard")
        except (SpecError, ValueError) as exc:
            return _error(400, str(exc))
        return web.Response(text=dumps(answer), content_type="application/json")

    def routes(self, prefix: str = "") -> list[web.RouteDef]:
        """The three routes under ``prefix`` (e.g. ``"/dpstream"``)."""
        return [web.get(f"{prefix}/", self.page), web.get(f"{prefix}/api/state", self.api_state),
                web.get(f"{prefix}/api/query", self.api_query)]

    # ---------------------------------------------------------------- lifecycle
    async def start_background(self) -> None:
        """Start following releases (and polling metrics); no HTTP server."""
        self._tasks.append(asyncio.create_task(self._follow(), name="dashboard-follow"))
        if self.metrics_urls or self.metrics_text or self.prometheus_url:
            self._tasks.append(asyncio.create_task(self._poll_metrics(), name="dashboard-metrics"))

    async def serve(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> int:
        """Start an HTTP server and the background tasks; return the bound port."""
        app = web.Application()
        app.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        await self.start_background()
        return self.port

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(BaseException):
                await t
        self._tasks = []
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---------------------------------------------------------------- follower
    async def _follow(self) -> None:
        """Follow the release topics; an error is shown on the page and retried."""
        while True:
            try:
                await self._follow_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker gone, ...: show it, keep trying
                self.follower_error = (f"release follower: {type(exc).__name__}: {exc}; "
                                       f"retrying in {FOLLOW_RETRY_S:g} s")
                self.state.ops.set_broker(f"{type(exc).__name__}: {exc}", _now_ms())
                log.warning("dashboard: %s", self.follower_error)
                await asyncio.sleep(FOLLOW_RETRY_S)

    async def _follow_once(self) -> None:
        """Feed every record of the release topics into :attr:`state` (a reader)."""
        async for value in follow_release_topics(
                self.bootstrap, self.topics, replay=self.replay,
                client_options=self._client_options, on_status=self._follower_status,
                on_broker=self._broker_status):
            self.state.add(value, _now_ms())

    def _follower_status(self, status: str | None) -> None:
        self.follower_error = status

    def _broker_status(self, error: str | None) -> None:
        if error is not None and self.state.ops.broker_error is None:
            log.warning("dashboard: broker %s: %s", self.bootstrap, error)
        self.state.ops.set_broker(error, _now_ms())

    def _probe(self, name: str) -> MetricsProbe:
        return self.probes.setdefault(name, MetricsProbe())

    async def scrape_round(self, session: ClientSession) -> dict[str, Scrape]:
        """Every metrics source once: one :class:`Scrape` per worker."""
        now = time.monotonic()

        async def one(url: str) -> tuple[str, Scrape]:
            name = worker_name(url)
            try:
                async with session.get(url) as resp:
                    if resp.status != 200:
                        raise OSError(f"HTTP {resp.status}")
                    text = await resp.text()
                probe = self._probe(name)
                return name, Scrape(probe.update(text, now), dict(probe.worker), source=url)
            except Exception as exc:  # the worker may be down: show it, keep going
                return name, Scrape(error=f"{type(exc).__name__}: {exc}".rstrip(": "),
                                    source=url)

        scrapes = dict(await asyncio.gather(*(one(u) for u in self.metrics_urls)))
        if self.metrics_text is not None:
            probe = self._probe("this process")
            try:
                scrapes["this process"] = Scrape(probe.update(self.metrics_text(), now),
                                                 dict(probe.worker), source="in-process")
            except Exception as exc:
                scrapes["this process"] = Scrape(error=repr(exc), source="in-process")
        if self.prometheus_url:
            scrapes.update(await self._prometheus_round(session, now))
        return scrapes

    async def _prometheus_round(self, session: ClientSession, now: float) -> dict[str, Scrape]:
        url = f"{self.prometheus_url}/api/v1/query"
        try:
            async with session.get(url, params={
                    "query": prometheus_query(self.prometheus_job)}) as resp:
                answer = await resp.json(content_type=None)
            per_worker = prometheus_samples(answer)
        except Exception as exc:  # Prometheus down: every worker it served is unknown
            err = f"Prometheus {self.prometheus_url}: {type(exc).__name__}: {exc}"
            known = [w["name"] for w in self.state.ops.workers_view(None)
                     if w["source"] == self.prometheus_url] or [f"prometheus {self.prometheus_url}"]
            return {name: Scrape(error=err, source=self.prometheus_url) for name in known}
        out: dict[str, Scrape] = {}
        for name, samples in per_worker.items():
            probe = self._probe(name)
            up = [v for n, _, v in samples if n == "up"]
            out[name] = Scrape(probe.update_samples(samples, now), dict(probe.worker),
                               source=self.prometheus_url)
            if up and up[0] == 0:
                out[name] = Scrape(error="Prometheus: up == 0", source=self.prometheus_url)
        # an instance Prometheus no longer returns (its series went stale): down
        for w in self.state.ops.workers_view(None):
            if w["source"] == self.prometheus_url and w["name"] not in out:
                out[w["name"]] = Scrape(error="no series in Prometheus (target down?)",
                                        source=self.prometheus_url)
        return out

    async def _poll_metrics(self) -> None:
        async with ClientSession(timeout=ClientTimeout(total=5)) as session:
            while True:
                self.state.ops.record(_now_ms(), await self.scrape_round(session))
                await asyncio.sleep(self.metrics_every_s)


def worker_name(url: str) -> str:
    """A metrics URL's ``host:port`` (the worker's name on the page).

    >>> worker_name("http://10.0.0.5:9108/metrics")
    '10.0.0.5:9108'
    """
    return urlsplit(url).netloc or url


def _now_ms() -> int:
    return int(time.time() * 1000)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


# -------------------------------------------------------------------- entry points


def topics_of(topology_paths: Sequence[str]) -> list[str]:
    """Release topics of the topologies at ``topology_paths``."""
    return sorted({topic for topic, _ in _release_schedules(topology_paths).values()})


def release_periods_of(topology_paths: Sequence[str]) -> dict[str, float]:
    """Release interval in seconds (``tick_ms * release.every_ticks``) per topology name."""
    return {name: period for name, (_, period) in _release_schedules(topology_paths).items()}


def _release_schedules(topology_paths: Sequence[str]) -> dict[str, tuple[str, float]]:
    from worker.config.mechanism_loader import load_mechanisms
    from worker.config.settings import Settings
    from worker.config.topology import load_topologies

    load_mechanisms(Settings.from_env().plugins)
    return {t.name: (t.release.topic, t.privacy.tick_ms * t.release.every_ticks / 1000)
            for t in load_topologies(list(topology_paths))}


def demo_extra(broker: str, port: int, host: str = "127.0.0.1") -> Any:
    """A coroutine function for ``dpstream demo``'s extras: the dashboard beside the worker.

    It follows the worker's release topics, reads its metrics endpoint when
    one is served, and prints the URL.
    """

    async def dashboard(worker: Any) -> None:
        metrics = (f"http://{worker.settings.metrics_host}:{worker.metrics_port}/metrics"
                   if worker.metrics_port else None)
        dash = Dashboard(broker, [t.release.topic for t in worker.topologies],
                         metrics_url=metrics,
                         client_options=aiokafka_kwargs(worker.settings, "dashboard"),
                         release_periods={t.name: t.privacy.tick_ms * t.release.every_ticks
                                          / 1000 for t in worker.topologies})
        try:
            bound = await dash.serve(host, port)
        except OSError as exc:  # e.g. the port is taken: the demo runs on without it
            await dash.stop()
            log.warning("dashboard not started on %s:%d (%s); pass --dashboard-port N "
                        "(0: none)", host, port, exc)
            return
        print(f"dpstream demo: dashboard on http://{host}:{bound}/", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await dash.stop()

    return dashboard
