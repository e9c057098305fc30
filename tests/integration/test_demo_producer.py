"""The demo producer against the real embedded broker (fixtures in conftest.py).

Deterministic (seeded events); waiting is polling with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.support.kafka import create_topic, read_all
from worker.ingest.routing import partition_for
from worker.kafka.demo_producer import run_producer
from worker.kafka.embedded import EmbeddedBroker

pytestmark = pytest.mark.broker


def test_demo_producer_keys_each_router_into_its_partition(broker: EmbeddedBroker,
                                                           unique: str) -> None:
    """run_producer writes exactly N events, keyed so each router lands in its partition
    (what worker/ingest/routing.py requires); a paced run is not faster than its rate."""

    def events(msgs: list[Any]) -> int:
        n = 0
        for m in msgs:
            doc = json.loads(m.value)
            shard = doc.get("router", doc.get("shard"))
            assert partition_for(shard, 4) == m.partition, (shard, m.partition)
            n += len(doc["item"]) if "item" in doc else 1
        return n

    async def main() -> None:
        await create_topic(broker.bootstrap, unique, 4)
        t0 = time.monotonic()
        sent = await run_producer(broker.bootstrap, unique, events=3000, rate=20_000.0,
                                  encoding="json", seed=5)
        assert sent == 3000 and time.monotonic() - t0 >= 3000 / 20_000
        sent = await run_producer(broker.bootstrap, unique, events=7000, rate=None,
                                  encoding="columnar", seed=6, chunk_events=1000)
        assert sent == 7000
        msgs = await read_all(broker.bootstrap, unique, lambda m: events(m) >= 10_000, 30.0)
        assert events(msgs) == 10_000

    asyncio.run(main())
