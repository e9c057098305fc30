"""``dpstream tail`` and ``dpstream query``: read releases from the command line.

Both read through the reader API (:class:`worker.release.reader.ReleaseView`):
``tail`` with :class:`worker.kafka.release_reader.ConfluentReleaseReader`
(confluent-kafka), ``query`` with :class:`worker.kafka.release_reader.ReleaseReader`
(aiokafka). A release that is not private is marked as such
(:mod:`worker.release.envelope` judges it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from sketches.errors import DPStreamError, SpecError
from worker.cli.errors import check_reachable


def bootstrap_from(arg: str | None) -> tuple[str, dict[str, Any]]:
    """``(bootstrap, aiokafka security options)``: ``--broker`` if given, else the
    environment's ``DPSTREAM_BROKER`` and security settings."""
    if arg:
        return arg, {}
    from worker.config.settings import Settings

    s = Settings.from_env()
    if not s.broker:
        raise SpecError("no broker address given; pass --broker host:port or set "
                        "DPSTREAM_BROKER (the address the worker publishes to)")
    return s.broker, s.kafka_security_kwargs()


def add_topic_args(ap: argparse.ArgumentParser) -> None:
    """The ``--topic`` and ``--broker`` options of ``dpstream tail`` and ``query``."""
    ap.add_argument("--topic", required=True, help="release topic (the topology's release.topic)")
    ap.add_argument("--broker", help="host:port (default: $DPSTREAM_BROKER)")
    ap.add_argument("--log-level", metavar="LEVEL", help="log level (default "
                    "$DPSTREAM_LOG_LEVEL or INFO; DPSTREAM_LOG_FORMAT=json for JSON lines)")


def _fail(exc: BaseException) -> int:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    print(f"dpstream: {msg}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- tail


def tail_main(argv: Sequence[str] | None = None) -> int:
    """``dpstream tail --topic T [--from-beginning] [--json] [--count N] [--seconds S]``.

    Prints releases as they are published (from now on; ``--from-beginning``
    replays the topic first). A release that is not private (``private:
    false`` or fast/zero noise, :func:`worker.release.envelope.is_private`) is marked
    ``[NOT PRIVATE ...]`` (with ``--json``: on stderr, the JSON line unchanged).
    Reads with confluent-kafka (:class:`worker.kafka.release_reader.ConfluentReleaseReader`).
    """
    from worker.kafka.release_reader import ConfluentReleaseReader, librdkafka_security
    from worker.release.envelope import privacy_note, summarize_release

    ap = argparse.ArgumentParser(prog="dpstream tail", description=tail_main.__doc__)
    add_topic_args(ap)
    ap.add_argument("--from-beginning", action="store_true",
                    help="replay the topic from its first release (default: from now on)")
    ap.add_argument("--json", action="store_true", help="print each envelope as JSON")
    ap.add_argument("--count", type=int, default=0, help="stop after N releases (0: never)")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after S seconds (0: never)")
    args = ap.parse_args(argv)
    try:
        if args.broker:
            bootstrap, conf = args.broker, {}
        else:
            from worker.config.settings import Settings

            bootstrap = bootstrap_from(None)[0]
            conf = librdkafka_security(Settings.from_env())
        check_reachable(*bootstrap_from(args.broker))  # one line, not librdkafka's errors
        printed = 0
        with ConfluentReleaseReader(bootstrap, args.topic, from_beginning=args.from_beginning,
                                    config=conf) as rd:
            for raw, env in rd.records(timeout_s=args.seconds or None):
                note = privacy_note(env) if env is not None else ""
                if args.json:
                    print(raw.decode(errors="replace"), flush=True)
                    if note:
                        print(f"dpstream tail: {note}: {env and env['topology']}/"
                              f"{env and env['shard']} epoch {env and env['epoch']} "
                              f"seq {env and env['seq']}", file=sys.stderr, flush=True)
                else:
                    line = summarize_release(raw)
                    print(f"[{note}] {line}" if note else line, flush=True)
                printed += 1
                if args.count and printed >= args.count:
                    break
    except (KeyError, DPStreamError) as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        return 130
    return 0


# ---------------------------------------------------------------- query


def query_main(argv: Sequence[str] | None = None) -> int:
    """``dpstream query --topic T --shard S [ITEM ...]``: point estimates or heavy hitters."""
    from worker.kafka.release_reader import ReleaseReader
    from worker.release.envelope import not_private_warning

    ap = argparse.ArgumentParser(prog="dpstream query", description=query_main.__doc__)
    add_topic_args(ap)
    ap.add_argument("--shard", required=True, help="shard key, e.g. r7")
    ap.add_argument("--topology", help="only needed if several topologies share the topic")
    ap.add_argument("--json", action="store_true", help="print the answer as JSON")
    ap.add_argument("--wait", type=float, default=10.0,
                    help="seconds to wait for a first release of the shard")
    ap.add_argument("items", nargs="*", help="items to estimate (sketch releases)")
    args = ap.parse_args(argv)

    async def run() -> int:
        async with ReleaseReader(bootstrap, args.topic, client_options=opts) as rd:
            await rd.catch_up()
            deadline = time.monotonic() + args.wait
            while not any(s == args.shard for _, s in rd.shards()):
                if time.monotonic() > deadline:
                    break
                await rd.poll(0.5)
            env = rd.latest(args.topology, args.shard)
            head = {k: env.get(k) for k in ("topology", "shard", "epoch", "seq", "mechanism",
                                            "private", "noise", "eps", "delta", "relation",
                                            "unit", "rounds", "error_bound")}
            if env["payload"].get("kind") == "heavy_hitters" or not args.items:
                answer: Any = (rd.heavy_hitters(args.topology, args.shard)
                               if env["payload"].get("kind") == "heavy_hitters" else [])
                if not answer and env["payload"].get("kind") == "sketch":
                    raise SpecError("this is a sketch release: pass the items to estimate")
            else:
                est = rd.query(args.topology, args.shard, args.items)
                answer = [{"item": i, "estimate": float(e)}
                          for i, e in zip(args.items, est, strict=True)]
        if args.json:
            print(json.dumps({"release": head, "answer": answer}))
        else:
            warning = not_private_warning(head)
            if warning:
                print(f"*** {warning} ***")
            print(f"{head['topology']}/{head['shard']} epoch {head['epoch']} seq {head['seq']} "
                  f"({head['mechanism']}, eps {head['eps']}, delta {head['delta']}, "
                  f"{head['relation']}, unit {head['unit']}; error bound {head['error_bound']})")
            for row in answer:
                print(f"  {row['item']}\t{float(row['estimate']):.1f}")
        return 0

    try:
        bootstrap, opts = bootstrap_from(args.broker)
        check_reachable(bootstrap, opts)  # one line, not the client's errors
        return int(asyncio.run(run()))
    except (KeyError, DPStreamError) as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        return 130
