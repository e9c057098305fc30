"""Engine schedule (pure, no broker): release timing/content never depend on event arrivals,
closed shard sets publish from assignment, event bounds truncate exactly, windowed mechanisms
release once per window. All noise is zero (exactness tests, no randomness)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from tests.support.engine import Clock, MemSink, MemStore, ev
from tests.support.schedule import T0, TOPO, make, out
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology, validate_mechanism_params
from worker.engine.engine import Engine
from worker.ingest.routing import partition_for

ROOT = Path(__file__).resolve().parents[4]







def _scenario(extra_event_before_timer: bool) -> tuple[list[bytes], list[int]]:
    clock = Clock(T0)
    sink = MemSink()
    eng = Engine([make()], MemStore(), sink, clock=clock)
    sizes: list[int] = []

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "a"), ev(1, "r1", "b")])  # tick 0
        clock.t += 0.72  # tick 7: the slot-1 boundary (tick 5) has passed, timer not yet run
        if extra_event_before_timer:
            await eng.process_batch("in", 0, [ev(2, "r1", "c")])
            sizes.append(len(sink.sent))  # nothing published from ingestion
        clock.t += 0.01
        await eng.on_timer()
        clock.t += 5.0  # past the epoch's end (tick 57)
        if extra_event_before_timer:
            await eng.process_batch("in", 0, [ev(3, "r1", "d")])
            sizes.append(len(sink.sent))
        await eng.on_timer()

    asyncio.run(run())
    return [v for t, _, v, *_ in sink.sent if t == "out"], sizes


def test_release_bytes_and_stamps_do_not_depend_on_event_arrivals() -> None:
    """An event arriving between a boundary and the timer changes neither the release
    (content covers exactly the ticks before the boundary) nor its published_at."""
    quiet, _ = _scenario(False)
    busy, sizes = _scenario(True)
    assert sizes == [0, 1]  # ingestion never publishes (the 1 is the slot-1 release)
    q = [json.loads(r) for r in quiet]
    b = [json.loads(r) for r in busy]
    # every slot boundary crossed gets its release (9 slots + the final, then slot 1)
    shape = [(200_000, k, k == 9) for k in range(10)] + [(200_001, 0, False)]
    assert [(r["epoch"], r["seq"], r["final"]) for r in q] == shape
    assert [(r["epoch"], r["seq"], r["final"]) for r in b] == shape
    assert q[0] == b[0]  # slot 1: identical bytes-level content
    assert q[0]["payload"]["counts"] == {"a": 1, "b": 1}
    assert q[0]["published_at"] == (10_000_000 + 5) * 100  # the slot boundary, not "now"
    assert [r["published_at"] for r in q] == [r["published_at"] for r in b] == [
        (10_000_000 + 5 * k) * 100 for k in range(1, 12)]
    assert b[9]["payload"]["counts"] == {"a": 1, "b": 1, "c": 1}  # "d" is the next epoch
    assert b[10]["payload"]["counts"] == {}  # "d" arrived at tick 57 > the slot boundary 55


def test_allowed_shards_publish_from_assignment_without_events() -> None:
    shards = [f"r{i}" for i in range(8)]
    t = make(parts=2, shards="shards: {allowed: [" + ", ".join(shards) + "]}")
    clock = Clock(T0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        clock.t += 0.55
        await eng.on_timer()

    asyncio.run(run())
    mine = sorted(s for s in shards if partition_for(s, 2) == 0)
    assert mine and sorted(r["shard"] for r in out(eng.sink)) == mine
    assert all(r["payload"]["counts"] == {} for r in out(eng.sink))


def test_event_bound_truncates_at_the_exact_event_not_the_batch() -> None:
    params = "{k: 2, k_tilde: 4, event_horizon: 10, hash_seed: 1}"
    t = make("lazy_hh", params)
    clock = Clock(T0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> list[int]:
        await eng.assign([("in", 0)])
        got = [await eng.process_batch("in", 0, [ev(k, "r1", f"i{k}") for k in range(7)])]
        got.append(await eng.process_batch("in", 0, [ev(k, "r1", f"i{k}")
                                                     for k in range(7, 12)]))
        got.append(await eng.process_batch("in", 0, [ev(12, "r1", "x")]))
        return got

    assert asyncio.run(run()) == [7, 3, 0]  # the batch crossing the bound keeps 3 of 5
    st = eng.parts[("t", 0)].shards["r1"]
    assert st.events_in_epoch == 10 and st.mechanism.events == 10
    assert eng.metrics.value("dpstream_events_over_horizon_total", topology="t") == 3


def test_windowed_mechanism_releases_once_per_window_then_fresh() -> None:
    t = make("pmg", "{k: 8, item_kind: str}", every=50)
    clock = Clock(T0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        recs = [ev(k, "r1", "hot" if k % 2 else f"c{k % 3}") for k in range(200)]
        await eng.process_batch("in", 0, recs)
        for _ in range(4):  # timers inside the window publish nothing
            clock.t += 1.0
            await eng.on_timer()
        assert out(eng.sink) == []
        clock.t += 1.5  # window (epoch) over
        await eng.on_timer()
        await eng.on_timer()
        await eng.process_batch("in", 0, [ev(200, "r1", "new")])

    asyncio.run(run())
    (rel,) = out(eng.sink)
    assert (rel["epoch"], rel["seq"], rel["final"], rel["mechanism"]) == (200_000, 0, True, "pmg")
    assert rel["published_at"] == (10_000_000 + 50) * 100
    items = {x["item"]: x for x in rel["payload"]["items"]}
    assert "hot" in items
    st = eng.parts[("t", 0)].shards["r1"]
    assert st.epoch == 200_001 and st.mechanism is not None and st.events_in_epoch == 1
    assert items["hot"]["estimate"] == 100  # k > distinct items: MG is exact, zero noise


WINDOWED = sorted(p.name for p in (ROOT / "topologies").glob("windowed_*.yaml"))


@pytest.mark.parametrize("fname", WINDOWED)
def test_shipped_windowed_topologies_release_once_per_window(fname: str) -> None:
    """Each shipped windowed topology (zero noise, shorter window) runs through the engine:
    events of one window -> exactly one final release at the window's end."""
    load_mechanisms()
    doc = yaml.safe_load((ROOT / "topologies" / fname).read_text())
    doc.update(production=False, noise={"kind": "zero", "allow_insecure_noise": True})
    doc["privacy"].update(tick_ms=100, epoch_ticks=20)
    doc["release"]["every_ticks"] = 20
    t = parse_topology(yaml.safe_dump(doc), fname)
    validate_mechanism_params(t)
    f = t.input.fields
    shard = next(s for s in sorted(t.allowed_shards or {"r0"})
                 if partition_for(s, t.input.partitions) == 0)
    recs = []
    for k in range(300):
        item: Any = (1000 + k % 3) if t.input.item_type == "int" else f"10.0.0.{k % 3}"
        ev_doc: dict[str, Any] = {f.shard: shard, f.item: item}
        if f.weight:
            ev_doc[f.weight] = -1 if k % 10 == 9 else 1
        recs.append((k, shard.encode(), json.dumps(ev_doc).encode(), 0))
    clock = Clock(T0)
    sink = MemSink()
    eng = Engine([t], MemStore(), sink, clock=clock)

    async def run() -> None:
        await eng.assign([(t.input.topic, 0)])
        assert await eng.process_batch(t.input.topic, 0, recs) == 300
        clock.t += 1.0
        await eng.on_timer()
        assert not [r for r in sink.sent if r[0] == t.release.topic]
        clock.t += 1.05
        await eng.on_timer()
        await eng.on_timer()

    asyncio.run(run())
    rels = [json.loads(v) for tp, _, v, *_ in sink.sent if tp == t.release.topic]
    assert [(r["shard"], r["seq"], r["final"]) for r in rels if r["shard"] == shard] == [
        (shard, 0, True)]
    assert eng.parts[(t.name, 0)].shards[shard].epoch == rels[0]["epoch"] + 1


