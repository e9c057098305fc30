"""Producer and release-reader throughput on the embedded broker (issue 11).

1. Demo producer: N pre-generated JSON flow records (keyed by router), sent
   with one aiokafka ``send()`` per message vs ``send_batch``
   (:func:`worker.kafka.demo_producer.send_batched`), each to a fresh 4-partition
   topic; msg/s from the first send until every future is acknowledged.
2. Raw consume of the same topic: aiokafka ``getmany`` vs confluent-kafka
   ``consume`` with ``fetch.queue.backoff.ms=10`` (the release reader's
   setting) and with librdkafka's default; msg/s from the first record.

Usage: ``.venv/bin/python benchmarks/bench_produce.py [--n 200000] [--rounds 2]``.
Numbers move 2-3x with the load of a shared machine: compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.kafka.demo_producer import NetmonGenerator, json_messages, send_batched  # noqa: E402
from worker.kafka.embedded import EmbeddedBroker  # noqa: E402


async def _topic(bootstrap: str, name: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 4, 1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, msgs: list[tuple[bytes, bytes]],
                  batched: bool) -> float:
    from aiokafka import AIOKafkaProducer

    await _topic(bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks=1,
                                linger_ms=10, max_batch_size=1024 * 1024,
                                max_request_size=8 * 1024 * 1024)
    await producer.start()
    try:
        t0 = time.perf_counter()
        for i in range(0, len(msgs), 5000):  # the demo producer's chunks
            chunk = msgs[i:i + 5000]
            if batched:
                futures = await send_batched(producer, topic, chunk)
            else:
                futures = [await producer.send(topic, v, key=k) for k, v in chunk]
            await asyncio.gather(*futures)
        return len(msgs) / (time.perf_counter() - t0)
    finally:
        await producer.stop()


async def consume_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                         auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20)
    await c.start()
    got, t0 = 0, None
    try:
        while got < n:
            batches = await c.getmany(timeout_ms=500, max_records=50_000)
            for msgs in batches.values():
                if t0 is None and msgs:
                    t0 = time.perf_counter()
                got += len(msgs)
    finally:
        await c.stop()
    return n / (time.perf_counter() - (t0 or 0))


def consume_confluent(bootstrap: str, topic: str, n: int, backoff_ms: int | None) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
            "enable.auto.commit": False}
    if backoff_ms is not None:
        conf["fetch.queue.backoff.ms"] = backoff_ms
    c = Consumer(conf)
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    got, t0 = 0, None
    try:
        while got < n:
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    if t0 is None:
                        t0 = time.perf_counter()
                    got += 1
    finally:
        c.close()
    return n / (time.perf_counter() - (t0 or 0))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    msgs = json_messages(NetmonGenerator(seed=0).chunk(args.n))
    rows: dict[str, list[float]] = {}
    with EmbeddedBroker() as broker:
        b = broker.bootstrap
        for r in range(args.rounds):
            for batched in (False, True):
                name = "send_batch" if batched else "send() per message"
                topic = f"bench-produce-{r}-{int(batched)}"
                rows.setdefault(f"produce: {name}", []).append(
                    asyncio.run(produce(b, topic, msgs, batched)))
            topic = f"bench-produce-{r}-1"
            rows.setdefault("consume: aiokafka getmany", []).append(
                asyncio.run(consume_aiokafka(b, topic, args.n)))
            rows.setdefault("consume: confluent-kafka, fetch.queue.backoff.ms=10", []).append(
                consume_confluent(b, topic, args.n, 10))
            rows.setdefault("consume: confluent-kafka, librdkafka default back-off", []).append(
                consume_confluent(b, topic, args.n, None))
    print(f"N = {args.n} JSON flow records (~150 bytes), {args.rounds} rounds, msg/s\n")
    print("| path | " + " | ".join(f"round {i + 1}" for i in range(args.rounds)) + " |")
    print("|---|" + "---|" * args.rounds)
    for name, vals in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:,.0f}" for v in vals) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
