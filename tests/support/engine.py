"""In-memory stand-ins for the engine's store, sink and clock, and a tiny topology (pure tests)."""

from __future__ import annotations

import json
from typing import Any

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from worker.config.topology import parse_topology
from worker.engine.checkpoint import (
    PartitionCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
    merge_checkpoint,
)

TOPO = """
name: t
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i{unit}}}}}
mechanism: {{name: {mech}, params: {params}}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50{cap}}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out}}
dead_letter: {{topic: dlq}}
"""


def topo(mech: str = "test_exact_counts", params: str = "{}", cap: int | None = None):
    return parse_topology(TOPO.format(mech=mech, params=params,
                                      unit=", unit: u" if cap else "",
                                      cap=f", unit_cap: {cap}" if cap else ""))


class MemStore:
    """In-memory stand-in for CheckpointStore (same async interface)."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, int], bytes] = {}

    async def write(self, cp: PartitionCheckpoint) -> int:
        """Incremental checkpoints are merged (what the Kafka store's restore reads);
        returns the bytes of ``cp`` itself (the changed shards)."""
        key = (cp.topology, cp.partition)
        prev = self.load(*key)
        self.data[key] = encode_checkpoint(merge_checkpoint(prev, cp))
        return len(encode_checkpoint(cp))

    async def refresh(self) -> None:
        return None

    def load(self, topology: str, partition: int) -> PartitionCheckpoint | None:
        raw = self.data.get((topology, partition))
        return None if raw is None else decode_checkpoint(raw)

    async def claim(self, topology: str, partition: int) -> None:
        return None  # one writer by construction: nothing to fence

    def take_damaged(self, topology: str, partition: int) -> set[str]:
        return set()

    def needs_repair(self, topology: str, partition: int) -> bool:
        return False


class MemSink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, int | None]] = []

    async def publish(self, topic: str, key: bytes, value: bytes,
                      timestamp_ms: int | None = None) -> None:
        self.sent.append((topic, key, value, timestamp_ms))

    async def flush(self) -> None:
        return None


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ev(offset: int, r: str, i: str, u: str | None = None):
    doc: dict[str, Any] = {"r": r, "i": i}
    if u is not None:
        doc["u"] = u
    return (offset, r.encode(), json.dumps(doc).encode(), 0)


def releases(sink: MemSink) -> list[dict[str, Any]]:
    return [json.loads(v) for t, _, v, _ in sink.sent if t == "out"]

