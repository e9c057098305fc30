"""Topology validation: every error names the file, the field path and the fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from sketches.errors import SpecError
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import (
    load_topologies,
    load_topology,
    parse_topology,
    validate_mechanism_params,
)

ROOT = Path(__file__).resolve().parents[4]

BASE = {
    "name": "t1",
    "input": {"topic": "in", "partitions": 2, "fields": {"shard": "router", "item": "src"}},
    "mechanism": {"name": "lazy_cms", "params": {"depth": 2, "width": 64}},
    "privacy": {"eps": 1.0, "delta": 1e-6, "tick_ms": 100, "epoch_ticks": 50},
    "release": {"every_ticks": 5, "topic": "out"},
    "dead_letter": {"topic": "dlq"},
}


def _with(path: str, value: object) -> str:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    node = doc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return yaml.safe_dump(doc)


_DELETE = object()


def test_minimal_topology_defaults() -> None:
    t = parse_topology(yaml.safe_dump(BASE), "x.yaml")
    assert t.privacy.relation == "add_remove" and t.privacy.clock == "tick"
    assert t.noise.kind == "secure" and t.allowed_shards is None
    assert t.input.encoding == "json" and t.input.item_type == "str"
    assert t.horizon == 50
    assert t.spec_params() == {"depth": 2, "width": 64, "eps": 1.0, "delta": 1e-6,
                               "relation": "add_remove", "clock": "tick", "horizon": 50,
                               "unit_cap": 1, "round_ticks": 5}


@pytest.mark.parametrize(("path", "value", "rounds"), [
    ("release.every_ticks", 5, 5),                         # a release every 5 of 50 ticks
    ("release.every_ticks", 1, None),                      # per-tick releases: per-tick rounds
    ("release.every_ticks", 7, None),                      # 7 does not divide epoch_ticks=50
    ("mechanism.params.round_ticks", 10, None),            # pinned: the topology's own value
    ("mechanism.params.columns_per_tick", 16, None),       # staggered columns (Algorithm 5)
    ("mechanism", {"name": "lazy_hh", "params": {"k": 4, "k_tilde": 16}}, None),
])
def test_continual_sketches_get_rounds_aligned_to_the_release_interval(path, value,
                                                                        rounds) -> None:
    """Issue 20c: the worker gives a mechanism with aligned rounds (LazyCMS/LazyCS)
    ``round_ticks = release.every_ticks``; never where the topology pins its rounds, a
    release is every tick or the interval does not divide the epoch, nor to a mechanism
    without the capability."""
    t = parse_topology(_with(path, value), "x.yaml")
    assert t.release_rounds() == rounds
    params = t.spec_params()
    pinned = t.mechanism_params.get("round_ticks")
    assert params.get("round_ticks") == (rounds if pinned is None else pinned)


@pytest.mark.parametrize(("path", "value", "field", "fix"), [
    ("privacy.eps", 0, "privacy.eps", "positive epsilon"),
    ("privacy.delta", 1.5, "privacy.delta", "delta"),
    ("privacy.clock", "arrival", "privacy.clock", "relation: replace"),
    ("privacy.relation", "swap", "privacy.relation", "add_remove, replace"),
    ("privacy.unit_cap", 5, "privacy.unit_cap", "input.fields.unit"),
    ("input.partitions", 0, "input.partitions", "positive whole number"),
    ("input.encoding", "avro", "input.encoding", "json, columnar"),
    ("input.fields.item", _DELETE, "input.fields.item", "add `item:`"),
    ("input.topic", "bad topic!", "input.topic", "A-Z"),
    ("input.extra", 1, "input.extra", "remove it"),
    ("release", _DELETE, "release", "add a `release:` section"),
    ("release.every_ticks", "often", "release.every_ticks", "int"),
    ("release.topic", "in", "release.topic", "own topic"),
    ("noise.kind", "fast", "noise.kind", "allow_insecure_noise: true"),
    ("shards.allowed", [], "shards.allowed", "public shard keys"),
])
def test_error_names_field_and_fix(path: str, value: object, field: str, fix: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_topology(_with(path, value), "pipelines/x.yaml")
    msg = str(err.value)
    assert msg.startswith("pipelines/x.yaml: "), msg
    assert field in msg and fix in msg, msg


def test_insecure_noise_needs_flag_and_is_refused_in_production() -> None:
    doc = yaml.safe_load(_with("noise", {"kind": "zero", "allow_insecure_noise": True}))
    assert parse_topology(yaml.safe_dump(doc)).noise.kind == "zero"
    doc["production"] = True
    with pytest.raises(SpecError, match="refused in a production topology"):
        parse_topology(yaml.safe_dump(doc))


def test_arrival_clock_with_replace_needs_epoch_events() -> None:
    doc = yaml.safe_load(_with("privacy.clock", "arrival"))
    doc["privacy"]["relation"] = "replace"
    with pytest.raises(SpecError, match=r"privacy\.epoch_events"):
        parse_topology(yaml.safe_dump(doc))
    doc["privacy"]["epoch_events"] = 1000
    t = parse_topology(yaml.safe_dump(doc))
    assert t.horizon == 1000 and t.spec_params()["clock"] == "arrival"


def test_unit_and_weight_cannot_be_combined() -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["input"]["fields"].update(unit="user", weight="bytes")
    with pytest.raises(SpecError, match=r"input\.fields\.weight"):
        parse_topology(yaml.safe_dump(doc))


def test_invalid_yaml_and_non_mapping() -> None:
    with pytest.raises(SpecError, match=r"x\.yaml: not valid YAML"):
        parse_topology("a: [", "x.yaml")
    with pytest.raises(SpecError, match="top level: must be a mapping"):
        parse_topology("- 1", "x.yaml")


def test_unknown_mechanism_and_bad_params_fail_at_load(tmp_path: Path) -> None:
    load_mechanisms()
    p = tmp_path / "m.yaml"
    p.write_text(_with("mechanism.name", "lazy_nope"))
    with pytest.raises(SpecError, match=r"m.yaml: mechanism.name: unknown mechanism 'lazy_nope'"):
        load_topology(p)
    p.write_text(_with("mechanism.params", {"depth": 2, "widht": 64}))
    with pytest.raises(SpecError, match=r"m.yaml: mechanism.params: widht"):
        load_topology(p)


def test_shipped_topologies_validate() -> None:
    load_mechanisms()
    topos = load_topologies([str(ROOT / "topologies")])
    names = {t.name for t in topos}
    assert {"netmon-heavy-sources", "netmon-dst-prefixes", "pageviews-dp"} <= names
    for t in topos:
        assert t.noise.kind == "secure"


def test_duplicate_names_rejected(tmp_path: Path) -> None:
    load_mechanisms()
    for n in ("a", "b"):
        (tmp_path / f"{n}.yaml").write_text(yaml.safe_dump(BASE))
    with pytest.raises(SpecError, match="already used"):
        load_topologies([str(tmp_path)])


def test_production_needs_a_closed_shard_set() -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["production"] = True
    with pytest.raises(SpecError) as err:
        parse_topology(yaml.safe_dump(doc), "p.yaml")
    assert "p.yaml: shards.allowed:" in str(err.value) and "list every shard" in str(err.value)
    doc["shards"] = {"allowed": ["r1", "r2"]}
    assert parse_topology(yaml.safe_dump(doc)).allowed_shards == frozenset({"r1", "r2"})


@pytest.mark.parametrize("calibrator", ["analytic", "paper"])
def test_production_refuses_float_noise_calibrators(calibrator: str) -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc.update(production=True, shards={"allowed": ["r1"]})
    doc["mechanism"]["params"]["calibrator"] = calibrator
    with pytest.raises(SpecError) as err:
        parse_topology(yaml.safe_dump(doc), "p.yaml")
    msg = str(err.value)
    assert "mechanism.params.calibrator" in msg and "calibrator: discrete" in msg
    doc["production"] = False
    assert parse_topology(yaml.safe_dump(doc)).mechanism_params["calibrator"] == calibrator


def test_production_refuses_float_laplace_noise() -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc.update(production=True, shards={"allowed": ["r1"]})
    doc["mechanism"] = {"name": "pmg", "params": {"k": 8, "noise": "laplace"}}
    with pytest.raises(SpecError, match=r"mechanism\.params\.noise: .*noise: geometric"):
        parse_topology(yaml.safe_dump(doc), "p.yaml")
    doc["mechanism"]["params"]["noise"] = "geometric"
    assert parse_topology(yaml.safe_dump(doc)).production


def test_production_refuses_pamg_float_gaussian_release() -> None:
    # review 2 F3: PAMG's GSHM release draws float Gaussian noise (registered
    # float_noise_only); the refusal names the field and the fix
    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc.update(production=True, shards={"allowed": ["r1"]})
    doc["mechanism"] = {"name": "pamg", "params": {"k": 8, "item_kind": "str"}}
    doc["release"]["every_ticks"] = doc["privacy"]["epoch_ticks"]
    with pytest.raises(SpecError, match=r"p\.yaml: mechanism\.name: 'pamg' .*production: false"):
        validate_mechanism_params(parse_topology(yaml.safe_dump(doc), "p.yaml"))
    doc["production"] = False
    validate_mechanism_params(parse_topology(yaml.safe_dump(doc), "p.yaml"))


def test_windowed_mechanism_releases_once_per_epoch(tmp_path: Path) -> None:
    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["mechanism"] = {"name": "pmg", "params": {"k": 16, "item_kind": "str"}}
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"release\.every_ticks: 'pmg' is a windowed"):
        load_topology(p)
    doc["release"]["every_ticks"] = doc["privacy"]["epoch_ticks"]
    p.write_text(yaml.safe_dump(doc))
    assert load_topology(p).mechanism == "pmg"


def test_signed_weights_flag() -> None:
    assert parse_topology(_with("input.signed_weights", True)).input.signed_weights
    with pytest.raises(SpecError, match=r"input\.signed_weights"):
        parse_topology(_with("input.signed_weights", "yes"))


def test_int_items_get_the_mechanism_domain() -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["input"]["item_type"] = "int"
    doc["mechanism"] = {"name": "dyadic_quantiles", "params": {"bits": 12}}
    assert parse_topology(yaml.safe_dump(doc)).input.item_bits == 12
    assert parse_topology(yaml.safe_dump(BASE)).input.item_bits is None


def test_mechanism_item_kind_must_match_input_item_type(tmp_path: Path) -> None:
    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["mechanism"] = {"name": "pmg", "params": {"k": 8, "item_kind": "int"}}
    doc["release"]["every_ticks"] = doc["privacy"]["epoch_ticks"]
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"mechanism\.params\.item_kind: .*item_kind: str"):
        load_topology(p)
    doc["input"]["item_type"] = "int"
    p.write_text(yaml.safe_dump(doc))
    assert load_topology(p).input.item_type == "int"


@pytest.mark.parametrize("name", ["punctual_cms", "punctual_cs"])
def test_punctual_topology_builds_on_the_arrival_clock(name: str) -> None:
    """Regression: the worker passed ``clock`` to PunctualSketchSpec, which had no
    such field, so no topology could run the documented punctual mechanisms."""
    from sketches.core.base import lookup as get

    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["mechanism"] = {"name": name, "params": {"depth": 2, "width": 64}}
    doc["privacy"] = {"eps": 1.0, "delta": 1e-6, "relation": "replace", "clock": "arrival",
                      "epoch_events": 100}
    doc["release"] = {"every_ticks": 5, "topic": "out"}
    t = parse_topology(yaml.safe_dump(doc), "p.yaml")
    entry = get(name)
    spec = entry.build_spec(t.spec_params())
    assert spec.horizon == 100
    from sketches.core.noise import ZeroNoise

    sketch = entry.build(spec, ZeroNoise())
    sketch.update_batch(np.array(["a", "a", "b"], dtype=object))
    assert sketch.name == name and sketch.query(np.array(["a"], dtype=object))[0] == 2


@pytest.mark.parametrize("name", ["punctual_cms", "punctual_cs"])
def test_punctual_topology_runs_in_the_engine(name: str) -> None:
    """End to end through the engine (zero noise): the arrival-clock releases count exactly."""
    import asyncio
    import json

    from tests.support.engine import Clock, MemSink, MemStore
    from worker.engine.engine import Engine

    load_mechanisms()
    text = f"""
