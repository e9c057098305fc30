"""``dpstream run`` and ``dpstream demo``: run the worker (and the demo around it).

``run`` hosts the worker in a Faust app (``--no-faust``: the plain asyncio
runner); with no broker configured it starts the embedded broker. ``demo`` adds
the demo producer, a release printer and the dashboard.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from sketches.errors import DPStreamError, SpecError
from worker.config.settings import Settings

log = logging.getLogger("dpstream")


def add_parsers(sub: Any) -> None:
    """Register ``run`` and ``demo`` on the ``dpstream`` subparsers."""
    run = sub.add_parser("run", help="run the worker")
    run.add_argument("--topology", action="append", help="topology file or directory "
                     "(repeatable; default $DPSTREAM_TOPOLOGIES or ./topologies)")
    run.add_argument("--broker", help="Kafka bootstrap servers; default $DPSTREAM_BROKER, "
                     "else an embedded broker")
    run.add_argument("--metrics-port", type=int, help="Prometheus port (0 disables)")
    add_config_flag(run)
    _faust_flags(run)
    run.set_defaults(func=cmd_run)
    demo = sub.add_parser("demo", help="embedded broker + demo producer + worker")
    _faust_flags(demo)
    demo.add_argument("--metrics-port", type=int, help="Prometheus port (default "
                      "$DPSTREAM_METRICS_PORT or 9108; 0 disables)")
    demo.add_argument("--rate", type=float, default=20000.0, help="events per second")
    demo.add_argument("--seconds", type=float, default=None, help="stop after this long")
    demo.add_argument("--dashboard-port", type=int, default=8050,
                      help="serve the dashboard (dpstream dashboard) on this port; 0: none")
    add_config_flag(demo)
    demo.set_defaults(func=cmd_demo)


def add_config_flag(p: argparse.ArgumentParser) -> None:
    """``--config FILE``: the TOML settings file (docs/OPERATIONS.md "Kafka client
    configuration")."""
    p.add_argument("--config", help="TOML settings file (default $DPSTREAM_CONFIG); "
                   "precedence: flags > environment > file > defaults")


def load_settings(config: str | None) -> Settings:
    """:meth:`Settings.load` with ``--config``; unknown ``DPSTREAM_*`` variables are
    warned (one line each) once logging is set up by the caller."""
    return Settings.load(config=config, warn=False)


def warn_unknown_variables() -> None:
    """One WARNING line per unknown ``DPSTREAM_*`` environment variable."""
    import os

    from worker.config.settings import unknown_variables

    for line in unknown_variables(os.environ):
        log.warning("%s", line)


def _faust_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-faust", dest="faust", action="store_false",
                   help="plain asyncio runner instead of hosting the worker in a Faust app "
                   "(default: Faust-hosted; ingestion is batched aiokafka either way)")
    p.add_argument("--faust", dest="faust", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(faust=True)


def _run_faust(app: Any, settings: Settings) -> int:
    """Run a Faust app until SIGINT/SIGTERM; the exit code is non-zero if it crashed.

    A dpstream worker failure (the app was made with ``crash_on_failure=False``)
    ends like ``--no-faust``: one line ``dpstream: <reason>`` on stderr, exit 2
    for a dpstream error (e.g. the broker is gone), 1 otherwise.
    """
    import faust

    # override_logging=False: the CLI configured logging (one format for every logger,
    # worker.observe.logs); Faust's own setup would add a second format
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True,
                          redirect_stdouts=False, override_logging=False)
    code = 0
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = int(exc.code or 0)
    failed = app.dpstream_worker.failed  # set by create_faust_app
    if failed is None:
        return code
    if isinstance(failed, DPStreamError):
        print(f"dpstream: {failed}", file=sys.stderr, flush=True)
        return 2
    print(f"dpstream: the worker failed: {type(failed).__name__}: {failed}", file=sys.stderr,
          flush=True)
    return 1


async def _run(settings: Settings, topology: Sequence[str] | None,
               embedded_exit: ExitStatus | None = None) -> None:
    from worker.runtime.worker import create_worker

    worker = create_worker(settings, topology)
    worker.embedded_exit = embedded_exit
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.start()
    if worker.metrics_port:
        log.info("metrics: http://%s:%d/metrics", settings.metrics_host, worker.metrics_port)
    await worker.run_until_stopped()


