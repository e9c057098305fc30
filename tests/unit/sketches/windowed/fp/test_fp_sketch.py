"""Tests of sketches/windowed/fp/fp_sketch.py and sketches/windowed/fp/fp_projection.py
(paper 004's F_p sketch).

Statistical tests use fixed seeds / keys and state their false-failure rate for a correct
implementation.
"""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sketches.windowed.fp.fp_projection as fpp
import sketches.windowed.fp.fp_sketch as fps
from sketches.core.base import lookup
from sketches.core.noise import FastNoise, ZeroNoise, make_noise
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.windowed.fp.fp_projection import DATA_TAG, PAD_TAG, chacha20_blocks, stable_columns
from sketches.windowed.fp.fp_sketch import (
    FpSketch,
    FpSketchSpec,
    fp_eps,
    fp_rho,
    pad_for_eps,
    paper_rho_bound,
)

stats = pytest.importorskip("scipy.stats")


def test_doctests() -> None:
    assert doctest.testmod(fpp).failed == 0
    assert doctest.testmod(fps).failed == 0


def test_chacha20_rfc8439_block() -> None:
    """RFC 8439 section 2.3.2: the full serialized block."""
    nonce = np.frombuffer(bytes.fromhex("000000090000004a00000000"), "<u4")
    out = chacha20_blocks(bytes(range(32)), np.array([1], np.uint32), nonce[None, :])
    want = ("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
            "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")
    assert out[0].astype("<u4").tobytes().hex() == want


def test_stable_sampler_matches_scipy() -> None:
    """KS test of 4000 secret-projection entries against scipy's levy_stable(p, 0) for
    p = 0.5 and the Cauchy law for p = 1; fixed key, false-failure rate 1e-3 per law."""
    keys = np.arange(2000, dtype=np.uint64)
    for p, law in ((0.5, stats.levy_stable(0.5, 0.0)), (1.0, stats.cauchy())):
        x = stable_columns(bytes(range(32)), keys, p, 2).ravel()
        assert stats.kstest(x, law.cdf).pvalue > 1e-3


def test_columns_are_keyed_and_tagged() -> None:
    keys = np.arange(5, dtype=np.uint64)
    a = stable_columns(bytes(32), keys, 0.5, 8)
    assert np.array_equal(a, stable_columns(bytes(32), keys, 0.5, 8))
    assert not np.array_equal(a, stable_columns(bytes([1]) + bytes(31), keys, 0.5, 8))
    assert not np.array_equal(a, stable_columns(bytes(32), keys, 0.5, 8, PAD_TAG))
    assert DATA_TAG != PAD_TAG
    with pytest.raises(SpecError, match="p"):
        stable_columns(bytes(32), keys, 1.5, 8)


def test_eps_formulas() -> None:
    assert fp_rho(0.5, 4.0, 400.0) == 1.1
    assert math.isclose(fp_eps(0.5, 50, 4.0, 400.0), 100 * math.log(1.1))
    assert math.isclose(fp_eps(0.5, 50, 1.0, 1e4, unit_cap=3), 100 * math.log1p(0.03))
    for eps in (0.1, 1.0, 5.0):
        assert math.isclose(fp_eps(0.25, 20, 2.0, pad_for_eps(eps, 0.25, 20, 2.0)), eps)
    # paper 004 Theorem 1 (digest's Fig. 3 table: n=2^15, m=2^20, M=16)
    assert round(paper_rho_bound(0.25, 2**15, 2**20, 16), 3) == 2.829
    assert FpSketchSpec(p=0.5, rows=50, pad_mass=1e6).eps == pytest.approx(0.09995, abs=1e-5)


@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.floats(0, 50), max_size=12), key=st.integers(0, 12),
       other=st.integers(0, 12), v=st.floats(0, 3), v2=st.floats(0, 3),
       p=st.sampled_from([0.1, 0.3, 0.5, 0.8, 1.0]), pad=st.floats(1, 100),
       replace=st.booleans())
def test_multiplicative_sensitivity_on_neighbours(counts, key, other, v, v2, p, pad,
                                                  replace) -> None:
    """F_p(S + pad) / F_p(S' + pad) <= rho = 1 + (M/pad)^p for add/remove or replace of one
    event of weight <= M = 3 (the bound Theorem 3 turns into eps)."""
    f = np.zeros(14)
    f[: len(counts)] = counts
    f1, f2 = f.copy(), f.copy()
    f1[key] += v
    if replace:
        f2[other] += v2

    def fp(x: np.ndarray) -> float:
        return float(np.sum(x ** p)) + pad ** p

    rho = fp_rho(p, 3.0, pad)
    assert fp(f1) <= rho * fp(f2) * (1 + 1e-12)
    assert fp(f2) <= rho * fp(f1) * (1 + 1e-12)


