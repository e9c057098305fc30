"""A corrupt record batch on the input topic does not stop the worker (real broker).

The embedded broker stores a produced batch as it is, CRC included, so a batch
with a broken CRC can be written with a raw ProduceRequest. A plain aiokafka
consumer then raises ``CorruptRecordException`` out of ``getmany`` on every
fetch (the worker used to fail, and fail again after each restart). Now the
worker reads it again a bounded number of times, dead-letters it as
``corrupt_batch`` naming its offsets, and counts every good record before and
after it exactly.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.protocol.produce import ProduceRequest

from tests.support.kafka import create_topic, latest_by_shard, read_all
from tests.support.record_batches import batch
from tests.support.record_batches import corrupt as _corrupt
from worker.ingest.routing import partition_for

pytestmark = pytest.mark.broker


async def _produce(bootstrap: str, topic: str, before: list[bytes], after: list[bytes],
                   partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for v in before:
            await producer.send_and_wait(topic, v, key=b"r0", partition=partition)
        node = producer.client.cluster.leader_for_partition(TopicPartition(topic, partition))
        req = ProduceRequest(required_acks=-1, timeout=5000, transactional_id=None,
                             topics=[(topic, [(partition, _corrupt(batch(0, 5)))])])
        resp = await producer.client.send(node, req)
        assert resp.topics[0][1][0][1] == 0, resp  # stored as it is
        for v in after:
            await producer.send_and_wait(topic, v, key=b"r0", partition=partition)
    finally:
        await producer.stop()


def test_corrupt_batch_is_dead_lettered_and_the_worker_keeps_counting(
        broker, workers, make_topology, unique) -> None:
    topo = make_topology(partitions=2, allowed=["r0"])
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    proc = workers.start(topo, group=unique)
    p = partition_for("r0", 2)
    exact: Counter[str] = Counter()
    values = []
    for i in range(40):
        src = f"10.0.{i % 3}.1"
        exact[src] += 1
        values.append(json.dumps({"router": "r0", "src": src}).encode())
    asyncio.run(_produce(broker.bootstrap, f"{unique}-in", values[:20], values[20:], p))

    dlq = asyncio.run(read_all(broker.bootstrap, f"{unique}-dlq", lambda m: len(m) >= 1, 60,
                               give_up=lambda: proc.poll() is not None))
    assert proc.poll() is None, workers.logs()
    docs = [json.loads(m.value) for m in dlq]
    assert [d["reason"] for d in docs] == ["corrupt_batch"], workers.logs()
    assert docs[0]["offset"] == 20 and "20..24" in docs[0]["detail"]
    assert "CRC" in docs[0]["detail"]

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return "r0" in latest and latest["r0"]["payload"]["counts"] == dict(exact)

    out = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60))
    assert done(out), workers.logs()
    assert proc.poll() is None, "the worker must keep running"
    assert workers.terminate(proc) == 0