name: p
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i}}}}
shards: {{allowed: [r1]}}
mechanism: {{name: {name}, params: {{depth: 2, width: 64}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, relation: replace, clock: arrival, epoch_events: 50}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 1, topic: out}}
dead_letter: {{topic: dlq}}
"""
    t = parse_topology(text, "p.yaml")
    clock = Clock(1_000_000.0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def go() -> None:
        await eng.assign([("in", 0)])
        recs = [(i, b"r1", json.dumps({"r": "r1", "i": f"x{i % 3}"}).encode(), 0)
                for i in range(12)]
        await eng.process_batch("in", 0, recs)
        for _ in range(5):
            clock.t += 1.0
            await eng.on_timer()

    asyncio.run(go())
    docs = [json.loads(v) for topic, _, v, _ in eng.sink.sent if topic == "out"]  # type: ignore[attr-defined]
    assert docs, "the engine published nothing"
    last = docs[-1]
    assert last["mechanism"] == name and last["clock"] == "arrival" and last["rounds"] == 12
    assert [sum(abs(v) for v in row) for row in last["payload"]["matrix"]] == [12, 12]


@pytest.mark.parametrize("name", ["punctual_cms", "punctual_cs"])
def test_punctual_refuses_the_tick_clock_naming_the_fix(name: str) -> None:
    from sketches.core.base import lookup as get

    load_mechanisms()
    entry = get(name)
    with pytest.raises(SpecError, match=r"clock.*arrival.*lazy_cm?s?"):
        entry.build_spec({"depth": 2, "width": 64, "eps": 1.0, "delta": 1e-6,
                          "relation": "replace", "clock": "tick", "horizon": 50,
                          "unit_cap": 1})


def test_production_accepts_the_lattice_counter_on_every_lazy_sketch() -> None:
    """`counter: blt_int` is the exact discrete Gaussian on a lattice (docs/PRIVACY.md 13):
    certified where every cell's count has an enforced public bound. LazyHH: the truncated
    event_horizon; LazyCMS/LazyCS: the per-round clamp at 2**31 // rounds (issue 20b; they
    were refused while the bound was enforced by an error one event could trigger)."""
    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["production"] = True
    doc["shards"] = {"allowed": ["r1"]}
    doc["privacy"]["time"] = "event"
    doc["mechanism"] = {"name": "lazy_hh", "params": {"k": 4, "k_tilde": 16,
                                                      "event_horizon": 10_000,
                                                      "counter": "blt_int"}}
    t = parse_topology(yaml.safe_dump(doc), "p.yaml")
    assert t.production and t.mechanism_params["counter"] == "blt_int"
    for mech in ("lazy_cms", "lazy_cs"):
        doc["mechanism"] = {"name": mech, "params": {"counter": "blt_int"}}
        t = parse_topology(yaml.safe_dump(doc), "p.yaml")
        assert t.production and t.mechanism_params["counter"] == "blt_int"


@pytest.mark.parametrize("counter", ["blt", "sqrt"])
def test_production_refuses_a_factorized_counter_naming_the_fix(counter: str) -> None:
    """BLT/sqrt noise is a float Gaussian (rounded, data-independent): its sampler's gap to
    the ideal Gaussian is not bounded, so production (certified guarantees only) refuses it."""
    load_mechanisms()
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["production"] = True
    doc["shards"] = {"allowed": ["r1"]}
    doc["mechanism"]["params"]["counter"] = counter
    with pytest.raises(SpecError, match=r"mechanism\.params\.counter.*counter: blt_int.*"
                                        r"counter: tree"):
        parse_topology(yaml.safe_dump(doc), "p.yaml")


# ---- issue 19: one event is the unit on every encoding -------------------------------

def _many_event(encoding: str, production: bool, max_events: int | None = None,
                unit: bool = False) -> dict:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc.update(production=production, shards={"allowed": ["r1"]})
    doc["input"]["encoding"] = encoding
    if max_events is not None:
        doc["input"]["max_events_per_message"] = max_events
    if unit:
        doc["input"]["fields"]["unit"] = "user"
        doc["privacy"]["unit_cap"] = 3
    return doc


@pytest.mark.parametrize("encoding", ["columnar", "arrow"])
def test_production_many_event_encoding_needs_a_message_bound(encoding: str) -> None:
    """A message-level failure drops every event of its message: production needs the
    public bound the noise is calibrated for, and the spec gets cap x bound."""
    with pytest.raises(SpecError) as err:
        parse_topology(yaml.safe_dump(_many_event(encoding, True)), "p.yaml")
    assert "p.yaml: input.max_events_per_message:" in str(err.value)
    assert "declare input.max_events_per_message" in str(err.value)
    topo = parse_topology(yaml.safe_dump(_many_event(encoding, True, 300)))
    assert topo.calibration_cap == 300 and topo.spec_params()["unit_cap"] == 300
    assert topo.message_unit_reason() is None


@pytest.mark.parametrize("encoding", ["columnar", "arrow"])
def test_many_event_encoding_with_a_privacy_unit(encoding: str) -> None:
    """One unit's messages can spoil any number of other units' messages: refused in
    production, not private elsewhere (the reason is in the epoch block)."""
    with pytest.raises(SpecError) as err:
        parse_topology(yaml.safe_dump(_many_event(encoding, True, 10, unit=True)), "p.yaml")
    assert "p.yaml: input.encoding:" in str(err.value) and "encoding: json" in str(err.value)
    from worker.release.envelope import envelope
    from worker.release.epoch_params import epoch_params

    topo = parse_topology(yaml.safe_dump(_many_event(encoding, False, 10, unit=True)))
    assert topo.calibration_cap == 30
    params = epoch_params(topo)
    assert params["private"] is False and "privacy unit" in params["input_not_private"]
    doc = envelope(topo, "r1", epoch=0, seq=0, rounds=1, final=False, payload={},
                   published_at_ms=0, params=params)
    assert doc["private"] is False and "privacy unit" in doc["not_private_reason"]


def test_non_production_many_event_without_a_bound_is_not_private() -> None:
    from worker.release.envelope import envelope
    from worker.release.epoch_params import epoch_params

    topo = parse_topology(yaml.safe_dump(_many_event("columnar", False)))
    assert topo.calibration_cap == 1
    doc = envelope(topo, "r1", epoch=0, seq=0, rounds=1, final=False, payload={},
                   published_at_ms=0, params=epoch_params(topo))
    assert doc["private"] is False
    assert "without input.max_events_per_message" in doc["not_private_reason"]
    assert doc["input"] == {"encoding": "columnar", "max_events_per_message": None,
                            "calibration_cap": 1}
    json_topo = parse_topology(yaml.safe_dump(BASE))
    doc = envelope(json_topo, "r1", epoch=0, seq=0, rounds=1, final=False, payload={},
                   published_at_ms=0, params=epoch_params(json_topo))
    assert doc["private"] is True and doc["input"]["calibration_cap"] == 1


def test_max_events_per_message_only_for_many_event_encodings() -> None:
    with pytest.raises(SpecError) as err:
        parse_topology(_with("input.max_events_per_message", 5), "p.yaml")
    assert "input.max_events_per_message" in str(err.value)


def test_lazy_cms_noise_is_calibrated_for_the_message_bound() -> None:
    """The mechanism built from the topology has sigma for a group of M events."""
    from sketches import lookup

    one = parse_topology(yaml.safe_dump(_many_event("columnar", False, 1)))
    many = parse_topology(yaml.safe_dump(_many_event("columnar", False, 40)))
    s1 = lookup("lazy_cms").build_spec(one.spec_params())
    s40 = lookup("lazy_cms").build_spec(many.spec_params())
    assert s40.unit_cap == 40 and s1.unit_cap == 1


def test_lazy_hh_refuses_tick_clock_with_replace() -> None:
    """Replace keeps the length public, but on the tick clock an event that moves tick
    changes LazyHH's exact per-output length (t_estimate 4 vs 3 in 200/200 runs)."""
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["mechanism"] = {"name": "lazy_hh", "params": {"k": 4, "k_tilde": 16,
                                                      "event_horizon": 10_000}}
    doc["privacy"]["relation"] = "replace"
    with pytest.raises(SpecError) as err:
        validate_mechanism_params(parse_topology(yaml.safe_dump(doc), "p.yaml"))
    assert "replace" in str(err.value) and "add_remove" in str(err.value)


