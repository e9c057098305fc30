"""Issue 22 items 3 and 6 against the embedded broker.

- The fast fetch path (:class:`worker.kafka.record_tuples.RecordTuples`) and the public
  ``getmany`` fallback (:class:`worker.kafka.record_tuples.PublicFetchConsumer`, chosen on
  any aiokafka but the pinned one) hand over the same ``(offset, key, value, timestamp)``
  tuples and the same timestamp-type notes from a real broker.
- ``client.id`` from the settings is what the broker sees (the group member's client id
  in DescribeGroups), not aiokafka's ``aiokafka-0.14.0``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.support.kafka import create_topic, produce
from worker.config.settings import Settings
from worker.kafka import record_tuples
from worker.kafka.client_config import aiokafka_kwargs

pytestmark = pytest.mark.broker


async def _read(cls: type, bootstrap: str, topic: str, n: int,
                settings: Settings) -> tuple[list[Any], list[tuple[str, int]]]:
    from aiokafka import TopicPartition

    mode = record_tuples.TupleMode()
    consumer = cls(**aiokafka_kwargs(settings.with_broker(bootstrap), "input", {
        "group_id": None, "enable_auto_commit": False, "auto_offset_reset": "earliest",
        "value_deserializer": mode}))
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            for tp, recs in (await consumer.getmany(timeout_ms=200, max_records=97)).items():
                out.extend((tp.partition, *r) for r in recs)
    finally:
        await consumer.stop()
    return sorted(out), mode.take_timestamp_types()


def test_fast_and_public_paths_hand_over_identical_records(
        broker: Any, unique: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.consumer import fetcher

    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 2))
    records = [(f"k{i % 5}".encode() if i % 3 else None, b'{"i": %d}' % i) for i in range(600)]
    asyncio.run(produce(broker.bootstrap, topic, records))
    s = Settings()
    assert record_tuples.install() is True  # the pinned aiokafka: the fast path
    fast, fast_types = asyncio.run(_read(AIOKafkaConsumer, broker.bootstrap, topic, 600, s))
    # the public path, as on another aiokafka: nothing patched
    monkeypatch.setattr(fetcher, "PartitionRecords", record_tuples._ORIGINAL)
    monkeypatch.setattr(fetcher.FetchResult, "getall", record_tuples._ORIGINAL_GETALL)
    slow, slow_types = asyncio.run(_read(record_tuples.PublicFetchConsumer, broker.bootstrap,
                                         topic, 600, s))
    assert len(fast) == 600 and all(isinstance(r[1], int) for r in fast)
    assert slow == fast
    assert slow_types == fast_types == [(topic, 0)]  # CreateTime batches, noted by both


def test_client_id_reaches_the_broker_connections(broker: Any, unique: str) -> None:
    """The input consumer's connections to the broker send the configured client.id.

    Not observable from the broker side here: the embedded Tansu broker answers
    DescribeGroups with state STABLE and no members (measured), so the request
    header's client id is asserted on the started client's live connections."""
    from aiokafka import AIOKafkaConsumer

    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 1))
    s = Settings(client_id=f"{unique}-{{role}}").with_broker(broker.bootstrap)

    async def join() -> set[str]:
        consumer = AIOKafkaConsumer(topic, **aiokafka_kwargs(s, "input", {
            "group_id": unique, "enable_auto_commit": False}))
        await consumer.start()
        try:
            deadline = time.monotonic() + 30
            while not consumer.assignment() and time.monotonic() < deadline:
                await consumer.getmany(timeout_ms=200)
            assert consumer.assignment()
            conns = list(consumer._client._conns.values())
            assert conns
            return {c._client_id for c in conns}
        finally:
            await consumer.stop()

    assert asyncio.run(join()) == {f"{unique}-input"}
