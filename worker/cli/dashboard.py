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
    ap.add_argument("--broker", help="host:port (default: $DPSTREAM_BROKER)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"HTTP port (default {DEFAULT_PORT}; 0 picks a free one)")
    ap.add_argument("--metrics-url", help="the worker's Prometheus endpoint, e.g. "
                    "http://127.0.0.1:9108/metrics (throughput and lag; operator-only)")
    ap.add_argument("--public", action="store_true",
                    help="a page for release readers: only public releases, a metrics URL "
                    "is refused (metrics are exact, private counts)")
    ap.add_argument("--history", type=int, default=720,
                    help="releases kept per shard for the time series (default 720: an hour "
                    "of releases every 5 s)")
    ap.add_argument("--sketch-history", type=int, default=120,
                    help="released sketch matrices kept per shard for a queried item's series "
                    "(default 120; each is depth x width floats)")
    ap.add_argument("--replay", type=int, default=5000,
                    help="records read before each partition's end at start (0: all)")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after S seconds (0: never)")
    ap.add_argument("--log-level", metavar="LEVEL", help="log level (default "
                    "$DPSTREAM_LOG_LEVEL or INFO; DPSTREAM_LOG_FORMAT=json for JSON lines)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``dpstream dashboard``."""
    from worker.cli.read import bootstrap_from
    from worker.dashboard.server import Dashboard, topics_of

    args = build_parser().parse_args(argv)
    if args.public and args.metrics_url:
        print("dpstream: --public: a page for release readers shows releases only; "
              "--metrics-url is operator information (exact counts per topology: "
              "docs/PRIVACY.md section 1); drop --metrics-url or --public", file=sys.stderr)
        return 2
    from worker.cli.errors import check_port, check_reachable, port_taken_message

    fix = "pass --port with a free port (0 picks one)"
    bootstrap, opts = bootstrap_from(args.broker)
    check_port(args.host, args.port, "dashboard", fix)
    check_reachable(bootstrap, opts)

    async def run() -> int:
        topics = list(args.topic) + (topics_of(args.topology) if args.topology else [])
        dash = Dashboard(bootstrap, topics, metrics_url=args.metrics_url,
                         client_options=opts, history=args.history, replay=args.replay,
                         sketch_history=args.sketch_history, public=args.public)
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
