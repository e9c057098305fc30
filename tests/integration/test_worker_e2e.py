"""End to end on the embedded broker: events in, exact (zero-noise) releases out."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import numpy as np
import pytest

from tests.support.kafka import conflicting_ids, create_topic, latest_by_shard, produce, read_all

pytestmark = pytest.mark.broker


def _events(n: int, seed: int) -> tuple[list[tuple[bytes, bytes]], dict[str, Counter[str]]]:
    rng = np.random.default_rng(seed)
    routers = [f"r{i}" for i in range(5)]
    exact: dict[str, Counter[str]] = {r: Counter() for r in routers}
    out = []
    for _ in range(n):
        r = routers[int(rng.integers(5))]
        src = f"10.0.0.{int(rng.zipf(1.5)) % 50}"
        exact[r][src] += 1
        out.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
    return out, exact


def _matches(exact: dict[str, Counter[str]]):
    def check(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                   for r, c in exact.items() if c)
    return check


@pytest.mark.parametrize("runner", ["asyncio", "faust"])
def test_releases_equal_exact_counts(broker, workers, make_topology, unique, runner) -> None:
    """Every produced event appears exactly once in the latest release of its shard.

    ``faust``: the worker hosted in the Faust app (the default of ``dpstream run``);
    ``asyncio``: the plain runner (``dpstream run --no-faust``).
    """
    topo = make_topology(partitions=2)
    records, exact = _events(3000, seed=1)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    proc = workers.start(topo, group=unique, args=() if runner == "faust" else ("--no-faust",))
    asyncio.run(produce(broker.bootstrap, f"{unique}-in", records))
    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", _matches(exact), 60,
                                give_up=lambda: proc.poll() is not None))
    assert _matches(exact)(msgs), workers.logs()
    doc = json.loads(msgs[-1].value)
    assert doc["schema_version"] == 2 and doc["topology"] == unique
    assert doc["unit"] == "event" and doc["relation"] == "add_remove"
    assert conflicting_ids(msgs) == []
    assert workers.terminate(proc) == 0, workers.logs()