def test_theorem3_density_ratio() -> None:
    """Paper 004 Theorem 3's key inequality, checked numerically (scipy pdf, deterministic):
    1/rho <= D_{p,F}(x) / D_{p,rho F}(x) <= rho^(1/p), scale = F^(1/p)."""
    rho, f = 1.5, 2.0
    xs = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 15)])
    for p in (0.5, 0.9):
        a = stats.levy_stable(p, 0.0, scale=f ** (1 / p)).pdf(xs)
        b = stats.levy_stable(p, 0.0, scale=(rho * f) ** (1 / p)).pdf(xs)
        ratio = a / b
        assert (ratio <= rho ** (1 / p) * (1 + 1e-6)).all()
        assert (ratio >= 1 / rho * (1 - 1e-6)).all()


def _stream() -> tuple[np.ndarray, dict[float, float]]:
    rng = np.random.default_rng(0)
    counts = rng.zipf(1.5, 300).clip(max=5000)
    items = np.repeat(np.arange(300), counts)
    return items, {p: float(np.sum(counts.astype(float) ** p)) for p in (0.5, 1.0)}


@pytest.mark.parametrize("p", [0.5, 1.0])
def test_estimate_within_chebyshev_bound(p: float) -> None:
    """200 independent keys; the released interval (confidence 0.9, Chebyshev on the log)
    misses the truth w.p. <= 0.1 each; P(Bin(200, 0.1) > 36) < 2e-4 = false-failure rate.
    The GM estimator is unbiased: mean of F_hat/F within 0.1 (> 6 sd of the mean here)."""
    items, truth = _stream()
    spec = FpSketchSpec(p=p, rows=50, pad_mass=10.0, confidence=0.9)
    misses, ratios = 0, []
    for seed in range(200):
        sk = FpSketch(spec, FastNoise(seed))
        sk.update_batch(items)
        out = sk.release()
        misses += int(not out["error_bound"]["low"] <= truth[p] <= out["error_bound"]["high"])
        ratios.append((out["estimate"] + 10.0 ** p) / (truth[p] + 10.0 ** p))
    assert misses <= 36
    assert abs(float(np.mean(ratios)) - 1) < 0.1


def test_linear_weights_clip_and_split_batches() -> None:
    spec = FpSketchSpec(p=0.5, rows=8, max_value=2.0)
    a, b = FpSketch(spec, ZeroNoise()), FpSketch(spec, ZeroNoise())   # same (zero) key
    a.update_batch(np.array([1, 2, 3, 1]), weights=np.array([1.0, 5.0, -1.0, 1.0]))
    b.update_batch(np.array([1, 1]))
    b.update_batch(np.array([2, 2]))                 # 5.0 clipped to 2.0; -1.0 clipped to 0
    assert np.allclose(a._a, b._a)


def test_single_release_secret_not_released_roundtrip() -> None:
    noise = make_noise("secure")
    sk = FpSketch(FpSketchSpec(p=0.75), noise)
    sk.update_batch(np.arange(1000))
    blob = sk.to_bytes()
    assert sk._key in blob                        # checkpoint holds the secret
    out = sk.release()
    text = json.dumps(out)
    assert sk._key.hex() not in text and "key" not in text
    assert FpSketch.from_bytes(blob, noise).release() == out
    with pytest.raises(PrivacyError):
        sk.release()
    with pytest.raises(PrivacyError):
        sk.update_batch(np.arange(3))
    with pytest.raises(SerializationError):
        FpSketch.from_bytes(blob[:-5], noise)
    other = FpSketch(FpSketchSpec(p=0.75), noise)
    assert other._key != sk._key                  # fresh key per window


def test_spec_and_registry() -> None:
    with pytest.raises(SpecError, match="p"):
        FpSketchSpec(p=1.5)
    with pytest.raises(SpecError, match="rows"):
        FpSketchSpec(p=0.5, rows=1)
    with pytest.raises(SpecError, match="pad_mass"):
        FpSketchSpec(p=0.5, pad_mass=0)
    entry = lookup("fp_sketch")
    assert entry.continual is False
    assert entry.build_spec({"p": 0.5, "eps": 2.0}).eps == pytest.approx(2.0)
    with pytest.raises(SpecError, match="pad_mass"):   # explicit padding too small for eps
        entry.build_spec({"p": 0.5, "eps": 0.1, "pad_mass": 10.0})


def test_release_is_quantized_to_a_relative_grid() -> None:
    """Issue 8 item 8: estimate and bounds carry 4 significant digits (no raw float bits)."""
    from sketches.core.noise import make_noise
    from sketches.windowed.fp.fp_sketch import FpSketch, FpSketchSpec

    spec = FpSketchSpec(p=0.5, rows=50, max_value=1.0, pad_mass=1e6)
    sk = FpSketch(spec, make_noise("fast", 5, allow_insecure=True))
    sk.update_batch(np.repeat(np.arange(300), 37))
    out = sk.release()
    values = [out["estimate"], out["error_bound"]["low"], out["error_bound"]["high"]]
    assert all(v == float(f"{v:.4g}") for v in values)
    assert values[0] > 0 and "significant" in out["quantization"]
