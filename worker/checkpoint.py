"""Checkpoints: per-(topology, input partition) state on a compacted Kafka topic.

Record format (version 1, little endian) of one checkpoint before chunking::

    b"DPCP" | u16 version | u32 meta_len | meta (JSON) |
    u32 n_shards  | n_shards  x (u64 len | ShardState.to_bytes())
    u32 n_pending | n_pending x (u32 len | release envelope bytes)

``meta`` = ``{"topology", "partition", "next_offset", "done"?, "watermark"?}``: the state covers
every input record with offset < ``next_offset``, and the records whose offsets
are listed in ``done`` (event time: records above ``next_offset`` already applied
or dead-lettered while earlier ones waited for the watermark; absent = empty);
``watermark`` (event time, ms) is where the restored watermark restarts.
``pending`` holds the releases
about to be published, byte for byte (crash consistency: checkpoint first,
then publish; on restore re-publish exactly these bytes).

On the topic the record is zlib-compressed and cut into chunks of at most
``CHUNK_BYTES`` (checkpoints of large sketches exceed broker message limits).
Keys (UTF-8): head ``"<topology>/<partition>"`` and chunks
``"<topology>/<partition>#<generation % 2>#<index>"``; chunks are written and
acknowledged first, the head last. The two alternating chunk slots mean a
crash while writing generation ``g + 1`` never damages generation ``g`` even
after compaction. Head value: ``b"DPCH" | u16 1 | u64 generation |
u32 n_chunks | u64 total_len | u32 crc32``; chunk value: ``b"DPCC" | u64
generation | u32 index | data``.

Examples
--------
>>> cp = PartitionCheckpoint("t", 3, next_offset=42, shards=[b"s1"], pending=[b"{}"])
>>> decode_checkpoint(encode_checkpoint(cp)) == cp
True
>>> [k for k, _ in chunk_records("t", 3, 1, b"x" * 5, chunk_bytes=2)]
[b't/3#1#0', b't/3#1#1', b't/3#1#2', b't/3']
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from sketches.errors import SerializationError

log = logging.getLogger(__name__)

MAGIC, VERSION = b"DPCP", 1
HEAD_MAGIC, CHUNK_MAGIC = b"DPCH", b"DPCC"
CHUNK_BYTES = 512 * 1024
MARKER_KEY = b"__dpstream_marker__"


@dataclass
class PartitionCheckpoint:
    """Everything needed to resume one (topology, partition)."""

    topology: str
    partition: int
    next_offset: int
    shards: list[bytes] = field(default_factory=list)
    pending: list[bytes] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    watermark: int | None = None


def encode_checkpoint(cp: PartitionCheckpoint) -> bytes:
    """Serialize (uncompressed) in the version-1 format above."""
    doc: dict[str, Any] = {"topology": cp.topology, "partition": cp.partition,
                           "next_offset": cp.next_offset}
    if cp.done:
        doc["done"] = list(cp.done)
    if cp.watermark is not None:
        doc["watermark"] = int(cp.watermark)
    meta = json.dumps(doc, separators=(",", ":")).encode()
    parts = [MAGIC, struct.pack("<HI", VERSION, len(meta)), meta, struct.pack("<I", len(cp.shards))]
    for s in cp.shards:
        parts += [struct.pack("<Q", len(s)), s]
    parts.append(struct.pack("<I", len(cp.pending)))
    for p in cp.pending:
        parts += [struct.pack("<I", len(p)), p]
    return b"".join(parts)


def decode_checkpoint(data: bytes) -> PartitionCheckpoint:
    """Inverse of :func:`encode_checkpoint`; raises SerializationError on bad bytes."""
    try:
        if data[:4] != MAGIC:
            raise SerializationError("checkpoint: bad magic; not a dpstream checkpoint")
        version, mlen = struct.unpack_from("<HI", data, 4)
        if version != VERSION:
            raise SerializationError(f"checkpoint: unknown version {version}; "
                                     f"this worker reads version {VERSION}")
        pos = 10
        meta = json.loads(data[pos:pos + mlen])
        pos += mlen
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        shards = []
        for _ in range(n):
            (ln,) = struct.unpack_from("<Q", data, pos)
            shards.append(data[pos + 8:pos + 8 + ln])
            pos += 8 + ln
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        pending = []
        for _ in range(n):
            (ln,) = struct.unpack_from("<I", data, pos)
            pending.append(data[pos + 4:pos + 4 + ln])
            pos += 4 + ln
    except (struct.error, ValueError, KeyError) as exc:
        raise SerializationError(f"checkpoint: truncated or corrupt ({exc})") from None
    if pos != len(data):
        raise SerializationError("checkpoint: trailing bytes; corrupt record")
    return PartitionCheckpoint(meta["topology"], int(meta["partition"]),
                               int(meta["next_offset"]), shards, pending,
                               [int(o) for o in meta.get("done", [])],
                               None if meta.get("watermark") is None
                               else int(meta["watermark"]))


def head_key(topology: str, partition: int) -> bytes:
    """Compaction key of a checkpoint head."""
    return f"{topology}/{partition}".encode()


def chunk_records(topology: str, partition: int, generation: int, blob: bytes,
                  chunk_bytes: int = CHUNK_BYTES) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` records for one compressed checkpoint ``blob``; head last."""
    head = head_key(topology, partition).decode()
    slot = generation % 2
    chunks = [blob[i:i + chunk_bytes] for i in range(0, len(blob), chunk_bytes)] or [b""]
    out = [(f"{head}#{slot}#{i}".encode(),
            CHUNK_MAGIC + struct.pack("<QI", generation, i) + c) for i, c in enumerate(chunks)]
    out.append((head.encode(), HEAD_MAGIC + struct.pack(
        "<HQIQI", 1, generation, len(chunks), len(blob), zlib.crc32(blob))))
    return out


