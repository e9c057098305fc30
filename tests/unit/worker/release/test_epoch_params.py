"""A topology edited mid-epoch never changes the guarantee a release states (issue 8 item 2),
releases say whether they are private (item 5) and whether shard presence is covered
(item 9), and carry published_at as their Kafka timestamp (item 6)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from sketches.errors import SerializationError, SpecError
from tests.support.checkpoints import TOPO, as_version_1
from tests.support.checkpoints import epoch_topo as topo
from tests.support.engine import Clock, MemSink, MemStore, ev
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import Topology, parse_topology
from worker.engine.engine import Engine
from worker.engine.shard_state import ShardState
from worker.release.epoch_params import HARD, check_hard, epoch_params, soft_changes


def released(sink: MemSink) -> list[dict[str, Any]]:
    return [json.loads(v) for t, _, v, *_ in sink.sent if t == "out"]


def run_epoch_start(t: Any, store: MemStore, clock: Clock, records: list) -> Engine:
    eng = Engine([t], store, MemSink(), clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, records)
        clock.t += 0.5  # 5 ticks: the release of slot 1 is due
        await eng.on_timer()

    asyncio.run(go())
    return eng


def test_edited_eps_and_cap_mid_epoch_state_the_checkpointed_guarantee() -> None:
    """The issue's example: checkpoint at eps=4, cap 1; restart with eps=0.5, cap 20.

    Old code: the release after the restart stated eps 0.5 / cap 20 while its noise was
    calibrated for eps 4 / cap 1 (the guarantee stated needs a far larger sigma).
    """
    store, clock = MemStore(), Clock(1_000_000.0)
    old = topo(eps=4.0, cap=1)
    e1 = run_epoch_start(old, store, clock, [ev(0, "r1", "a", "u1")])
    (first,) = released(e1.sink)  # type: ignore[arg-type]
    assert (first["eps"], first["unit_cap"]) == (4.0, 1)

    new = topo(eps=0.5, cap=20)
    e2 = Engine([new], store, MemSink(), clock=clock)

    async def go() -> None:
        await e2.assign([("in", 0)])
        clock.t += 0.5
        await e2.on_timer()
        clock.t += 5.0  # past the epoch's end: the next epoch uses the new topology
        await e2.on_timer()
        clock.t += 0.5
        await e2.on_timer()

    asyncio.run(go())
    rels = released(e2.sink)  # type: ignore[arg-type]
    same_epoch = [r for r in rels if r["epoch"] == first["epoch"]]
    later = [r for r in rels if r["epoch"] > first["epoch"]]
    assert same_epoch and later
    for r in same_epoch:
        assert (r["eps"], r["unit_cap"]) == (4.0, 1), r
        assert r["error_bound"] == first["error_bound"]  # same noise scale as stated
    for r in later:
        assert (r["eps"], r["unit_cap"]) == (0.5, 20), r
        assert r["error_bound"] != first["error_bound"]


def test_epsilon_gauge_reports_the_checkpointed_epoch_parameters() -> None:
    store, clock = MemStore(), Clock(1_000_000.0)
    run_epoch_start(topo(eps=4.0), store, clock, [ev(0, "r1", "a", "u1")])
    e2 = Engine([topo(eps=0.5)], store, MemSink(), clock=clock)

    async def go() -> None:
        await e2.assign([("in", 0)])
        await e2.on_timer()

    asyncio.run(go())
    assert e2.metrics.value("dpstream_privacy_epsilon_per_epoch", topology="views",
                            shard="r1") == 4.0


def test_checkpointed_unit_cap_is_applied_until_the_epoch_ends() -> None:
    """Old code applied the edited cap (20) to the old epoch's sketch (noise for cap 1)."""
    store, clock = MemStore(), Clock(1_000_000.0)
    mech = dict(mech="test_exact_counts", params="{}")
    run_epoch_start(topo(cap=1, **mech), store, clock, [ev(0, "r1", "a", "u1")])
    e2 = Engine([topo(cap=20, **mech)], store, MemSink(), clock=clock)

    async def go() -> None:
        await e2.assign([("in", 0)])
        await e2.process_batch("in", 0, [ev(k, "r1", "a", "u1") for k in range(1, 6)])
        clock.t += 0.5
        await e2.on_timer()

    asyncio.run(go())
    last = released(e2.sink)[-1]  # type: ignore[arg-type]
    assert last["payload"]["counts"] == {"a": 1} and last["unit_cap"] == 1


