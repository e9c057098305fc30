"""Shard keys and a topology text for the open-shard limit tests."""

from __future__ import annotations

from worker.ingest.routing import partition_for

TEXT = """
name: o
input: {topic: in, partitions: 2, fields: {shard: r, item: i}}
mechanism: {name: lazy_cms, params: {depth: 2, width: 64}}
privacy: {eps: 1.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 1000,
          epoch_ticks: 60, time: processing}
noise: {kind: zero, allow_insecure_noise: true}
release: {every_ticks: 1, topic: out}
dead_letter: {topic: dlq}
"""


def shard_keys(partition: int, n: int) -> list[str]:
    """``n`` shard keys the partitioner places on ``partition`` (of 2)."""
    out, i = [], 0
    while len(out) < n:
        k = f"s{i}"
        if partition_for(k, 2) == partition:
            out.append(k)
        i += 1
    return out

