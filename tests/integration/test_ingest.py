"""BatchIngestor against the real embedded broker (fixtures in conftest.py).

Deterministic tests (no randomness): exact delivery, seek, rebalance callbacks.
Waiting is always polling with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from worker.broker import EmbeddedBroker
from worker.ingest import Batch, BatchIngestor, IngestSettings

pytestmark = pytest.mark.broker


async def until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll ``cond`` every 20 ms until true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def make_topic(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """Create ``topic`` and write ``per_partition`` records ``b"p<p>-<i>"`` to each partition."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                linger_ms=5)
    await producer.start()
    try:
        futs = [await producer.send(topic, f"p{p}-{i}".encode(), partition=p)
                for p in range(partitions) for i in range(per_partition)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


class Recorder:
    """Collects batches and rebalance callbacks of one ingestor."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[int, bytes]]] = {}
        self.batches: list[Batch] = []
        self.assigned: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []
        self.seeks: dict[int, int] = {}
        self.ingestor: BatchIngestor | None = None
        self.in_batch = False
        self.overlap = False  # set if a rebalance callback ran during on_batch

    def count(self) -> int:
        return sum(len(v) for v in self.records.values())

    async def on_batch(self, batch: Batch) -> None:
        self.in_batch = True
        self.batches.append(batch)
        for r in batch.records:
            assert r.value is not None
            self.records.setdefault(batch.partition, []).append((r.offset, r.value))
        await asyncio.sleep(0)  # give rebalance callbacks a chance to interleave
        self.in_batch = False

    async def on_assigned(self, tps: set[TopicPartition]) -> None:
        self.overlap |= self.in_batch
        self.assigned.append(tps)
        assert self.ingestor is not None
        for tp in tps:
            if tp.partition in self.seeks:
                self.ingestor.seek(tp, self.seeks[tp.partition])

    async def on_revoked(self, tps: set[TopicPartition]) -> None:
        self.overlap |= self.in_batch
        self.revoked.append(tps)

    def build(self, bootstrap: str, group: str, topic: str, **kw: Any) -> BatchIngestor:
        self.ingestor = BatchIngestor(
            IngestSettings(bootstrap, group, **kw), [topic], on_batch=self.on_batch,
            on_assigned=self.on_assigned, on_revoked=self.on_revoked)
        return self.ingestor


def test_every_record_once_in_order(broker: EmbeddedBroker, unique: str) -> None:
    """3 partitions x 1500 records, small batches: each delivered once, in offset order."""

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 3, 1500)
        rec = Recorder()
        ing = rec.build(broker.bootstrap, unique, unique, max_batch=400)
        await ing.start()
        try:
            await until(lambda: rec.count() >= 4500, what="4500 records")
        finally:
            await ing.stop()
        assert rec.count() == 4500
        for p in range(3):
            offsets = [o for o, _ in rec.records[p]]
            assert offsets == list(range(1500)), f"partition {p} offsets"
            assert [v for _, v in rec.records[p]] == [f"p{p}-{i}".encode() for i in range(1500)]
        assert all(len(b) <= 400 for b in rec.batches)
        assert all(len({r.partition for r in b.records}) == 1 for b in rec.batches)
        for b in rec.batches:
            assert b.next_offset == b.first_offset + len(b)
        assert ing.records_delivered == 4500
        assert not ing.crashed  # a clean stop, no ConsumerStoppedError in the fetch loop
        # a graceful stop hands the current assignment to on_revoked (checkpoint hook)
        assert rec.revoked[-1] == {TopicPartition(unique, p) for p in range(3)}

    asyncio.run(main())


def test_seek_in_on_assigned(broker: EmbeddedBroker, unique: str) -> None:
    """Seeking partition 0 to offset 120 and partition 1 to 0 in on_assigned is honoured."""

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 2, 200)
        rec = Recorder()
        rec.seeks = {0: 120, 1: 0}
        ing = rec.build(broker.bootstrap, unique, unique)
        await ing.start()
        try:
            await until(lambda: rec.count() >= 80 + 200, what="280 records")
        finally:
            await ing.stop()
        assert [o for o, _ in rec.records[0]] == list(range(120, 200))
        assert [o for o, _ in rec.records[1]] == list(range(200))

    asyncio.run(main())


@pytest.mark.slow
def test_commit_then_new_member_resumes_there(broker: EmbeddedBroker, unique: str) -> None:
    """Offsets committed via commit() are where a later member of the group starts."""

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 1, 100)
        tp = TopicPartition(unique, 0)
        first = Recorder()
        ing = first.build(broker.bootstrap, unique, unique)
        await ing.start()
        try:
            await until(lambda: first.count() >= 100, what="100 records")
            await ing.commit({tp: 60})
        finally:
            await ing.stop()
        second = Recorder()
        ing2 = second.build(broker.bootstrap, unique, unique)
        await ing2.start()
        try:
            await until(lambda: second.count() >= 40, what="40 records")
        finally:
            await ing2.stop()
        assert [o for o, _ in second.records[0]] == list(range(60, 100))

    asyncio.run(main())


@pytest.mark.slow
def test_rebalance_callbacks_when_member_joins_and_leaves(
    broker: EmbeddedBroker, unique: str
) -> None:
    """A second member joins: partitions split, revoke/assign fire; it leaves: all return."""

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 4, 50)
        all_tps = {TopicPartition(unique, p) for p in range(4)}
        a, b = Recorder(), Recorder()
        ing_a = a.build(broker.bootstrap, unique, unique)
        await ing_a.start()
        try:
            await until(lambda: ing_a.assignment == all_tps, what="A owns all partitions")
            await until(lambda: a.count() >= 200, what="A read 200 records")
            ing_b = b.build(broker.bootstrap, unique, unique)
            await ing_b.start()
            try:
                await until(lambda: bool(ing_b.assignment) and bool(ing_a.assignment)
                            and (ing_a.assignment | ing_b.assignment) == all_tps,
                            timeout=45, what="A and B split the partitions")
                assert not ing_a.assignment & ing_b.assignment
                assert a.revoked and a.revoked[0] == all_tps  # A revoked before the split
                assert b.assigned and b.assigned[-1] == ing_b.assignment
            finally:
                await ing_b.stop()
            await until(lambda: ing_a.assignment == all_tps, timeout=45,
                        what="A owns all partitions again after B left")
            assert a.assigned[-1] == all_tps
        finally:
            await ing_a.stop()
        assert not a.overlap and not b.overlap  # callbacks never ran inside on_batch

    asyncio.run(main())


def test_demo_producer_into_ingestor(broker: EmbeddedBroker, unique: str) -> None:
    """run_producer writes exactly N events, keyed so each router lands in its partition;
    a paced run is not faster than its rate."""
    import json

    from worker.demo_producer import run_producer
    from worker.routing import partition_for

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 4, 0)
        t0 = time.monotonic()
        sent = await run_producer(broker.bootstrap, unique, events=3000, rate=20_000.0,
                                  encoding="json", seed=5)
        assert sent == 3000 and time.monotonic() - t0 >= 3000 / 20_000
        sent = await run_producer(broker.bootstrap, unique, events=7000, rate=None,
                                  encoding="columnar", seed=6, chunk_events=1000)
        assert sent == 7000
        rec = Recorder()
        ing = rec.build(broker.bootstrap, unique, unique)
        await ing.start()
        events = 0

        def count() -> int:
            n = 0
            for p, rows in rec.records.items():
                for _, v in rows:
                    doc = json.loads(v)
                    shard = doc.get("router", doc.get("shard"))
                    assert partition_for(shard, 4) == p, (shard, p)
                    n += len(doc["item"]) if "item" in doc else 1
            return n

        try:
            await until(lambda: count() >= 10_000, what="10,000 events")
            events = count()
        finally:
            await ing.stop()
        assert events == 10_000

    asyncio.run(main())


def test_on_batch_error_crashes_the_service(broker: EmbeddedBroker, unique: str) -> None:
    """An exception in on_batch crashes the service (crash_reason set); no more deliveries."""

    async def main() -> None:
        await make_topic(broker.bootstrap, unique, 1, 50)
        calls: list[int] = []

        async def bad(batch: Batch) -> None:
            calls.append(len(batch))
            raise ValueError("decode exploded")

        ing = BatchIngestor(IngestSettings(broker.bootstrap, unique), [unique], on_batch=bad)
        await ing.start()
        try:
            await until(lambda: ing.crashed, what="the service to crash")
        finally:
            await ing.stop()
        assert isinstance(ing.crash_reason, ValueError)
        assert len(calls) == 1 and ing.records_delivered == 0

    asyncio.run(main())


FAUST_HOST = """
import os, sys
import faust
from worker.ingest import BatchIngestor, IngestSettings
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = faust.App(topic + "-faust", broker="kafka://" + bootstrap, store="memory://",
                web_enabled=False, autodiscover=False)
seen = []
async def on_batch(batch):
    seen.extend(batch.values)
    if len(seen) >= n:
        print(f"DELIVERED {len(seen)} {len(set(seen))}", flush=True)
        os._exit(0)
app.add_dependency(BatchIngestor(IngestSettings(bootstrap, topic), [topic], on_batch=on_batch))
faust.Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()
"""


@pytest.mark.slow
def test_runs_as_a_faust_app_dependency(broker: EmbeddedBroker, unique: str) -> None:
    """A Faust app (no agents) started by faust.Worker runs BatchIngestor as a dependency."""
    import subprocess
    import sys
    from pathlib import Path

    asyncio.run(make_topic(broker.bootstrap, unique, 2, 300))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", FAUST_HOST, broker.bootstrap, unique, "600"],
                          capture_output=True, text=True, timeout=120, cwd=root,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    out = proc.stdout + proc.stderr  # Faust redirects stdout into its log
    assert "DELIVERED 600 600" in out, out[-3000:]
