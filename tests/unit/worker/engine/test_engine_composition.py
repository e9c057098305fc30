"""The engine's live composition (review of issue 19, finding 4).

``topic_total`` was fixed when the worker loaded its topologies. An epoch that
finishes on larger checkpointed parameters (a topology edited mid-epoch) or a
topology whose releases stopped being private (CreateTime) must raise the total
every later release states, and a declared budget must still hold.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from sketches.errors import SpecError
from tests.integration.exact_mechanism import ExactCounts  # noqa: F401  (registers it)
from tests.support.engine import Clock, MemSink, MemStore, ev
from worker.config.topology import parse_topology
from worker.engine.checkpoint import PartitionCheckpoint
from worker.engine.engine import Engine

TOPO = """
name: {name}
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i}}{budget}}}
mechanism: {{name: test_exact_counts}}
privacy: {{eps: {eps}, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50}}
noise: {{kind: secure}}
release: {{every_ticks: 5, topic: {name}-out}}
dead_letter: {{topic: {name}-dlq}}
"""


def topo(name: str, eps: float, budget: str = ""):
    return parse_topology(TOPO.format(name=name, eps=eps, budget=budget))


def _checkpointed_a(store: MemStore, clock: Clock, eps: float, budget: str = "") -> None:
    e1 = Engine([topo("a", eps, budget)], store, MemSink(), clock=clock)

    async def go() -> None:
        await e1.assign([("in", 0)])
        await e1.process_batch("in", 0, [ev(0, "r1", "x")])
        p = e1.parts[("a", 0)]
        await store.write(PartitionCheckpoint("a", 0, p.next_offset,
                                              [s.to_bytes() for s in p.shards.values()], []))

    asyncio.run(go())


def _releases(sink: MemSink, topic: str) -> list[dict]:
    return [json.loads(v) for t, _, v, _ in sink.sent if t == topic]


def test_an_epoch_on_older_parameters_raises_the_stated_total() -> None:
    store, clock = MemStore(), Clock(1_000_000.0)
    _checkpointed_a(store, clock, 1.0)
    sink = MemSink()
    e2 = Engine([topo("a", 0.5), topo("b", 0.5)], store, sink, clock=clock)
    assert e2.composition.block(e2.topologies["a"])["eps"] == 1.0  # as loaded: 0.5 + 0.5

    async def go() -> None:
        await e2.assign([("in", 0)])  # restores a's epoch, which finishes at eps 1.0
        await e2.process_batch("in", 0, [ev(0, "r1", "x"), ev(1, "r1", "y")])
        clock.t += 1.0
        await e2.on_timer()

    asyncio.run(go())
    for name in ("a", "b"):
        docs = _releases(sink, f"{name}-out")
        assert docs and all(d["topic_total"]["eps"] == 1.5 for d in docs), name
    assert {d["eps"] for d in _releases(sink, "a-out")} == {1.0}


def test_an_epoch_on_older_parameters_over_the_budget_is_refused() -> None:
    store, clock = MemStore(), Clock(1_000_000.0)
    budget = ", budget: {eps: 1.0}"
    _checkpointed_a(store, clock, 1.0, budget)
    e2 = Engine([topo("a", 0.5, budget), topo("b", 0.5)], store, MemSink(), clock=clock)
    with pytest.raises(SpecError, match="over the declared budget eps 1"):
        asyncio.run(e2.assign([("in", 0)]))


def test_a_topology_turned_not_private_voids_the_topic_total() -> None:
    sink, clock = MemSink(), Clock(1_000_000.0)
    eng = Engine([topo("a", 1.0), topo("b", 0.5)], MemStore(), sink, clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x")])
        eng.input_not_private["a"] = "x"  # what mark_input_not_private records
        eng.composition.mark_not_private(eng.topologies["a"])
        clock.t += 1.0
        await eng.on_timer()

    asyncio.run(go())
    docs = _releases(sink, "b-out")
    assert docs and all(d["topic_total"]["private"] is False for d in docs)
    assert all(d["private"] is True for d in docs)  # b itself is still private
