"""Repartition: records not on their shard's partition are forwarded, counted once there.

State is kept per ``(topology, partition, shard)`` and a shard belongs to the
partition ``partition_for(shard, n)`` gives (murmur2, :mod:`worker.ingest.routing`).
Producers that place records otherwise (librdkafka's default ``consistent_random``
is CRC32 of the key; unkeyed records go anywhere) used to lose them as
``wrong_partition`` dead letters. Now the worker that reads such a record on input
partition ``q`` *forwards* it, unchanged, to partition ``partition_for(shard, n)``
of the internal topic :func:`repartition_topic` (``<input>.dpstream-repartition``,
``n`` partitions, created by the worker), keyed by the shard. Partition ``p`` of the
input and of the repartition topic are owned by the same worker (co-partitioned:
the range assignor, or ``assignment=static``), and the forwarded record is applied
to the state of ``(topology, p)``, where every other event of its shard is.

A forwarded record's value is a :func:`frame`: the source ``(partition, offset)``,
its original Kafka timestamp and timestamp type, and the topology it is for,
in front of the original value (the worker's fetch path hands over
``(offset, key, value, timestamp)`` tuples only, without headers:
:mod:`worker.kafka.record_tuples`; headers would cost the generic record path).

Exactly once with respect to counting (:class:`Inbox`): the forwards of one
source partition reach a target partition in source-offset order (one
producer, one partition, one request in flight per partition), so the receiver
keeps, per source partition, the highest source offset it has taken and skips
anything at or below it. Each forward also names the previous source offset its
sender forwarded to the same partition: a forward whose predecessor was never
taken (its delivery failed while a later one succeeded) is skipped too, and a
sender whose forwards failed never checkpoints past them (it restores the
source partition and forwards from there again, starting a new chain). The
forwarding side flushes its forwards before it checkpoints the source offset; a
crash in between re-forwards from the checkpoint, and the receiver skips the
copies. The receiver checkpoints the
inbox (per source partition, the highest offset taken below its resume offset
on the repartition topic) together with the shard states.

Event time: a forwarded record keeps its source timestamp (its tick). It is
forwarded once the source partition's watermark has reached its tick (it was
on time at the source), and every forwarding worker sends *marks*
(:func:`mark_frame`) with its source partition's watermark to the other
partitions of the repartition topic after its forwards; a receiving partition
closes a tick only when every other source partition's mark has passed it
(:meth:`Inbox.marks_floor`), so the hop never makes a record late.

Examples
--------
>>> raw = frame("netmon", 3, 1234, 1700000000123, 1, b'{"router": "r1"}')
>>> f = unframe(raw)
>>> (f.topology, f.partition, f.offset, f.timestamp, f.timestamp_type, f.value)
('netmon', 3, 1234, 1700000000123, 1, b'{"router": "r1"}')
>>> inbox = Inbox()
>>> [inbox.accept(r, 3, o) for r, o in [(0, 10), (1, 11), (2, 10), (3, 12)]]
[True, True, False, True]
>>> inbox.checkpoint_seen(resume=2)    # taken below repartition offset 2
{3: 11}
>>> repartition_topic("flows")
'flows.dpstream-repartition'
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SUFFIX = ".dpstream-repartition"
"""Name of the internal repartition topic: the input topic's name plus this."""

MAGIC = b"DPRF"
VERSION = 1
KIND_EVENT, KIND_MARK = 0, 1
_HEAD = struct.Struct("<4sBBiqqqbH")
# magic, version, kind, source partition, source offset, previous source offset sent to this
# partition by the same sender (-1: the sender's first), timestamp, timestamp type, name length


def repartition_topic(input_topic: str) -> str:
    """The internal topic records of ``input_topic`` are forwarded to."""
    return input_topic + SUFFIX


def producer_hint(topic: str, partitions: int) -> str:
    """The one log line per input topic that names the producer setting avoiding the hop."""
    return (f"input topic {topic!r}: records are arriving on partitions other than their "
            f"shard's (murmur2 of the shard key modulo {partitions}); they are forwarded "
            f"through {repartition_topic(topic)!r} and counted once there (an extra hop: "
            "more broker traffic and latency). To avoid it, key records by the shard and "
            "use the murmur2 partitioner: librdkafka-based clients (confluent-kafka, "
            "kcat, node-rdkafka, ...) `partitioner=murmur2_random`; the Java client, "
            "aiokafka and kafka-python do this by default "
            "(dpstream_repartition_forwarded_total counts the forwarded records)")


