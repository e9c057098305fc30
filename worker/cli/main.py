"""The ``dpstream`` command line.

``dpstream run [--topology FILE_OR_DIR ...] [--broker HOST:PORT] [--no-faust]``
    Run the worker, hosted in a Faust app (``worker.runtime.faust_host.create_faust_app``;
    ``--no-faust``: the plain asyncio runner). With no broker configured (no
    ``--broker``, no ``DPSTREAM_BROKER``) it starts the embedded broker on
    loopback and stops it on exit.
``dpstream demo [--no-faust] [--metrics-port PORT]``
    Embedded broker + demo producer + worker on ``topologies/netmon.yaml``;
    prints releases as they are published.
``dpstream validate TOPOLOGY...``
    Check topology files (or directories) without a broker; exit 2 on the
    first error, which names the file, the field and the fix.
``dpstream plan TOPOLOGY... [--rate EVENTS_PER_S] [--share S] [--json]``
    Before running: each topology's stated guarantee, noise sigma, error
    bounds, detection times, memory and what-ifs (``worker.plan.plan``).
``dpstream tail ...`` / ``dpstream query ...``
    Read releases through the reader API (``worker.release.reader``).
``dpstream dashboard ...``
    Live web page over release topics (see ``worker.dashboard.server``);
    ``dpstream demo`` serves it on ``--dashboard-port`` (default 8050).

This module parses and dispatches; one module per command group does the
work: :mod:`worker.cli.run` (``run``, ``demo``), :mod:`worker.cli.plan`
(``validate``, ``plan``), :mod:`worker.cli.read` (``tail``, ``query``),
:mod:`worker.cli.dashboard` (``dashboard``), and
:mod:`worker.cli.demo_producer` (``python -m worker.cli.demo_producer``).

Examples
--------
>>> build_parser().parse_args(["run", "--topology", "topologies/netmon.yaml"]).topology
['topologies/netmon.yaml']
>>> build_parser().parse_args(["run"]).faust, build_parser().parse_args(["run", "--no-faust"]).faust
(True, False)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sketches.errors import DPStreamError
from worker.cli import dashboard, plan, read, run

DELEGATED: dict[str, Callable[[Sequence[str]], int]] = {
    "tail": read.tail_main, "query": read.query_main, "dashboard": dashboard.main}
"""Commands whose module parses its own arguments (the rest of the command line)."""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of ``dpstream`` (each command group registers its own subcommands)."""
    p = argparse.ArgumentParser(prog="dpstream", description="Differentially private "
                                "statistics over Kafka event streams")
    sub = p.add_subparsers(dest="command", required=True)
    run.add_parsers(sub)
    plan.add_parsers(sub)
    # parsed by their own modules (main() hands them the rest of the command line)
    sub.add_parser("tail", help="tail a release topic (see dpstream tail -h)", add_help=False)
    sub.add_parser("query", help="point queries on releases (see dpstream query -h)",
                   add_help=False)
    sub.add_parser("dashboard", help="live web page over release topics "
                   "(see dpstream dashboard -h)", add_help=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpstream`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return int(DELEGATED[argv[0]](argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DPStreamError as exc:
        print(f"dpstream: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
