"""Peak memory of one batch is bounded by a documented function of the settings.

docs/OPERATIONS.md ("Bounded work per batch"): decoding, routing and applying
one batch of ``n`` records holding ``B`` raw bytes allocates at most (JSON parsed into
Python objects takes up to about 32 bytes per input byte: an empty list per ``[]``)
``64 x B + 2 KiB x n + 1 MiB`` beyond the sketch state, where
``n <= DPSTREAM_MAX_BATCH`` and ``B <= n x input.max_message_bytes``; items
are at most ``input.max_item_bytes``. Adversarial batches below (longest
allowed items, JSON that expands most in Python, deep nesting, one huge item)
are measured with tracemalloc.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import pytest

from tests.support.engine import Clock, MemSink, MemStore
from worker.config.topology import parse_topology
from worker.engine.engine import Engine

MAX_MESSAGE = 16_384
TOPO = f"""
name: mem
production: false
input: {{topic: in, partitions: 1, max_message_bytes: {MAX_MESSAGE}, max_item_bytes: 1024,
         fields: {{shard: r, item: i}}}}
mechanism: {{name: lazy_cms, params: {{depth: 4, width: 1024}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 1000}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out}}
dead_letter: {{topic: dlq}}
"""


def _msg(item: str, pad: str = "") -> bytes:
    raw = ('{"r": "r1", "i": ' + json.dumps(item) + (', "p": ' + pad if pad else "") + "}")
    return raw.encode()[:MAX_MESSAGE] if len(raw) > MAX_MESSAGE else raw.encode()


N = 400
BATCHES = {
    "longest_items": [_msg(f"{k:04d}" + "é" * 510) for k in range(N)],
    "json_expansion": [_msg(str(k), "[" + ",".join(["{}"] * 5400) + "]") for k in range(N)],
    "deep_nesting": [_msg(str(k), "[" * 900 + "]" * 900) for k in range(N)],
    "one_huge_item": [_msg(str(k)) for k in range(N - 1)] + [_msg("x" * (MAX_MESSAGE - 40))],
    "oversized_messages": [b'{"r": "r1", "i": "' + b"y" * MAX_MESSAGE + b'"}'] * N,
}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_batch_peak_memory_under_the_documented_bound(name: str) -> None:
    values = BATCHES[name]
    records = [(k, b"r1", v, 0) for k, v in enumerate(values)]
    raw = sum(len(v) for v in values)
    eng = Engine([parse_topology(TOPO)], MemStore(), MemSink(), clock=Clock(1_000_000.0))

    async def run() -> int:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, records[:1])  # sketch state allocated first
        tracemalloc.start()
        try:
            await eng.process_batch("in", 0, records[1:])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak = asyncio.run(run())
    bound = 64 * raw + 2048 * len(records) + 1_048_576
    assert peak <= bound, (name, raw, peak, bound)
