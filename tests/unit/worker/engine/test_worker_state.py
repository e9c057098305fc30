"""Pure tests of the worker core (no broker): caps, epochs, checkpoints, replay skipping."""

from __future__ import annotations

import asyncio
import zlib

import numpy as np
import pytest

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from sketches.errors import SerializationError
from tests.support.engine import TOPO, Clock, MemSink, MemStore, ev, releases, topo
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.engine.checkpoint import (
    CheckpointCache,
    PartitionCheckpoint,
    chunk_records,
    decode_checkpoint,
    encode_checkpoint,
)
from worker.engine.engine import Engine
from worker.engine.shard_state import cap_mask


def test_cap_mask_exact_per_unit() -> None:
    counts: dict[str, int] = {"a": 2}
    units = np.array(["a", "b", "b", "c", "b", "a"], dtype=object)
    assert cap_mask(units, counts, 3).tolist() == [True, True, True, True, True, False]
    assert counts == {"a": 3, "b": 3, "c": 1}
    assert not cap_mask(units, counts, 3)[[0, 1, 2, 4, 5]].any()


def test_releases_exact_and_unit_cap_applied() -> None:
    clock = Clock(1_000_000.0)  # tick = 10_000_000 -> epoch 200_000, local tick 0
    eng = Engine([topo(cap=2)], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        recs = [ev(k, "r1", "x", u=f"u{k % 2}") for k in range(6)] + [ev(6, "r1", "y", u="u9")]
        assert await eng.process_batch("in", 0, recs) == 5  # u0, u1 capped at 2 each
        clock.t += 0.5  # 5 ticks later: one release is due
        await eng.on_timer()

    asyncio.run(run())
    (rel,) = releases(eng.sink)  # type: ignore[arg-type]
    assert rel["payload"]["counts"] == {"x": 4, "y": 1}
    assert (rel["epoch"], rel["seq"], rel["unit"], rel["unit_cap"]) == (200_000, 0, "u", 2)
    assert eng.metrics.value("dpstream_contributions_dropped_total", topology="t") == 2


def test_epoch_roll_final_release_fresh_state_and_caps() -> None:
    clock = Clock(1_000_000.0)
    eng = Engine([topo(cap=1)], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x", "u"), ev(1, "r1", "x", "u")])
        clock.t += 5.0  # 50 ticks: next epoch
        await eng.process_batch("in", 0, [ev(2, "r1", "z", "u")])
        await eng.on_timer()

    asyncio.run(run())
    rels = releases(eng.sink)  # type: ignore[arg-type]
    # every slot of the epoch is released (the timer ran only after the epoch ended), then
    # the final release
    n = len(rels)
    assert [(r["epoch"], r["seq"], r["final"]) for r in rels] == [
        (200_000, k, k == n - 1) for k in range(n)] and n > 1
    assert rels[-1]["payload"]["counts"] == {"x": 1} and rels[-1]["rounds"] == 50
    st = eng.parts[("t", 0)].shards["r1"]
    assert st.epoch == 200_001 and st.seq == 0 and st.unit_counts == {"u": 1}
    assert st.mechanism.counts == {"z": 1}  # fresh mechanism, cap reset per epoch


def test_restore_republishes_pending_bytes_and_skips_covered_records() -> None:
    store = MemStore()
    clock = Clock(1_000_000.0)
    e1 = Engine([topo()], store, MemSink(), clock=clock)
    recs = [ev(k, "r1", f"i{k % 3}") for k in range(10)]

    async def first() -> None:
        await e1.assign([("in", 0)])
        await e1.process_batch("in", 0, recs[:6])
        clock.t += 0.5
        p = e1.parts[("t", 0)]
        p.shards["r1"].released_slot = 1  # what the timer's catch-up does for slot 1
        e1._release(p, p.shards["r1"], e1.now_ms(), final=False)  # pending, then "crash"
        await store.write(PartitionCheckpoint("t", 0, p.next_offset,
                                              [s.to_bytes() for s in p.shards.values()],
                                              [raw for _, _, raw, _, _ in p.pending]))

    asyncio.run(first())
    pending = store.load("t", 0).pending  # type: ignore[union-attr]
    assert len(pending) == 1
    e2 = Engine([topo()], store, MemSink(), clock=clock)

    async def second() -> dict:
        offsets = await e2.assign([("in", 0)])
        await e2.process_batch("in", 0, recs)  # redelivered from 0: first 6 skipped
        return offsets

    assert asyncio.run(second()) == {("in", 0): 6}
    assert [v for _, _, v, _ in e2.sink.sent] == pending  # type: ignore[attr-defined]
    st = e2.parts[("t", 0)].shards["r1"]
    assert st.seq == 1
    assert sum(st.mechanism.counts.values()) == 10


def test_checkpoint_codec_and_chunks_roundtrip_large() -> None:
    rng = np.random.default_rng(0)
    big = rng.bytes(3_000_000)  # incompressible: several chunks
    cp = PartitionCheckpoint("topo", 2, 12345, [big, b"s2"], [b'{"a":1}'])
    assert decode_checkpoint(encode_checkpoint(cp)) == cp
    cache = CheckpointCache()
    blob = zlib.compress(encode_checkpoint(cp), 1)
    for gen in (0, 1):
        for k, v in chunk_records("topo", 2, gen, blob):
            cache.feed(k, v)
    gen, got = cache.get("topo", 2)  # type: ignore[misc]
    assert gen == 1 and got == cp
    # a crash while writing generation 2 (chunks only, no head) leaves generation 1 intact
    for k, v in chunk_records("topo", 2, 2, zlib.compress(b"junk"))[:-1]:
        cache.feed(k, v)
    assert cache.get("topo", 2)[0] == 1  # type: ignore[index]
    with pytest.raises(SerializationError):
        decode_checkpoint(encode_checkpoint(cp)[:-3])


@pytest.mark.slow
def test_large_lazy_hh_state_checkpoints_through_chunks() -> None:
    """A real LazyHH whose compressed checkpoint exceeds 1 MB survives chunking."""
    load_mechanisms()
    params = "{k: 50, k_tilde: 20000, event_horizon: 10000000}"
    t = parse_topology(TOPO.format(mech="lazy_hh", params=params, unit="", cap="")
                       .replace("kind: zero", "kind: fast, seed: 3"))
    clock = Clock(1_000_000.0)
    store = MemStore()
    eng = Engine([t], store, MemSink(), clock=clock)
    rng = np.random.default_rng(1)

    async def run() -> None:
        await eng.assign([("in", 0)])
        recs = [ev(k, "r1", f"10.{k % 251}.{(k * 7) % 253}.{rng.integers(255)}")
                for k in range(20000)]
        await eng.process_batch("in", 0, recs)
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(run())
    raw = store.data[("t", 0)]
    blob = zlib.compress(raw, 1)
    assert len(blob) > 1_000_000
    cache = CheckpointCache()
    for k, v in chunk_records("t", 0, 0, blob):
        assert len(v) <= 512 * 1024 + 16
        cache.feed(k, v)
    _, cp = cache.get("t", 0)  # type: ignore[misc]
    e2 = Engine([t], store, MemSink(), clock=clock)
    asyncio.run(e2.assign([("in", 0)]))
    before = eng.parts[("t", 0)].shards["r1"].mechanism.release()
    after = e2.parts[("t", 0)].shards["r1"].mechanism.release()
    assert before == after and cp.next_offset == 20000


def test_arrival_clock_splits_batches_at_epoch_boundaries() -> None:
    """relation replace + arrival clock: epoch = events // epoch_events, exact split."""
    t = parse_topology(TOPO.format(mech="test_exact_counts", params="{}", unit="", cap="")
                       .replace("epoch_ticks: 50", "relation: replace, clock: arrival, "
                                                   "epoch_events: 5"))
    clock = Clock(1_000_000.0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(k, "r1", f"i{k}") for k in range(12)])

    asyncio.run(run())
    rels = releases(eng.sink)  # type: ignore[arg-type]
    assert [(r["epoch"], r["final"], r["rounds"]) for r in rels] == [(0, True, 5), (1, True, 5)]
    assert rels[0]["payload"]["counts"] == {f"i{k}": 1 for k in range(5)}
    assert rels[1]["payload"]["counts"] == {f"i{k}": 1 for k in range(5, 10)}
    st = eng.parts[("t", 0)].shards["r1"]
    assert (st.epoch, st.events_in_epoch) == (2, 2) and st.mechanism.counts == {"i10": 1,
                                                                                "i11": 1}


def test_wall_clock_stepping_back_keeps_events_in_the_open_tick() -> None:
    """LazyCMS refuses ticks before its closed ones: the engine must clamp to the open tick."""
    load_mechanisms()
    t = topo("lazy_cms", "{depth: 2, width: 16, hash_seed: 1}")
    clock = Clock(1_000_000.0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        clock.t += 2.0  # local tick 20
        await eng.process_batch("in", 0, [ev(0, "r1", "a")])
        await eng.on_timer()
        clock.t -= 1.0  # NTP step back: local tick 10 < 20 closed ticks
        await eng.process_batch("in", 0, [ev(1, "r1", "a")])
        clock.t -= 10.0  # and back into the previous epoch
        await eng.process_batch("in", 0, [ev(2, "r1", "a")])
        clock.t += 11.5  # local tick 25
        await eng.on_timer()

    asyncio.run(run())
    st = eng.parts[("t", 0)].shards["r1"]
    assert st.epoch == 200_000 and st.rounds == 25
    from sketches.core.release import query_release

    assert query_release(st.mechanism.release(), ["a"]).tolist() == [3]


def test_cap_mask_never_merges_units_differing_by_nul() -> None:
    """``astype(str)`` would strip the trailing NUL and put both under one cap."""
    counts: dict[str, int] = {}
    units = np.array(["alice", "alice\x00", "alice", "alice\x00"], dtype=object)
    assert cap_mask(units, counts, 1).tolist() == [True, True, False, False]
    assert counts == {"alice": 1, "alice\x00": 1}
