"""Prometheus metrics of the worker (operator-only: they describe private data).

Every metric lives in one :class:`Metrics` object with its own registry, so
tests can run several workers in one process. :meth:`Metrics.serve` exposes
them over HTTP at ``/metrics``, next to the probes ``/healthz`` and
``/readyz`` (:mod:`worker.observe.health`), on 127.0.0.1 unless configured
otherwise. The list with meanings is in docs/OPERATIONS.md.

Examples
--------
>>> m = Metrics()
>>> m.events_in.labels(topology="t").inc(3)
>>> m.value("dpstream_events_in_total", topology="t")
3.0
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import make_wsgi_app

from sketches.errors import DPStreamError, SpecError
from worker.observe.health import Probe

log = logging.getLogger(__name__)

_SIZE_BUCKETS = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
_LAT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    """All dpstream worker metrics (names carry their unit, Prometheus style)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        t, ts, tp = ["topology"], ["topology", "shard"], ["topology", "partition"]
        self.events_in = Counter("dpstream_events_in", "Events ingested into a sketch", t,
                                 registry=r)
        self.messages_in = Counter("dpstream_messages_in", "Input messages read", t, registry=r)
        self.batch_size = Histogram("dpstream_batch_size_events", "Events per processed batch",
                                    t, buckets=_SIZE_BUCKETS, registry=r)
        self.batch_latency = Histogram("dpstream_batch_duration_seconds",
                                       "Time to decode, route and apply one batch", t,
                                       buckets=_LAT_BUCKETS, registry=r)
        self.decode_errors = Counter("dpstream_decode_errors", "Messages that failed decoding",
                                     ["topology", "reason"], registry=r)
        self.dead_letters = Counter("dpstream_dead_letters", "Records sent to the dead-letter "
                                    "topic", ["topology", "reason"], registry=r)
        self.dropped = Counter("dpstream_contributions_dropped", "Events dropped by the exact "
                               "per-unit contribution cap", t, registry=r)
        self.repartition_forwarded = Counter(
            "dpstream_repartition_forwarded", "Input records not on their shard's partition "
            "(the producer's partitioner is not murmur2 of the shard key), forwarded to the "
            "repartition topic to be counted there", t, registry=r)
        self.repartition_deduplicated = Counter(
            "dpstream_repartition_deduplicated", "Forwarded records skipped because their "
            "source offset was taken already (copies re-forwarded after a crash)", t,
            registry=r)
        self.over_horizon = Counter("dpstream_events_over_horizon", "Events dropped because "
                                    "the epoch's public event bound was reached", t, registry=r)
        self.releases = Counter("dpstream_releases_published", "Releases published", ts,
                                registry=r)
        self.release_latency = Histogram(
            "dpstream_release_latency_seconds",
            "Oldest event-in to its inclusion in a published release", t,
            buckets=_LAT_BUCKETS, registry=r)
        self.lag = Gauge("dpstream_consumer_lag_messages", "High watermark minus position", tp,
                         registry=r)
        self.memory = Gauge("dpstream_sketch_memory_bytes", "Bytes of sketch state", ts,
                            registry=r)
        self.eps = Gauge("dpstream_privacy_epsilon_per_epoch", "Epsilon spent per epoch", ts,
                         registry=r)
        self.delta = Gauge("dpstream_privacy_delta_per_epoch", "Delta spent per epoch", ts,
                           registry=r)
        self.epoch = Gauge("dpstream_epoch", "Current epoch number", ts, registry=r)
        self.epoch_progress = Gauge("dpstream_epoch_progress_rounds", "Closed rounds of the "
                                    "current epoch", ts, registry=r)
        self.epoch_length = Gauge("dpstream_epoch_length_rounds", "Rounds per epoch", ts,
                                  registry=r)
        self.privacy_info = Info("dpstream_privacy", "Privacy semantics of a topology", t,
                                 registry=r)
        self.checkpoint_bytes = Counter("dpstream_checkpoint_written_bytes", "Compressed "
                                        "checkpoint bytes written", t, registry=r)
        self.checkpoint_latency = Histogram("dpstream_checkpoint_duration_seconds",
                                            "Time to write and acknowledge one checkpoint", t,
                                            buckets=_LAT_BUCKETS, registry=r)
        self.checkpoint_failures = Counter("dpstream_checkpoint_failures", "Checkpoint writes "
                                           "that failed (the releases they cover stay queued; "
                                           "nothing is published before its checkpoint)",
                                           t, registry=r)
        self.fenced = Counter("dpstream_fenced", "Partitions this worker stopped writing "
                              "because another writer claimed them (a zombie or another "
                              "deployment; docs/PRIVACY.md \"One writer per release\"): "
                              "their pending releases were withheld", t, registry=r)
        self.timer_errors = Counter("dpstream_timer_errors", "Release-timer rounds of a "
                                    "partition that raised (not a broker error): its "
                                    "releases stay queued and are retried next round", t,
                                    registry=r)
        self.release_period = Gauge("dpstream_release_period_seconds", "Public release "
                                    "cadence: tick_ms * release.every_ticks", t, registry=r)
        self.last_release = Gauge("dpstream_last_release_timestamp_seconds", "Unix time of "
                                  "the last published release (set to the assignment time "
                                  "before the first one)", t, registry=r)
        self.shards_owned = Gauge("dpstream_shards_owned", "Shards whose state this worker "
                                  "holds", t, registry=r)
        self.ready = Gauge("dpstream_worker_ready", "1 if the worker is ready (/readyz: "
                           "connected, partitions assigned and restored, not rebalancing)",
                           registry=r)
        self.broker_connected = Gauge("dpstream_broker_connected", "1 while the worker reaches "
                                      "the broker, 0 during an outage", registry=r)
        self.broker_outages = Counter("dpstream_broker_outages", "Broker outages detected "
                                      "(connection lost or embedded broker died)", registry=r)
        _standard_collectors(r)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    _PER_TOPOLOGY = ("events_in", "messages_in", "dropped", "over_horizon", "timer_errors",
                     "repartition_forwarded", "repartition_deduplicated")

    def init_topology(self, topology: str, reasons: tuple[str, ...]) -> None:
        """Create every error and throughput series of ``topology`` at 0, so that
        ``increase(...) > 0`` alerts fire on the first event (a series without a
        sample has no increase)."""
        for name in self._PER_TOPOLOGY:
            getattr(self, name).labels(topology=topology)
        for reason in reasons:
            self.decode_errors.labels(topology=topology, reason=reason)
            self.dead_letters.labels(topology=topology, reason=reason)

    def forget_shard(self, topology: str, shard: str) -> None:
        """Remove the per-shard gauges of a shard this worker no longer owns (after a
        revocation another worker reports them; a stale copy would double-count)."""
        for gauge in (self.memory, self.eps, self.delta, self.epoch, self.epoch_progress,
                      self.epoch_length):
            try:
                gauge.remove(topology, shard)
            except KeyError:
                pass

    def forget_partition(self, topology: str, partition: int) -> None:
        """Remove the lag gauge of a revoked partition (summed lag must not double-count)."""
        try:
            self.lag.remove(topology, str(partition))
        except KeyError:
            pass

    def value(self, name: str, **labels: str) -> float | None:
        """Current sample value (for tests and the demo)."""
        return self.registry.get_sample_value(name, labels)

    def serve(self, host: str, port: int, *, live: Callable[[], Probe] | None = None,
              ready: Callable[[], Probe] | None = None) -> int:
        """Start the HTTP endpoint; return the bound port (``port`` 0 picks a free one).

        ``/metrics`` is the Prometheus exposition; ``/healthz`` and ``/readyz``
        answer 200 or 503 with the probe's reason as the body (``live`` and
        ``ready``; absent ones always answer 200). ``ready`` also drives the
        ``dpstream_worker_ready`` gauge, evaluated at every scrape.

        Raises
        ------
        SpecError
            The port is in use (names the port and the fix).
        """
        if ready is not None:
            probe = ready
            self.ready.set_function(lambda: float(probe().ok))
        app = _probe_app(make_wsgi_app(self.registry), live, ready)
        try:
            server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise SpecError(port_in_use_message(host, port)) from None
        thread = threading.Thread(target=server.serve_forever, name="dpstream-metrics",
                                  daemon=True)
        thread.start()
        self._server, self._thread = server, thread
        bound = int(server.server_address[1])
        log.info("metrics on http://%s:%d/metrics (probes /healthz, /readyz)", host, bound)
        return bound

    def close(self) -> None:
        """Stop the HTTP endpoint if it runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _standard_collectors(registry: CollectorRegistry) -> None:
    """Register prometheus_client's process (``process_*``: RSS, CPU, open fds),
    platform (``python_info``) and GC (``python_gc_*``) collectors on ``registry``,
    unless it already has them (the library's default registry does)."""
    if registry is REGISTRY:
        return
    for make in (ProcessCollector, PlatformCollector, GCCollector):
        try:
            make(registry=registry)
        except ValueError:  # already registered by the caller under the same names
            pass


def port_in_use_message(host: str, port: int) -> str:
    """The one-line error for a metrics port another process listens on."""
    return (f"metrics port {host}:{port} is already in use (another dpstream worker or "
            "demo?); pass --metrics-port with a free port, set DPSTREAM_METRICS_PORT, or 0 "
            "to disable metrics")


def check_port(host: str, port: int) -> None:
    """Raise :class:`DPStreamError` (one line) if ``host:port`` cannot be bound for the
    metrics endpoint; nothing for port 0 (metrics off).

    Binds exactly as the endpoint will (``SO_REUSEADDR``, like :meth:`Metrics.serve`'s
    HTTP server), so connections of earlier scrapes left in TIME-WAIT after a stop do
    not block a restart on the same port, while a port another process listens on is
    still refused (Linux never lets a second socket bind a listening port).
    """
    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise DPStreamError(port_in_use_message(host, port)) from None


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # HTTPServer already sets SO_REUSEADDR (a restart must not wait for the TIME-WAIT
    # sockets of earlier scrapes); stated here because check_port relies on it.
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log per scrape
        pass


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _probe_app(metrics_app: WSGIApp, live: Callable[[], Probe] | None,
               ready: Callable[[], Probe] | None) -> WSGIApp:
    """WSGI app: ``/healthz`` and ``/readyz`` from the probes, anything else to metrics."""
    probes = {"/healthz": live, "/readyz": ready}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in probes:
            return metrics_app(environ, start_response)
        fn = probes[path]
        probe = Probe(True, "ok") if fn is None else fn()
        status = "200 OK" if probe.ok else "503 Service Unavailable"
        body = (probe.reason + "\n").encode()
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                                ("Content-Length", str(len(body)))])
        return [body]

    return app