@pytest.mark.parametrize(("mech", "params", "unit"), [
    ("pamg", "{k: 16, item_kind: str}", True),
    ("triehh", "{levels: 4, bits: 8, item_kind: str}", False),
    ("dp_cs", "{depth: 3, width: 64}", False),
    ("dp_cms", "{depth: 3, width: 64}", False),
])
def test_other_windowed_mechanisms_release_once(mech: str, params: str, unit: bool) -> None:
    """PAMG (gets the unit column), TrieHH, DP Count Sketch / Count-Min through the engine."""
    text = TOPO.format(mech=mech, params=params, every=50, parts=1, shards="")
    if unit:
        text = text.replace("item: i}", "item: i, unit: u}").replace(
            "epoch_ticks: 50", "epoch_ticks: 50, unit_cap: 3")
    load_mechanisms()
    t = parse_topology(text)
    validate_mechanism_params(t)
    clock = Clock(T0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)
    recs = [(k, b"r1", json.dumps({"r": "r1", "i": f"ab{k % 5}", "u": f"u{k % 50}"}).encode(), 0)
            for k in range(300)]

    async def run() -> int:
        await eng.assign([("in", 0)])
        n = await eng.process_batch("in", 0, recs)
        clock.t += 5.05
        await eng.on_timer()
        await eng.on_timer()
        return n

    assert asyncio.run(run()) == (150 if unit else 300)  # unit cap 3 x 50 units
    assert [(r["seq"], r["final"], r["mechanism"]) for r in out(eng.sink)] == [(0, True, mech)]