@pytest.mark.parametrize("encoding", ["columnar", "arrow"])
def test_arrival_clock_refused_with_many_event_encodings(encoding: str) -> None:
    """Review of issue 19, finding 1: on the arrival clock a row that makes its message
    fail whole removes M arrivals and moves every later event's step and the epoch
    boundaries (replace assumes a public length); refused for any topology."""
    doc = _many_event(encoding, False, 4)
    doc["privacy"].update(relation="replace", clock="arrival", epoch_events=8)
    with pytest.raises(SpecError) as err:
        parse_topology(yaml.safe_dump(doc), "p.yaml")
    assert "p.yaml: privacy.clock:" in str(err.value) and "clock: tick" in str(err.value)


def test_unit_field_named_event_is_refused() -> None:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["input"]["fields"]["unit"] = "event"
    with pytest.raises(SpecError, match=r"input\.fields\.unit"):
        parse_topology(yaml.safe_dump(doc), "p.yaml")


def test_encoding_is_structural_and_judged_from_the_topology() -> None:
    """Review of issue 19, finding 3: json -> columnar mid-epoch is refused; a block
    from before issue 19 (no `encoding`) restored under a columnar topology without a
    message bound says private: false (the current encoding is judged too)."""
    from worker.release.envelope import envelope
    from worker.release.epoch_params import check_hard, epoch_params

    json_topo = parse_topology(yaml.safe_dump(BASE))
    col = parse_topology(yaml.safe_dump(_many_event("columnar", False)))
    old = epoch_params(json_topo)
    with pytest.raises(SpecError, match=r"input\.encoding: changed from 'json' to 'columnar'"):
        check_hard(old, epoch_params(col), "p.yaml", "r1")
    legacy = {k: v for k, v in old.items()
              if k not in ("encoding", "max_events_per_message", "calibration_cap",
                           "input_not_private")}
    check_hard(legacy, epoch_params(col), "p.yaml", "r1")  # accepted: nothing to compare
    doc = envelope(col, "r1", epoch=0, seq=0, rounds=1, final=False, payload={},
                   published_at_ms=0, params=legacy)
    assert doc["private"] is False and "max_events_per_message" in doc["not_private_reason"]


