"""Read published releases: the latest release per (topology, shard), point queries.

Releases are public (docs/RELEASES.md, envelope schema versions 1 and 2), so reading
them is post-processing and costs no privacy budget. :class:`ReleaseIndex` is
the pure part (parse, validate, keep the latest); :class:`ReleaseReader` tails
a release topic with aiokafka into an index (asyncio code);
:class:`worker.kafka.release_reader.ConfluentReleaseReader` is the synchronous
confluent-kafka reader for scripts and notebooks; its
:func:`~worker.kafka.release_reader.tail_main` (on
confluent-kafka) and :func:`query_main` are the ``dpstream tail`` /
``dpstream query`` commands.

A release may be seen twice after a worker crash (identical bytes); the index
keeps the highest ``(epoch, seq)`` per ``(topology, shard)``, so duplicates and
late copies never replace a newer release.

Examples
--------
>>> idx = ReleaseIndex()
>>> env = {"schema_version": 1, "topology": "hh", "shard": "r1", "epoch": 3, "seq": 2,
...        "payload": {"kind": "heavy_hitters", "items": [{"item": "10.0.0.1", "estimate": 9.0}]}}
>>> idx.add(json.dumps(env).encode())
True
>>> idx.heavy_hitters("r1")
[{'item': '10.0.0.1', 'estimate': 9.0}]
>>> idx.add(json.dumps(dict(env, seq=1)).encode())    # older: ignored
False
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sketches import query_release
from sketches.errors import SerializationError, SpecError

SCHEMA_VERSION = 2
KNOWN_VERSIONS = (1, 2)
"""Version 2 adds ``private``/``noise`` (a ``fast``/``zero`` release says it is not
private), ``time``, ``covers_shard_presence``, and states the epoch's checkpointed
privacy parameters."""

Envelope = dict[str, Any]


def parse_envelope(raw: bytes) -> Envelope:
    """Decode and validate one release record value (schema versions 1 and 2).

    >>> try:
    ...     parse_envelope(b'{"schema_version": 3}')
    ... except SerializationError as exc:
    ...     print(exc)
    release schema_version 3 is not supported by this reader (knows 1, 2); upgrade dpstream
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SerializationError(f"release is not UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SerializationError("release must be a JSON object (the envelope)")
    version = doc.get("schema_version")
    if version not in KNOWN_VERSIONS:
        raise SerializationError(
            f"release schema_version {version} is not supported by this reader "
            f"(knows {', '.join(map(str, KNOWN_VERSIONS))}); upgrade dpstream")
    for name, kind in (("topology", str), ("shard", str), ("epoch", int), ("seq", int),
                       ("payload", dict)):
        if not isinstance(doc.get(name), kind):
            raise SerializationError(
                f"release field {name!r} is missing or not a {kind.__name__}")
    return doc


def not_private_warning(env: Envelope) -> str | None:
    """The warning to show before a release made without secure noise, else None.

    >>> not_private_warning({"private": False, "noise": "fast", "eps": 1.0})
    'NOT PRIVATE: made with fast noise; the stated eps 1.0 does not hold'
    >>> not_private_warning({"private": True}) is None
    True
    """
    if env.get("private") is False:
        why = env.get("not_private_reason") or f"{env.get('noise')} noise"
        return f"NOT PRIVATE: made with {why}; the stated eps {env.get('eps')} does not hold"
    return None


class ReleaseIndex:
    """The latest release per ``(topology, shard)``, with point queries."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Envelope] = {}
        self.seen = 0
        self.rejected = 0

    def add(self, raw: bytes) -> bool:
        """Index one record value; True if it became the latest of its shard.

        Unreadable records are counted in :attr:`rejected` and skipped.
        """
        return self.add_envelope(raw) is not None

    def add_envelope(self, raw: bytes) -> Envelope | None:
        """As :meth:`add`, returning the envelope when it became the latest, else None."""
        self.seen += 1
        try:
            env = parse_envelope(raw)
        except SerializationError:
            self.rejected += 1
            return None
        key = (env["topology"], env["shard"])
        cur = self._latest.get(key)
        if cur is not None and (cur["epoch"], cur["seq"]) >= (env["epoch"], env["seq"]):
            return None
        self._latest[key] = env
        return env

    def shards(self) -> list[tuple[str, str]]:
        """Every ``(topology, shard)`` with a release, sorted."""
        return sorted(self._latest)

    def latest(self, shard: str, topology: str | None = None) -> Envelope:
        """The current release of ``shard`` (``topology`` needed only if several share it)."""
        matches = [k for k in self._latest if k[1] == shard
                   and (topology is None or k[0] == topology)]
        if not matches:
            known = ", ".join(f"{t}/{s}" for t, s in self.shards()) or "none yet"
            raise KeyError(f"no release for shard {shard!r}"
                           f"{'' if topology is None else f' of topology {topology!r}'}; "
                           f"known: {known}")
        if len(matches) > 1:
            raise SpecError(f"shard {shard!r} has releases of several topologies "
                            f"{sorted(t for t, _ in matches)}; pass topology=")
        return self._latest[matches[0]]

    def estimate(self, shard: str, items: Any, topology: str | None = None) -> Any:
        """Point query on the latest sketch release of ``shard``.

        ``items``: one item (returns a float) or a sequence (returns an array).
        String items are converted to int when the release's ``item_type`` is
        ``int``.
        """
        env = self.latest(shard, topology)
        payload = env["payload"]
        if payload.get("kind") != "sketch":
            raise SpecError(f"release of {env['topology']}/{shard} is a "
                            f"{payload.get('kind')!r} payload, not a sketch; "
                            "use heavy_hitters() for heavy_hitters payloads")
        single = isinstance(items, (str, bytes, int, np.integer))
        seq = [items] if single else list(items)
        if env.get("item_type") == "int":
            seq = [int(x) for x in seq]
        else:
            seq = [str(x) if isinstance(x, (int, np.integer)) else x for x in seq]
        out = np.asarray(query_release(payload, seq), dtype=np.float64)
        return float(out[0]) if single else out

    def heavy_hitters(self, shard: str, topology: str | None = None) -> list[dict[str, Any]]:
        """The heavy-hitter list of the latest heavy_hitters release of ``shard``."""
        env = self.latest(shard, topology)
        payload = env["payload"]
        if payload.get("kind") != "heavy_hitters":
            raise SpecError(f"release of {env['topology']}/{shard} is a "
                            f"{payload.get('kind')!r} payload; use estimate() for sketches")
        return list(payload.get("items") or [])


class ReleaseReader(ReleaseIndex):
    """Tail the release ``topic`` (all partitions, no consumer group) into an index.

    Example (needs a running broker, so it is not run as a doctest)::

        async def main():
            async with ReleaseReader("127.0.0.1:9092", "netmon-dst-prefixes") as rd:
                await rd.catch_up()
                print(rd.estimate("r7", "93.184.216.0/24"))
    """

    def __init__(self, bootstrap: str, topic: str, *,
                 client_options: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.bootstrap, self.topic = bootstrap, topic
        self._client_options = dict(client_options or {})
        self._consumer: Any = None

    async def start(self) -> None:
        """Connect and position at the beginning of every partition of the topic."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest", **self._client_options)
        await self._consumer.start()
        parts = await self._partitions()
        self._consumer.assign([TopicPartition(self.topic, p) for p in parts])
        await self._consumer.seek_to_beginning()

    async def _partitions(self, timeout_s: float = 10.0) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while True:
            parts = self._consumer.partitions_for_topic(self.topic)
            if parts:
                return sorted(parts)
            if time.monotonic() > deadline:
                raise KeyError(f"release topic {self.topic!r} does not exist on "
                               f"{self.bootstrap}; check --topic (the topology's release.topic)")
            await self._consumer._client.force_metadata_update()
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Close the consumer."""
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def __aenter__(self) -> ReleaseReader:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def poll(self, timeout_s: float = 1.0) -> list[Envelope]:
        """Read what arrived within ``timeout_s``; return the releases that became latest."""
        if self._consumer is None:
            raise RuntimeError("ReleaseReader is not started; use `async with` or start()")
        fetched = await self._consumer.getmany(timeout_ms=int(timeout_s * 1000))
        fresh = []
        for records in fetched.values():
            for rec in records:
                env = self.add_envelope(rec.value) if rec.value is not None else None
                if env is not None:
                    fresh.append(env)
        return fresh

    async def catch_up(self, idle_s: float = 0.5, timeout_s: float = 30.0) -> int:
        """Read until a poll of ``idle_s`` brings nothing (or ``timeout_s``); return #records."""
        before = self.seen
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            n = self.seen
            await self.poll(idle_s)
            if self.seen == n:
                break
        return self.seen - before


