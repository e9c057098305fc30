"""Per-record cost of handing fetched Kafka records to the worker (no broker).

The same fetch-response bytes (N demo-like JSON records of ~130 bytes in
batches of B records, built with aiokafka's batch builder) are read three
ways, alternated R times in one process:

- aiokafka 0.14's ``PartitionRecords`` drained by ``FetchResult.getall`` in
  slices of 50,000 (a ``ConsumerRecord`` per record: what raw ``getmany``
  hands over), and the same plus the worker's former ``(offset, key, value,
  timestamp)`` tuple map;
- :class:`worker.kafka.record_tuples.RecordTuples` drained by the same ``getall``
  (the worker's path since 2026-11-25: one slice per call);
- the public ``getmany`` fallback (``PublicFetchConsumer``, used on any aiokafka but
  the pinned one): aiokafka's ``ConsumerRecord`` path plus
  :func:`worker.kafka.record_tuples.public_tuples` (tuples and timestamp-type notes);
- ``CRC only``: opening every batch and checking its CRC, nothing per record
  (the floor every path shares).

Writes ``results/bench_fetch_records.md``.

Usage::

    .venv/bin/python benchmarks/bench_fetch_records.py [--n 200000] [--batch 500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import random
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka.consumer.fetcher import FetchResult  # noqa: E402
from aiokafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from aiokafka.record.memory_records import MemoryRecords  # noqa: E402
from aiokafka.structs import TopicPartition  # noqa: E402

from worker.kafka import record_tuples  # noqa: E402

TP = TopicPartition("netflow", 0)
FIELDS = operator.attrgetter("offset", "key", "value", "timestamp")


def fetch_bytes(n: int, per_batch: int, seed: int = 1) -> bytes:
    """``n`` demo-like JSON records in v2 batches of ``per_batch``."""
    rnd = random.Random(seed)
    out, off = bytearray(), 0
    while off < n:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)
        m = min(per_batch, n - off)
        for i in range(m):
            v = json.dumps({"router": f"r{rnd.randrange(8)}",
                            "src_ip": f"10.{rnd.randrange(256)}.{rnd.randrange(256)}."
                                      f"{rnd.randrange(256)}",
                            "dst_ip": "93.184.216.34", "bytes": rnd.randrange(1500),
                            "packets": 3}).encode()
            b.append(i, timestamp=1_700_000_000_000 + off + i, key=None, value=v, headers=[])
        buf = bytearray(b.build())
        struct.pack_into(">q", buf, 0, off)
        out += buf
        off += m
    return bytes(out)


class _State:
    paused, position = False, 0

    def consumed_to(self, offset: int) -> None:
        self.position = offset


class _Assignment:
    """The two methods of aiokafka's assignment that ``FetchResult`` calls."""

    active = True

    def __init__(self) -> None:
        self.state = _State()

    def state_value(self, tp: TopicPartition) -> _State:
        return self.state


def drain(records: object) -> list[object]:
    """What ``getmany(max_records=50_000)`` collects from one buffered partition fetch."""
    res = FetchResult(TP, assignment=_Assignment(), partition_records=records, backoff=0)
    out: list[object] = []
    while res.has_more():
        out += res.getall(max_records=50_000)
    return out


def aiokafka_path(data: bytes) -> int:
    return len(drain(record_tuples._ORIGINAL(TP, MemoryRecords(data), None, 0, None, None,
                                             True, 0)))


def aiokafka_map_path(data: bytes) -> int:
    return len(list(map(FIELDS, drain(record_tuples._ORIGINAL(
        TP, MemoryRecords(data), None, 0, None, None, True, 0)))))


def public_path(data: bytes) -> int:
    recs = drain(record_tuples._ORIGINAL(TP, MemoryRecords(data), None, 0, None, None, True, 0))
    return len(record_tuples.public_tuples(TP.topic, recs, record_tuples.TupleMode()))


def tuples_path(data: bytes) -> int:
    return len(drain(record_tuples.RecordTuples(TP, MemoryRecords(data), None, 0,
                                                record_tuples.TupleMode(), True, 0)))


def crc_only(data: bytes) -> int:
    mr, n = MemoryRecords(data), 0
    while mr.has_next():
        batch = mr.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        n += 1
    return n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_fetch_records.md"))
    args = ap.parse_args(argv)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    data = fetch_bytes(args.n, args.batch)
    record_tuples.install()  # getall: one slice for RecordTuples, aiokafka's loop otherwise
    paths = {"aiokafka ConsumerRecord (raw getmany)": aiokafka_path,
             "aiokafka + tuple map (worker before)": aiokafka_map_path,
             "public getmany fallback (other aiokafka versions)": public_path,
             "RecordTuples (worker now)": tuples_path, "CRC only (floor)": crc_only}
    us: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(args.repeat):
        for name, f in paths.items():
            t = time.perf_counter()
            f(data)
            us[name].append((time.perf_counter() - t) / args.n * 1e6)
    base = statistics.median(us["aiokafka ConsumerRecord (raw getmany)"])
    lines = ["# Fetched records to the worker: per-record cost "
             "(`benchmarks/bench_fetch_records.py`)",
             "", f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
             f"before: {load}; {args.n:,} JSON records (~130 bytes) in batches of "
             f"{args.batch}, the same bytes for every path, paths alternated "
             f"{args.repeat} times in one process.", "",
             "| path | us per record (median) | min | max | speed-up vs raw getmany |",
             "|---|---|---|---|---|"]
    for name, v in us.items():
        med = statistics.median(v)
        lines.append(f"| {name} | {med:.3f} | {min(v):.3f} | {max(v):.3f} | "
                     f"{base / med:.1f}x |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
