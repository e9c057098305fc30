"""Event time on the embedded broker (issue 8 items 3 and 6).

The worker declares the input topic ``LogAppendTime`` and the release topic
``CreateTime`` (checked through describe_configs, which a real Kafka and Tansu
both answer), assigns every record the tick of its record timestamp, and
publishes each release with Kafka timestamp = its ``published_at``.

Nothing here depends on whether the broker *applies* LogAppendTime (Tansu
reports the config but keeps the producer's timestamp, docs/TOPOLOGY.md "Event
time"): the producer stamps send time, which is within the allowed lateness
either way, so every event must be counted exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from tests.support.kafka import conflicting_ids, latest_by_shard, produce, read_all

pytestmark = pytest.mark.broker


async def _timestamp_type(bootstrap: str, topic: str) -> str | None:
    from aiokafka.admin import AIOKafkaAdminClient

    from worker.kafka.admin import describe_timestamp_types

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return (await describe_timestamp_types(admin, [topic]))[topic]
    finally:
        await admin.close()


def test_event_time_worker_counts_every_event_and_stamps_published_at(
        broker, workers, make_topology, unique) -> None:
    path = make_topology(partitions=2, tick_ms=200, every_ticks=2, allowed=["r0", "r1", "r2"])
    path.write_text(path.read_text().replace(
        "  tick_ms: 200\n", "  tick_ms: 200\n  time: event\n  allowed_lateness_ms: 1500\n"))
    proc = workers.start(path, group=unique, args=("--no-faust",))
    exact: dict[str, Counter[str]] = {f"r{i}": Counter() for i in range(3)}
    records = []
    for k in range(600):
        r, src = f"r{k % 3}", f"10.0.0.{k % 7}"
        exact[r][src] += 1
        records.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                   for r, c in exact.items())

    # Produce once the worker owns the partitions (its first releases: closed shard set).
    # Records appended before a worker's first assignment and older than the allowed
    # lateness are late by design (no checkpoint to resume the watermark from).
    asyncio.run(_wait_declared(broker.bootstrap, f"{unique}-out", proc))  # before reading it
    started = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", lambda m: len(m) >= 3,
                                   60, give_up=lambda: proc.poll() is not None))
    assert len(started) >= 3, workers.logs()
    asyncio.run(produce(broker.bootstrap, f"{unique}-in", records))
    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60,
                                give_up=lambda: proc.poll() is not None))
    assert done(msgs), workers.logs()
    assert conflicting_ids(msgs) == []
    for m in msgs:
        doc = json.loads(m.value)
        assert doc["time"] == "event" and doc["private"] is False and doc["noise"] == "zero"
        assert m.timestamp == doc["published_at"]  # item 6: data-independent timestamp
    assert asyncio.run(_timestamp_type(broker.bootstrap, f"{unique}-in")) == "LogAppendTime"
    assert asyncio.run(_timestamp_type(broker.bootstrap, f"{unique}-out")) == "CreateTime"
    assert workers.terminate(proc) == 0, workers.logs()


async def _wait_declared(bootstrap: str, topic: str, proc, timeout: float = 30.0) -> None:
    """Poll (with a deadline) until the worker has declared ``topic`` with its config.

    Reading a topic before that would auto-create it with the broker's defaults.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await _timestamp_type(bootstrap, topic) is not None:
            return
        if proc.poll() is not None:
            raise AssertionError("worker exited before declaring its topics")
        await asyncio.sleep(0.1)
    raise AssertionError(f"worker did not declare {topic} within {timeout}s")
