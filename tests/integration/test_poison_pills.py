"""Issue 9: each poison pill against the real embedded broker.

The worker stays up, every pill is dead-lettered with its reason (the 5 MB
message's copy truncated to the producer limit), and with zero noise the good
counts are exact.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from tests.integration.exact_mechanism import POISON
from tests.support.kafka import create_topic, latest_by_shard, read_all
from tests.support.poison import produce_values

pytestmark = pytest.mark.broker

LIMIT = 1_048_576  # the worker's producer limit in this test (DPSTREAM_PRODUCER_MAX_...)
PILLS = {
    "five_mb_message": (json.dumps({"router": "r0", "src": "x" * 5_000_000}).encode(),
                        "oversized_item"),
    "lone_surrogate": (b'{"router": "r0", "src": "\\ud800"}', "not_utf8"),
    "deep_nesting": (b'{"router": "r0", "src": ' + b"[" * 3000 + b"]" * 3000 + b"}",
                     "too_deep"),
    "long_item": (json.dumps({"router": "r0", "src": "y" * 900_000}).encode(),
                  "oversized_item"),
    "raises_in_mechanism": (json.dumps({"router": "r0", "src": POISON}).encode(), "poison"),
}




def test_poison_pills_dead_lettered_worker_stays_up(broker, workers, make_topology,
                                                    unique) -> None:
    topo = make_topology(partitions=1, max_message_bytes=8_000_000)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 1))
    proc = workers.start(topo, group=unique, extra_env={
        "DPSTREAM_PRODUCER_MAX_REQUEST_BYTES": str(LIMIT), "DPSTREAM_POISON_ATTEMPTS": "2"})
    exact: Counter[str] = Counter()
    records: list[tuple[bytes, bytes]] = []
    for i in range(60):
        src = f"10.0.{i % 5}.1"
        exact[src] += 1
        records.append((b"r0", json.dumps({"router": "r0", "src": src}).encode()))
        if i % 12 == 5:
            raw, _ = list(PILLS.values())[i // 12]
            records.append((b"r0", raw))
    asyncio.run(produce_values(broker.bootstrap, f"{unique}-in", records))

    def distinct(msgs) -> dict[tuple[int, int], dict]:
        """Dead letters are at-least-once (docs/TOPOLOGY.md): a poison retry restores the
        last checkpoint and re-reads the batch, so an earlier pill's dead letter can be
        published twice; one per source record is what the test checks."""
        out = {}
        for m in msgs:
            d = json.loads(m.value)
            out[(d["partition"], d["offset"])] = d
        return out

    dlq = asyncio.run(read_all(broker.bootstrap, f"{unique}-dlq",
                               lambda m: len(distinct(m)) >= len(PILLS), 90,
                               give_up=lambda: proc.poll() is not None))
    docs = list(distinct(dlq).values())
    assert Counter(d["reason"] for d in docs) == Counter(r for _, r in PILLS.values()), \
        workers.logs()
    assert all(len(m.value) <= LIMIT for m in dlq)
    big = max(docs, key=lambda d: d.get("value_bytes", 0))
    assert big["truncated"] is True and big["value_bytes"] == len(PILLS["five_mb_message"][0])
    poison = next(d for d in docs if d["reason"] == "poison")
    assert "RuntimeError" in poison["detail"] and "test poison item" in poison["detail"]

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return "r0" in latest and latest["r0"]["payload"]["counts"] == dict(exact)

    out = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60))
    assert done(out), workers.logs()
    assert proc.poll() is None, "the worker must keep running"
    assert workers.terminate(proc) == 0