# ---------------------------------------------------------------- CLI


def bootstrap_from(arg: str | None) -> tuple[str, dict[str, Any]]:
    if arg:
        return arg, {}
    from worker.config.settings import Settings

    s = Settings.from_env()
    if not s.broker:
        raise SpecError("no broker: pass --broker host:port or set DPSTREAM_BROKER")
    return s.broker, s.kafka_security_kwargs()


def add_topic_args(ap: argparse.ArgumentParser) -> None:
    """The ``--topic`` and ``--broker`` options of ``dpstream tail`` and ``query``."""
    ap.add_argument("--topic", required=True, help="release topic (the topology's release.topic)")
    ap.add_argument("--broker", help="host:port (default: $DPSTREAM_BROKER)")


def query_main(argv: Sequence[str] | None = None) -> int:
    """``dpstream query --topic T --shard S [ITEM ...]``: point estimates or heavy hitters."""
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
        bootstrap, opts = bootstrap_from(args.broker)
        async with ReleaseReader(bootstrap, args.topic, client_options=opts) as rd:
            await rd.catch_up()
            deadline = time.monotonic() + args.wait
            while not any(s == args.shard for _, s in rd.shards()):
                if time.monotonic() > deadline:
                    break
                await rd.poll(0.5)
            env = rd.latest(args.shard, args.topology)
            head = {k: env.get(k) for k in ("topology", "shard", "epoch", "seq", "mechanism",
                                            "private", "noise", "eps", "delta", "relation",
                                            "unit", "rounds", "error_bound")}
            if env["payload"].get("kind") == "heavy_hitters" or not args.items:
                answer: Any = (rd.heavy_hitters(args.shard, args.topology)
                               if env["payload"].get("kind") == "heavy_hitters" else [])
                if not answer and env["payload"].get("kind") == "sketch":
                    raise SpecError("this is a sketch release: pass the items to estimate")
            else:
                est = rd.estimate(args.shard, args.items, args.topology)
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

    return _run_cli(run)


def _run_cli(run: Any) -> int:
    try:
        return int(asyncio.run(run()))
    except (KeyError, SpecError, SerializationError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"dpstream: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

