"""Release readers over Kafka: the reader API (:class:`worker.release.reader.ReleaseView`)
filled from a release topic.

Two clients, one API (arguments in the order ``topology, shard[, items]``):

- :class:`ReleaseReader` (aiokafka, asyncio): for asyncio code (``dpstream
  query``, the benchmarks);
- :class:`ConfluentReleaseReader` (confluent-kafka/librdkafka, synchronous): for
  scripts, notebooks, and pipelines built on confluent-kafka (Quix Streams,
  Bytewax), and ``dpstream tail``.

Releases are public, so reading them is post-processing and costs no privacy budget.

>>> # needs a running broker, so not run as a doctest:
>>> # with ConfluentReleaseReader("127.0.0.1:9092", "netmon-dst-prefixes") as rd:
>>> #     rd.catch_up()
>>> #     rd.query("netmon-dst-prefixes", "r7", ["93.184.216.0/24"])
>>> #     for env in rd.follow(timeout_s=60): print(env["shard"], env["seq"])

Behaviour of :class:`ConfluentReleaseReader`:

- ``from_beginning=True`` (default for the class) replays the topic, so
  :meth:`latest` knows every shard after :meth:`catch_up`; ``False`` starts at
  the end (only releases published from now on; ``dpstream tail``'s default).
- No consumer group is joined and nothing is committed: partitions are
  ``assign()``-ed after ``list_topics()`` has returned the topic's partitions
  (librdkafka needs the metadata before an assignment of a topic it has not
  seen; a missing topic is an error naming ``--topic``).
- ``fetch.queue.backoff.ms`` is 10 ms (librdkafka's default back-off of 1 s
  between fetches when its queue is "full" makes throughput bimodal).
- Duplicates after a worker crash (identical bytes, same ``(topology, shard,
  epoch, seq)``) never replace a newer release (:class:`ReleaseIndex`);
  :meth:`history` returns each release once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from sketches.errors import SerializationError
from worker.kafka.client_config import librdkafka_conf
from worker.release.envelope import Envelope, parse_envelope
from worker.release.reader import ReleaseIndex

FETCH_QUEUE_BACKOFF_MS = 10


def librdkafka_security(settings: Any, role: str = "reader") -> dict[str, Any]:
    """librdkafka configuration of a reader for ``settings`` (config.settings.Settings):
    :func:`worker.kafka.client_config.librdkafka_conf`."""
    return librdkafka_conf(settings, role)


class ReleaseReader(ReleaseIndex):
    """Tail the release ``topic`` (all partitions, no consumer group) into an index (aiokafka).

    A :class:`~worker.release.reader.ReleaseIndex`, so it answers the reader API
    (``latest(topology, shard)``, ``query(topology, shard, items)``, ...) for what
    it has read. Example (needs a running broker, so it is not run as a doctest)::

        async def main():
            async with ReleaseReader("127.0.0.1:9092", "netmon-dst-prefixes") as rd:
                await rd.catch_up()
                print(rd.query(None, "r7", "93.184.216.0/24"))
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

        self._consumer = AIOKafkaConsumer(**{
            **self._client_options, "bootstrap_servers": self.bootstrap, "group_id": None,
            "enable_auto_commit": False, "auto_offset_reset": "earliest"})
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


