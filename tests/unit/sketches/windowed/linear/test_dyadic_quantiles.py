"""Tests of sketches/windowed/linear/dyadic_quantiles.py
(paper 003's private dyadic Count Sketch, turnstile)
and of the shared sketches/windowed/linear/dyadic_levels.py.

Exactness tests use ZeroNoise; statistical tests use FastNoise with fixed seeds and state
their false-failure rate for a correct implementation.
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sketches.windowed.linear.dyadic_levels as dl
import sketches.windowed.linear.dyadic_quantiles as dq
from sketches.core.base import lookup
from sketches.core.noise import FastNoise, ZeroNoise
from sketches.errors import PrivacyError, SpecError
from sketches.windowed.linear.dyadic_levels import DyadicLevels
from sketches.windowed.linear.dyadic_quantiles import DyadicQuantiles, DyadicQuantilesSpec

ZERO = ZeroNoise()
PHIS = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def exact_quantiles(values: np.ndarray, phis: tuple[float, ...]) -> list[int]:
    """Smallest x with #{v <= x} >= phi * N (multiset given as an array)."""
    v = np.sort(values)
    n = v.shape[0]
    return [int(v[max(int(np.ceil(p * n - 1e-9)) - 1, 0)]) for p in phis]


def turnstile_stream(rng: np.random.Generator, bits: int, n: int) -> tuple[np.ndarray, ...]:
    """Inserts, then deletions of a random subset of the inserted items (strict turnstile)."""
    ins = rng.integers(0, 1 << bits, n)
    dele = rng.choice(ins, n // 3, replace=False)
    items = np.concatenate([ins, dele])
    weights = np.concatenate([np.ones(n, int), -np.ones(n // 3, int)])
    perm = rng.permutation(items.shape[0])
    counts = np.bincount(ins, minlength=1 << bits) - np.bincount(dele, minlength=1 << bits)
    remaining = np.repeat(np.arange(1 << bits), counts)
    return items[perm], weights[perm], remaining


def test_doctests() -> None:
    assert doctest.testmod(dq).failed == 0
    assert doctest.testmod(dl).failed == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_noise_exact_levels_give_exact_quantiles(seed: int) -> None:
    rng = np.random.default_rng(seed)
    items, weights, remaining = turnstile_stream(rng, 10, 3000)
    s = DyadicQuantilesSpec(bits=10, eps=1.0, delta=1e-6, depth=1, width=1024, phis=PHIS)
    q = DyadicQuantiles(s, ZERO)
    assert all(q.levels.is_exact(i) for i in range(len(s.shifts)))
    q.update_batch(items[:1000], weights=weights[:1000])
    q.update_batch(items[1000:], weights=weights[1000:])
    out = q.release()
    assert out["n_estimate"] == remaining.shape[0]
    assert [d["value"] for d in out["quantiles"]] == exact_quantiles(remaining, PHIS)


def test_zero_noise_resolution() -> None:
    """Exact up to the dyadic resolution: the answer is the exact quantile's 2^r cell."""
    rng = np.random.default_rng(5)
    items, weights, remaining = turnstile_stream(rng, 12, 4000)
    r = 3
    s = DyadicQuantilesSpec(bits=12, eps=1.0, delta=1e-6, depth=1, width=4096,
                            resolution_bits=r, phis=PHIS)
    q = DyadicQuantiles(s, ZERO)
    q.update_batch(items, weights=weights)
    got = [d["value"] for d in q.release()["quantiles"]]
    assert got == [(v >> r) << r for v in exact_quantiles(remaining, PHIS)]


def test_zero_noise_hashed_levels_are_close() -> None:
    """Hashed (Count Sketch) levels with zero noise: only collision error. Seeded data,
    deterministic (observed error <= 1 item); the tolerance 2% of N is a loose guard."""
    rng = np.random.default_rng(9)
    values = rng.zipf(1.3, 20000) % (1 << 16)
    s = DyadicQuantilesSpec(bits=16, eps=1.0, delta=1e-6, depth=7, width=512, phis=PHIS)
    q = DyadicQuantiles(s, ZERO)
    assert not q.levels.is_exact(0)
    q.update_batch(values)
    srt = np.sort(values)
    for d in q.release()["quantiles"]:
        lo = np.searchsorted(srt, d["value"], side="left")    # rank(v - 1)
        hi = np.searchsorted(srt, d["value"], side="right")   # rank(v)
        target = d["phi"] * values.shape[0]
        assert lo - 0.02 * values.shape[0] <= target <= hi + 0.02 * values.shape[0]


def test_noisy_rank_error_within_reported_bound() -> None:
    """All-exact levels, noise only: the returned cell's true rank interval is within
    levels * E of phi * N whenever every noise value is within E, which fails w.p.
    <= beta/2 = 5e-5 per release; 20 seeded releases -> false-failure rate <= 1e-3."""
    rng = np.random.default_rng(2)
    values = rng.integers(0, 1024, 5000)
    srt = np.sort(values)
    s = DyadicQuantilesSpec(bits=10, eps=0.5, delta=1e-6, depth=1, width=1024, phis=PHIS,
                            beta=1e-4)
    for seed in range(20):
        q = DyadicQuantiles(s, FastNoise(seed))
        q.update_batch(values)
        out = q.release()
        bound = out["error_bound"]["rank_noise_abs_max"]
        for d in out["quantiles"]:
            lo = np.searchsorted(srt, d["value"], side="left")    # rank(v - 1)
            hi = np.searchsorted(srt, d["value"], side="right")   # rank(v)
            target = d["phi"] * values.shape[0]
            assert lo - bound <= target <= hi + bound


def test_single_release_and_roundtrip() -> None:
    s = DyadicQuantilesSpec(bits=12, eps=1.0, delta=1e-6, depth=3, width=64)
    q = DyadicQuantiles(s, FastNoise(4))
    q.update_batch(np.arange(100), weights=np.ones(100))
    again = DyadicQuantiles.from_bytes(q.to_bytes(), ZERO)
    out = q.release()
    assert again.release() == out
    json.dumps(out)
    with pytest.raises(PrivacyError):
        q.release()
    with pytest.raises(PrivacyError):
        q.update_batch(np.array([1]))


def test_domain_and_spec_errors() -> None:
    q = DyadicQuantiles(DyadicQuantilesSpec(bits=4, eps=1.0, delta=1e-6), ZERO)
    with pytest.raises(SpecError, match="items"):
        q.update_batch(np.array([16]))
    with pytest.raises(SpecError, match="items"):
        q.update_batch(np.array(["a"]))
    with pytest.raises(SpecError, match="phis"):
        DyadicQuantilesSpec(bits=4, eps=1.0, delta=1e-6, phis=(0.0,))
    assert lookup("dyadic_quantiles").continual is False


events = st.lists(st.tuples(st.integers(0, 255), st.sampled_from([-1, 1])), max_size=25)


@settings(max_examples=120, deadline=None)
@given(events=events, extra=st.tuples(st.integers(0, 255), st.sampled_from([-1, 1])),
       other=st.tuples(st.integers(0, 255), st.sampled_from([-1, 1])),
       relation=st.sampled_from(["add_remove", "replace"]), kind=st.sampled_from(["cms", "cs"]))
def test_joint_sensitivity_bounds_neighbours(events, extra, other, relation, kind) -> None:
    """All levels together move by at most the joint Delta_2 between neighbouring streams
    (turnstile weights; mix of exact and hashed levels)."""
    mats = []
    for stream in ([*events, extra], list(events) if relation == "add_remove"
                   else [*events, other]):
        lv = DyadicLevels(8, tuple(range(9)), kind, 2, 8, 0)
        if stream:
            it, w = zip(*stream, strict=True)
            lv.update(np.array(it, dtype=np.int64), np.array(w, dtype=float))
        mats.append(np.concatenate([c.ravel() for c in lv.counts]))
    bound = DyadicLevels(8, tuple(range(9)), kind, 2, 8, 0).l2_sensitivity(relation, 1, True)
    assert np.linalg.norm(mats[0] - mats[1]) <= bound + 1e-9
