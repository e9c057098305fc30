"""``dpstream tail`` and ``dpstream query``: read releases from the command line.

Both read through the reader API (:class:`worker.release.reader.ReleaseView`):
``tail`` with :class:`worker.kafka.release_reader.ConfluentReleaseReader`
(confluent-kafka), ``query`` with :class:`worker.kafka.release_reader.ReleaseReader`
(aiokafka). A release that is not private is marked as such
(:mod:`worker.release.envelope` judges it).

Both (and ``dpstream dashboard``) take their client settings from the same
place as the worker (:func:`read_settings`: ``--config`` / ``DPSTREAM_CONFIG``,
the environment, ``--broker`` on top) and fail in one line, exit code 2, when
the broker is malformed or does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sketches.errors import DPStreamError, SpecError

if TYPE_CHECKING:
    from worker.config.settings import Settings

CHECK_TIMEOUT_S = 10.0
"""How long a read-side command waits for the broker to answer at start."""


def read_settings(broker: str | None, config: str | None = None) -> Settings:
    """The settings of a read-side command: the file (``--config``, else
    ``$DPSTREAM_CONFIG``), the environment, then ``--broker`` on top. Security and
    client settings are kept with ``--broker`` (they were dropped before).

    Raises
    ------
    SpecError
        No broker, or one that is not ``host:port[,host:port]``.
    """
    from worker.config.settings import Settings

    s = Settings.load(config=config)
    if broker:
        s = s.with_broker(broker)
    if not s.broker:
        raise SpecError("no broker address given; pass --broker host:port or set "
                        "DPSTREAM_BROKER (the address the worker publishes to)")
    for part in s.broker.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
            raise SpecError(f"--broker / DPSTREAM_BROKER: {part.strip()!r} is not host:port "
                            "(e.g. kafka-1:9092)")
    return s


async def check_reachable(settings: Settings, role: str) -> None:
    """Raise a one-line error when no broker answers (within :data:`CHECK_TIMEOUT_S`)."""
    import logging

    from worker.kafka.broker_watch import check_broker
    from worker.kafka.client_config import aiokafka_kwargs

    quiet = logging.getLogger("aiokafka")  # its own ERROR lines would repeat ours
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        await check_broker(settings.broker, aiokafka_kwargs(settings, role),
                           timeout_s=CHECK_TIMEOUT_S)
    finally:
        quiet.setLevel(level)


def bootstrap_from(arg: str | None, role: str = "query",
                   config: str | None = None) -> tuple[str, dict[str, Any]]:
    """``(bootstrap, aiokafka options of the role's client)`` of :func:`read_settings`."""
    from worker.kafka.client_config import aiokafka_kwargs

    s = read_settings(arg, config)
    return s.broker, aiokafka_kwargs(s, role)


def add_topic_args(ap: argparse.ArgumentParser) -> None:
    """The ``--topic``, ``--broker`` and ``--config`` options of ``dpstream tail`` and
    ``query``."""
    ap.add_argument("--topic", required=True, help="release topic (the topology's release.topic)")
    ap.add_argument("--broker", help="host:port (default: $DPSTREAM_BROKER); the security "
                    "settings of the environment / --config file apply to it")
    ap.add_argument("--config", help="TOML settings file (default $DPSTREAM_CONFIG)")
    ap.add_argument("--log-level", metavar="LEVEL", help="log level (default "
                    "$DPSTREAM_LOG_LEVEL or INFO; DPSTREAM_LOG_FORMAT=json for JSON lines)")


def _fail(exc: BaseException) -> int:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    if not isinstance(exc, DPStreamError | KeyError):  # a client library's error
        msg = f"{type(exc).__name__}: {exc}"
    print(f"dpstream: {msg}", file=sys.stderr)
    return 2


def _client_errors() -> tuple[type[BaseException], ...]:
    from aiokafka.errors import KafkaError
    from confluent_kafka import KafkaException

    return (KafkaError, KafkaException)


# ---------------------------------------------------------------- tail


def tail_main(argv: Sequence[str] | None = None) -> int:
    """``dpstream tail --topic T [--from-beginning] [--json] [--count N] [--seconds S]``.

    Prints releases as they are published (from now on; ``--from-beginning``
    replays the topic first). A release that is not private (``private:
    false`` or fast/zero noise, :func:`worker.release.envelope.is_private`) is marked
    ``[NOT PRIVATE ...]`` (with ``--json``: on stderr, the JSON line unchanged).
    Reads with confluent-kafka (:class:`worker.kafka.release_reader.ConfluentReleaseReader`).
    """
    from worker.kafka.client_config import check_librdkafka, librdkafka_conf
    from worker.kafka.release_reader import ConfluentReleaseReader
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
        settings = read_settings(args.broker, args.config)
        conf = librdkafka_conf(settings, "tail")
        check_librdkafka(conf)
        if settings.sasl_mechanism != "GSSAPI":  # the check is aiokafka's (gssapi package)
            asyncio.run(check_reachable(settings, "tail"))
        printed = 0
        with ConfluentReleaseReader(settings.broker, args.topic, from_beginning=args.from_beginning,
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
    except (KeyError, DPStreamError, *_client_errors()) as exc:  # type: ignore[misc]
        return _fail(exc)
    except KeyboardInterrupt:
        return 130
    return 0


# ---------------------------------------------------------------- query


def query_main(argv: Sequence[str] | None = None) -> int:
    """``dpstream query --topic T --shard S [ITEM ...]``: point estimates or heavy hitters."""
    from worker.kafka.client_config import aiokafka_kwargs
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
        settings = read_settings(args.broker, args.config)
        await check_reachable(settings, "query")
        bootstrap, opts = settings.broker, aiokafka_kwargs(settings, "query")
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
        return int(asyncio.run(run()))
    except (KeyError, DPStreamError, *_client_errors()) as exc:  # type: ignore[misc]
        return _fail(exc)
    except KeyboardInterrupt:
        return 130
