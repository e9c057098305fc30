"""PunctualCMS / PunctualCS (Alg. 3): exactness, one noise draw per event, privacy guard."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.continual.plain import CMS, CS, PlainSketchSpec
from sketches.continual.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
from sketches.core.base import lookup
from sketches.core.noise import ZeroNoise
from sketches.errors import HorizonExceededError, PrivacyError, SpecError
from sketches.privacy import Calibrator, Relation


class CountingNoise(ZeroNoise):
    """Zero noise that counts draws and values drawn (test double)."""

    def __init__(self) -> None:
        self.values = 0
        self.calls = 0

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        self.calls += 1
        self.values += int(np.prod(size))
        return super().discrete_gaussian(sigma, size)


def _spec(**kw: Any) -> PunctualSketchSpec:
    base: dict[str, Any] = {"depth": 3, "width": 16, "horizon": 300, "eps": 0.5,
                            "delta": 1e-6, "hash_seed": 4}
    base.update(kw)
    return PunctualSketchSpec(**base)


@pytest.mark.parametrize(("cls", "plain"), [(PunctualCMS, CMS), (PunctualCS, CS)])
def test_zero_noise_equals_plain_sketch_after_every_batch(cls, plain):
    spec = _spec()
    sk = cls(spec, ZeroNoise())
    ref = plain(PlainSketchSpec(depth=3, width=16, hash_seed=4))
    rng = np.random.default_rng(0)
    for n in (1, 17, 40, 3):
        items = rng.integers(0, 50, n)
        sk.update_batch(items)
        ref.update_batch(items)
        np.testing.assert_array_equal(sk.noisy_matrix(), ref.matrix())
        np.testing.assert_array_equal(sk.query(np.arange(50)), ref.query(np.arange(50)))


def test_every_event_draws_noise_for_every_cell():
    """Alg. 3: one round per event -> one d*w noise vector per event."""
    noise = CountingNoise()
    sk = PunctualCMS(_spec(), noise)
    sk.update_batch(np.arange(25))
    assert noise.calls == 25 and noise.values == 25 * 3 * 16
    assert sk.rounds == 25


def test_guards():
    with pytest.raises(PrivacyError, match="clock"):
        _spec(relation=Relation.ADD_REMOVE)
    with pytest.raises(SpecError, match=r"^width:"):
        _spec(width=0)
    sk = PunctualCS(_spec(horizon=10, calibrator=Calibrator.ANALYTIC), ZeroNoise())
    sk.update_batch(np.arange(10))
    with pytest.raises(HorizonExceededError):
        sk.update_batch(np.arange(1))
    with pytest.raises(SpecError, match=r"^ticks:"):
        sk.update_batch(np.arange(1), ticks=np.zeros(1, np.int64))


def test_cs_calibrated_with_signed_replace_cells():
    cms, cs = PunctualCMS(_spec(), ZeroNoise()), PunctualCS(_spec(), ZeroNoise())
    assert cms.calibration.m == 6 and cs.calibration.m == 12
    assert cs.calibration.sigma > cms.calibration.sigma


def test_registered_and_release_payload():
    entry = lookup("punctual_cms")
    sk = entry.build(entry.build_spec({"depth": 2, "width": 4, "horizon": 8, "eps": 0.5,
                                       "delta": 1e-6}), ZeroNoise())
    sk.update_batch(np.array([1, 1]))
    rel = sk.release()
    assert rel["kind"] == "sketch" and rel["lag_bound"] == 0 and rel["rounds"] == 2
    assert rel["error_bound"]["noise"] > 0


class _FailOn(ZeroNoise):
    """Zero noise whose ``fail_at``-th draw raises (test double)."""

    def __init__(self, fail_at: int) -> None:
        self.calls, self.fail_at = 0, fail_at

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("noise source failed")
        return super().discrete_gaussian(sigma, size)


def test_failed_noise_draw_leaves_batch_unapplied():
    """A draw failing at the 3rd event of a batch rolls the whole batch back:
    state and release as before the call (zero noise would otherwise expose
    the exact counts of the first two events)."""
    sk = PunctualCMS(_spec(), _FailOn(fail_at=0))
    sk.update_batch(np.array([1, 2]))
    state, rel = sk.to_bytes(), sk.release()
    sk._counters._noise_src.fail_at = sk._counters._noise_src.calls + 3  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        sk.update_batch(np.array([5, 5, 5, 5]))
    assert sk.to_bytes() == state and sk.release() == rel and sk.rounds == 2
    assert rel["float_noise"] is False
