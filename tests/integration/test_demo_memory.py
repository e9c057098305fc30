"""Issue 23: the demo runs in bounded memory on the embedded broker.

Tansu's in-memory storage keeps every record (it accepts ``retention.ms`` but
never applies it, and DeleteRecords is not implemented: docs/OPERATIONS.md
"Demo memory"), so the demo producer bounds what it writes: zstd-compressed
batches and a byte cap, after which it stops by itself with one WARNING.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.kafka import create_topic, read_all
from worker.kafka.demo_producer import demo_producer_options, run_producer
from worker.kafka.embedded import EmbeddedBroker

pytestmark = pytest.mark.broker


def test_demo_producer_stops_at_its_input_cap_with_compressed_batches(
        broker: EmbeddedBroker, unique: str, caplog) -> None:
    cap_mib = 1

    async def main() -> tuple[int, int]:
        await create_topic(broker.bootstrap, unique, 4)
        # events=None: forever, unless the cap stops it (the deadline fails the test)
        sent = await asyncio.wait_for(run_producer(
            broker.bootstrap, unique, events=None, rate=None, chunk_events=2000,
            **demo_producer_options(cap_mib)), 90)
        msgs = await read_all(broker.bootstrap, unique, lambda m: len(m) >= sent, 60)
        return sent, len(msgs)

    with caplog.at_level(logging.WARNING, logger="worker.kafka.demo_producer"):
        sent, readable = asyncio.run(main())
    assert sent == readable  # json: one record per event, all readable (zstd)
    # about 28 bytes per compressed event (135 uncompressed): past the cap by < a chunk
    assert 2**20 / 60 < sent < 2**20 / 60 + 20_000 + 2**20 / 10, sent
    stop = [r.getMessage() for r in caplog.records if "stopped after" in r.getMessage()]
    assert len(stop) == 1 and f"stopped after {sent} events" in stop[0]
    assert "DPSTREAM_DEMO_INPUT_MB" in stop[0]
