"""The capabilities each mechanism declares on its registry entry (issue 21) match what
its spec and instances actually do, so the worker can ask the entry instead of probing."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from sketches import ZeroNoise, lookup, registered
from sketches.core.base import Capabilities, NoiseSummary, spec_fields

BASE = {"eps": 1.0, "delta": 1e-6, "relation": "add_remove", "clock": "tick",
        "horizon": 3600, "unit_cap": 1}
PARAMS: dict[str, dict[str, Any]] = {
    "lazy_cms": {"depth": 2, "width": 64},
    "lazy_cs": {"depth": 3, "width": 64},
    "lazy_hh": {"k": 4, "k_tilde": 16, "event_horizon": 10000},
    "LazyHH": {"k": 4, "k_tilde": 16, "event_horizon": 10000, "counter": "blt_int"},
    "pmg": {"k": 32},
    "pamg": {"k": 32, "unit_cap": 2},
    "triehh": {"levels": 2, "bits": 4},
    "dp_cms": {"depth": 2, "width": 64},
    "dp_cs": {"depth": 3, "width": 64},
    "dp_cms_hh": {"bits": 8, "depth": 2, "width": 64, "item_kind": "int"},
    "dyadic_quantiles": {"bits": 8, "depth": 2, "width": 64},
    "fp_sketch": {"p": 0.5, "rows": 8},
    "punctual_cms": {"depth": 2, "width": 64, "relation": "replace", "clock": "arrival",
                     "horizon": 5000},
    "punctual_cs": {"depth": 2, "width": 64, "relation": "replace", "clock": "arrival",
                    "horizon": 5000},
    "cms": {"depth": 2, "width": 64},
    "cs": {"depth": 2, "width": 64},
}
PLAIN = ("cms", "cs")  # non-private: no privacy parameters


def build(name: str) -> tuple[Capabilities, Any, Any]:
    entry = lookup(name)
    params = PARAMS[name] if name in PLAIN else {**BASE, **PARAMS[name]}
    spec = entry.build_spec(params)
    return entry.capabilities, spec, entry.build(spec, ZeroNoise())


def test_every_builtin_mechanism_is_covered() -> None:
    assert set(PARAMS) <= set(registered())
    assert {n for n in registered() if not n.startswith("test_")} <= set(PARAMS)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_declared_capabilities_match_the_mechanism(name: str) -> None:
    caps, spec, mech = build(name)
    assert mech.spec == spec  # part of the required contract
    assert caps.tick_clock == callable(getattr(mech, "advance_to", None))
    assert caps.takes_units == ("units" in inspect.signature(mech.update_batch).parameters)
    fields = spec_fields(spec)
    assert (caps.event_horizon is not None) == ("event_horizon" in fields)
    if caps.event_horizon is not None:
        assert caps.event_horizon(spec) == fields["event_horizon"]
    assert (caps.item_kind is not None) == ("item_kind" in fields)
    if caps.item_kind is not None:
        assert caps.item_kind(spec) == fields["item_kind"]
    assert bool(caps.counters) == ("counter" in fields)
    if caps.counters:
        assert fields["counter"].value in caps.counters
    assert (caps.memory_model is not None) == callable(getattr(spec, "memory_bytes", None))
    assert (caps.memory_for_item_bytes is not None) == hasattr(spec, "memory_bytes_for")
    assert caps.state_growth == getattr(spec, "state_growth", None)
    assert (caps.sketch_error is not None) == hasattr(spec, "sketch_error")
    assert caps.guarantee is None or caps.guarantee(mech)["eps"] == 1.0
    summary = caps.noise(mech) if caps.noise is not None else NoiseSummary()
    assert (summary.counter is not None) == ("counter" in fields)
    if caps.heavy_hitters is not None:
        hh = caps.heavy_hitters(mech)
        assert 0 < hh.min_detectable_share() < 1
        assert hh.detection_events(hh.min_detectable_share() / 2) is None
        assert hh.output_bounds(0)["coverage"] > 0


@pytest.mark.parametrize("name", ["lazy_cms", "lazy_cs", "punctual_cms", "punctual_cs"])
def test_point_query_follows_the_estimator(name: str) -> None:
    caps, spec, mech = build(name)
    assert caps.point_query is not None
    lo, hi = caps.point_query(spec, 1000.0, 5.0)
    if mech.estimator == "median":
        assert lo == -hi
    else:
        assert lo == -5.0 and hi > 5.0


def test_spec_fields_reads_a_dataclass_and_nothing_else() -> None:
    _, spec, _ = build("pmg")
    assert spec_fields(spec)["k"] == 32
    assert spec_fields(object()) == {} and spec_fields(type(spec)) == {}