@pytest.mark.parametrize("edit, field, exc, says", [
    (dict(tick_ms=200), "privacy.tick_ms", SpecError, "changed from 100 to 200"),
    (dict(epoch_ticks=60), "privacy.epoch_ticks", SpecError, "changed from 50 to 60"),
    (dict(noise="zero"), "noise.kind", SpecError, "changed from 'fast' to 'zero'"),
    # the shard state itself names its mechanism: refused while decoding it
    (dict(mech="lazy_cs"), "mechanism.name", SerializationError, "mechanism 'lazy_cms', not"),
])
def test_structural_edit_mid_epoch_is_refused_naming_the_field(
        edit: dict, field: str, exc: type, says: str) -> None:
    """A restart under an edited structural field is refused naming the field, both values
    and the fix (a new topology `name`), before any shard is restored."""
    store, clock = MemStore(), Clock(1_000_000.0)
    run_epoch_start(topo(), store, clock, [ev(0, "r1", "a", "u1")])
    e2 = Engine([topo(**edit)], store, MemSink(), clock=clock)
    with pytest.raises(exc, match=field.replace(".", r"\.")) as err:
        asyncio.run(e2.assign([("in", 0)]))
    assert says in str(err.value) and "new `name`" in str(err.value)


# Listed here on purpose, not read from worker.release.epoch_params.HARD: a field dropped from
# HARD must make this test fail (issue 24: 6 of the 9 could be dropped unnoticed).
STRUCTURAL = [
    ("mechanism", "mechanism.name", lambda t: dataclasses.replace(t, mechanism="lazy_cs")),
    ("clock", "privacy.clock", lambda t: _privacy(t, clock="arrival", relation="replace",
                                                  epoch_events=1000)),
    ("time", "privacy.time", lambda t: _privacy(t, time="event")),
    ("tick_ms", "privacy.tick_ms", lambda t: _privacy(t, tick_ms=200)),
    ("epoch_ticks", "privacy.epoch_ticks", lambda t: _privacy(t, epoch_ticks=60)),
    ("epoch_events", "privacy.epoch_events", lambda t: _privacy(t, epoch_events=7)),
    ("unit", "input.fields.unit", lambda t: _privacy(t, unit_field="v")),
    ("noise", "noise.kind", lambda t: dataclasses.replace(
        t, noise=dataclasses.replace(t.noise, kind="zero"))),
    ("item_type", "input.item_type", lambda t: dataclasses.replace(
        t, input=dataclasses.replace(t.input, item_type="int"))),
    # issue 19: the message bound decides which messages the decoder accepts for noise
    # already calibrated, and the encoding whether one event is the unit
    ("max_events_per_message", "input.max_events_per_message", lambda t: dataclasses.replace(
        t, input=dataclasses.replace(t.input, encoding="columnar", max_events_per_message=5))),
    ("encoding", "input.encoding", lambda t: dataclasses.replace(
        t, input=dataclasses.replace(t.input, encoding="columnar"))),
    # the release slots are counted in its units (independent review of issue 20c, F4:
    # edited 4 -> 1 mid-epoch, releases were stamped ticks 4..9 but counted ticks < 10)
    ("every_ticks", "release.every_ticks", lambda t: dataclasses.replace(
        t, release=dataclasses.replace(t.release, every_ticks=10))),
]


def _privacy(t: Any, **kw: Any) -> Any:
    return dataclasses.replace(t, privacy=dataclasses.replace(t.privacy, **kw))


@pytest.mark.parametrize(("key", "path", "edit"), STRUCTURAL, ids=[s[0] for s in STRUCTURAL])
def test_every_structural_field_edited_mid_epoch_is_refused(key: str, path: str, edit) -> None:
    """Each structural field decides which tick/epoch an event belongs to or
    the epoch's noise: the checkpointed block must record it (``epoch_params``) and a
    change of it alone must be refused by ``check_hard`` naming the topology path, both
    values and the fix, while an edit of a privacy knob alone is not refused."""
    old_t = topo()
    new_t = edit(old_t)
    old, new = epoch_params(old_t), epoch_params(new_t)
    assert old[key] != new[key], "the edit must change the recorded field"
    with pytest.raises(SpecError) as err:
        check_hard(old, new, "v.yaml", "r1")
    msg = str(err.value)
    assert msg.startswith(f"v.yaml: {path}: changed from {old[key]!r} to {new[key]!r}")
    assert "shard 'r1'" in msg and "new `name`" in msg
    assert f"set {path} back to {old[key]!r}" in msg
    check_hard(old, epoch_params(topo(eps=0.5, cap=20)), "v.yaml", "r1")  # soft only


