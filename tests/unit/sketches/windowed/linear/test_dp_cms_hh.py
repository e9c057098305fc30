"""Tests of sketches/windowed/linear/dp_cms_hh.py: DP Count-Min heavy hitters with a
private hierarchical candidate search (paper 003's DP CMS per prefix level).

Exactness tests use ZeroNoise; statistical tests use FastNoise with fixed seeds and state
their false-failure rate for a correct implementation.
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest

import sketches.windowed.linear.dp_cms_hh as hhmod
from sketches.core.base import lookup
from sketches.core.noise import FastNoise, ZeroNoise
from sketches.errors import PrivacyError
from sketches.windowed.linear.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec

ZERO = ZeroNoise()


def test_doctests() -> None:
    assert doctest.testmod(hhmod).failed == 0


def zipf_counts(seed: int, bits: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.zipf(1.2, n) * 7919 % (1 << bits)


@pytest.mark.parametrize("branch_bits", [1, 3, 4])
def test_zero_noise_exact_levels_find_exactly_the_heavy_items(branch_bits: int) -> None:
    """Small domain: all levels exact; the search returns exactly {x: f(x) >= tau}."""
    items = zipf_counts(0, 10, 20000)
    s = DPCMSHeavyHittersSpec(bits=10, eps=1.0, delta=1e-6, depth=1, width=1024,
                              branch_bits=branch_bits, phi=0.01, max_frontier=10**6)
    hh = DPCMSHeavyHitters(s, ZERO)
    hh.update_batch(items)
    out = hh.release()
    f = np.bincount(items, minlength=1 << 10)
    want = {int(x) for x in np.flatnonzero(f >= 0.01 * items.shape[0])}
    assert {d["item"] for d in out["items"]} == want
    assert all(d["estimate"] == f[d["item"]] for d in out["items"])
    assert out["n_estimate"] == items.shape[0]


def test_zero_noise_hashed_levels_have_full_recall() -> None:
    """Count-Min never underestimates without noise, so every item above tau is found."""
    items = zipf_counts(1, 20, 50000)
    s = DPCMSHeavyHittersSpec(bits=20, eps=1.0, delta=1e-6, depth=4, width=256, phi=0.005,
                              max_frontier=10**6)
    hh = DPCMSHeavyHitters(s, ZERO)
    hh.update_batch(items)
    got = {d["item"] for d in hh.release()["items"]}
    f = np.bincount(items)
    assert {int(x) for x in np.flatnonzero(f >= 0.005 * items.shape[0])} <= got


def test_noisy_recall_and_one_sided_error() -> None:
    """eps=1 (sigma ~ 14, E ~ 81 here). When every noise value is within E: each prefix of an
    item with f >= tau + E passes (Count-Min never underestimates the exact prefix count), so
    the item is found; and every released estimate is >= f - E. That event fails w.p.
    <= beta/2 = 5e-4 per seed; 5 seeds -> false-failure rate <= 2.5e-3."""
    items = zipf_counts(2, 16, 200000)
    f = np.bincount(items, minlength=1 << 16)
    s = DPCMSHeavyHittersSpec(bits=16, eps=1.0, delta=1e-6, depth=5, width=2048, phi=0.002,
                              beta=1e-3, top_k=None)
    for seed in range(5):
        hh = DPCMSHeavyHitters(s, FastNoise(seed))
        hh.update_batch(items)
        out = hh.release()
        e = out["error_bound"]["noise_abs_max"]
        got = {d["item"] for d in out["items"]}
        strong = {int(x) for x in np.flatnonzero(f >= out["threshold"] + e)}
        assert strong and strong <= got
        assert all(d["estimate"] >= f[d["item"]] - e for d in out["items"])


def test_top_k_and_release_once() -> None:
    items = zipf_counts(3, 12, 5000)
    s = DPCMSHeavyHittersSpec(bits=12, eps=1.0, delta=1e-6, phi=0.001, top_k=3)
    hh = DPCMSHeavyHitters(s, FastNoise(1))
    hh.update_batch(items)
    blob = hh.to_bytes()
    out = hh.release()
    json.dumps(out)
    assert len(out["items"]) <= 3
    est = [d["estimate"] for d in out["items"]]
    assert est == sorted(est, reverse=True)
    assert DPCMSHeavyHitters.from_bytes(blob, ZERO).release() == out
    with pytest.raises(PrivacyError):
        hh.release()
    assert lookup("dp_cms_hh").continual is False
