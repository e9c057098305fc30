"""Does the embedded broker compact the checkpoint topic? And what does restore cost? (not CI)

The worker declares its checkpoint topic with ``cleanup.policy=compact``
(:mod:`worker.runtime.worker`) and restores by reading that topic from the beginning up
to a fresh marker (:meth:`worker.engine.checkpoint.CheckpointStore.refresh`). If the
broker never compacts, restore reads every checkpoint ever written.

This script starts the embedded broker (Tansu, :class:`worker.kafka.embedded.EmbeddedBroker`)
and, for each count ``N`` in ``--counts``:

1. creates a fresh topic exactly as the worker does (1 partition,
   ``cleanup.policy=compact``; with ``--eager`` also the settings that make
   Kafka compact at once: ``segment.ms=100``, ``min.cleanable.dirty.ratio=0.01``,
   ``delete.retention.ms=100``) and prints the configuration the broker reports;
2. writes ``N`` checkpoints for ONE key through ``CheckpointStore.write``;
3. waits ``--wait`` seconds, then counts the records left from the beginning
   (compaction would leave about one head and one chunk per key);
4. times a restore: a new consumer, ``refresh()`` and ``load()``, as at start-up.

Usage::

    .venv/bin/python scripts/check_compaction.py --counts 100,1000,10000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engine.checkpoint import CheckpointStore, PartitionCheckpoint  # noqa: E402
from worker.kafka.embedded import EmbeddedBroker  # noqa: E402

EAGER = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
         "delete.retention.ms": "100", "max.compaction.lag.ms": "100"}


async def create(bootstrap: str, topic: str, eager: bool) -> dict[str, str]:
    """Create ``topic`` as the worker does; return the configuration the broker reports."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    cfg = {"cleanup.policy": "compact", **(EAGER if eager else {})}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1, topic_configs=cfg)])
        try:
            resp = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, None)])
            entries = resp[0].resources[0][4]
            got = {e[0]: e[1] for e in entries if e[0] in cfg}
            return got or {"describe_configs": f"none of {sorted(cfg)} reported"}
        except Exception as exc:  # the broker may not implement DescribeConfigs
            return {"describe_configs": f"failed: {type(exc).__name__}: {exc}"}
    finally:
        await admin.close()


async def clients(bootstrap: str, topic: str) -> tuple[Any, Any]:
    """Producer and consumer as in ``worker.runtime.worker`` (consumer at the beginning)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                acks="all", linger_ms=2, max_request_size=4 * 1024 * 1024)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await producer.start()
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    return producer, consumer


async def count_records(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """``(records read from the beginning, first offset, end offset)``, read to a marker."""
    producer, consumer = await clients(bootstrap, topic)
    try:
        md = await producer.send_and_wait(topic, key=b"__count__", value=b"x", partition=0)
        n, first, seen = 0, -1, -1
        deadline = time.monotonic() + 300
        while seen < md.offset and time.monotonic() < deadline:
            for recs in (await consumer.getmany(timeout_ms=200, max_records=10_000)).values():
                for r in recs:
                    first = r.offset if first < 0 else first
                    n, seen = n + 1, max(seen, r.offset)
        return n, first, md.offset + 1
    finally:
        await consumer.stop()
        await producer.stop()


async def one(bootstrap: str, n: int, size: int, wait: float, eager: bool) -> dict[str, Any]:
    topic = f"ck-compaction-{n}-{'eager' if eager else 'default'}"
    cfg = await create(bootstrap, topic, eager)
    producer, consumer = await clients(bootstrap, topic)
    store = CheckpointStore(producer, consumer, topic)
    shard = np.random.default_rng(n).bytes(size)  # incompressible: one chunk per checkpoint
    t0 = time.perf_counter()
    for i in range(n):
        await store.write(PartitionCheckpoint("topo", 0, i + 1, [shard], []))
    write_s = time.perf_counter() - t0
    await consumer.stop()
    await producer.stop()
    await asyncio.sleep(wait)
    left, first, end = await count_records(bootstrap, topic)
    producer, consumer = await clients(bootstrap, topic)
    t0 = time.perf_counter()
    reader = CheckpointStore(producer, consumer, topic)
    await reader.refresh(timeout_s=600)
    got = reader.load("topo", 0)
    restore_s = time.perf_counter() - t0
    await consumer.stop()
    await producer.stop()
    assert got is not None and got.next_offset == n, "restore did not return the latest"
    return {"n": n, "config": cfg, "written_records": 2 * n, "left": left, "first": first,
            "end": end, "write_s": write_s, "restore_s": restore_s}


async def run(args: argparse.Namespace) -> None:
    with EmbeddedBroker() as broker:
        print(f"embedded broker {broker.bootstrap} (pid {broker.pid})", flush=True)
        for eager in (False, True) if args.eager else (False,):
            for n in args.counts:
                r = await one(broker.bootstrap, n, args.size, args.wait, eager)
                print(f"N={n:6d} {'eager ' if eager else ''}config={r['config']}: wrote "
                      f"{r['written_records']} checkpoint records in {r['write_s']:.1f} s; "
                      f"after {args.wait:.0f} s {r['left']} records left from offset "
                      f"{r['first']} (end {r['end']}); restore {r['restore_s']:.3f} s",
                      flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="100,1000,10000",
                    help="checkpoints written per run, comma-separated")
    ap.add_argument("--size", type=int, default=4096, help="bytes of shard state per checkpoint")
    ap.add_argument("--wait", type=float, default=5.0, help="seconds to give compaction")
    ap.add_argument("--eager", action="store_true",
                    help="also run with settings that make Kafka compact at once")
    args = ap.parse_args()
    args.counts = [int(c) for c in args.counts.split(",")]
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