def test_the_block_records_its_version_the_unit_and_canonical_mechanism_params() -> None:
    """The checkpointed block: version ``v``, ``unit`` = the unit field or ``event`` (cap 1
    at event level, whatever the topology's cap), mechanism params as canonical JSON (sorted
    keys: the same params in another YAML order give the same checkpoint bytes; values JSON
    cannot hold, like a YAML date, as strings)."""
    import datetime

    t = topo(cap=3)
    block = epoch_params(t)
    assert block["v"] == 1 and block["unit"] == "u" and block["unit_cap"] == 3
    event = epoch_params(_privacy(t, unit_field=None))
    assert event["unit"] == "event" and event["unit_cap"] == 1
    odd = epoch_params(dataclasses.replace(
        t, mechanism_params={"width": 16, "day": datetime.date(2026, 1, 2), "depth": 2}))
    assert odd["mechanism_params"] == {"day": "2026-01-02", "depth": 2, "width": 16}
    assert list(odd["mechanism_params"]) == ["day", "depth", "width"]
    assert json.dumps(odd) == json.dumps(epoch_params(dataclasses.replace(
        t, mechanism_params={"depth": 2, "day": datetime.date(2026, 1, 2), "width": 16})))


def test_not_private_reason_names_the_float_noise_field_or_the_mechanism() -> None:
    """Why a release is not private, as stated in it: a factorized counter is uncertified
    (not the floating-point attack); a mechanism registered float-noise-only (PAMG) is
    judged by its name, with no parameter pointing at it."""
    from worker.release.envelope import not_private_reason

    blt = not_private_reason("lazy_cms", "secure", {"counter": "blt"})
    assert blt is not None and blt.startswith("float noise (mechanism.params.counter: a "
                                              "continuous Gaussian sampler")
    assert "not certified" in blt and "Mironov" not in blt
    load_mechanisms()
    pamg = not_private_reason("pamg", "secure", {})
    assert pamg is not None and pamg.startswith("float noise (") and "Mironov" in pamg
    assert epoch_params(topo(mech="pamg", params="{k: 8, item_kind: str}",
                             noise="secure"))["private"] is False


def test_soft_changes_name_each_edited_knob_with_both_values() -> None:
    """What the restart warning lists: ``{field: (checkpointed, topology)}``, only the
    knobs that differ."""
    old, new = epoch_params(topo(eps=4.0, cap=1)), epoch_params(topo(eps=0.5, cap=20))
    assert soft_changes(old, new) == {"eps": (4.0, 0.5), "unit_cap": (1, 20)}
    assert soft_changes(old, old) == {}


def test_structural_fields_are_exactly_these() -> None:
    """Adding a structural field means adding its case to STRUCTURAL above."""
    assert {k: p for k, p, _ in STRUCTURAL} == HARD




def test_version_1_states_restore_when_their_spec_matches_else_refused() -> None:
    from worker.engine.checkpoint import decode_checkpoint, encode_checkpoint

    store, clock = MemStore(), Clock(1_000_000.0)
    run_epoch_start(topo(), store, clock, [ev(0, "r1", "a", "u1")])
    cp = decode_checkpoint(store.data[("views", 0)])
    cp.shards = [as_version_1(s) for s in cp.shards]
    store.data[("views", 0)] = encode_checkpoint(cp)

    e_same = Engine([topo()], store, MemSink(), clock=clock)
    asyncio.run(e_same.assign([("in", 0)]))
    st: ShardState = e_same.parts[("views", 0)].shards["r1"]
    assert st.params is not None and st.params["eps"] == 4.0

    e_edit = Engine([topo(eps=0.5)], store, MemSink(), clock=clock)
    with pytest.raises(SpecError, match="version 1"):
        asyncio.run(e_edit.assign([("in", 0)]))