def test_privacy_gauges_report_the_mechanism_guarantee() -> None:
    # review 2 F4: LazyHH guarantees (eps, delta_tilde), delta_tilde > the topology's delta;
    # the per-epoch gauge must not understate it. Other mechanisms report the topology's.
    params = "{k: 2, k_tilde: 4, event_horizon: 10, hash_seed: 1}"
    hh, cms = make("lazy_hh", params), make()
    for topo in (hh, cms):
        clock = Clock(T0)
        eng = Engine([topo], MemStore(), MemSink(), clock=clock)

        async def run(eng: Engine = eng, clock: Clock = clock) -> None:
            await eng.assign([("in", 0)])
            await eng.process_batch("in", 0, [ev(0, "r1", "a")])
            clock.t += 0.55
            await eng.on_timer()

        asyncio.run(run())
        delta = eng.metrics.value("dpstream_privacy_delta_per_epoch", topology="t", shard="r1")
        eps = eng.metrics.value("dpstream_privacy_epsilon_per_epoch", topology="t", shard="r1")
        st = eng.parts[("t", 0)].shards["r1"]
        if topo is hh:
            stated = st.mechanism.privacy()
            assert delta == stated["delta_tilde"] > topo.privacy.delta
            assert eps == stated["eps"] == topo.privacy.eps
        else:
            assert (eps, delta) == (topo.privacy.eps, topo.privacy.delta)


def test_checkpoint_failure_is_counted_and_raised_and_period_is_exported() -> None:
    """Alerts need dpstream_checkpoint_failures_total and dpstream_release_period_seconds."""

    class FailingStore(MemStore):
        async def write(self, cp: Any) -> int:
            raise OSError("broker unavailable")

    clock = Clock(T0)
    eng = Engine([make(every=5)], FailingStore(), MemSink(), clock=clock, reraise=(OSError,))

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "a")])
        clock.t += 0.72
        await eng.on_timer()

    with pytest.raises(OSError):
        asyncio.run(run())
    assert eng.metrics.value("dpstream_checkpoint_failures_total", topology="t") == 1.0
    assert eng.metrics.value("dpstream_release_period_seconds", topology="t") == 0.5


def test_last_release_timestamp_starts_at_assignment_and_follows_releases() -> None:
    clock = Clock(T0)
    eng = Engine([make(every=5)], MemStore(), MemSink(), clock=clock)
    name = "dpstream_last_release_timestamp_seconds"

    async def run() -> None:
        await eng.assign([("in", 0)])
        assert eng.metrics.value(name, topology="t") == T0
        await eng.process_batch("in", 0, [ev(0, "r1", "a")])
        clock.t += 0.72
        await eng.on_timer()

    asyncio.run(run())
    assert eng.metrics.value(name, topology="t") == pytest.approx(T0 + 0.72)