class CheckpointCache:
    """Latest head and chunks per key, fed with every record of the checkpoint topic."""

    def __init__(self) -> None:
        self.heads: dict[bytes, tuple[int, int, int, int]] = {}
        self.chunks: dict[bytes, tuple[int, bytes]] = {}

    def feed(self, key: bytes | None, value: bytes | None) -> None:
        """Consume one record (unknown records are ignored)."""
        if key is None or value is None or key == MARKER_KEY:
            return
        if value[:4] == HEAD_MAGIC:
            _, gen, n, total, crc = struct.unpack_from("<HQIQI", value, 4)
            self.heads[key] = (gen, n, total, crc)
        elif value[:4] == CHUNK_MAGIC:
            gen, _ = struct.unpack_from("<QI", value, 4)
            self.chunks[key] = (gen, value[16:])

    def get(self, topology: str, partition: int) -> tuple[int, PartitionCheckpoint] | None:
        """``(generation, checkpoint)`` of the latest complete checkpoint, or None."""
        key = head_key(topology, partition)
        if key not in self.heads:
            return None
        gen, n, total, crc = self.heads[key]
        parts = []
        for i in range(n):
            got = self.chunks.get(f"{key.decode()}#{gen % 2}#{i}".encode())
            if got is None or got[0] != gen:
                raise SerializationError(f"checkpoint {key.decode()}: chunk {i} of generation "
                                         f"{gen} missing; the checkpoint topic lost data")
            parts.append(got[1])
        blob = b"".join(parts)
        if len(blob) != total or zlib.crc32(blob) != crc:
            raise SerializationError(f"checkpoint {key.decode()}: CRC mismatch; corrupt")
        return gen, decode_checkpoint(zlib.decompress(blob))


class CheckpointStore:
    """Write checkpoints and read them back to the end of the topic.

    Reading to the end does not trust ListOffsets (wrong on some brokers): the
    store writes a marker record, notes its offset from the acknowledgement,
    and reads until it has seen that offset.
    """

    def __init__(self, producer: Any, consumer: Any, topic: str) -> None:
        self.producer, self.consumer, self.topic = producer, consumer, topic
        self.cache = CheckpointCache()
        self.generations: dict[bytes, int] = {}
        self.bytes_written = 0

    async def write(self, cp: PartitionCheckpoint) -> int:
        """Write ``cp`` (compressed, chunked), wait for every ack; return bytes written."""
        key = head_key(cp.topology, cp.partition)
        cached = self.cache.heads.get(key)
        gen = max(self.generations.get(key, -1), cached[0] if cached else -1) + 1
        self.generations[key] = gen
        blob = zlib.compress(encode_checkpoint(cp), 1)
        records = chunk_records(cp.topology, cp.partition, gen, blob)
        futures = [await self.producer.send(self.topic, key=k, value=v, partition=0)
                   for k, v in records[:-1]]
        await asyncio.gather(*futures)
        hk, hv = records[-1]
        await self.producer.send_and_wait(self.topic, key=hk, value=hv, partition=0)
        self.bytes_written += len(blob)
        return len(blob)

    async def refresh(self, timeout_s: float = 60.0) -> None:
        """Read the checkpoint topic up to a freshly written marker."""
        md = await self.producer.send_and_wait(
            self.topic, key=MARKER_KEY, value=uuid.uuid4().bytes, partition=0)
        target = md.offset
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        seen = -1
        while seen < target:
            if loop.time() > deadline:
                raise TimeoutError(f"checkpoint topic {self.topic}: marker at offset {target} "
                                   f"not read back within {timeout_s:.0f}s")
            batches = await self.consumer.getmany(timeout_ms=200, max_records=10_000)
            for records in batches.values():
                for r in records:
                    self.cache.feed(r.key, r.value)
                    seen = max(seen, r.offset)

    def load(self, topology: str, partition: int) -> PartitionCheckpoint | None:
        """Latest checkpoint of ``(topology, partition)`` from the cache (call refresh first)."""
        got = self.cache.get(topology, partition)
        if got is None:
            return None
        self.generations[head_key(topology, partition)] = got[0]
        return got[1]
