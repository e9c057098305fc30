"""Demo producer: realistic network-monitoring flow records, generated here.

Everything is synthesised by the project (no data files are read). Each
router ``r0 .. r{R-1}`` (the public shard key) sees flow records whose source
IPv4 (the private item) follows a Zipf law over a per-router pool of
addresses in 10.0.0.0/8, so every router has its own few heavy sources and a
long tail; destinations follow a Zipf law over public addresses; packets per
flow are Pareto (heavy-tailed) and bytes are packets times a packet size.

Two encodings, matching ``worker/ingest/decode.py`` and the topologies:

``json``
    one flow record per message, keyed by router::

        {"router": "r3", "src_ip": "10.4.2.1", "dst_ip": "93.184.216.34",
         "dst_prefix": "93.184.216.0/24", "packets": 3, "bytes": 1800}
``columnar``
    many records of one router per message (``{"v": 1, "shard": "r3",
    "item": [...]}`` with the ``item_field`` column, plus ``"weight"`` =
    packets when ``weight=True``), keyed by router.
``arrow``
    the same grouping as one Apache Arrow IPC stream per message
    (:func:`worker.ingest.arrow.arrow_message`): IPv4 items as a ``uint32``
    column, prefixes as ``utf8``, ``weight`` = packets as ``float64``.

Messages are keyed by router, and partitions are chosen with the default
Kafka partitioner (murmur2 of the key), exactly as ``worker/ingest/routing.py``
expects. Generation is vectorised with numpy; the seed makes a run
reproducible (this is synthetic data, not noise). Standalone (the command line is
:mod:`worker.cli.demo_producer`):
``python -m worker.cli.demo_producer --broker HOST:PORT --topic netflow --rate 5000``.

Examples
--------
>>> gen = NetmonGenerator(routers=4, seed=1)
>>> ev = gen.chunk(5)
>>> sorted(ev)
['bytes', 'dst_ip', 'dst_ip_u32', 'dst_prefix', 'packets', 'router', 'src_ip', 'src_ip_u32']
>>> key, value = json_messages(ev)[0]
>>> key.startswith(b"r"), json.loads(value)["router"] == key.decode()
(True, True)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sketches.errors import SpecError

log = logging.getLogger(__name__)

ENCODINGS = ("json", "columnar", "arrow")
ITEM_FIELDS = ("src_ip", "dst_ip", "dst_prefix")
HEAVY_DESTINATION = 0x5DB8D822  # 93.184.216.34


def ipv4_str(addrs: np.ndarray) -> np.ndarray:
    """Dotted-quad strings (object array) of uint32 addresses.

    >>> ipv4_str(np.array([0x0A000001, 0xC0A80101], dtype=np.uint32)).tolist()
    ['10.0.0.1', '192.168.1.1']
    """
    a = np.asarray(addrs, dtype=np.uint32).ravel()
    cols = [((a >> s) & 255).tolist() for s in (24, 16, 8, 0)]
    out = np.array([f"{w}.{x}.{y}.{z}" for w, x, y, z in zip(*cols, strict=True)], dtype=object)
    return out.reshape(np.shape(addrs))


@dataclass
class NetmonGenerator:
    """Vectorised generator of flow records.

    Parameters
    ----------
    routers
        Number of routers ``r0 .. r{routers-1}``.
    sources_per_router
        Size of each router's source-address pool.
    zipf_a
        Zipf exponent of sources and destinations (> 0; 1.1 - 1.3 is typical).
    destinations
        Size of the destination-address pool (shared by all routers).
    seed
        Makes the stream reproducible.
    """

    routers: int = 8
    sources_per_router: int = 50_000
    zipf_a: float = 1.2
    destinations: int = 20_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.routers < 1:
            raise SpecError(f"NetmonGenerator.routers must be >= 1, got {self.routers}")
        if self.sources_per_router < 1 or self.destinations < 1:
            raise SpecError("NetmonGenerator.sources_per_router and destinations must be >= 1")
        if self.zipf_a <= 0:
            raise SpecError(f"NetmonGenerator.zipf_a must be > 0, got {self.zipf_a}")
        self._rng = np.random.default_rng(self.seed)
        # per-router source pools in 10.0.0.0/8; rank 0 is that router's heaviest source
        self._src_pool = (0x0A000000 + self._rng.integers(
            1, 1 << 24, size=(self.routers, self.sources_per_router))).astype(np.uint32)
        # destinations: public-looking unicast space 1.0.0.0 - 223.255.255.255
        self._dst_pool = self._rng.integers(
            0x01000000, 0xE0000000, size=self.destinations).astype(np.uint32)
        # the heaviest destination is 93.184.216.34 (example.com), so the README's
        # query example (prefix 93.184.216.0/24) has a visible answer
        self._dst_pool[0] = HEAVY_DESTINATION
        # strings are built once per pool; chunks only index them
        self._src_str = ipv4_str(self._src_pool)
        self._dst_str = ipv4_str(self._dst_pool)
        self._dst_pfx = np.array([f"{p}/24" for p in ipv4_str(
            self._dst_pool & np.uint32(0xFFFFFF00)).tolist()], dtype=object)
        self._src_cdf = self._cdf(self.sources_per_router)
        self._dst_cdf = self._cdf(self.destinations)
        self.router_names = np.array([f"r{i}" for i in range(self.routers)], dtype=object)

    def _cdf(self, pool: int) -> np.ndarray:
        w = np.arange(1, pool + 1, dtype=np.float64) ** -self.zipf_a
        c = np.cumsum(w)
        return np.asarray(c / c[-1])

    def _ranks(self, cdf: np.ndarray, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, self._rng.random(n), side="right"), cdf.size - 1)

    def chunk(self, n: int) -> dict[str, np.ndarray]:
        """The next ``n`` flow records as columns (object arrays of str, int64 counts;
        ``src_ip_u32``/``dst_ip_u32``: the same addresses as uint32)."""
        rng = self._rng
        router = rng.integers(0, self.routers, size=n)
        src_rank = self._ranks(self._src_cdf, n)
        src = self._src_str[router, src_rank]
        dst = self._ranks(self._dst_cdf, n)
        packets = 1 + np.floor(rng.pareto(1.5, size=n)).astype(np.int64)
        size = rng.integers(40, 1501, size=n)
        return {
            "router": self.router_names[router],
            "src_ip": src,
            "src_ip_u32": self._src_pool[router, src_rank],
            "dst_ip": self._dst_str[dst],
            "dst_ip_u32": self._dst_pool[dst],
            "dst_prefix": self._dst_pfx[dst],
            "packets": packets,
            "bytes": packets * size,
        }


def json_messages(ev: Mapping[str, np.ndarray]) -> list[tuple[bytes, bytes]]:
    """One ``(key, value)`` JSON message per record, keyed by router."""
    out = []
    for r, s, d, p, pk, b in zip(ev["router"], ev["src_ip"], ev["dst_ip"], ev["dst_prefix"],
                                 ev["packets"].tolist(), ev["bytes"].tolist(), strict=True):
        value = (f'{{"router":"{r}","src_ip":"{s}","dst_ip":"{d}","dst_prefix":"{p}",'
                 f'"packets":{pk},"bytes":{b}}}')
        out.append((r.encode(), value.encode()))
    return out


def columnar_messages(ev: Mapping[str, np.ndarray], item_field: str = "src_ip",
                      weight: bool = False) -> list[tuple[bytes, bytes]]:
    """One columnar message per router present in ``ev`` (records keep their order).

    >>> ev = NetmonGenerator(routers=2, seed=3).chunk(50)
    >>> msgs = columnar_messages(ev)
    >>> sum(len(json.loads(v)["item"]) for _, v in msgs)
    50
    """
    if item_field not in ITEM_FIELDS:
        raise SpecError(f"item_field must be one of {ITEM_FIELDS}, got {item_field!r}")
    routers = ev["router"].astype(str)
    out = []
    for r in np.unique(routers):
        idx = np.flatnonzero(routers == r)
        doc: dict[str, Any] = {"v": 1, "shard": str(r), "item": ev[item_field][idx].tolist()}
        if weight:
            doc["weight"] = ev["packets"][idx].tolist()
        out.append((str(r).encode(), json.dumps(doc, separators=(",", ":")).encode()))
    return out


def arrow_messages(ev: Mapping[str, np.ndarray], item_field: str = "src_ip",
                   weight: bool = False) -> list[tuple[bytes, bytes]]:
    """One ``arrow`` message per router present in ``ev`` (the events of
    :func:`columnar_messages`, same order; IPv4 items as uint32).

    >>> from worker.ingest.arrow import ipv4_text
    >>> import pyarrow as pa
    >>> ev = NetmonGenerator(routers=2, seed=3).chunk(50)
    >>> msgs = arrow_messages(ev)
    >>> sum(pa.ipc.open_stream(v).read_all().num_rows for _, v in msgs)
    50
    """
    from worker.ingest.arrow import arrow_message

    if item_field not in ITEM_FIELDS:
        raise SpecError(f"item_field must be one of {ITEM_FIELDS}, got {item_field!r}")
    column = ev[item_field + "_u32"] if item_field in ("src_ip", "dst_ip") else ev[item_field]
    routers = ev["router"].astype(str)
    out = []
    for r in np.unique(routers):
        idx = np.flatnonzero(routers == r)
        value = arrow_message(str(r), column[idx],
                              weights=ev["packets"][idx] if weight else None)
        out.append((str(r).encode(), value))
    return out


async def send_batched(producer: Any, topic: str, msgs: list[tuple[bytes, bytes]],
                       batches: list[Any] | None = None) -> list[asyncio.Future[Any]]:
    """Send ``(key, value)`` messages with aiokafka's ``send_batch``; return the futures.

    Partitions are chosen exactly as ``send()`` would (the default partitioner:
    murmur2 of the key over the topic's partitions, what ``worker/ingest/routing.py``
    expects); each partition's messages keep their order and fill as few
    batches as the producer's ``max_batch_size`` allows. ``batches``, if given,
    receives every batch builder sent (once its future is done, ``size()`` is the
    batch's size on the wire, compressed).
    """
    from aiokafka.partitioner import DefaultPartitioner

    parts = sorted(await producer.partitions_for(topic))
    by_part: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in msgs:
        by_part.setdefault(DefaultPartitioner()(key, parts, parts), []).append((key, value))
    futures = []
    for p, rows in by_part.items():
        batch = producer.create_batch()
        for key, value in rows:
            if batch.append(key=key, value=value, timestamp=None) is None:
                futures.append(await producer.send_batch(batch, topic, partition=p))
                if batches is not None:
                    batches.append(batch)
                batch = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    raise SpecError(f"demo producer: a {len(value)}-byte message does not fit "
                                    "an empty batch; raise max_batch_size")
        if batch.record_count():
            futures.append(await producer.send_batch(batch, topic, partition=p))
            if batches is not None:
                batches.append(batch)
    return futures


class Pacer:
    """Schedule for a target rate: how long to wait before the next chunk.

    >>> p = Pacer(rate=1000.0, start=0.0)
    >>> p.delay(sent=500, now=0.1)      # 500 events are due at t=0.5
    0.4
    >>> p.delay(sent=500, now=0.9)      # behind schedule: no wait
    0.0
    >>> Pacer(rate=None, start=0.0).delay(sent=10**9, now=0.0)
    0.0
    """

    def __init__(self, rate: float | None, start: float) -> None:
        if rate is not None and rate <= 0:
            raise SpecError(f"rate must be > 0 events/s or None (as fast as possible), got {rate}")
        self.rate, self.start = rate, start

    def delay(self, sent: int, now: float) -> float:
        """Seconds to wait so that ``sent`` events are not ahead of the schedule."""
        if self.rate is None:
            return 0.0
        return round(max(0.0, self.start + sent / self.rate - now), 9)


async def run_producer(
    bootstrap: str,
    topic: str,
    *,
    events: int | None,
    rate: float | None = None,
    encoding: str = "json",
    seed: int = 0,
    routers: int = 8,
    item_field: str = "src_ip",
    weight: bool = False,
    chunk_events: int = 5000,
    client_options: Mapping[str, Any] | None = None,
    batched: bool = True,
    max_bytes: int | None = None,
) -> int:
    """Produce ``events`` flow records to ``topic`` (forever if None); return how many.

    ``rate`` is events per second (None: as fast as possible). The producer
    builds its own batches per partition (:func:`send_batched`, aiokafka's
    ``send_batch``; ``batched=False``: one ``send()`` per message, about 10x
    slower, see benchmarks/bench_produce.py), awaits futures once per chunk, and
    runs without idempotence (Tansu does not support it; no exactly-once is
    claimed). Cancel the task to stop a run with ``events=None``.

    ``max_bytes`` caps the record-batch bytes written (compressed, as the broker
    stores them): the producer stops, with one WARNING, after the chunk that reaches
    it. The demo sets it (``DPSTREAM_DEMO_INPUT_MB``) because the embedded broker
    keeps every record in memory (docs/OPERATIONS.md "Demo memory").
    """
    from aiokafka import AIOKafkaProducer

    if encoding not in ENCODINGS:
        raise SpecError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    gen = NetmonGenerator(routers=routers, seed=seed)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=False, acks=1, linger_ms=10,
        max_batch_size=1024 * 1024, max_request_size=8 * 1024 * 1024,
        **dict(client_options or {}))
    await producer.start()
    sent = written = 0
    pacer = Pacer(rate, time.monotonic())
    step = chunk_events if rate is None else max(1, min(chunk_events, int(rate / 20) or 1))
    try:
        while events is None or sent < events:
            n = step if events is None else min(step, events - sent)
            ev = gen.chunk(n)
            msgs = (json_messages(ev) if encoding == "json"
                     else arrow_messages(ev, item_field, weight) if encoding == "arrow"
                     else columnar_messages(ev, item_field, weight))
            built: list[Any] = []
            if batched:
                futures = await send_batched(producer, topic, msgs, built)
            else:
                futures = [await producer.send(topic, value, key=key) for key, value in msgs]
            await asyncio.gather(*futures)
            sent += n
            written += (sum(b.size() for b in built) if batched
                        else sum(len(k or b"") + len(v) for k, v in msgs))
            if max_bytes is not None and written >= max_bytes:
                log.warning(
                    "demo producer: stopped after %d events, %.0f MB of input the embedded "
                    "broker keeps in memory (its in-memory storage honours neither retention "
                    "nor DeleteRecords); the worker goes on releasing. Set "
                    "DPSTREAM_DEMO_INPUT_MB (0: no cap, memory grows) or lower --rate for a "
                    "longer feed, or use --broker with a Kafka that applies retention",
                    sent, written / 2**20)
                break
            wait = pacer.delay(sent, time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
    finally:
        await producer.stop()
    log.info("demo producer: %d events to %s (%s)", sent, topic, encoding)
    return sent


def demo_producer_options(input_mb: int) -> dict[str, Any]:
    """:func:`run_producer` options of ``dpstream demo``: zstd-compressed batches (the
    embedded broker stores them as sent: 28 MB instead of 135 MB per million JSON
    events, measured) and the input cap ``input_mb`` MiB (0: none).

    >>> demo_producer_options(2)["max_bytes"], demo_producer_options(0)["max_bytes"]
    (2097152, None)
    """
    return {"client_options": {"compression_type": demo_compression()},
            "max_bytes": input_mb * 2**20 or None}


def demo_compression() -> str:
    """The codec of every producer of ``dpstream demo`` (the demo producer's input and
    the worker's releases and dead letters): zstd, or gzip without the zstd library.
    Tansu's in-memory storage keeps batches as sent, so this is what bounds them."""
    from aiokafka.codec import has_zstd

    return "zstd" if has_zstd() else "gzip"


def demo_worker_settings(settings: Any) -> Any:
    """``dpstream demo``'s worker settings: its producer compresses (releases measured
    2.8 and 17.7 kB each uncompressed, 1.3 and 7.8 kB with zstd) unless the operator
    chose a ``compression_type`` (``DPSTREAM_AIOKAFKA_COMPRESSION_TYPE``).

    >>> from worker.config.settings import Settings
    >>> demo_worker_settings(Settings()).aiokafka_config["compression_type"] in ("zstd", "gzip")
    True
    >>> s = Settings(aiokafka_config={"compression_type": "lz4"})
    >>> demo_worker_settings(s).aiokafka_config["compression_type"]
    'lz4'
    """
    import dataclasses

    if "compression_type" in settings.aiokafka_config:
        return settings
    return dataclasses.replace(settings, aiokafka_config={
        **settings.aiokafka_config, "compression_type": demo_compression()})