class ConfluentReleaseReader:
    """Read one release topic (all partitions) synchronously with confluent-kafka.

    Answers the reader API (:class:`worker.release.reader.ReleaseView`) from
    :attr:`index`, the releases read so far.

    Parameters
    ----------
    bootstrap
        ``host:port[,host:port]`` of the Kafka cluster.
    topic
        The topology's ``release.topic``.
    from_beginning
        Replay the topic (True) or start at its end (False: new releases only).
    config
        Extra librdkafka settings (security, ...); they override the defaults.
    """

    def __init__(self, bootstrap: str, topic: str, *, from_beginning: bool = True,
                 config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap, self.topic, self.from_beginning = bootstrap, topic, from_beginning
        self._config = dict(config or {})
        self.index = ReleaseIndex()
        self._consumer: Any = None
        self._partitions: list[int] = []
        self._eof: set[int] = set()

    # ------------------------------------------------------------- lifecycle
    def _conf(self) -> dict[str, Any]:
        return {  # no group is joined (assign only, no commits); librdkafka wants an id
                "group.id": f"dpstream-reader-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                "auto.offset.reset": "earliest", **self._config,
                "bootstrap.servers": self.bootstrap}  # the reader's own wins

    def _open(self, from_beginning: bool, timeout_s: float = 10.0) -> tuple[Any, list[int]]:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

        consumer = Consumer(self._conf())
        try:
            parts = self._list_partitions(consumer, timeout_s)
            start = OFFSET_BEGINNING if from_beginning else OFFSET_END
            consumer.assign([TopicPartition(self.topic, p, start) for p in parts])
        except BaseException:
            consumer.close()
            raise
        return consumer, parts

    def _list_partitions(self, consumer: Any, timeout_s: float) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while True:
            md = consumer.list_topics(self.topic, timeout=max(0.5, deadline - time.monotonic()))
            tmd = md.topics.get(self.topic)
            if tmd is not None and tmd.error is None and tmd.partitions:
                return sorted(tmd.partitions)
            if time.monotonic() > deadline:
                raise KeyError(f"release topic {self.topic!r} does not exist on "
                               f"{self.bootstrap}; check --topic (the topology's release.topic)")
            time.sleep(0.1)

    def start(self) -> ConfluentReleaseReader:
        """Connect, ``list_topics()``, ``assign()`` every partition."""
        if self._consumer is None:
            self._consumer, self._partitions = self._open(self.from_beginning)
        return self

    def close(self) -> None:
        """Close the consumer (no group to leave, nothing committed)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> ConfluentReleaseReader:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- reading
    def _consume(self, consumer: Any, timeout_s: float, eof: set[int]) -> list[Any]:
        from confluent_kafka import KafkaError

        out = []
        for msg in consumer.consume(num_messages=10_000, timeout=timeout_s):
            err = msg.error()
            if err is None:
                out.append(msg)
                eof.discard(msg.partition())
            elif err.code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
            elif err.fatal():
                raise SerializationError(f"release topic {self.topic!r}: {err}")
        return out

    def poll(self, timeout_s: float = 1.0) -> list[Envelope]:
        """Read what arrives within ``timeout_s``; return the releases that became latest."""
        if self._consumer is None:
            raise RuntimeError("ConfluentReleaseReader is not started; use `with` or start()")
        fresh = []
        for msg in self._consume(self._consumer, timeout_s, self._eof):
            value = msg.value()
            env = self.index.add_envelope(value) if value is not None else None
            if env is not None:
                fresh.append(env)
        return fresh

    def catch_up(self, timeout_s: float = 30.0) -> int:
        """Read until every partition has reported its end; return records read."""
        before = self.index.seen
        deadline = time.monotonic() + timeout_s
        self.start()
        while set(self._partitions) - self._eof and time.monotonic() < deadline:
            self.poll(0.2)
        return self.index.seen - before

    def follow(self, timeout_s: float | None = None,
               poll_s: float = 0.5) -> Iterator[Envelope]:
        """Yield every release that becomes the latest of its shard, as it arrives.

        Runs until ``timeout_s`` (None: forever) or until the caller stops iterating.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.start()
        while deadline is None or time.monotonic() < deadline:
            yield from self.poll(poll_s if deadline is None
                                 else max(0.0, min(poll_s, deadline - time.monotonic())))

    def records(self, timeout_s: float | None = None, poll_s: float = 0.5
                ) -> Iterator[tuple[bytes, Envelope | None]]:
        """Every record value as it arrives, with its parsed envelope (None if unreadable).

        Unlike :meth:`follow`, duplicates and late copies are yielded too (``dpstream tail``).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.start()
        while deadline is None or time.monotonic() < deadline:
            wait = poll_s if deadline is None else max(0.0, min(poll_s,
                                                                 deadline - time.monotonic()))
            for msg in self._consume(self._consumer, wait, self._eof):
                value = msg.value()
                if value is None:
                    continue
                self.index.add_envelope(value)
                try:
                    yield value, parse_envelope(value)
                except SerializationError:
                    yield value, None

    def history(self, since: int | None = None, *, topology: str | None = None,
                shard: str | None = None, timeout_s: float = 60.0) -> list[Envelope]:
        """Every release on the topic (each ``(topology, shard, epoch, seq)`` once).

        ``since``: only releases with ``published_at >= since`` (Unix ms).
        Reads the topic from the beginning to its current end with a separate
        consumer (this reader's position is unchanged), sorted by
        ``(topology, shard, epoch, seq)``.
        """
        consumer, parts = self._open(from_beginning=True)
        eof: set[int] = set()
        found: dict[tuple[str, str, int, int], Envelope] = {}
        deadline = time.monotonic() + timeout_s
        try:
            while set(parts) - eof:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"history of {self.topic!r}: the end was not reached "
                                       f"in {timeout_s} s; raise timeout_s")
                for msg in self._consume(consumer, 0.2, eof):
                    try:
                        env = parse_envelope(msg.value() or b"")
                    except SerializationError:
                        continue
                    if topology is not None and env["topology"] != topology:
                        continue
                    if shard is not None and env["shard"] != shard:
                        continue
                    at = env.get("published_at")
                    if since is not None and not (isinstance(at, int) and at >= since):
                        continue
                    found.setdefault((env["topology"], env["shard"], env["epoch"], env["seq"]),
                                     env)
        finally:
            consumer.close()
        return [found[k] for k in sorted(found)]

    # ------------------------------------------------------------- answers
    def shards(self, topology: str | None = None) -> list[tuple[str, str]]:
        """Every ``(topology, shard)`` with a release read so far (of ``topology`` if given)."""
        return self.index.shards(topology)

    def latest(self, topology: str | None, shard: str) -> Envelope:
        """The current release of ``topology``/``shard`` (KeyError if none was read)."""
        return self.index.latest(topology, shard)

    def query(self, topology: str | None, shard: str, items: Any) -> Any:
        """Point estimates from the latest sketch release (one item: float; a list: array)."""
        out = self.index.query(topology, shard, items)
        return out if isinstance(out, float) else np.asarray(out)

    def heavy_hitters(self, topology: str | None, shard: str) -> list[dict[str, Any]]:
        """The heavy-hitter list of the latest heavy_hitters release."""
        return self.index.heavy_hitters(topology, shard)