# ---------------------------------------------------------------- YAML 1.1 scalars (issue 22.5)

_YAML = """
name: t1
input: {topic: in, partitions: 2, fields: {shard: router, item: src}}
mechanism: {name: lazy_cms, params: {depth: 2, width: 64}}
privacy: {eps: 1.0, delta: 1.0e-6}
release: {every_ticks: 5, topic: out}
dead_letter: {topic: dlq}
"""


@pytest.mark.parametrize(("allowed", "index", "text", "read"), [
    ("[r1, NO, ON]", 1, "NO", "the boolean False"),
    ("[yes, r1]", 0, "yes", "the boolean True"),
    ("[r1, off]", 1, "off", "the boolean False"),
    ("[r1, 010]", 1, "010", "the integer 8"),  # YAML 1.1 octal
    ("[r1, 0x1F]", 1, "0x1F", "the integer 31"),
    ("[r1, 1_000]", 1, "1_000", "the integer 1000"),
    ("[r1, 1:30]", 1, "1:30", "the integer 90"),  # sexagesimal
    ("[r1, 1.0]", 1, "1.0", "the number 1.0"),
    ("[r1, 2024-01-01]", 1, "2024-01-01", "the date"),
    ("[r1, ~]", 1, "~", "null"),
])
def test_allowed_shards_that_yaml_does_not_read_as_written_are_refused(
        allowed: str, index: int, text: str, read: str) -> None:
    """Unquoted NO/ON were booleans that validated as the shards 'False'/'True' (and
    010 as the shard '8'): every event of the real shards NO and ON was dead-lettered."""
    with pytest.raises(SpecError) as err:
        parse_topology(_YAML + f"shards: {{allowed: {allowed}}}\n", "s.yaml")
    msg = str(err.value)
    assert msg.startswith(f"s.yaml: shards.allowed[{index}]: ")
    assert read in msg and f'quote it: "{text}"' in msg


