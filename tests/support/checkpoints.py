"""Checkpoint states in older formats."""

from __future__ import annotations

import json
import struct
from typing import Any

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.engine.shard_state import STATE_MAGIC


def as_version_1(blob: bytes) -> bytes:
    """Rewrite a shard state as the version-1 format (no `params` block)."""
    (mlen,) = struct.unpack_from("<I", blob, 6)
    meta = json.loads(blob[10:10 + mlen])
    meta.pop("params")
    mb = json.dumps(meta, separators=(",", ":")).encode()
    return STATE_MAGIC + struct.pack("<HI", 1, len(mb)) + mb + blob[10 + mlen:]


TOPO = """
name: views
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i, unit: u}}}}
{shards}
mechanism: {{name: {mech}, params: {params}}}
privacy: {{eps: {eps}, delta: 1.0e-6, tick_ms: {tick_ms}, epoch_ticks: {epoch_ticks},
          unit_cap: {cap}}}
noise: {{kind: {noise}, {extra}allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out}}
dead_letter: {{topic: dlq}}
"""


def epoch_topo(eps: float = 4.0, cap: int = 1, mech: str = "lazy_cms",
         params: str = "{depth: 2, width: 16, hash_seed: 1}", tick_ms: int = 100,
         noise: str = "fast", shards: str = "", epoch_ticks: int = 50) -> Any:
    load_mechanisms()
    extra = "seed: 5, " if noise == "fast" else ""
    return parse_topology(TOPO.format(eps=eps, cap=cap, mech=mech, params=params,
                                      tick_ms=tick_ms, noise=noise, extra=extra,
                                      shards=shards, epoch_ticks=epoch_ticks))