ExitStatus = Callable[[], "str | None"]


def _with_broker(settings: Settings, *, demo: bool = False,
                 ) -> tuple[Settings, contextlib.AbstractContextManager[object], ExitStatus | None]:
    """The configured broker (checked reachable), or a new embedded one.

    The embedded broker keeps everything in memory and dies with this process
    (parent-death signal): a restart starts a new, empty one. To keep data
    across worker restarts, run a broker of your own and pass ``--broker``.
    ``DPSTREAM_EMBEDDED_BROKER=false`` forbids starting it (``demo`` always does).
    """
    from worker.cli.errors import check_reachable

    if settings.broker:
        from worker.kafka.client_config import aiokafka_kwargs

        check_reachable(settings.broker, aiokafka_kwargs(settings, "probe"))
        return settings, contextlib.nullcontext(), None
    if not (demo or settings.embedded_broker):
        raise SpecError("DPSTREAM_BROKER: no broker configured; set host:port[,host:port] "
                        "(DPSTREAM_EMBEDDED_BROKER=false forbids starting the embedded "
                        "in-memory broker; `dpstream demo` always starts one)")
    from worker.kafka.embedded import EmbeddedBroker

    broker = EmbeddedBroker()
    broker.start()
    log.warning("no broker configured: started a NEW embedded broker on %s (pid %s). It keeps "
                "topics and checkpoints in memory only and dies with this process: data of "
                "earlier runs is not there. Use --broker HOST:PORT for a persistent broker",
                broker.bootstrap, broker.pid)
    return (settings.with_broker(broker.bootstrap), contextlib.closing(_Stopper(broker)),
            broker.exit_status)


def _check_metrics_port(settings: Settings) -> None:
    """Fail fast, in one line, if the metrics port is taken (before any broker starts)."""
    from worker.observe.metrics import check_port

    check_port(settings.metrics_host, settings.metrics_port)


def _check_state_dir(settings: Settings, faust: bool) -> None:
    """Faust's data directory must be writable: fail in one line before any broker starts
    (:mod:`worker.config.state_dir`; ``--no-faust`` writes nothing to disk)."""
    if faust:
        import os

        from worker.config.state_dir import state_dir

        state_dir({**os.environ, "DPSTREAM_STATE_DIR": settings.state_dir}
                  if settings.state_dir else None)


class _Stopper:
    def __init__(self, broker: object) -> None:
        self.broker = broker

    def close(self) -> None:
        self.broker.stop()  # type: ignore[attr-defined]


def cmd_run(args: argparse.Namespace) -> int:
    """``dpstream run``."""
    settings = load_settings(args.config)
    if args.broker:
        settings = settings.with_broker(args.broker)
    if args.metrics_port is not None:
        settings = dataclasses.replace(settings, metrics_port=args.metrics_port)
    warn_unknown_variables()
    _check_metrics_port(settings)
    _check_state_dir(settings, args.faust)
    settings, broker, exit_status = _with_broker(settings)
    with broker:
        if args.faust:
            from worker.runtime.faust_host import create_faust_app

            app = create_faust_app(settings, args.topology, crash_on_failure=False)
            app.dpstream_worker.embedded_exit = exit_status
            return _run_faust(app, settings)
        asyncio.run(_run(settings, args.topology, exit_status))
    return 0


DEMO_TOPOLOGIES = ["topologies/netmon.yaml", "topologies/netmon_prefixes.yaml"]
DEMO_PROBE = "93.184.216.0/24"  # the demo producer's heaviest destination prefix


Extra = Callable[[Any], Coroutine[Any, Any, None]]
"""A coroutine function started with the worker (argument: the started worker)."""