def test_allowed_shards_quoted_and_plain_decimal_are_kept() -> None:
    t = parse_topology(_YAML + 'shards: {allowed: ["NO", "ON", \'off\', r1, 7, 0, -3]}\n')
    assert t.allowed_shards == frozenset({"NO", "ON", "off", "r1", "7", "0", "-3"})


@pytest.mark.parametrize(("old", "new", "field", "text"), [
    ("shard: router", "shard: off", "input.fields.shard", "off"),
    ("item: src", "item: yes", "input.fields.item", "yes"),
    ("topic: in", "topic: 2024-01-01", "input.topic", "2024-01-01"),
    ("name: t1", "name: ON", "name", "ON"),
    ("topic: out", "topic: 12", "release.topic", "12"),
    ("topic: dlq", "topic: Off", "dead_letter.topic", "Off"),
])
def test_string_fields_read_as_other_scalars_name_the_quote_fix(
        old: str, new: str, field: str, text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_topology(_YAML.replace(old, new), "s.yaml")
    assert str(err.value).startswith(f"s.yaml: {field}: YAML 1.1 reads the unquoted {text} ")
    assert f'quote it: "{text}"' in str(err.value)


def test_boolean_keys_are_refused_naming_the_quote_fix() -> None:
    """`on:` is the key True; with a second unknown key the old unknown-key check
    sorted a bool with a str and raised TypeError (a traceback, not a SpecError)."""
    for yaml_text in (_YAML.replace("item: src", "item: src, on: x"),
                      _YAML.replace("item: src", "item: src, foo: 1, on: x")):
        with pytest.raises(SpecError, match=r'input\.fields\.on: .*boolean True.*quote it: "on"'):
            parse_topology(yaml_text, "s.yaml")


def test_booleans_where_booleans_belong_and_recursive_aliases() -> None:
    t = parse_topology(_YAML.replace("name: t1", "name: t1\nproduction: no"))
    assert t.production is False
    with pytest.raises(SpecError):  # a recursive alias is walked once, then refused as usual
        parse_topology(_YAML + "shards: &s {allowed: *s}\n")


def test_max_arrow_expansion_setting() -> None:
    """input.max_arrow_expansion bounds what an arrow message may expand to
    (worker/decode_arrow.py); other encodings have nothing to expand."""
    arrow = _YAML.replace("partitions: 2,", "partitions: 2, encoding: arrow,")
    assert parse_topology(arrow).input.max_arrow_expansion == 64
    def expansion(k: int) -> str:
        return arrow.replace("encoding: arrow,", f"encoding: arrow, max_arrow_expansion: {k},")

    assert parse_topology(expansion(8)).input.max_arrow_expansion == 8
    with pytest.raises(SpecError, match=r"input\.max_arrow_expansion: must be an integer >= 1"):
        parse_topology(expansion(0))
    with pytest.raises(SpecError, match=r"input\.max_arrow_expansion: encoding 'json'"):
        parse_topology(_YAML.replace("partitions: 2,", "partitions: 2, max_arrow_expansion: 8,"))
