"""The empirical privacy audit, small CI version (scripts/privacy_audit.py runs the large one).

Two kinds of assertion per mechanism:

- **claim**: on the production noise (``SecureNoise``), the empirical eps lower
  bound at the stated delta does not exceed the claimed eps. The bound is a
  Clopper-Pearson bound at total confidence ``1 - ALPHA`` (Bonferroni over all
  thresholds), so a correct mechanism fails this test with probability at most
  ``ALPHA = 1e-4`` per mechanism, below 1.5e-3 for all 14 together.
- **power**: the same audit on a deliberately broken variant (zero noise for
  every mechanism; noise scale divided by 4 for PMG and by 10 for LazyCMS)
  certifies an eps *above* the claim, so the audit can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from privacy_audit import CASES, ScaledNoise, case, clopper_pearson, eps_lower_bound, run_case
from sketches import SecureNoise, ZeroNoise

ALPHA = 1e-4
# trials (runs on X and on X' each) per mechanism: a few seconds each on an idle core
TRIALS = {"lazy_hh": 30, "fp_sketch": 60, "dp_cms_hh": 60, "dyadic_quantiles": 60}
DEFAULT_TRIALS = 100


def test_clopper_pearson_matches_scipy() -> None:
    for k, n, a in [(0, 10, 0.05), (3, 10, 0.05), (10, 10, 0.01), (17, 1000, 1e-4),
                    (999, 1000, 1e-3), (5000, 100000, 0.05)]:
        lo, hi = clopper_pearson(k, n, a)
        ref_lo = 0.0 if k == 0 else sps.beta.ppf(a, k, n - k + 1)
        ref_hi = 1.0 if k == n else sps.beta.ppf(1 - a, k + 1, n - k)
        assert lo == pytest.approx(ref_lo, rel=1e-7, abs=1e-12)
        assert hi == pytest.approx(ref_hi, rel=1e-7, abs=1e-12)


def test_eps_lower_bound_on_randomized_response() -> None:
    """eps-DP randomized response: the bound is valid (<= eps) and tight with many samples.

    Seeded; the first assertion fails with probability <= 0.05 over seeds.
    """
    eps = 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(1)
    s0 = (rng.random(200_000) > p).astype(float)  # X: answers 1 with prob 1 - p
    s1 = (rng.random(200_000) < p).astype(float)  # X': answers 1 with prob p
    b = eps_lower_bound(s0, s1, delta=0.0, alpha=0.05)
    assert b.eps_lb <= eps
    assert b.eps_lb > 0.95
    assert b.ceiling > b.eps_lb


def test_eps_lower_bound_subtracts_delta() -> None:
    """A release that differs only w.p. ~delta certifies no positive eps."""
    s0 = np.zeros(1000)
    s1 = np.zeros(1000)
    s1[:1] = 1.0  # one in a thousand runs reveals X'
    assert eps_lower_bound(s0, s1, delta=1e-3, alpha=0.05).eps_lb <= 0.0
    assert eps_lower_bound(s0, s1, delta=1e-6, alpha=0.05).eps_lb <= 0.0  # too few runs


@pytest.mark.parametrize("name", list(CASES))
def test_claim_holds(name: str) -> None:
    c = case(name)
    r = run_case(c, TRIALS.get(name, DEFAULT_TRIALS), SecureNoise(), alpha=ALPHA)
    assert r.eps_lb <= r.eps_claimed, (
        f"{name}: the audit certifies eps >= {r.eps_lb:.3f} at delta={r.delta_claimed:.3g} "
        f"but the release claims eps={r.eps_claimed} ({r.test}); the stated guarantee is false")


@pytest.mark.parametrize("name", list(CASES))
def test_power_zero_noise(name: str) -> None:
    """Without noise (and with all-zero secret keys) every mechanism is caught."""
    c = case(name)
    r = run_case(c, 60, ZeroNoise(), alpha=0.05)
    assert r.eps_lb > r.eps_claimed, (
        f"{name}: the audit cannot tell X from X' even without noise "
        f"(bound {r.eps_lb:.3f}, ceiling {r.ceiling:.3f}): the statistic is too weak")


def test_power_pmg_noise_divided_by_4() -> None:
    c = case("pmg_int")
    r = run_case(c, 500, ScaledNoise(SecureNoise(), 0.25), alpha=0.05)
    assert r.eps_lb > r.eps_claimed, f"pmg with noise/4 passed the audit: {r}"


@pytest.mark.slow
def test_power_lazy_cms_noise_divided_by_10() -> None:
    """The continual sketch's statistic catches a miscalibrated sigma (about 30 s)."""
    c = case("lazy_cms")
    r = run_case(c, 1000, ScaledNoise(SecureNoise(), 0.1), alpha=0.05)
    assert r.eps_lb > r.eps_claimed, f"lazy_cms with noise/10 passed the audit: {r}"
