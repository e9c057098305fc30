"""Cost of the fencing read-back on the checkpoint path (issue 19; embedded broker).

One ``CheckpointStore`` writes 30 incremental checkpoints of N changed shards (2 KB
each, half random) to a fresh checkpoint topic, without a claim (no owner header, no
read-back: the path before issue 19) and with one (every head read back to check for a
newer claim: ``CheckpointStore._verify``). Prints the median write time (first 5
skipped) and the mean read-back time. Run: ``python benchmarks/bench_fencing.py``.
Results are quoted in docs/OPERATIONS.md "One writer per release".
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.support.kafka import create_topic
from worker.engine.checkpoint import CheckpointStore, PartitionCheckpoint
from worker.kafka.embedded import EmbeddedBroker


async def make_store(bs: str, topic: str, claim: bool) -> tuple[CheckpointStore, list]:
    p = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=False, acks="all",
                         linger_ms=2, max_request_size=4 * 1024 * 1024)
    c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await p.start()
    await c.start()
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    await c.seek_to_beginning(tp)
    s = CheckpointStore(p, c, topic, deployment="d")
    await s.refresh()
    if claim:
        await s.claim("t", 0)
    return s, [c, p]


async def run(bs: str, n_shards: int, size: int, rounds: int = 30
              ) -> dict[bool, tuple[float, float]]:
    rng = np.random.default_rng(0)
    out = {}
    for claim in (False, True):
        topic = f"b{uuid.uuid4().hex[:8]}"
        await create_topic(bs, topic, 1)
        s, clients = await make_store(bs, topic, claim)
        times = []
        names = [f"s{i}" for i in range(n_shards)]
        for g in range(rounds):
            states = [rng.bytes(size // 2) + bytes(size // 2) for _ in range(n_shards)]
            cp = PartitionCheckpoint("t", 0, g, states, [b"{}"] * 4, names=names,
                                     incremental=True, held=n_shards, deployment="d")
            t0 = time.perf_counter()
            await s.write(cp)
            times.append(time.perf_counter() - t0)
        out[claim] = (statistics.median(times[5:]) * 1000, s.verify_s / rounds * 1000)
        for client in clients:
            await client.stop()
    return out


def main() -> None:
    with EmbeddedBroker() as b:
        for n, size in ((8, 2000), (200, 2000), (2000, 2000)):
            r = asyncio.run(run(b.bootstrap, n, size))
            print(f"{n} changed shards x {size} B: write without fencing {r[False][0]:.2f} ms, "
                  f"with fencing {r[True][0]:.2f} ms (read-back {r[True][1]:.2f} ms mean)")


if __name__ == "__main__":
    main()
