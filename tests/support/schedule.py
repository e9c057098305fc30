"""An engine on a fake clock, for the release-schedule tests."""

from __future__ import annotations

import json
from typing import Any

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology

TOPO = """
name: t
input: {{topic: in, partitions: {parts}, fields: {{shard: r, item: i}}}}
{shards}
mechanism: {{name: {mech}, params: {params}}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: {every}, topic: out}}
dead_letter: {{topic: dlq}}
"""

T0 = 1_000_000.0  # tick 10_000_000: epoch 200_000, local tick 0


def make(mech: str = "test_exact_counts", params: str = "{}", every: int = 5, parts: int = 1,
         shards: str = "") -> Any:
    load_mechanisms()
    return parse_topology(TOPO.format(mech=mech, params=params, every=every, parts=parts,
                                      shards=shards))


def out(sink: Any) -> list[dict[str, Any]]:
    return [json.loads(v) for t, _, v, *_ in sink.sent if t == "out"]

