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
import os
import sys
from collections.abc import Callable, Sequence

from worker.cli import dashboard, plan, read, run
from worker.cli.errors import one_line

DELEGATED: dict[str, Callable[[Sequence[str]], int]] = {
    "tail": read.tail_main, "query": read.query_main, "dashboard": dashboard.main}
"""Commands whose module parses its own arguments (the rest of the command line)."""

LOG_LEVEL_HELP = ("log level of every logger (DEBUG, INFO, WARNING, ERROR; default "
                  "$DPSTREAM_LOG_LEVEL or INFO); DPSTREAM_LOG_FORMAT=json: one JSON object "
                  "per line")


def version() -> str:
    """The installed package's version (``pyproject.toml``'s when run from a checkout)."""
    from importlib import metadata

    try:
        return metadata.version("dpstream")
    except metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        import re
        from pathlib import Path

        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
        found = re.search(r'(?m)^version = "([^"]+)"', text)
        return found.group(1) if found else "unknown"


def add_log_level(p: argparse.ArgumentParser) -> None:
    """``--log-level`` (every command accepts it; :func:`main` applies it)."""
    p.add_argument("--log-level", metavar="LEVEL", help=LOG_LEVEL_HELP)


def pop_log_level(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--log-level X`` / ``--log-level=X`` (anywhere), and ``X``.

    >>> pop_log_level(["run", "--log-level", "debug", "--no-faust"])
    (['run', '--no-faust'], 'debug')
    >>> pop_log_level(["--log-level=WARNING", "tail", "--topic", "t"])
    (['tail', '--topic', 't'], 'WARNING')
    """
    out, level, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out.extend(argv[i:])
            break
        if arg == "--log-level" and i + 1 < len(argv):
            level, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--log-level="):
            level, i = arg.split("=", 1)[1], i + 1
            continue
        out.append(arg)
        i += 1
    return out, level


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of ``dpstream`` (each command group registers its own subcommands)."""
    p = argparse.ArgumentParser(prog="dpstream", description="Differentially private "
                                "statistics over Kafka event streams")
    p.add_argument("--version", action="version", version=f"dpstream {version()}")
    add_log_level(p)
    sub = p.add_subparsers(dest="command", required=True)
    run.add_parsers(sub)
    plan.add_parsers(sub)
    for name in ("run", "demo", "validate", "plan"):
        add_log_level(sub.choices[name])
    # parsed by their own modules (main() hands them the rest of the command line)
    sub.add_parser("tail", help="tail a release topic (see dpstream tail -h)", add_help=False)
    sub.add_parser("query", help="point queries on releases (see dpstream query -h)",
                   add_help=False)
    sub.add_parser("dashboard", help="live web page over release topics "
                   "(see dpstream dashboard -h)", add_help=False)
    return p


def setup_logging(level: str | None) -> None:
    """One format for every logger (:func:`worker.observe.logs.configure_logging`):
    ``level`` (``--log-level``) else ``DPSTREAM_LOG_LEVEL``, format ``DPSTREAM_LOG_FORMAT``.

    A ``--log-level`` is also put in the environment, so the settings every command
    reads (and the Faust worker's level) agree with it.
    """
    from worker.observe.logs import check_format, check_level, configure_logging

    if level is not None:
        os.environ["DPSTREAM_LOG_LEVEL"] = check_level(level)
    configure_logging(check_level(os.environ.get("DPSTREAM_LOG_LEVEL", "INFO") or "INFO"),
                      check_format(os.environ.get("DPSTREAM_LOG_FORMAT", "text") or "text"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpstream`` console script.

    Every command ends a known error (bad broker, taken port, bad topology or
    setting) with one line ``dpstream: <what>; <fix>`` on stderr and exit code 2
    (:mod:`worker.cli.errors`).
    """
    argv, level = pop_log_level(list(sys.argv[1:] if argv is None else argv))
    if argv and argv[0] in DELEGATED:
        cmd, rest = DELEGATED[argv[0]], argv[1:]

        def delegated() -> int:
            setup_logging(level)
            return cmd(rest)

        return one_line(delegated)
    args = build_parser().parse_args(argv)

    def dispatch() -> int:
        setup_logging(level)
        return int(args.func(args))

    return one_line(dispatch)


if __name__ == "__main__":
    sys.exit(main())
