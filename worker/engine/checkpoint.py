"""Checkpoints: per-(topology, input partition) state on a compacted Kafka topic.

Record format (versions 1 and 2, little endian) of one checkpoint before chunking::

    b"DPCP" | u16 version | u32 meta_len | meta (JSON) |
    u32 n_shards  | n_shards  x (u64 len | ShardState.to_bytes())
    u32 n_pending | n_pending x (u32 len | release envelope bytes)

``meta`` = ``{"topology", "partition", "next_offset", "done"?, "watermark"?,
"repartition"?}``: the state covers
every input record with offset < ``next_offset``, and the records whose offsets
are listed in ``done`` (event time: records above ``next_offset`` already applied
or dead-lettered while earlier ones waited for the watermark; absent = empty);
``watermark`` (event time, ms) is where the restored watermark restarts.
``repartition`` (absent in checkpoints written before it: an empty inbox) is what the
partition took from the repartition topic: ``{"next", "seen": {source partition:
highest source offset}, "done"}`` (:mod:`worker.ingest.repartition`).
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

Incremental checkpoints (head version 2, what the engine writes; issue 12). Each
shard's state is its own set of records, key
``"<topology>/<partition>@<len(shard)>:<shard>#<slot>#<index>"`` and value
``b"DPSR" | u64 generation | u32 index | u32 n_chunks | u64 total_len | u32 crc32 |
data`` (:func:`shard_records`: the zlib-compressed ``ShardState.to_bytes()``, chunked).
A checkpoint of generation ``g`` writes only the shards changed since the previous one,
each into the slot (0/1) its committed record is *not* in, then the head (version 2),
whose chunks hold the body above (meta version 2, no shard states, ``held`` = the number
of shards); the head commits them. A shard's committed record is its latest one with a
generation ``<=`` the head's. Records of a generation whose head never arrived (a crash)
are never committed, and the next write tombstones them first, so no later head can
pick them up. Meta version 2 adds ``names``, ``incremental`` and ``held``; version 1
checkpoints (one full snapshot, head version 1) still restore, and any other version is
refused with a :class:`SerializationError` naming the fix.

One writer per partition (issue 19; docs/PRIVACY.md "One writer per release"). The meta
carries ``deployment``, the id of the deployment that wrote it (``DPSTREAM_DEPLOYMENT_ID``;
absent in older checkpoints, which restore as before). Before restoring a partition a
store *claims* it: a record key ``"<topology>/<partition>#owner"``, value ``b"DPOW" |
JSON {"deployment"}``, whose offset on the (single-partition) topic is the owner id. Every
record the store then writes for the partition carries the header ``dpstream-owner`` =
that offset, and after each head the store reads the topic back up to the head: a claim
of the partition with a higher offset before the head means another writer took the
partition over, and :meth:`CheckpointStore.write` raises :class:`Fenced` (the head is
void and its pending releases must never be published). Readers apply the same rule in
log order (:meth:`CheckpointCache.feed`): a record whose owner is older than the latest
claim seen is a fenced writer's: ignored (the key keeps its earlier valid record) and
remembered as *damaged*; the owner rewrites the shards and then tombstones the keys
(:meth:`CheckpointStore.take_damaged`). A damaged key whose valid record was never seen
(compacted away) makes the partition's restore refuse (:attr:`CheckpointCache.uncertain`).
A checkpoint or claim of another deployment is refused (:class:`ForeignCheckpoint`)
unless that deployment is named in ``DPSTREAM_TAKEOVER_FROM``.

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
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from sketches.errors import SerializationError
from worker.errors import Fenced, ForeignCheckpoint

log = logging.getLogger(__name__)

MAGIC, VERSION = b"DPCP", 2
READ_VERSIONS = (1, 2)
HEAD_MAGIC, CHUNK_MAGIC, SHARD_MAGIC = b"DPCH", b"DPCC", b"DPSR"
HEAD_VERSIONS = (1, 2)
"""Head version 1: the chunks hold every shard; 2: shards live in per-shard records."""
CHUNK_BYTES = 512 * 1024
MARKER_KEY = b"__dpstream_marker__"
CLAIM_MAGIC = b"DPOW"
OWNER_HEADER = "dpstream-owner"
"""Kafka record header: the offset of the claim its writer holds (absent: no claim)."""


def check_deployment(found: str | None, ours: str, takeover: tuple[str, ...], topology: str,
                     partition: int, what: str = "checkpoint") -> None:
    """Refuse a ``what`` of another deployment (``found``) unless ``takeover`` names it.

    ``found`` None (a checkpoint written before deployment ids existed) or ``ours`` empty
    (no deployment id configured: unit tests) is accepted.

    >>> check_deployment("blue", "blue", (), "t", 0)
    >>> check_deployment(None, "green", (), "t", 0)
    >>> check_deployment("blue", "green", ("blue",), "t", 0)
    >>> check_deployment("blue", "green", (), "t", 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    worker.errors.ForeignCheckpoint: topology t partition 3: the checkpoint ... 'blue' ...
    """
    if found is None or not ours or found == ours or found in takeover:
        return
    raise ForeignCheckpoint(
        f"topology {topology} partition {partition}: the {what} on the checkpoint topic was "
        f"written by deployment {found!r}, this worker is deployment {ours!r} "
        "(DPSTREAM_DEPLOYMENT_ID, default DPSTREAM_GROUP_ID); restoring it would make two "
        f"writers of the same releases (two noise draws per release). Refused. Fix: stop "
        f"deployment {found!r} and set DPSTREAM_TAKEOVER_FROM={found} on this one (a "
        "blue/green switch: this deployment then fences the other), or give this "
        "deployment its own DPSTREAM_CHECKPOINT_TOPIC or the topology a new `name` to start "
        "fresh state (docs/OPERATIONS.md \"Blue/green\")")


def claim_key(topology: str, partition: int) -> bytes:
    """Compaction key of one ownership claim of a partition: unique per claim, so
    compaction never removes a claim that fences a record (a later claim of the same
    partition would otherwise replace it: found by the second review of issue 19). The
    owner tombstones older claims once no fenced record of the partition needs them
    (:meth:`CheckpointStore.prune_claims`)."""
    return f"{topology}/{partition}#owner#{uuid.uuid4().hex}".encode()


def _prefix(key: bytes) -> str:
    """``"<topology>/<partition>"`` of any checkpoint record key (names have no ``#@``)."""
    text = key.decode()
    cut = min((i for i in (text.find("#"), text.find("@")) if i >= 0), default=len(text))
    return text[:cut]


def _owner(headers: Any) -> int | None:
    for k, v in headers or ():
        if k == OWNER_HEADER:
            return int(v)
    return None


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
    names: list[str] | None = None
    """Shard names of ``shards`` (same order). None: an anonymous full snapshot (version-1
    records). Given: the store writes one record per shard (incremental format)."""
    incremental: bool = False
    """True: ``shards`` holds only the shards changed since this store's previous
    checkpoint of the partition (the others keep their last record); ``held`` counts all.
    A loaded checkpoint is always complete; ``incremental`` then says whether it came from
    per-shard records (False: a version-1 full snapshot, to be rewritten shard by shard)."""
    held: int | None = None
    """Number of shards the partition holds (checked on restore of per-shard records)."""
    deployment: str | None = None
    """Id of the deployment that wrote it (None: written before deployment ids)."""
    repartition: dict[str, Any] | None = None
    """What the partition took from the repartition topic (:mod:`worker.ingest.repartition`):
    ``{"next": offset to resume it at, "seen": {source partition: highest source offset
    taken}, "done": [repartition offsets above "next" already applied]}``; None: nothing
    (a checkpoint written before repartitioning restores with an empty inbox)."""


def encode_checkpoint(cp: PartitionCheckpoint) -> bytes:
    """Serialize (uncompressed) in the version-1 format above."""
    doc: dict[str, Any] = {"topology": cp.topology, "partition": cp.partition,
                           "next_offset": cp.next_offset}
    if cp.done:
        doc["done"] = list(cp.done)
    if cp.watermark is not None:
        doc["watermark"] = int(cp.watermark)
    if cp.names is not None:
        doc["names"] = list(cp.names)
    if cp.incremental:
        doc["incremental"] = True
    if cp.held is not None:
        doc["held"] = int(cp.held)
    if cp.deployment is not None:
        doc["deployment"] = cp.deployment
    if cp.repartition is not None:
        doc["repartition"] = cp.repartition
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
        if version not in READ_VERSIONS:
            raise SerializationError(
                f"checkpoint: unknown version {version}; this worker reads versions "
                f"{', '.join(map(str, READ_VERSIONS))}: run a dpstream release that reads it, "
                "or give the topology a new `name` to start fresh state")
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
                               else int(meta["watermark"]),
                               None if meta.get("names") is None else list(meta["names"]),
                               bool(meta.get("incremental", False)),
                               None if meta.get("held") is None else int(meta["held"]),
                               None if meta.get("deployment") is None
                               else str(meta["deployment"]),
                               _repartition(meta.get("repartition")))


def _repartition(doc: Any) -> dict[str, Any] | None:
    """The checkpoint's ``repartition`` block, normalized (JSON turns int keys into str)."""
    if doc is None:
        return None
    return {"next": int(doc.get("next", 0)),
            "seen": {int(q): int(o) for q, o in dict(doc.get("seen", {})).items()},
            "done": [int(o) for o in doc.get("done", [])]}


def head_key(topology: str, partition: int) -> bytes:
    """Compaction key of a checkpoint head."""
    return f"{topology}/{partition}".encode()


def chunk_records(topology: str, partition: int, generation: int, blob: bytes,
                  chunk_bytes: int = CHUNK_BYTES,
                  head_version: int = 1) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` records for one compressed checkpoint ``blob``; head last."""
    head = head_key(topology, partition).decode()
    slot = generation % 2
    chunks = [blob[i:i + chunk_bytes] for i in range(0, len(blob), chunk_bytes)] or [b""]
    out = [(f"{head}#{slot}#{i}".encode(),
            CHUNK_MAGIC + struct.pack("<QI", generation, i) + c) for i, c in enumerate(chunks)]
    out.append((head.encode(), HEAD_MAGIC + struct.pack(
        "<HQIQI", head_version, generation, len(chunks), len(blob), zlib.crc32(blob))))
    return out


def shard_key_prefix(topology: str, partition: int) -> str:
    """Prefix of the per-shard record keys of a partition (topology names have no ``@``)."""
    return f"{topology}/{partition}@"


def shard_records(topology: str, partition: int, shard: str, slot: int, generation: int,
                  state: bytes,
                  chunk_bytes: int = CHUNK_BYTES) -> list[tuple[bytes, bytes]]:
    """Records of one shard's state (zlib, chunked) in its slot ``slot`` (0 or 1).

    Key ``"<topology>/<partition>@<len(shard)>:<shard>#<slot>#<index>"`` (the length
    prefix keeps any shard name unambiguous); value ``b"DPSR" | u64 generation |
    u32 index | u32 n_chunks | u64 total_len | u32 crc32 | data``.

    >>> [k for k, _ in shard_records("t", 0, "a#1", 1, 7, b"x")]
    [b't/0@3:a#1#1#0']
    """
    blob = zlib.compress(state, 1)
    chunks = [blob[i:i + chunk_bytes] for i in range(0, len(blob), chunk_bytes)] or [b""]
    base = f"{shard_key_prefix(topology, partition)}{len(shard)}:{shard}#{slot}#"
    crc = zlib.crc32(blob)
    return [(f"{base}{i}".encode(),
             SHARD_MAGIC + struct.pack("<QIIQI", generation, i, len(chunks), len(blob), crc) + c)
            for i, c in enumerate(chunks)]


def _parse_shard_key(key: bytes) -> tuple[str, str, int, int] | None:
    """``(partition prefix "<topology>/<p>", shard, slot, index)`` of a shard record key."""
    text = key.decode()
    at = text.find("@")
    colon = text.find(":", at)
    if at < 0 or colon < 0:
        return None
    n = int(text[at + 1:colon])
    shard = text[colon + 1:colon + 1 + n]
    slot, index = text[colon + 1 + n:].lstrip("#").split("#")
    return text[:at], shard, int(slot), int(index)


class CheckpointCache:
    """Latest head and chunks per key, fed with every record of the checkpoint topic."""

    def __init__(self) -> None:
        self.heads: dict[bytes, tuple[int, int, int, int, int]] = {}
        self.chunks: dict[bytes, tuple[int, bytes]] = {}
        # per-shard records: partition prefix -> shard -> slot -> index -> (gen, n, total,
        # crc, data)
        self.shards: dict[str, dict[str, dict[int, dict[int, tuple[int, int, int, int,
                                                                     bytes]]]]] = {}
        self.claims: dict[str, tuple[int, str]] = {}
        """Per partition prefix: the latest claim seen, ``(offset, deployment)``."""
        self.claim_log: dict[str, list[tuple[int, str]]] = {}
        """Per partition prefix: its last 64 claims ``(offset, deployment)`` (racing
        claims: :meth:`CheckpointStore.claim`)."""
        self.claim_keys: dict[str, dict[bytes, int]] = {}
        """Per partition prefix: the keys of its live (not pruned) claims and offsets."""
        self.damaged: dict[str, set[bytes]] = {}
        """Per partition prefix: keys a fenced writer wrote (the owner repairs them)."""
        self.uncertain: dict[str, set[bytes]] = {}
        """Per partition prefix: keys whose latest record is a fenced writer's and whose
        earlier valid record was not seen (compacted away, or there was none): the
        partition's restore is refused until the owner rewrites them."""
        self.fenced_records = 0

    def feed(self, key: bytes | None, value: bytes | None, headers: Any = None,
             offset: int = -1) -> None:
        """Consume one record (unknown records are ignored; a tombstone deletes).

        ``headers`` and ``offset`` (the record's) attribute it: a claim is stored at its
        offset; a record whose ``dpstream-owner`` claim is older than the latest claim
        of its partition comes from a fenced writer: it is not taken (the key keeps its
        previous valid content), and the key is noted in :attr:`damaged` and, when no
        earlier valid record of it was seen (compaction removes it once a later record
        exists), in :attr:`uncertain`."""
        if key is None or key == MARKER_KEY:
            return
        if value is not None and value[:4] == CLAIM_MAGIC:
            doc = json.loads(value[4:])
            claim = (offset, str(doc.get("deployment", "")))
            self.claims[_prefix(key)] = claim
            log_ = self.claim_log.setdefault(_prefix(key), [])
            log_.append(claim)
            del log_[:-64]
            self.claim_keys.setdefault(_prefix(key), {})[key] = offset
            return
        if value is None and b"#owner#" in key:  # an older claim, pruned by its owner
            self.claim_keys.get(_prefix(key), {}).pop(key, None)
            return
        owner = _owner(headers)
        prefix = _prefix(key)
        cur = self.claims.get(prefix)
        # a record after a claim of its partition carries its writer's claim; one without
        # (a pre-claim worker of an older version) after a claim is fenced as well
        if cur is not None and (owner is None or cur[0] > owner) and value is not None \
                and value[:4] in (HEAD_MAGIC, CHUNK_MAGIC, SHARD_MAGIC):
            self._fenced(prefix, key)
            return
        if self.uncertain:  # a valid record settles a key a fenced writer wrote last
            got_prefix = self.uncertain.get(_prefix(key))
            if got_prefix is not None:
                got_prefix.discard(key)
                if not got_prefix:
                    del self.uncertain[_prefix(key)]
        if value is None:  # tombstone of a per-shard record (an aborted generation)
            got = _parse_shard_key(key) if b"@" in key else None
            if got is not None:
                prefix, shard, slot, index = got
                self.shards.get(prefix, {}).get(shard, {}).get(slot, {}).pop(index, None)
            else:
                self.chunks.pop(key, None)
            return
        if value[:4] == HEAD_MAGIC:
            version, gen, n, total, crc = struct.unpack_from("<HQIQI", value, 4)
            self.heads[key] = (gen, n, total, crc, version)
        elif value[:4] == CHUNK_MAGIC:
            gen, _ = struct.unpack_from("<QI", value, 4)
            self.chunks[key] = (gen, value[16:])
        elif value[:4] == SHARD_MAGIC:
            got = _parse_shard_key(key)
            if got is not None:
                prefix, shard, slot, index = got
                gen, _, n, total, crc = struct.unpack_from("<QIIQI", value, 4)
                self.shards.setdefault(prefix, {}).setdefault(shard, {}).setdefault(
                    slot, {})[index] = (gen, n, total, crc, value[32:])

    def _fenced(self, prefix: str, key: bytes) -> None:
        """A fenced writer's record on ``key`` (see :meth:`feed`)."""
        self.fenced_records += 1
        self.damaged.setdefault(prefix, set()).add(key)
        if b"@" in key:
            got = _parse_shard_key(key)
            held = got is not None and got[3] in self.shards.get(prefix, {}).get(
                got[1], {}).get(got[2], {})
        else:
            held = key in (self.chunks if b"#" in key else self.heads)
        if not held:
            self.uncertain.setdefault(prefix, set()).add(key)

    def shard_state(self, prefix: str, shard: str, head_gen: int) -> tuple[int, int, bytes]:
        """``(slot, generation, state)``: the shard's latest record committed by the head
        of generation ``head_gen`` (records of later generations were never committed)."""
        best = self._best(prefix, shard, head_gen)
        if best is None:
            raise SerializationError(f"checkpoint {prefix}: shard {shard!r} has no record "
                                     f"committed by generation {head_gen}; corrupt")
        slot, gen = best
        chunks = self.shards[prefix][shard][slot]
        _, n, total, crc, _ = chunks[0]
        parts = []
        for i in range(n):
            c = chunks.get(i)
            if c is None or c[0] != gen:
                raise SerializationError(f"checkpoint {prefix}: shard {shard!r}: chunk {i} of "
                                         f"generation {gen} missing; the checkpoint topic "
                                         "lost data")
            parts.append(c[4])
        blob = b"".join(parts)
        if len(blob) != total or zlib.crc32(blob) != crc:
            raise SerializationError(f"checkpoint {prefix}: shard {shard!r}: CRC mismatch; "
                                     "corrupt")
        return slot, gen, zlib.decompress(blob)

    def _best(self, prefix: str, shard: str, head_gen: int) -> tuple[int, int] | None:
        """``(slot, generation)`` of the shard's latest record with generation <= head_gen."""
        best: tuple[int, int] | None = None
        for slot, chunks in self.shards.get(prefix, {}).get(shard, {}).items():
            first = chunks.get(0)
            if first is not None and first[0] <= head_gen and (best is None or
                                                                first[0] > best[1]):
                best = (slot, first[0])
        return best

    def committed(self, prefix: str, shard: str, head_gen: int) -> bool:
        """Whether the shard has a record of a generation <= ``head_gen``."""
        return self._best(prefix, shard, head_gen) is not None

    def slots(self, prefix: str, head_gen: int) -> dict[str, int]:
        """Slot of each shard's committed record (the next write goes to the other)."""
        out = {}
        for shard in self.shards.get(prefix, {}):
            best = self._best(prefix, shard, head_gen)
            if best is not None:
                out[shard] = best[0]
        return out

    def uncommitted(self, prefix: str, head_gen: int) -> list[bytes]:
        """Keys of per-shard records of generations after ``head_gen`` (a crash between
        the shard records and the head): never committed, tombstoned before the next head."""
        out = []
        for shard, slots in self.shards.get(prefix, {}).items():
            for slot, chunks in slots.items():
                for index, c in chunks.items():
                    if c[0] > head_gen:
                        out.append(f"{prefix}@{len(shard)}:{shard}#{slot}#{index}".encode())
        return out

    def head_body(self, topology: str, partition: int
                  ) -> tuple[int, int, PartitionCheckpoint] | None:
        """``(generation, head version, body)`` of the latest head, or None; for head
        version 2 the body holds no shard states (cheap: meta and pending releases)."""
        key = head_key(topology, partition)
        lost = self.uncertain.get(key.decode())
        if lost:
            raise SerializationError(
                f"checkpoint {key.decode()}: {len(lost)} records (e.g. "
                f"{sorted(lost)[0].decode()!r}) were last written by a fenced writer (a "
                "worker or deployment that had lost the partition) and the valid records "
                "they replaced are gone from the compacted topic; the owner did not repair "
                "them before it stopped, so the state cannot be restored exactly. Give the "
                "topology a new `name` (or a new DPSTREAM_CHECKPOINT_TOPIC) to start fresh "
                "state")
        if key not in self.heads:
            return None
        gen, n, total, crc, version = self.heads[key]
        if version not in HEAD_VERSIONS:
            raise SerializationError(
                f"checkpoint {key.decode()}: unknown head version {version}; this worker "
                f"reads versions {', '.join(map(str, HEAD_VERSIONS))}: run a dpstream release "
                "that reads it, or give the topology a new `name` to start fresh state")
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
        return gen, version, decode_checkpoint(zlib.decompress(blob))

    def get(self, topology: str, partition: int) -> tuple[int, PartitionCheckpoint] | None:
        """``(generation, checkpoint)`` of the latest complete checkpoint, or None."""
        got = self.head_body(topology, partition)
        if got is None:
            return None
        gen, version, cp = got
        if version == 1:
            return gen, cp
        prefix = head_key(topology, partition).decode()
        names = sorted(self.shards.get(prefix, {}))
        states = []
        for shard in list(names):
            if not self.committed(prefix, shard, gen):
                names.remove(shard)  # created after the head: its first write never committed
                continue
            states.append(self.shard_state(prefix, shard, gen)[2])
        if cp.held is not None and cp.held != len(names):
            raise SerializationError(f"checkpoint {prefix}: generation {gen} holds {cp.held} "
                                     f"shards but {len(names)} shard records were found; the "
                                     "checkpoint topic lost data")
        cp.shards, cp.names, cp.incremental = states, names, True
        return gen, cp


class CheckpointConsumer(Protocol):
    """How a :class:`CheckpointStore` reads its topic (an ``AIOKafkaConsumer`` assigned
    to it in production). Its assigned partitions are paused between read-backs; a
    consumer with nothing assigned (an in-memory log) is never paused."""

    async def getmany(self, *partitions: Any, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[Any, list[Any]]:
        """The records fetched so far, per partition."""
    def assignment(self) -> set[Any]:
        """The partitions assigned to this consumer."""
    def pause(self, *partitions: Any) -> None:
        """Stop fetching ``partitions`` in the background."""
    def resume(self, *partitions: Any) -> None:
        """Fetch ``partitions`` again."""


class CheckpointStore:
    """Write checkpoints and read them back to the end of the topic.

    Reading to the end does not trust ListOffsets (wrong on some brokers): the
    store writes a marker record, notes its offset from the acknowledgement,
    and reads until it has seen that offset.
    """

    def __init__(self, producer: Any, consumer: CheckpointConsumer, topic: str, *,
                 deployment: str = "", takeover: tuple[str, ...] = ()) -> None:
        self.producer, self.consumer, self.topic = producer, consumer, topic
        self.deployment, self.takeover = deployment, tuple(takeover)
        self.owners: dict[str, int] = {}
        """Per partition prefix: the offset of this store's claim (its owner id)."""
        self.verify_s = 0.0
        """Seconds spent reading back after heads (the fencing check), for measurements."""
        self.cache = CheckpointCache()
        self.generations: dict[bytes, int] = {}
        self.slots: dict[str, dict[str, int]] = {}
        """Per partition: each shard's committed slot (learned at load, then kept)."""
        self.stale: dict[str, list[bytes]] = {}
        """Per partition: keys of never-committed shard records, tombstoned at next write."""
        self.bytes_written = 0
        self.read_offset = -1
        """The highest offset of the topic fed to the cache."""
        self.deferred: dict[str, list[bytes]] = {}
        self.deferred_ready: dict[str, list[bytes]] = {}
        """Repair tombstones of keys that held committed records (:meth:`take_damaged`):
        ``deferred`` until a checkpoint that moved those shards is written, then
        ``deferred_ready`` for the checkpoint after it."""

    async def write(self, cp: PartitionCheckpoint) -> int:
        """Write ``cp`` (compressed, chunked), wait for every ack; return bytes written.

        With shard ``names`` (the engine), every given shard state goes to its own
        records, in the slot its committed record is *not* in, then the head (version 2:
        offsets, pending releases, the number of shards held) commits them all; an
        ``incremental`` checkpoint gives only the shards changed since the last one, so
        its bytes grow with the changes, not with the shards held. Without names: a
        version-1 full snapshot.
        """
        key = head_key(cp.topology, cp.partition)
        cached = self.cache.heads.get(key)
        gen = max(self.generations.get(key, -1), cached[0] if cached else -1) + 1
        self.generations[key] = gen
        written = 0
        records: list[tuple[bytes, bytes | None]] = []
        attempted: list[bytes] = []
        prefix = key.decode()
        if cp.names is None:
            blob = zlib.compress(encode_checkpoint(cp), 1)
            records += chunk_records(cp.topology, cp.partition, gen, blob)
        else:
            slots = self.slots.setdefault(prefix, {})
            new_slots = {}
            for i, (shard, state) in enumerate(zip(cp.names, cp.shards, strict=True)):
                new_slots[shard] = 1 - slots.get(shard, 1)
                records += shard_records(cp.topology, cp.partition, shard, new_slots[shard],
                                         gen, state)
                if i % 64 == 63:
                    await asyncio.sleep(0)  # zlib per shard: let the heartbeat run
            attempted = [k for k, _ in records]
            rewritten = set(attempted)
            # aborted generation: tombstones first, never over a record written now
            ready = self.deferred_ready.pop(prefix, [])
            records = [(k, None) for k in self.stale.pop(prefix, []) + ready
                       if k not in rewritten] + records
            written += sum(len(v) for _, v in records if v is not None)
            body = PartitionCheckpoint(cp.topology, cp.partition, cp.next_offset, [],
                                       cp.pending, cp.done, cp.watermark, [], True, cp.held,
                                       cp.deployment, cp.repartition)
            blob = zlib.compress(encode_checkpoint(body), 1)
            records += chunk_records(cp.topology, cp.partition, gen, blob, head_version=2)
        owner = self.owners.get(prefix)
        headers = None if owner is None else [(OWNER_HEADER, str(owner).encode())]
        try:
            futures = [await self.producer.send(self.topic, key=k, value=v, partition=0,
                                                headers=headers)
                       for k, v in records[:-1]]
            await asyncio.gather(*futures)
            hk, hv = records[-1]
            md = await self.producer.send_and_wait(self.topic, key=hk, value=hv, partition=0,
                                                   headers=headers)
        except BaseException:
            # never committed: tombstone them before the next head (which may not rewrite
            # the same shards), so no later generation can pick them up
            tried = set(attempted)
            self.stale.setdefault(prefix, []).extend(
                k for k, v in records[:-1] if v is None or k in tried)
            raise
        moved = self.deferred.pop(prefix, None)
        if moved:
            self.deferred_ready.setdefault(prefix, []).extend(moved)
        if cp.names is not None:
            if not cp.incremental:
                slots.clear()
            slots.update(new_slots)
        written += len(blob)
        self.bytes_written += written
        if owner is not None:
            await self._verify(cp.topology, cp.partition, owner, md.offset)
            if not self.needs_repair(cp.topology, cp.partition):
                await self.prune_claims(cp.topology, cp.partition, owner)
        return written

    async def prune_claims(self, topology: str, partition: int, owner: int) -> int:
        """Tombstone the partition's claims older than ours (``owner``); return how many.

        Safe once no fenced record of the partition awaits repair: a record fenced only
        by an older claim precedes our claim, so we read it before claiming and repaired
        it; a zombie's record written later is fenced by our own claim, which we keep.
        Keeps the compacted topic from growing by one claim per assignment."""
        prefix = head_key(topology, partition).decode()
        live = self.cache.claim_keys.get(prefix, {})
        old = sorted(k for k, off in live.items() if off < owner)
        for key in old:
            await self.producer.send_and_wait(self.topic, key=key, value=None, partition=0)
            live.pop(key, None)
        return len(old)

    async def _verify(self, topology: str, partition: int, owner: int, head: int) -> None:
        """Fencing check: read the topic up to our ``head``; raise :class:`Fenced` if a
        claim of the partition newer than ``owner`` precedes it (the head is then void:
        a restore by the claimant never reads it, so its releases must never go out)."""
        t0 = time.perf_counter()
        await self._read_to(head)
        self.verify_s += time.perf_counter() - t0
        prefix = head_key(topology, partition).decode()
        cur = self.cache.claims.get(prefix)
        if cur is not None and cur[0] != owner:
            self.owners.pop(prefix, None)
            raise Fenced(topology, partition, cur[1], self.deployment, cur[0], owner)

    async def claim(self, topology: str, partition: int) -> None:
        """Take ownership of ``(topology, partition)`` before restoring it (call
        :meth:`refresh` first): refuse another deployment's checkpoint or claim
        (:class:`ForeignCheckpoint`), write a claim, read up to it and check again.

        From then on every record written for the partition carries the claim's offset
        and every head is verified (:meth:`write`); an older owner is fenced."""
        prefix = head_key(topology, partition).decode()
        self._check_foreign(topology, partition)
        checked = self.read_offset
        md = await self.producer.send_and_wait(
            self.topic, key=claim_key(topology, partition),
            value=CLAIM_MAGIC + json.dumps({"deployment": self.deployment}).encode(),
            partition=0)
        await self._read_to(md.offset)
        self.owners[prefix] = md.offset
        self._check_foreign(topology, partition)  # a claim or head after ours
        # a claim of another deployment written between our check and our claim (both
        # deployments started at once): ours fenced it, but refuse too (both stop;
        # neither publishes what the other restored)
        for off, dep in self.cache.claim_log.get(prefix, []):
            if checked < off < md.offset:
                check_deployment(dep, self.deployment, self.takeover, topology, partition,
                                 "ownership claim (written while this worker claimed it)")

    def _check_foreign(self, topology: str, partition: int) -> None:
        prefix = head_key(topology, partition).decode()
        cur = self.cache.claims.get(prefix)
        if cur is not None and cur[0] != self.owners.get(prefix):
            check_deployment(cur[1], self.deployment, self.takeover, topology, partition,
                             "latest ownership claim of the partition")
        got = self.cache.head_body(topology, partition)
        if got is not None:
            check_deployment(got[2].deployment, self.deployment, self.takeover, topology,
                             partition)

    def take_damaged(self, topology: str, partition: int) -> set[str]:
        """Repair after a fenced writer: the shards of the partition it wrote over since
        the last call, for the caller to rewrite in its next checkpoint (call it before
        building that checkpoint). Every other key it touched gets a tombstone: at once
        if no committed record lives there, else (the committed record was kept: the
        cache ignored the fenced one) in the write *after* the rewrite, once that key is
        no longer committed. So no fenced record stays last on a key, and none of this
        store's committed records is ever deleted. :meth:`needs_repair` says whether
        another checkpoint is due for it."""
        prefix = head_key(topology, partition).decode()
        keys = self.cache.damaged.pop(prefix, set())
        names: set[str] = set()
        slots = self.slots.get(prefix, {})
        gen = self.generations.get(head_key(topology, partition))
        for k in sorted(keys):
            if k == head_key(topology, partition):
                continue  # every checkpoint rewrites the head
            got = _parse_shard_key(k) if b"@" in k else None
            if got is not None:
                names.add(got[1])
                committed = slots.get(got[1]) == got[2]
            else:  # a chunk: committed if in the slot of the latest head's generation
                committed = gen is not None and k.startswith(
                    f"{prefix}#{gen % 2}#".encode())
            (self.deferred if committed else self.stale).setdefault(prefix, []).append(k)
        return names

    def needs_repair(self, topology: str, partition: int) -> bool:
        """A fenced writer's records of the partition still need a checkpoint of ours."""
        prefix = head_key(topology, partition).decode()
        return bool(self.cache.damaged.get(prefix) or self.deferred.get(prefix)
                    or self.deferred_ready.get(prefix))

    async def refresh(self, timeout_s: float = 60.0) -> None:
        """Read the checkpoint topic up to a freshly written marker."""
        md = await self.producer.send_and_wait(
            self.topic, key=MARKER_KEY, value=uuid.uuid4().bytes, partition=0)
        await self._read_to(md.offset, timeout_s)

    async def _read_to(self, target: int, timeout_s: float = 60.0) -> None:
        """Feed the cache with every record up to offset ``target`` (written by us)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        # Paused between reads: a fetch sent when the records are already there returns
        # at once, while a background fetch waiting at the broker may not be woken by
        # our write (the embedded broker answers it after fetch_max_wait_ms: ~250 ms per
        # read-back on average, measured; docs/OPERATIONS.md "One writer")
        tps = list(self.consumer.assignment())
        if tps:
            self.consumer.resume(*tps)
        try:
            while self.read_offset < target:
                if loop.time() > deadline:
                    raise TimeoutError(f"checkpoint topic {self.topic}: offset {target} not "
                                       f"read back within {timeout_s:.0f}s")
                batches = await self.consumer.getmany(timeout_ms=200, max_records=10_000)
                for records in batches.values():
                    for r in records:
                        self.cache.feed(r.key, r.value, r.headers, r.offset)
                        self.read_offset = max(self.read_offset, r.offset)
        finally:
            if tps:
                self.consumer.pause(*tps)

    def load(self, topology: str, partition: int) -> PartitionCheckpoint | None:
        """Latest checkpoint of ``(topology, partition)`` from the cache (call refresh first)."""
        got = self.cache.get(topology, partition)
        key = head_key(topology, partition)
        if got is None:  # shard records without any head: a first write that crashed
            self.stale[key.decode()] = self.cache.uncommitted(key.decode(), -1)
            return None
        self.generations[key] = got[0]
        prefix = key.decode()
        self.slots[prefix] = self.cache.slots(prefix, got[0]) if got[1].incremental else {}
        self.stale[prefix] = self.cache.uncommitted(prefix, got[0])
        return got[1]


class MemoryCheckpointStore:
    """Checkpoints kept in this process's memory: the store of ``dpstream demo`` only.

    The demo's embedded broker lives and dies with the worker, so checkpoints on it
    add no durability; but its in-memory storage never compacts, so every release's
    checkpoint stayed there for good (0.25 MB/s under the demo, about 0.9 GB per
    hour: docs/OPERATIONS.md "Demo memory"). Here a write replaces the partition's
    previous checkpoint (:func:`merge_checkpoint`), so memory is bounded by the
    shards held. Restores within the process (a rebalance) read it back; nothing
    survives the process, which is what ``dpstream run`` must never accept: it
    always uses :class:`CheckpointStore`. One writer by construction: nothing to
    claim or fence.

    >>> import asyncio
    >>> store = MemoryCheckpointStore()
    >>> cp = PartitionCheckpoint("t", 0, 5, [b"A", b"B"], names=["a", "b"], incremental=True)
    >>> asyncio.run(store.write(cp))   # bytes of the shard states and pending releases
    2
    >>> _ = asyncio.run(store.write(PartitionCheckpoint("t", 0, 9, [b"B2"], names=["b"],
    ...                                                 incremental=True)))
    >>> got = store.load("t", 0)
    >>> (got.next_offset, got.names, got.shards, store.load("t", 1))
    (9, ['a', 'b'], [b'A', b'B2'], None)
    """

    def __init__(self) -> None:
        self.checkpoints: dict[tuple[str, int], PartitionCheckpoint] = {}
        self.bytes_written = 0

    async def write(self, cp: PartitionCheckpoint) -> int:
        """Merge ``cp`` over the partition's checkpoint; the bytes of ``cp``'s states."""
        key = (cp.topology, cp.partition)
        self.checkpoints[key] = merge_checkpoint(self.checkpoints.get(key), cp)
        n = sum(map(len, cp.shards)) + sum(map(len, cp.pending))
        self.bytes_written += n
        return n

    async def refresh(self) -> None:
        """Nothing to read: every write is already here."""

    def load(self, topology: str, partition: int) -> PartitionCheckpoint | None:
        """The partition's merged checkpoint (None if none was written)."""
        return self.checkpoints.get((topology, partition))

    async def claim(self, topology: str, partition: int) -> None:
        """One writer by construction: nothing to fence."""

    def take_damaged(self, topology: str, partition: int) -> set[str]:
        """No other writer can damage anything."""
        return set()

    def needs_repair(self, topology: str, partition: int) -> bool:
        """No other writer: never."""
        return False


def merge_checkpoint(prev: PartitionCheckpoint | None,
                     cp: PartitionCheckpoint) -> PartitionCheckpoint:
    """The complete checkpoint after writing ``cp`` over ``prev`` (what a restore reads).

    An incremental ``cp`` replaces the states of the shards it names and keeps the
    others of ``prev``; anything else replaces ``prev`` whole. In-memory stores use it;
    :class:`CheckpointStore` gets the same result from its per-shard records.

    >>> a = PartitionCheckpoint("t", 0, 5, [b"A", b"B"], names=["a", "b"], incremental=True)
    >>> b = PartitionCheckpoint("t", 0, 9, [b"B2"], names=["b"], incremental=True, held=2)
    >>> m = merge_checkpoint(a, b)
    >>> (m.next_offset, m.names, m.shards)
    (9, ['a', 'b'], [b'A', b'B2'])
    """
    if not cp.incremental or cp.names is None:
        return cp
    states = {} if prev is None or prev.names is None else dict(
        zip(prev.names, prev.shards, strict=True))
    states.update(zip(cp.names, cp.shards, strict=True))
    names = sorted(states)
    return PartitionCheckpoint(cp.topology, cp.partition, cp.next_offset,
                               [states[n] for n in names], list(cp.pending), list(cp.done),
                               cp.watermark, names, True, len(names), cp.deployment,
                               cp.repartition)