def _demo_extras(settings: Settings, rate: float) -> list[Extra]:
    """The demo's producer and release printer, as coroutines taking the started worker."""

    async def produce(worker: Any) -> None:
        try:
            from worker.kafka.demo_producer import demo_producer_options, run_producer
        except ImportError:
            log.error("worker.kafka.demo_producer is not available; run your own producer")
            return
        topo = worker.topologies[0]
        await run_producer(settings.broker, topo.input.topic, events=None, rate=rate,
                           encoding=topo.input.encoding, seed=0, **demo_producer_options(
                               settings.demo_input_mb))

    async def show(worker: Any) -> None:
        prefixes = worker.topologies[1].release.topic
        metrics = (f"metrics http://{settings.metrics_host}:{worker.metrics_port}/metrics"
                   if worker.metrics_port else "metrics off")
        print(f"dpstream demo: broker {settings.broker}; {metrics}; Ctrl-C stops\n"
              f"  heavy source IPs per router and, from the destination-prefix sketch,\n"
              f"  the noisy count of {DEMO_PROBE} are printed as they are released;\n"
              f"  query the sketch for any prefix from another shell with\n"
              f"  DPSTREAM_BROKER={settings.broker} dpstream query --topic {prefixes} "
              f"--shard r1 {DEMO_PROBE}", flush=True)
        await _print_releases(settings, [worker.topologies[0].release.topic, prefixes],
                              probe=DEMO_PROBE)

    return [produce, show]


async def _demo(settings: Settings, rate: float, seconds: float | None,
                more: Sequence[Extra] = (),
                embedded_exit: ExitStatus | None = None) -> None:
    from worker.runtime.worker import create_worker

    worker = create_worker(settings, DEMO_TOPOLOGIES, memory_checkpoints=True)
    worker.embedded_exit = embedded_exit
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.start()
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(fn(worker))
                                       for fn in [*_demo_extras(settings, rate), *more]]
    if seconds:
        loop.call_later(seconds, worker.request_stop)
    try:
        await worker.run_until_stopped()
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t


async def _print_releases(settings: Settings, topics: Sequence[str], probe: str) -> None:
    """Print every record of the release ``topics`` from their beginning, one line each."""
    from worker.kafka.client_config import aiokafka_kwargs
    from worker.kafka.release_follower import follow_release_topics
    from worker.release.envelope import summarize_release

    async for value in follow_release_topics(str(settings.broker), topics, replay=0,
                                             client_options=aiokafka_kwargs(settings, "reader")):
        if value:
            print(summarize_release(value, probe=probe), flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    """``dpstream demo``."""
    settings = load_settings(args.config)
    if args.metrics_port is not None:
        settings = dataclasses.replace(settings, metrics_port=args.metrics_port)
    warn_unknown_variables()
    _check_metrics_port(settings)
    _check_state_dir(settings, args.faust)
    if args.dashboard_port:
        from worker.cli.errors import check_port

        check_port("127.0.0.1", args.dashboard_port, "dashboard",
                   "pass --dashboard-port with a free port, or 0 for no dashboard")
    settings, broker, exit_status = _with_broker(settings, demo=True)
    from worker.kafka.demo_producer import demo_worker_settings

    settings = demo_worker_settings(settings)  # zstd releases (docs/OPERATIONS.md "Demo memory")
    with broker:
        if args.faust:
            from worker.runtime.faust_host import create_faust_app

            extras = list(_demo_extras(settings, args.rate)) + _dashboard(settings, args)
            if args.seconds:
                seconds = float(args.seconds)

                async def stop_later(worker: Any) -> None:
                    await asyncio.sleep(seconds)
                    worker.request_stop()

                extras.append(stop_later)
            app = create_faust_app(settings, DEMO_TOPOLOGIES, extras=extras,
                                   crash_on_failure=False, memory_checkpoints=True)
            app.dpstream_worker.embedded_exit = exit_status
            return _run_faust(app, settings)
        asyncio.run(_demo(settings, args.rate, args.seconds, _dashboard(settings, args),
                          exit_status))
    return 0


def _dashboard(settings: Settings, args: argparse.Namespace) -> list[Extra]:
    """The demo's dashboard as an extra (none with ``--dashboard-port 0``)."""
    if not args.dashboard_port:
        return []
    from worker.dashboard.server import demo_extra

    return [demo_extra(str(settings.broker), args.dashboard_port)]