def test_insecure_noise_releases_say_not_private() -> None:
    """Old code: a `zero`/`fast` release looked private (eps 1.0, nothing else)."""
    from worker.release.envelope import summarize_release

    for noise, private in (("fast", False), ("zero", False), ("secure", True)):
        t = topo(noise=noise)
        eng = run_epoch_start(t, MemStore(), Clock(1_000_000.0), [ev(0, "r1", "a", "u1")])
        (rel,) = released(eng.sink)  # type: ignore[arg-type]
        assert (rel["private"], rel["noise"]) == (private, noise)
        line = summarize_release(eng.sink.sent[-1][2])  # type: ignore[attr-defined]
        assert ("NOT PRIVATE" in line) == (not private), line


@pytest.mark.parametrize(("mech", "params", "private"), [
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1}", True),
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, calibrator: analytic}", False),
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, calibrator: paper}", False),
    ("pmg", "{k: 8, item_kind: str, noise: laplace}", False),
    ("pmg", "{k: 8, item_kind: str}", True),
    ("pamg", "{k: 8, item_kind: str}", False),
    # BLT/sqrt draw continuous Gaussians (rounded before use): the gap between the float
    # sampler and the ideal Gaussian is not bounded, so the stated eps is not certified
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, counter: blt}", False),
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, counter: sqrt}", False),
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, counter: tree}", True),
    # the lattice BLT: exact discrete Gaussian on integers (certified, PRIVACY.md 13.1);
    # under LazyCMS its per-cell bound is a per-round clamp since issue 20b (was: an error
    # one event could trigger, so not private: issue 20 review, finding 1)
    ("lazy_cms", "{depth: 2, width: 16, hash_seed: 1, counter: blt_int}", True),
])
def test_float_noise_releases_say_not_private(mech: str, params: str, private: bool) -> None:
    """Old code stamped `private: true` on releases drawn with float noise (a non-production
    topology with `calibrator: analytic|paper`, PMG's `laplace`, PAMG's GSHM): the stated eps
    does not hold against the floating-point attack (Mironov 2012), the very reason production
    topologies refuse them. Such a release now says `private: false` and why, and every reader
    prints NOT PRIVATE for it."""
    from worker.release.envelope import (
        is_private,
        not_private_warning,
        privacy_label,
        privacy_note,
    )

    load_mechanisms()
    eps = 0.5 if "paper" in params else 4.0  # the classic bound needs eps < 1
    t = topo(eps=eps, noise="secure", mech=mech, params=params)
    if mech != "lazy_cms":  # windowed: one release per epoch
        t = parse_topology(TOPO.format(eps=eps, cap=1, mech=mech, params=params, tick_ms=100,
                                       noise="secure", extra="", shards="",
                                           epoch_ticks=50)
                           .replace("every_ticks: 5", "every_ticks: 50"))
    eng = Engine([t], MemStore(), MemSink(), clock=(clock := Clock(1_000_000.0)))

    async def go() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "a", "u1")])
        for _ in range(60):
            clock.t += 0.1
            await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    assert rels, "nothing released"
    for rel in rels:
        assert rel["private"] is private and rel["noise"] == "secure"
        reason = rel["not_private_reason"]
        assert (reason is None) is private
        assert is_private(rel) is private
        assert ("NOT PRIVATE" in privacy_label(rel)) is not private
        assert (not_private_warning(rel) is None) is private
        if not private:
            why = "per-cell count bound" if "blt_int" in params else "float noise"
            assert why in reason and why in privacy_note(rel)


def test_open_shard_set_releases_say_shard_presence_is_not_covered() -> None:
    for shards, covered in (("", False), ("shards: {allowed: [r1, r2]}", True)):
        eng = run_epoch_start(topo(shards=shards), MemStore(), Clock(1_000_000.0),
                              [ev(0, "r1", "a", "u1")])
        rels = released(eng.sink)  # type: ignore[arg-type]
        assert rels and all(r["covers_shard_presence"] is covered for r in rels)


def test_release_records_carry_published_at_as_their_kafka_timestamp() -> None:
    """Old code sent releases without a timestamp (the producer stamped the send time)."""
    store, clock = MemStore(), Clock(1_000_000.0)
    eng = run_epoch_start(topo(), store, clock, [ev(0, "r1", "a", "u1")])
    outs = [s for s in eng.sink.sent if s[0] == "out"]  # type: ignore[attr-defined]
    assert outs and all(ts == json.loads(v)["published_at"] for _, _, v, ts in outs)


