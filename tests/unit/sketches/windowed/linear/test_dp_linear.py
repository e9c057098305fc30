"""Tests of sketches/windowed/linear/dp_linear.py.

Paper 003's DP Count-Min / Count Sketch (single release).

Exactness tests use ZeroNoise; statistical tests use FastNoise with fixed seeds
and state their false-failure rate for a correct implementation.
"""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sketches.windowed.linear.dp_linear as dpl
from sketches.core.base import lookup
from sketches.core.hashing import HashSpec
from sketches.core.noise import FastNoise, ZeroNoise
from sketches.core.release import query_release
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.windowed.linear.dp_linear import DPLinearSketch, DPLinearSpec, linear_l2_sensitivity

ZERO = ZeroNoise()


def spec(**kw: object) -> DPLinearSpec:
    base: dict[str, object] = {"kind": "cms", "depth": 4, "width": 32, "eps": 1.0,
                               "delta": 1e-6}
    base.update(kw)
    return DPLinearSpec(**base)  # type: ignore[arg-type]


def reference_matrix(items: np.ndarray, weights: np.ndarray, hs: HashSpec,
                     signed: bool) -> np.ndarray:
    """Plain CMS/CS counters, one event at a time (slow, obviously right)."""
    m = np.zeros((hs.depth, hs.width), dtype=np.int64)
    for x, w in zip(items.tolist(), weights.tolist(), strict=True):
        k = hs.item_keys(np.array([x]))
        b, g = hs.buckets(k)[:, 0], hs.signs(k)[:, 0]
        for r in range(hs.depth):
            m[r, b[r]] += int(w) * (int(g[r]) if signed else 1)
    return m


def test_doctests() -> None:
    assert doctest.testmod(dpl).failed == 0


@pytest.mark.parametrize("kind", ["cms", "cs"])
def test_zero_noise_equals_plain_sketch(kind: str) -> None:
    rng = np.random.default_rng(1)
    items = rng.integers(0, 200, 500)
    weights = rng.choice([-1, 1], 500)
    s = spec(kind=kind, turnstile=True)
    sk = DPLinearSketch(s, ZERO)
    sk.update_batch(items[:200], weights=weights[:200])
    sk.update_batch(items[200:], weights=weights[200:])
    ref = reference_matrix(items, weights, sk.hash, kind == "cs")
    out = sk.release()
    assert np.array_equal(np.array(out["matrix"]), ref)


def test_zero_noise_query_matches_release_reader() -> None:
    sk = DPLinearSketch(spec(kind="cs", depth=5), ZERO)
    sk.update_batch(np.array(["a", "b", "a", "c"], dtype=object))
    q = sk.query(np.array(["a", "b", "z"], dtype=object))
    out = sk.release()
    assert np.allclose(query_release(out, ["a", "b", "z"]), q)
    assert q[0] == 2.0   # CS with 5 rows and 3 items in 32 columns: exact unless all collide


def test_noise_is_drawn_once_and_has_calibrated_scale() -> None:
    """Noise std within 10% of sigma: 6000 values, relative sd of s^2/sigma^2 is
    sqrt(2/6000) = 0.018, so the false-failure rate is < 1e-7 (5 sd)."""
    s = spec(depth=6, width=1000, calibrator="analytic")
    sk = DPLinearSketch(s, FastNoise(7))
    a = np.array(sk.release()["matrix"], dtype=float)
    assert abs(a.std() / s.sigma - 1) < 0.1
    assert abs(a.mean()) < 5 * s.sigma / math.sqrt(a.size)


def test_offset_bounds_all_noise() -> None:
    """P(max |noise| > E) <= beta/2 = 0.1 per sketch (paper 003); 300 seeded sketches:
    P(Bin(300, 0.1) > 50) < 1e-3 is the false-failure rate of this test."""
    s = spec(depth=3, width=50, beta=0.2, calibrator="discrete")
    fails = 0
    for seed in range(300):
        sk = DPLinearSketch(s, FastNoise(seed))
        fails += int(np.abs(sk._noise).max() > sk.offset)
    assert fails <= 50


def test_cms_offset_never_underestimates_whp() -> None:
    """With cms_offset the estimate is >= truth when all noise is within E (w.p. >= 1-beta/2
    = 0.995); one seeded run, false-failure rate <= 0.005."""
    s = spec(depth=4, width=64, cms_offset=True, beta=0.01)
    sk = DPLinearSketch(s, FastNoise(3))
    items = np.repeat(np.arange(20), np.arange(1, 21))
    sk.update_batch(items)
    est = sk.query(np.arange(20))
    assert (est >= np.arange(1, 21)).all()


