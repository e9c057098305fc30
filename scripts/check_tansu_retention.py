"""What frees memory in the embedded broker (Tansu, in-memory storage)? (issue 23, not CI)

Starts :class:`worker.kafka.embedded.EmbeddedBroker` and measures its RSS while it

1. keeps a topic created with ``retention.ms=1000, retention.bytes=10000``:
   is the low watermark ever raised (``--wait`` seconds after producing)?
2. answers DeleteRecords below the high watermark (aiokafka ``delete_records``);
3. deletes a whole topic (DeleteTopics): is the memory returned?
4. stores the demo's JSON events with each producer compression (MB per million).

Usage: ``python scripts/check_tansu_retention.py [--wait 60]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.kafka.demo_producer import run_producer  # noqa: E402
from worker.kafka.embedded import EmbeddedBroker  # noqa: E402


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _low_high(bootstrap: str, topic: str) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        return (await c.beginning_offsets([tp]))[tp], (await c.end_offsets([tp]))[tp]
    finally:
        await c.stop()


async def _fill(bootstrap: str, topic: str, n: int, size: int = 500) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, enable_idempotence=False)
    await p.start()
    try:
        futures = [await p.send(topic, b"x" * size) for _ in range(n)]
        await asyncio.gather(*futures)
    finally:
        await p.stop()


async def main(wait: float) -> None:
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.records_to_delete import RecordsToDelete

    with EmbeddedBroker() as b:
        pid, bs = b.pid or 0, b.bootstrap
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            await admin.create_topics([
                NewTopic("ret", 1, 1, topic_configs={"retention.ms": "1000",
                                                     "retention.bytes": "10000"}),
                NewTopic("gone", 1, 1)])
            await _fill(bs, "ret", 60_000)
            await _fill(bs, "gone", 60_000)
            t0 = time.monotonic()
            while time.monotonic() - t0 < wait:
                low, high = await _low_high(bs, "ret")
                if low:
                    break
                await asyncio.sleep(5)
            print(f"1. retention.ms=1000: after {time.monotonic() - t0:.0f} s low watermark "
                  f"{low} of {high} (0: nothing removed)")
            try:
                await admin.delete_records({TopicPartition("ret", 0): RecordsToDelete(high)},
                                           timeout_ms=5000)
                print(f"2. DeleteRecords: answered; now {await _low_high(bs, 'ret')}")
            except Exception as exc:  # Tansu 0.6: panics (not yet implemented)
                print(f"2. DeleteRecords failed: {type(exc).__name__}: {exc}")
            before = _rss_mb(pid)
            await admin.delete_topics(["gone"])
            await asyncio.sleep(2)
            print(f"3. DeleteTopics of a 30 MB topic: RSS {before:.1f} -> {_rss_mb(pid):.1f} MB")
            for comp in ("none", "lz4", "zstd", "gzip"):
                await admin.create_topics([NewTopic(f"c-{comp}", 4, 1)])
                r0 = _rss_mb(pid)
                opts = {} if comp == "none" else {"compression_type": comp}
                await run_producer(bs, f"c-{comp}", events=300_000, client_options=opts)
                print(f"4. demo JSON events, {comp}: {(_rss_mb(pid) - r0) / 0.3:.1f} MB of "
                      "broker RSS per million events")
        finally:
            await admin.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=60)
    asyncio.run(main(ap.parse_args().wait))
