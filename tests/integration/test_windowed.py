"""A windowed mechanism via the real broker: one release per (shard, window), exact at zero noise.

DP Count-Min (paper 003, noise at initialisation) is single-release: the worker
feeds it the events of one window (= one epoch of ticks), calls ``release()``
once at the window's end, publishes it (checkpoint first) and starts a fresh
instance. With zero noise the released matrices, summed over windows, equal
the exact Count-Min sketch of everything produced. A closed shard set makes
every allowed shard publish every window, events or not.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import numpy as np
import pytest

from sketches.core.hashing import HashSpec
from tests.support.kafka import conflicting_ids, create_topic, produce, read_all

pytestmark = pytest.mark.broker

ROUTERS = ["r0", "r1", "r2", "r3"]
IDLE = "r9"  # allowed, never sent an event: publishes empty windows anyway


def _exact_cms(docs: list[dict], counts: Counter[str]) -> bool:
    spec = HashSpec.from_public(docs[0]["payload"]["hash"])
    exact = np.zeros((spec.depth, spec.width), dtype=np.int64)
    if counts:
        items = list(counts)
        b = spec.buckets(spec.item_keys(np.array(items, dtype=object)))
        w = np.array([counts[i] for i in items], dtype=np.int64)
        for row in range(spec.depth):
            np.add.at(exact[row], b[row], w)
    released = sum(np.asarray(d["payload"]["matrix"], dtype=np.int64) for d in docs)
    return bool(np.array_equal(released, exact))


def test_windowed_dp_cms_publishes_once_per_window(broker, workers, make_topology,
                                                   unique) -> None:
    topo = make_topology(partitions=2, tick_ms=100, epoch_ticks=15, every_ticks=15,
                         mechanism="dp_cms", allowed=[*ROUTERS, IDLE],
                         params={"depth": 3, "width": 64, "hash_seed": 3})
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    proc = workers.start(topo, group=unique)
    rng = np.random.default_rng(5)
    exact: dict[str, Counter[str]] = {r: Counter() for r in ROUTERS}
    for _ in range(2):  # two bursts, so events land in more than one window
        chunk: list[tuple[bytes | None, bytes]] = []
        for _ in range(600):
            r = ROUTERS[int(rng.integers(len(ROUTERS)))]
            src = f"10.2.0.{int(rng.zipf(1.6)) % 30}"
            exact[r][src] += 1
            chunk.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
        asyncio.run(produce(broker.bootstrap, f"{unique}-in", chunk))

    def by_shard(msgs) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for m in msgs:
            doc = json.loads(m.value)
            out.setdefault(doc["shard"], []).append(doc)
        return out

    def done(msgs) -> bool:
        got = by_shard(msgs)
        return (len(got.get(IDLE, [])) >= 2
                and all(r in got and _exact_cms(got[r], c) for r, c in exact.items()))

    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60,
                                give_up=lambda: proc.poll() is not None))
    got = by_shard(msgs)
    assert done(msgs), workers.logs()
    for docs in got.values():
        windows = [d["epoch"] for d in docs]
        assert len(windows) == len(set(windows))  # once per (shard, window)
        assert all(d["seq"] == 0 and d["final"] and d["mechanism"] == "dp_cms" for d in docs)
        assert all(d["published_at"] == (d["epoch"] + 1) * 15 * 100 for d in docs)
    assert not np.asarray(got[IDLE][0]["payload"]["matrix"]).any()
    assert conflicting_ids(msgs) == []
    assert workers.terminate(proc) == 0, workers.logs()
