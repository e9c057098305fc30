"""The checkpoint store on the real broker: > 1 MB checkpoints, read to the end via a marker."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.integration.conftest import create_topic
from worker.checkpoint import CheckpointStore, PartitionCheckpoint

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