@dataclass(frozen=True)
class Forward:
    """One framed record of the repartition topic."""

    kind: int
    topology: str
    partition: int
    """Source input partition."""
    offset: int
    """Source offset (-1 for a mark)."""
    prev: int
    """The source offset the same sender forwarded to this partition before (-1: its
    first since it restored the source partition): a gap shows a lost forward."""
    timestamp: int
    """Source record timestamp (ms); a mark: the source partition's watermark."""
    timestamp_type: int
    value: bytes | None


def frame(topology: str, partition: int, offset: int, timestamp: int, timestamp_type: int,
          value: bytes | None, prev: int = -1) -> bytes:
    """The repartition-topic value of a forwarded record (``value`` None: a null value)."""
    name = topology.encode()
    body = b"" if value is None else value
    flag = 0 if value is None else 1
    return _HEAD.pack(MAGIC, VERSION, KIND_EVENT | (flag << 4), int(partition), int(offset),
                      int(prev), int(timestamp), int(timestamp_type), len(name)) + name + body


def mark_frame(topology: str, partition: int, watermark_ms: int) -> bytes:
    """A mark: source ``partition`` of ``topology`` has forwarded everything before
    ``watermark_ms`` (event time; see the module docstring)."""
    name = topology.encode()
    return _HEAD.pack(MAGIC, VERSION, KIND_MARK, int(partition), -1, -1, int(watermark_ms),
                      -1, len(name)) + name


def unframe(raw: bytes | None) -> Forward | None:
    """Parse a repartition-topic value; None if it is not a frame of this version."""
    if raw is None or len(raw) < _HEAD.size:
        return None
    try:
        magic, version, kind, part, off, prev, ts, tst, n = _HEAD.unpack_from(raw)
    except struct.error:
        return None
    if magic != MAGIC or version != VERSION or len(raw) < _HEAD.size + n:
        return None
    try:
        name = raw[_HEAD.size:_HEAD.size + n].decode()
    except UnicodeDecodeError:
        return None
    has_value, kind = kind >> 4, kind & 0x0F
    value = raw[_HEAD.size + n:] if has_value else None
    return Forward(kind, name, part, off, prev, ts, tst, value)


class Inbox:
    """What one ``(topology, partition)`` has taken from the repartition topic.

    :meth:`accept` is the deduplication rule: a forward of source ``(q, o)`` is taken
    only if ``o`` is above every offset of ``q`` taken so far. :meth:`checkpoint_seen`
    is what a checkpoint resuming the repartition topic at ``resume`` keeps: the
    highest source offsets taken from records below ``resume`` (those above it are
    read again after a restore and taken again, unless they are in the state already:
    event time's ``done`` offsets).
    """

    def __init__(self, seen: dict[int, int] | None = None, next_offset: int = 0) -> None:
        self._base: dict[int, int] = dict(seen or {})
        self.seen: dict[int, int] = dict(self._base)
        self._log: list[tuple[int, int, int]] = []  # (repartition offset, q, o) since base
        self.next_offset = int(next_offset)
        """Next offset to read from the repartition topic partition."""
        self.covered_offset = int(next_offset)
        """The repartition offset the last checkpoint resumes from."""
        self.marks: dict[int, int] = {}
        """Event time: source partition -> the highest watermark it marked (not
        checkpointed: marks are sent again every round)."""

    def accept(self, r_offset: int, source_partition: int, source_offset: int,
               prev: int = -1) -> bool:
        """True if the forward is new (take it); False if it is a copy (skip it) or follows
        a lost forward of its sender (``prev`` above everything taken: the sender's
        flush failed, it restores the source partition and forwards both again)."""
        top = self.seen.get(source_partition, -1)
        if source_offset <= top or prev > top:
            return False
        self.seen[source_partition] = source_offset
        self._log.append((r_offset, source_partition, source_offset))
        return True

    def mark(self, source_partition: int, watermark_ms: int) -> None:
        """Event time: source partition ``q`` has forwarded everything before ``watermark_ms``."""
        if watermark_ms > self.marks.get(source_partition, -(1 << 62)):
            self.marks[source_partition] = watermark_ms

    def marks_floor(self, partition: int, partitions: int) -> int | None:
        """The lowest mark over every other source partition; None until all have marked."""
        others = [q for q in range(partitions) if q != partition]
        if any(q not in self.marks for q in others):
            return None if others else 1 << 62
        return min((self.marks[q] for q in others), default=1 << 62)

    def checkpoint_seen(self, resume: int) -> dict[int, int]:
        """Per source partition, the highest offset taken from repartition offsets below
        ``resume`` (folds them into the base; the rest are read again after a restore)."""
        keep = []
        for r, q, o in self._log:
            if r < resume:
                if o > self._base.get(q, -1):
                    self._base[q] = o
            else:
                keep.append((r, q, o))
        self._log = keep
        return dict(self._base)