def test_single_release() -> None:
    sk = DPLinearSketch(spec(), FastNoise(0))
    sk.update_batch(np.array([1, 2]))
    sk.release()
    with pytest.raises(PrivacyError):
        sk.release()
    with pytest.raises(PrivacyError):
        sk.update_batch(np.array([1]))


def test_roundtrip_keeps_drawn_noise() -> None:
    sk = DPLinearSketch(spec(kind="cs"), FastNoise(11))
    sk.update_batch(np.arange(100))
    blob = sk.to_bytes()
    other = DPLinearSketch.from_bytes(blob, FastNoise(999))   # a different source: unused
    assert other.release() == sk.release()
    with pytest.raises(SerializationError):
        DPLinearSketch.from_bytes(blob[:-3], ZERO)


def test_release_is_json_and_public() -> None:
    sk = DPLinearSketch(spec(calibrator="analytic"), FastNoise(1))
    sk.update_batch(np.array([5, 5, 5]))
    out = sk.release()
    json.dumps(out)
    assert all(isinstance(v, int) for row in out["matrix"] for v in row)  # rounded
    assert out["kind"] == "sketch" and out["rounds"] == 1


def test_registry_entries_are_single_release() -> None:
    for name, kind in (("dp_cms", "cms"), ("dp_cs", "cs")):
        entry = lookup(name)
        assert entry.continual is False
        s = entry.build_spec({"depth": 2, "width": 8, "eps": 1.0, "delta": 1e-6, "kind": "x"})
        assert s.kind == kind


@pytest.mark.parametrize(("field", "value"), [("kind", "hll"), ("depth", 0), ("eps", 0.0),
                                              ("relation", "swap"), ("calibrator", "magic")])
def test_spec_errors_name_the_field(field: str, value: object) -> None:
    with pytest.raises(SpecError, match=field):
        spec(**{field: value})


def test_paper_sensitivity_is_wrong_for_count_sketch() -> None:
    """Two items colliding in every row with opposite signs: replacing one by the other moves
    every row by 2, so ||diff||_2 = 2 sqrt(d) > sqrt(2d) (paper 003 eq. 1)."""
    hs = HashSpec(seed=0, depth=1, width=2)
    keys = hs.item_keys(np.arange(64))
    b, g = hs.buckets(keys)[0], hs.signs(keys)[0]
    x = 0
    y = next(i for i in range(1, 64) if b[i] == b[x] and g[i] != g[x])
    s = spec(kind="cs", depth=1, width=2, relation="replace")
    c1, c2 = (DPLinearSketch(s, ZERO) for _ in range(2))
    c1.update_batch(np.array([x]))
    c2.update_batch(np.array([y]))
    diff = np.linalg.norm(c1._counts - c2._counts)
    assert diff == 2.0 > math.sqrt(2)
    assert diff <= s.sensitivity


events = st.lists(st.tuples(st.integers(0, 40), st.integers(-3, 3)), min_size=0, max_size=30)
unit = st.lists(st.tuples(st.integers(0, 40), st.integers(-3, 3)), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(events=events, extra=unit, other=unit, kind=st.sampled_from(["cms", "cs"]),
       turnstile=st.booleans(), relation=st.sampled_from(["add_remove", "replace"]),
       clip=st.integers(1, 2), cap=st.integers(1, 3))
def test_sensitivity_bounds_neighbouring_streams(events, extra, other, kind, turnstile,
                                                 relation, clip, cap) -> None:
    """||C(S) - C(S')||_2 <= Delta_2 for neighbouring S, S': add/remove one unit of at most
    ``unit_cap`` events, or replace it by another such unit; weights clipped as the sketch
    clips them (unit_cap = 1 is event level)."""
    s = spec(kind=kind, depth=3, width=4, turnstile=turnstile, relation=relation,
             weight_clip=clip, unit_cap=cap)
    extra, other = extra[:cap], other[:cap]
    s1 = [*events, *extra]
    s2 = list(events) if relation == "add_remove" else [*events, *other]
    mats = []
    for stream in (s1, s2):
        sk = DPLinearSketch(s, ZERO)
        if stream:
            it, w = zip(*stream, strict=True)
            sk.update_batch(np.array(it), weights=np.array(w))
        mats.append(sk._counts)
    assert np.linalg.norm(mats[0] - mats[1]) <= s.sensitivity + 1e-9


def test_sensitivity_table() -> None:
    assert linear_l2_sensitivity("cms", 6, "replace") == math.sqrt(12)
    assert linear_l2_sensitivity("cms", 6, "replace", turnstile=True) == 2 * math.sqrt(6)
    assert linear_l2_sensitivity("cs", 6, "add_remove", weight_clip=3) == 3 * math.sqrt(6)
    assert linear_l2_sensitivity("cms", 6, "replace", unit_cap=2) == 2 * math.sqrt(12)
