"""The worker commits its checkpoint-covered offsets to its consumer group.

Restores never read them (they seek to the checkpointed offsets), but lag
monitors and KEDA's Kafka scaler do: with no committed offset KEDA counted the
whole retained log as lag and held the maximum replica count.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest

from tests.support.kafka import create_topic, latest_by_shard, produce, read_all

pytestmark = pytest.mark.broker


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` (confluent-kafka: aiokafka's admin
    OffsetFetch decoding fails against the embedded broker); -1001 = none."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def test_worker_commits_checkpointed_offsets_to_its_group(broker, workers, make_topology,
                                                           unique) -> None:
    topo = make_topology(partitions=2)
    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 2))
    proc = workers.start(topo, group=unique)
    exact: Counter[str] = Counter()
    records = []
    for i in range(200):
        src = f"10.1.{i % 7}.1"
        exact[src] += 1
        records.append((b"r0", json.dumps({"router": "r0", "src": src}).encode()))
    asyncio.run(produce(broker.bootstrap, topic, records))

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return "r0" in latest and latest["r0"]["payload"]["counts"] == dict(exact)

    assert done(asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60))), \
        workers.logs()
    # every record is released, so the checkpoint covers all 200 of r0's partition
    deadline, committed = time.monotonic() + 30, {}
    while time.monotonic() < deadline:
        committed = _committed(broker.bootstrap, unique, topic)
        if sum(committed.values()) >= 200:
            break
        time.sleep(0.5)  # poll interval of a deadline-bounded poll (not a wait for a condition)
    assert sum(committed.values()) == 200, \
        (committed, workers.logs())
    assert proc.poll() is None
    assert workers.terminate(proc) == 0
