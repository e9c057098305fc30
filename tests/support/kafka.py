"""Kafka helpers of the integration tests: topics, producing, reading, release checks.

Plain functions; the fixtures stay in tests/integration/conftest.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


PLUGIN = "tests.integration.exact_mechanism"


# ---- helpers -------------------------------------------------------------
async def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]],
                  partition_by_key: bool = True) -> None:
    """Produce ``(key, value)`` records with the default partitioner (key = shard)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=k, value=v) for k, v in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Declare ``name`` with an explicit partition count (auto-creation would give 4)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def read_all(bootstrap: str, topic: str, until: Callable[[list[Any]], bool],
                   timeout: float, give_up: Callable[[], bool] = lambda: False) -> list[Any]:
    """Read ``topic`` from the beginning until ``until(records)`` holds (poll with deadline).

    ``give_up()`` true (e.g. the worker process died) ends the wait early.
    """
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest")
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for msgs in batches.values():
                out.extend(msgs)
            if until(out) or give_up():
                return out
    finally:
        await consumer.stop()
    return out


def latest_by_shard(msgs: list[Any]) -> dict[str, dict[str, Any]]:
    """Latest release per shard by (epoch, seq)."""
    best: dict[str, dict[str, Any]] = {}
    for m in msgs:
        doc = json.loads(m.value)
        cur = best.get(doc["shard"])
        if cur is None or (doc["epoch"], doc["seq"]) > (cur["epoch"], cur["seq"]):
            best[doc["shard"]] = doc
    return best


def conflicting_ids(msgs: list[Any]) -> list[tuple[Any, ...]]:
    """(topology, shard, epoch, seq) published with two different payloads."""
    seen: dict[tuple[Any, ...], bytes] = {}
    bad = []
    for m in msgs:
        doc = json.loads(m.value)
        rid = (doc["topology"], doc["shard"], doc["epoch"], doc["seq"])
        if rid in seen and seen[rid] != m.value:
            bad.append(rid)
        seen.setdefault(rid, m.value)
    return bad

