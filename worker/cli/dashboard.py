"""``dpstream dashboard``: the live web page over release topics, from the command line.

The server is :class:`worker.dashboard.server.Dashboard`; this module parses the
flags and runs it until Ctrl-C (or ``--seconds``). The server (aiohttp) is
imported when the command runs, not when ``dpstream`` starts.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import sys
from collections.abc import Sequence

from sketches.errors import DPStreamError


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of ``dpstream dashboard``."""
    from worker.dashboard.server import DEFAULT_PORT  # aiohttp: imported when used

    ap = argparse.ArgumentParser(prog="dpstream dashboard",
                                 description="Live web page over dpstream release topics.")
    ap.add_argument("--topic", action="append", default=[], help="release topic (repeatable)")
    ap.add_argument("--topology", action="append", default=[],
                    help="topology file or directory: follow its release.topic (repeatable)")
    ap.add_argument("--broker", help="host:port (default: $DPSTREAM_BROKER); the security "
                    "settings of the environment / --config file apply to it")
    ap.add_argument("--config", help="TOML settings file (default $DPSTREAM_CONFIG)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"HTTP port (default {DEFAULT_PORT}; 0 picks a free one)")
    ap.add_argument("--metrics", "--metrics-url", dest="metrics", action="append", default=[],
                    metavar="URL", help="a worker's Prometheus endpoint, e.g. "
                    "http://127.0.0.1:9108/metrics (repeatable, one per worker: throughput, "
                    "lag, dead letters, worker status; operator-only)")
    ap.add_argument("--prometheus", metavar="URL",
                    help="read the workers' metrics from this Prometheus server instead "
                    "(e.g. http://127.0.0.1:9090; one worker per instance label)")
    ap.add_argument("--prometheus-job", metavar="JOB",
                    help="only the series of this Prometheus job (default: every dpstream_* "
                    "series)")
    ap.add_argument("--stale-after", type=float, default=3.0, metavar="N",
                    help="releases count as stopped after N release intervals without one "
                    "(default 3; the interval comes from --topology files, the workers' "
                    "metrics, or the releases read)")
    ap.add_argument("--public", action="store_true",
                    help="a page for release readers: only public releases, a metrics URL "
                    "is refused (metrics are exact, private counts)")
    ap.add_argument("--history", type=int, default=720,
                    help="releases kept per shard for the time series (default 720: an hour "
                    "of releases every 5 s)")
    ap.add_argument("--sketch-history", type=int, default=120,
                    help="released sketch matrices kept per shard for a queried item's series "
                    "(default 120; each is depth x width floats)")
    ap.add_argument("--metrics-history", type=int, default=1800,
                    help="metrics rounds (one every 2 s) kept for the throughput, lag and "
                    "dead-letter charts (default 1800: an hour)")
    ap.add_argument("--replay", type=int, default=5000,
                    help="records read before each partition's end at start (0: all)")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after S seconds (0: never)")
    ap.add_argument("--log-level", metavar="LEVEL", help="log level (default "
                    "$DPSTREAM_LOG_LEVEL or INFO; DPSTREAM_LOG_FORMAT=json for JSON lines)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``dpstream dashboard``."""
    from worker.cli.read import check_reachable, read_settings
    from worker.dashboard.server import Dashboard, release_periods_of, topics_of
    from worker.kafka.client_config import aiokafka_kwargs

    args = build_parser().parse_args(argv)
    if args.public and (args.metrics or args.prometheus):
        print("dpstream: --public: a page for release readers shows releases only; "
              "--metrics/--prometheus are operator information (exact counts per topology: "
              "docs/PRIVACY.md section 1); drop them or --public", file=sys.stderr)
        return 2
    from worker.cli.errors import check_port, port_taken_message

    fix = "pass --port with a free port (0 picks one)"
    check_port(args.host, args.port, "dashboard", fix)

    async def run() -> int:
        settings = read_settings(args.broker, args.config)
        await check_reachable(settings, "dashboard-admin")
        bootstrap, opts = settings.broker, aiokafka_kwargs(settings, "dashboard")
        topics = list(args.topic) + (topics_of(args.topology) if args.topology else [])
        dash = Dashboard(bootstrap, topics, metrics_urls=args.metrics,
                         prometheus_url=args.prometheus, prometheus_job=args.prometheus_job,
                         client_options=opts, history=args.history, replay=args.replay,
                         sketch_history=args.sketch_history, public=args.public,
                         stale_after=args.stale_after, metrics_history=args.metrics_history,
                         release_periods=(release_periods_of(args.topology)
                                          if args.topology else None))
        try:
            port = await dash.serve(args.host, args.port)
        except OSError as exc:  # taken between the check and now
            await dash.stop()
            if exc.errno != errno.EADDRINUSE:
                raise
            raise DPStreamError(port_taken_message(args.host, args.port, "dashboard",
                                                   fix)) from None
        print(f"dpstream dashboard: http://{args.host}:{port}/ (topics {', '.join(dash.topics)})",
              flush=True)
        try:
            if args.seconds:
                await asyncio.sleep(args.seconds)
            else:
                await asyncio.Event().wait()
        finally:
            await dash.stop()
        return 0

    try:
        return int(asyncio.run(run()))
    except DPStreamError as exc:
        print(f"dpstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