def test_reader_flags_not_private_releases_and_reads_both_schema_versions() -> None:
    from worker.release.envelope import not_private_warning
    from worker.release.reader import ReleaseIndex

    idx = ReleaseIndex()
    base = {"topology": "t", "shard": "r1", "epoch": 1, "payload": {"kind": "heavy_hitters"}}
    assert idx.add(json.dumps(dict(base, schema_version=1, seq=0)).encode())
    assert idx.add(json.dumps(dict(base, schema_version=2, seq=1, private=False,
                                   noise="zero", eps=1.0)).encode())
    warning = not_private_warning(idx.latest(None, "r1"))
    assert warning is not None and "NOT PRIVATE" in warning and "zero" in warning


def test_open_to_closed_switch_mid_epoch_does_not_claim_presence_for_old_shards() -> None:
    """Review: `shards.allowed` was not in the epoch block, so a shard created by its data
    under an open set, restored under a closed set, published `covers_shard_presence: true`.
    Presence is stated per epoch: covered only for a shard created under a closed set."""
    store, clock = MemStore(), Clock(1_000_000.0)
    run_epoch_start(topo(), store, clock, [ev(0, "r1", "a", "u1")])  # open set: r1 by data
    closed = topo(shards="shards: {allowed: [r1, r2]}")
    eng = Engine([closed], store, MemSink(), clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    by_shard = {r["shard"]: r["covers_shard_presence"] for r in rels if r["epoch"] == 200_000}
    assert by_shard == {"r1": False, "r2": True}  # r2 exists from assignment (closed set)


def test_version_1_state_restored_under_secure_noise_is_not_stamped_private() -> None:
    """Review: a version-1 state records no noise kind; restored under a `secure` topology
    with an equal spec it was stamped `private: true` (it may have been written with
    `fast` noise). Its epoch now states `private: false`; the next epoch is private."""
    from worker.engine.checkpoint import decode_checkpoint, encode_checkpoint

    store, clock = MemStore(), Clock(1_000_000.0)
    mech, params = "test_exact_counts", "{}"
    run_epoch_start(topo(mech=mech, params=params, noise="fast"), store, clock,
                    [ev(0, "r1", "a", "u1")])
    cp = decode_checkpoint(store.data[("views", 0)])
    cp.shards = [as_version_1(s) for s in cp.shards]
    store.data[("views", 0)] = encode_checkpoint(cp)
    secure = parse_topology(TOPO.format(eps=4.0, cap=1, mech=mech, params=params, tick_ms=100,
                                        noise="secure", extra="", shards="",
                                           epoch_ticks=50).replace(
        "allow_insecure_noise: true", "allow_insecure_noise: false"))
    eng = Engine([secure], store, MemSink(), clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        clock.t += 5.0  # past the epoch's end: the rest of the epoch, then the next one
        await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    old = [r for r in rels if r["epoch"] == 200_000]
    new = [r for r in rels if r["epoch"] == 200_001]
    assert old and all(r["private"] is False for r in old)
    assert new and all(r["private"] is True for r in new)


@pytest.mark.parametrize("version_1", [False, True])
def test_a_tree_checkpoint_restores_under_the_lattice_default_then_new_epochs_use_it(
        version_1: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: with the lattice default on, a topology without `counter` builds `blt_int`
    for LazyCMS (it wins at equal (eps, delta)). A checkpoint written with the tree (the
    old default: its spec bytes have no counter field) keeps restoring with the tree until
    its epoch ends; the next epoch is built with the new default, and its releases state
    the counter."""
    from sketches.counters import family
    from worker.engine.checkpoint import decode_checkpoint, encode_checkpoint

    monkeypatch.setattr(family, "DEFAULT_TO_LATTICE", True)

    store, clock = MemStore(), Clock(1_000_000.0)
    # 200 ticks released every 5: 40 aligned rounds, where blt_int wins (at 10 the tree does)
    tree = topo(params="{depth: 2, width: 16, hash_seed: 1, counter: tree}", epoch_ticks=200)
    with monkeypatch.context() as m:  # written before issue 20c: per-tick rounds
        m.setattr(Topology, "release_rounds", lambda self: None)
        run_epoch_start(tree, store, clock, [ev(0, "r1", "a", "u1")])
    if version_1:
        cp = decode_checkpoint(store.data[("views", 0)])
        cp.shards = [as_version_1(s) for s in cp.shards]
        store.data[("views", 0)] = encode_checkpoint(cp)
    eng = Engine([topo(epoch_ticks=200)], store, MemSink(), clock=clock)
    assert eng.specs["views"].counter == "blt_int"

    async def go() -> None:
        await eng.assign([("in", 0)])
        st: ShardState = eng.parts[("views", 0)].shards["r1"]
        assert st.mechanism.spec.counter == "tree" and "counter" not in st.mechanism.spec.to_dict()
        assert st.mechanism.spec.round_ticks is None
        clock.t += 20.0  # past the epoch's end: the rest of the epoch, then the next one
        await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    old = [r for r in rels if r["epoch"] == 50_000]
    new = [r for r in rels if r["epoch"] == 50_001]
    assert old and all("counter" not in r["payload"]["error_bound"] for r in old)
    assert new and all(r["payload"]["error_bound"]["counter"] == "blt_int" for r in new)
    assert eng.parts[("views", 0)].shards["r1"].mechanism.spec.counter == "blt_int"
    # the new epoch also gets rounds aligned to the releases; the old one kept per-tick rounds
    assert eng.parts[("views", 0)].shards["r1"].mechanism.spec.round_ticks == 5
    assert all(r["payload"]["lag_bound_ticks"] == 1 for r in old)
    assert all(r["payload"]["lag_bound_ticks"] == 5 for r in new)


def test_a_production_topology_with_the_lattice_counter_runs_and_says_private() -> None:
    """Issue 20's "done": a `production: true` topology with `counter: blt_int` validates,
    runs on secure noise, and its releases say `private: true` and state the counter.
    LazyHH (its cells are bounded by the truncated event_horizon); LazyCMS with blt_int
    validates too (its cells are clamped per round since issue 20b)."""
    cms = parse_topology(
        TOPO.format(eps=1.0, cap=1, mech="lazy_cms",
                    params="{depth: 2, width: 16, counter: blt_int}", tick_ms=100,
                    noise="secure", extra="", shards="shards: {allowed: [r1]}",
                    epoch_ticks=50)
        .replace("name: views", "name: views\nproduction: true")
        .replace("allow_insecure_noise: true", "allow_insecure_noise: false"))
    assert cms.production and cms.mechanism_params["counter"] == "blt_int"
    t = parse_topology(
        TOPO.format(eps=1.0, cap=1, mech="lazy_hh",
                    params="{k: 4, k_tilde: 16, event_horizon: 100000, counter: blt_int}",
                    tick_ms=100, epoch_ticks=50,
                    noise="secure", extra="", shards="shards: {allowed: [r1]}")
        .replace("name: views", "name: views\nproduction: true")
        .replace("allow_insecure_noise: true", "allow_insecure_noise: false"))
    assert t.production and t.privacy.time == "event"
    clock = Clock(1_000_000.0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        now = int(clock.t * 1000)
        await eng.process_batch("in", 0, [(0, b"r1", json.dumps(
            {"r": "r1", "i": "a", "u": "u1"}).encode(), now)])  # LogAppendTime: now
        clock.t += 1.0  # 10 ticks: two release slots
        eng.log_end("in", 0, int(clock.t * 1000))  # the log is read to its end
        await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    assert rels
    for rel in rels:
        assert rel["private"] is True and rel["noise"] == "secure"
        assert rel["payload"]["budget"]["sketch"]["counter"] == "blt_int"


@pytest.mark.parametrize("noise", ["secure", "zero"])
def test_a_default_lazy_cms_runs_blt_int_on_rounds_aligned_to_its_releases(noise: str) -> None:
    """Issue 20c's "done": a topology without `counter` (here `production: true` on secure
    noise) gets blt_int on rounds of `release.every_ticks` ticks; its releases say
    `private: true`, state the counter and a lag of one round, and (zero noise) every release
    counts exactly the events of every tick before its boundary, none after it."""
    text = TOPO.format(eps=1.0, cap=1, mech="lazy_cms", params="{depth: 2, width: 16}",
                       tick_ms=100, noise=noise, extra="", shards="shards: {allowed: [r1]}",
                       epoch_ticks=200)
    if noise == "secure":
        text = (text.replace("name: views", "name: views\nproduction: true")
                .replace("allow_insecure_noise: true", "allow_insecure_noise: false"))
    t = parse_topology(text)
    clock = Clock(1_000_000.0)  # the epoch starts here (200 ticks of 100 ms = 20 s)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)
    assert eng.specs["views"].counter == "blt_int" and eng.specs["views"].round_ticks == 5
    start = int(clock.t * 1000)

    async def go() -> None:
        await eng.assign([("in", 0)])
        for k in range(12):  # k + 1 events at tick k (100 ms apart)
            now = start + 100 * k
            clock.t = now / 1000
            await eng.process_batch("in", 0, [(100 * k + j, b"r1", json.dumps(
                {"r": "r1", "i": "a", "u": f"u{k}-{j}"}).encode(), now) for j in range(k + 1)])
        clock.t = (start + 1500) / 1000  # 15 ticks: releases at ticks 5, 10, 15
        eng.log_end("in", 0, start + 1500)
        await eng.on_timer()

    asyncio.run(go())
    rels = released(eng.sink)  # type: ignore[arg-type]
    assert len(rels) == 3  # slots 1, 2, 3
    for rel in rels:
        assert rel["private"] is (noise == "secure")
        assert rel["payload"]["error_bound"]["counter"] == "blt_int"
        assert rel["payload"]["lag_bound_ticks"] == 5
    if noise == "zero":  # a row of a CMS sums every counted event
        totals = [sum(rel["payload"]["matrix"][0]) for rel in rels]
        assert totals == [sum(range(1, 6)), sum(range(1, 11)), sum(range(1, 13))]


def test_topology_at_restores_every_privacy_knob_of_the_block() -> None:
    """An epoch finishing on its checkpointed block runs as that block says: eps, delta,
    relation, unit cap and the mechanism's params each come from the block (a topology
    edited mid-epoch must not change what the epoch's releases state), and each falls back
    to the topology when the block lacks it (a block written before the field existed)."""
    from worker.release.epoch_params import topology_at

    old = topo(eps=1.0, cap=3)
    edited = topo(eps=4.0, cap=7, params="{depth: 2, width: 32, hash_seed: 1}")
    block = epoch_params(old)
    block_delta = 3.0e-7
    at = topology_at(edited, dict(block, delta=block_delta, relation="replace"))
    assert (at.privacy.eps, at.privacy.delta, at.privacy.relation, at.privacy.unit_cap) \
        == (1.0, block_delta, "replace", 3)
    assert at.mechanism_params == old.mechanism_params != edited.mechanism_params
    assert isinstance(at.privacy.eps, float) and isinstance(at.privacy.unit_cap, int)
    # the topology's values where the block is silent
    bare = topology_at(edited, {})
    assert (bare.privacy.eps, bare.privacy.delta, bare.privacy.relation, bare.privacy.unit_cap,
            bare.mechanism_params) == (4.0, edited.privacy.delta, edited.privacy.relation, 7,
                                       edited.mechanism_params)
    # the structural parts are the edited topology's own (only SOFT knobs are restored)
    assert at.name == edited.name and at.input == edited.input and at.release == edited.release


def test_a_block_without_the_release_interval_accepts_its_edit_and_skips_only_that() -> None:
    """A block written before issue 20c does not record `release.every_ticks`: an edit of it
    is accepted (nothing to compare), and a block from before issue 19 (no `encoding`) skips
    only that key: a later structural field that changed is still refused."""
    old_t = topo()
    new_t = dataclasses.replace(old_t, release=dataclasses.replace(old_t.release, every_ticks=10))
    old = {k: v for k, v in epoch_params(old_t).items() if k != "every_ticks"}
    check_hard(old, epoch_params(new_t), "v.yaml", "r1")  # accepted
    older = {k: v for k, v in epoch_params(old_t).items() if k != "encoding"}
    with pytest.raises(SpecError, match=r"^v.yaml: release.every_ticks: changed from 5 to 10"):
        check_hard(older, epoch_params(new_t), "v.yaml", "r1")


def test_the_block_records_the_calibration_cap_the_envelope_states() -> None:
    """A many-event encoding calibrates for `unit_cap x max_events_per_message`; the block
    records it (the envelope states `input.calibration_cap` from the block, falling back to
    the unit cap for a block without it, which would understate it)."""
    t = topo(cap=2)
    t = dataclasses.replace(t, input=dataclasses.replace(t.input, encoding="columnar",
                                                         max_events_per_message=5))
    assert t.calibration_cap == 10
    assert epoch_params(t)["calibration_cap"] == 10
