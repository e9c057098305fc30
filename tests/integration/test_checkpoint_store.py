"""The checkpoint store on the real broker: > 1 MB checkpoints, read to the end via a marker."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.support.kafka import create_topic
from worker.engine.checkpoint import CheckpointStore, PartitionCheckpoint

pytestmark = pytest.mark.broker


async def _store(bootstrap: str, topic: str) -> tuple[CheckpointStore, list]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                acks="all", max_request_size=4 * 1024 * 1024)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    return CheckpointStore(producer, consumer, topic), [consumer, producer]


def test_large_checkpoints_roundtrip_latest_wins(broker, unique) -> None:
    topic = f"{unique}-ck"
    big = np.random.default_rng(0).bytes(2_500_000)  # incompressible: 5 chunks

    async def run() -> None:
        await create_topic(broker.bootstrap, topic, 1)
        w, clients = await _store(broker.bootstrap, topic)
        for gen in range(3):
            await w.write(PartitionCheckpoint("topo", 1, 100 + gen, [big[gen:]], [b"p"]))
        await w.write(PartitionCheckpoint("other", 0, 7, [b"s"], []))
        r, clients2 = await _store(broker.bootstrap, topic)
        await r.refresh(timeout_s=30)
        got = r.load("topo", 1)
        assert got is not None and got.next_offset == 102 and got.shards == [big[2:]]
        assert r.load("other", 0).next_offset == 7  # type: ignore[union-attr]
        assert r.load("topo", 0) is None
        for c in clients + clients2:
            await c.stop()

    asyncio.run(run())


def test_incremental_per_shard_records_on_the_broker(broker, unique) -> None:
    """Head version 2 on the real broker: only changed shards are written, an aborted
    generation's records are tombstoned (value None) and never restored."""
    topic = f"{unique}-ck2"

    async def run() -> None:
        await create_topic(broker.bootstrap, topic, 1)
        w, clients = await _store(broker.bootstrap, topic)
        shards = {f"s{i}": bytes([i]) * 50_000 for i in range(5)}
        full = await w.write(PartitionCheckpoint("topo", 0, 10, list(shards.values()), [],
                                                 names=list(shards), incremental=True,
                                                 held=5))
        one = await w.write(PartitionCheckpoint("topo", 0, 11, [b"new s3"], [b"r"],
                                                names=["s3"], incremental=True, held=5))
        assert one < full / 3
        # an aborted generation: a shard record without its head
        from worker.engine.checkpoint import shard_records
        # (the next generation, 2, in the slot s1 is not committed in, as a crash leaves it)
        for k, v in shard_records("topo", 0, "s1", 1, 2, b"never committed"):
            await clients[1].send_and_wait(topic, key=k, value=v, partition=0)
        r, clients2 = await _store(broker.bootstrap, topic)
        await r.refresh(timeout_s=30)
        got = r.load("topo", 0)
        assert got is not None and got.next_offset == 11 and got.pending == [b"r"]
        assert dict(zip(got.names or [], got.shards, strict=True)) == {**shards, "s3": b"new s3"}
        await r.write(PartitionCheckpoint("topo", 0, 12, [b"s4 again"], [], names=["s4"],
                                          incremental=True, held=5))  # tombstones s1's
        r2, clients3 = await _store(broker.bootstrap, topic)
        await r2.refresh(timeout_s=30)
        got = r2.load("topo", 0)
        assert got is not None and dict(zip(got.names or [], got.shards, strict=True)) == {
            **shards, "s3": b"new s3", "s4": b"s4 again"}
        for c in clients + clients2 + clients3:
            await c.stop()

    asyncio.run(run())
