"""Tests of sketches.core.noise / sketches.core.noise_tables.

False-failure rates (stated per test; all randomized tests are seeded except the
SecureNoise ones, which by design cannot be):

- FastNoise tests use fixed seeds, so they are deterministic; the thresholds are
  chosen so that a *random* seed would fail with probability <= 1e-6 each.
- SecureNoise moment tests use |z| <= 5.5 per statistic (two-sided normal tail
  3.8e-8), 12 statistics: 4.6e-7.
- Chi-square and Kolmogorov-Smirnov tests reject at p < 1e-7 (1e-7 each; for
  FastNoise the seed is fixed, so deterministic). SecureNoise runs 1 chi-square
  and 3 KS tests: 4e-7.
- Whole file, SecureNoise included: false-failure rate < 1e-6 per run.
"""

from __future__ import annotations

import itertools
import logging
import math

import numpy as np
import pytest
from scipy import stats

from sketches.core.noise import FastNoise, NoiseSource, SecureNoise, ZeroNoise, make_noise
from sketches.core.noise_compose import MAX_DISCRETE_SIGMA, validate_discrete_sigma
from sketches.core.noise_tables import (
    MAX_DISCRETE_LAPLACE_SCALE,
    MAX_HALF_WIDTH,
    MAX_TABLE_SIGMA,
    MIN_DISCRETE_SCALE,
    IntegerTable,
    discrete_gaussian_table,
    discrete_laplace_table,
    validate_discrete_laplace_scale,
)
from sketches.errors import PrivacyError, SpecError

Z = 5.5  # per-statistic z threshold (two-sided tail 3.8e-8)


def dg_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    """Exact (float64, renormalised over a wide support) discrete Gaussian pmf."""
    k = math.ceil(40 * sigma) + 10
    xs = np.arange(-k, k + 1)
    w = np.exp(-(xs.astype(np.float64) ** 2) / (2 * sigma**2))
    z = w.sum()
    return np.exp(-(support.astype(np.float64) ** 2) / (2 * sigma**2)) / z


def dl_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    r = math.exp(-1.0 / scale)
    z = (1 + r) / (1 - r)
    return np.exp(-np.abs(support.astype(np.float64)) / scale) / z


def exact_moments(pmf, param: float) -> tuple[float, float, float]:
    """Mean, variance and 4th central moment of a symmetric integer pmf."""
    k = int(200 * param) + 50
    xs = np.arange(-k, k + 1).astype(np.float64)
    p = pmf(param, np.arange(-k, k + 1))
    p = p / p.sum()
    var = float((p * xs**2).sum())
    mu4 = float((p * xs**4).sum())
    return 0.0, var, mu4


def check_moments(x: np.ndarray, mean: float, var: float, mu4: float, z: float = Z) -> None:
    """|sample mean - mean| and |sample var - var| within z standard errors (CLT)."""
    n = x.size
    xf = x.astype(np.float64)
    m = xf.mean()
    assert abs(m - mean) <= z * math.sqrt(var / n), (m, mean)
    s2 = ((xf - mean) ** 2).mean()
    assert abs(s2 - var) <= z * math.sqrt((mu4 - var**2) / n), (s2, var)


# ---------------------------------------------------------------- make_noise


def test_make_noise_refuses_insecure_kinds_without_flag() -> None:
    for kind in ("fast", "zero"):
        with pytest.raises(PrivacyError, match="allow_insecure"):
            make_noise(kind)
        with pytest.raises(PrivacyError, match=kind):
            make_noise(kind, 1)


def test_make_noise_logs_warning_naming_the_mode(caplog: pytest.LogCaptureFixture) -> None:
    for kind in ("fast", "zero"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="sketches.core.noise"):
            src = make_noise(kind, 5 if kind == "fast" else None, allow_insecure=True)
        assert src.kind == kind
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert kind in warnings[0].getMessage() and "INSECURE" in warnings[0].getMessage()


def test_make_noise_secure_and_errors(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        src = make_noise("secure")
    assert isinstance(src, SecureNoise) and src.kind == "secure"
    assert not caplog.records
    with pytest.raises(SpecError, match="seed"):
        make_noise("secure", 3)
    with pytest.raises(SpecError, match="secure, fast, zero"):
        make_noise("gaussian")
    fast = make_noise("fast", 11, allow_insecure=True)
    assert isinstance(fast, FastNoise) and fast.seed == 11
    assert make_noise("fast", allow_insecure=True).seed == 0  # type: ignore[attr-defined]
    assert isinstance(make_noise("zero", allow_insecure=True), ZeroNoise)


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize("src", [SecureNoise(), FastNoise(1), ZeroNoise()], ids=repr)
def test_shapes_and_dtypes(src: NoiseSource) -> None:
    assert isinstance(src, NoiseSource)
    cases: list[tuple[int | tuple[int, ...], tuple[int, ...]]] = [
        (5, (5,)), ((2, 3), (2, 3)), (0, (0,)), ((4, 0), (4, 0))
    ]
    for size, shape in cases:
        assert src.gaussian(2.0, size).shape == shape
        assert src.gaussian(2.0, size).dtype == np.float64
        assert src.laplace(2.0, size).dtype == np.float64
        assert src.uniform(size).shape == shape
        dg = src.discrete_gaussian(2.0, size)
        dl = src.discrete_laplace(2.0, size)
        assert dg.shape == shape and dg.dtype == np.int64
        assert dl.shape == shape and dl.dtype == np.int64
    assert len(src.random_bytes(33)) == 33


@pytest.mark.parametrize("src", [SecureNoise(), FastNoise(1), ZeroNoise()], ids=repr)
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_scales_rejected(src: NoiseSource, bad: float) -> None:
    for fn in (src.gaussian, src.discrete_gaussian, src.laplace, src.discrete_laplace):
        with pytest.raises(SpecError, match=r"sigma|scale"):
            fn(bad, 3)


def test_huge_scale_refused_before_building() -> None:
    with pytest.raises(SpecError, match="sigma"):
        SecureNoise().discrete_gaussian(1e9, 1)  # above MAX_DISCRETE_SIGMA = 1e8
    with pytest.raises(SpecError, match="scale"):
        SecureNoise().discrete_laplace(1e6, 1)


def test_zero_noise_is_zero() -> None:
    z = ZeroNoise()
    assert not z.gaussian(5.0, 100).any() and not z.discrete_gaussian(5.0, 100).any()
    assert not z.laplace(5.0, 100).any() and not z.discrete_laplace(5.0, 100).any()
    assert not z.uniform(10).any() and z.random_bytes(4) == b"\0\0\0\0"


def test_fast_noise_reproducible_and_seed_exposed() -> None:
    a, b, c = FastNoise(42), FastNoise(42), FastNoise(43)
    assert a.seed == 42
    for name in ("gaussian", "discrete_gaussian", "laplace", "discrete_laplace"):
        x, y, w = (getattr(s, name)(7.0, 50) for s in (a, b, c))
        assert np.array_equal(x, y) and not np.array_equal(x, w)
    with pytest.raises(SpecError, match="seed"):
        FastNoise(-1)


def test_secure_noise_is_not_repeating() -> None:
    """Two 256-bit draws collide with probability 2**-256."""
    s = SecureNoise()
    assert s.random_bytes(32) != s.random_bytes(32)
    assert not np.array_equal(s.discrete_gaussian(100.0, 64), s.discrete_gaussian(100.0, 64))


# ---------------------------------------------------------------- tables


def test_table_cdf_matches_independent_exact_computation() -> None:
    """Table words vs. a direct (non-recurrence) Decimal computation: equal to 2**-100."""
    from decimal import Decimal, localcontext

    sigma = 3.7
    t = discrete_gaussian_table(sigma)
    k = -t.offset
    with localcontext() as ctx:
        ctx.prec = 60
        s2 = Decimal(repr(sigma)) ** 2
        w = [(-(Decimal(x) ** 2) / (2 * s2)).exp() for x in range(-k, k + 1)]
        total = sum(w, Decimal(0))
        acc, worst = Decimal(0), 0.0
        for j in range(2 * k):
            acc += w[j]
            exact = acc / total
            got = Decimal((int(t.hi[j]) << 64) | int(t.lo[j])) / Decimal(2) ** 128
            worst = max(worst, float(abs(exact - got)))
    assert worst < 2.0**-100
    assert t.tv_bound < 2.0**-100
    assert discrete_laplace_table(4.0).tv_bound < 2.0**-100


def test_table_tie_resolution_matches_128bit_reference() -> None:
    """Draws whose high word equals a table word must be resolved by the low word exactly."""
    rng = np.random.default_rng(3)
    # a table with many equal high words: CDF values clustered in few 2**64 buckets
    words = np.sort(rng.integers(0, 50, 40).astype(object) * (1 << 64)
                    + rng.integers(0, 2**63, 40).astype(object) * 2)
    table = IntegerTable(
        offset=-20,
        hi=np.array([int(w) >> 64 for w in words], dtype=np.uint64),
        lo=np.array([int(w) & ((1 << 64) - 1) for w in words], dtype=np.uint64),
        tv_bound=0.0,
    )
    u_hi = rng.integers(0, 52, 2000).astype(np.uint64)
    lows = rng.integers(0, 2**63, 2000, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    used: list[int] = []

    def draw(n: int) -> np.ndarray:
        out = lows[len(used): len(used) + n]
        used.extend(range(n))
        return out

    got = table.sample(u_hi, draw)
    # reference: low words are consumed in order of tied positions
    tied = [i for i in range(u_hi.size) if int(u_hi[i]) in set(table.hi.tolist())]
    lo_of = dict(zip(tied, lows[: len(tied)].tolist(), strict=True))
    for i in range(u_hi.size):
        u = (int(u_hi[i]) << 64) | lo_of.get(i, 0)
        if i not in lo_of:  # no tie: any low word gives the same answer
            u = int(u_hi[i]) << 64
        expect = sum(1 for w in words if int(w) <= u) - 20
        assert int(got[i]) == expect
    assert len(tied) > 100  # the tie path was really exercised


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize("sigma", [1.5, 4.0])
def test_discrete_gaussian_pmf_chi_square(sigma: float) -> None:
    """Chi-square goodness of fit vs. the exact pmf (FastNoise seed 1; reject at p < 1e-7)."""
    x = FastNoise(1).discrete_gaussian(sigma, 200_000)
    _chi_square(x, lambda s: dg_pmf(sigma, s))


def test_discrete_gaussian_pmf_chi_square_secure() -> None:
    """Same with SecureNoise (unseeded: false-failure rate 1e-7)."""
    x = SecureNoise().discrete_gaussian(2.5, 200_000)
    _chi_square(x, lambda s: dg_pmf(2.5, s))


def test_discrete_laplace_pmf_chi_square() -> None:
    x = FastNoise(2).discrete_laplace(2.0, 200_000)
    _chi_square(x, lambda s: dl_pmf(2.0, s))


def _chi_square(x: np.ndarray, pmf) -> None:
    n = x.size
    support = np.arange(int(x.min()), int(x.max()) + 1)
    probs = pmf(support)
    keep = probs * n >= 20  # pool bins with expected count < 20 into one tail bin
    lo, hi = support[keep].min(), support[keep].max()
    inner = np.arange(lo, hi + 1)
    tail = np.count_nonzero((x < lo) | (x > hi))
    obs = np.array([np.count_nonzero(x == v) for v in inner] + [tail])
    exp_inner = pmf(inner) * n
    expected = np.append(exp_inner, n - exp_inner.sum())
    chi2 = float(((obs - expected) ** 2 / expected).sum())
    p = stats.chi2.sf(chi2, obs.size - 1)
    assert p > 1e-7, (chi2, obs.size, p)


@pytest.mark.parametrize(
    "src", [FastNoise(123), SecureNoise()], ids=["fast-seed123", "secure"]
)
def test_moments_of_all_samplers(src: NoiseSource) -> None:
    """Mean and variance of each sampler within 5.5 standard errors (see module docstring)."""
    n = 200_000
    check_moments(src.gaussian(30.0, n), 0.0, 900.0, 3 * 30.0**4)
    check_moments(src.laplace(3.0, n), 0.0, 2 * 9.0, 24 * 3.0**4)
    check_moments(src.uniform(n), 0.5, 1 / 12, 1 / 80)
    for sigma in (10.0, 1000.0):
        _, var, mu4 = exact_moments(dg_pmf, sigma)
        check_moments(src.discrete_gaussian(sigma, n), 0.0, var, mu4)
    _, var, mu4 = exact_moments(dl_pmf, 5.0)
    check_moments(src.discrete_laplace(5.0, n), 0.0, var, mu4)
    u = src.uniform(n)
    assert u.min() >= 0.0 and u.max() < 1.0


@pytest.mark.parametrize("src", [FastNoise(9), SecureNoise()], ids=["fast-seed9", "secure"])
def test_continuous_samplers_match_cdf(src: NoiseSource) -> None:
    """Kolmogorov-Smirnov against the exact CDFs (reject at p < 1e-7)."""
    assert stats.kstest(src.gaussian(2.0, 50_000), stats.norm(scale=2.0).cdf).pvalue > 1e-7
    assert stats.kstest(src.laplace(2.0, 50_000), stats.laplace(scale=2.0).cdf).pvalue > 1e-7
    assert stats.kstest(src.uniform(50_000), "uniform").pvalue > 1e-7


# ---------------------------------------------------------------- small sigmas, range

SWEEP = [round(0.05 * i, 2) for i in range(1, 41)]  # 0.05 .. 2.0 step 0.05


def _table_pmf(t: IntegerTable) -> np.ndarray:
    """pmf on ``[offset, -offset]`` from the 128-bit CDF words (exact integer differences)."""
    cdf = [0] + [(int(h) << 64) | int(lo) for h, lo in zip(t.hi, t.lo, strict=True)] + [1 << 128]
    return np.array([(b - a) / 2.0**128 for a, b in itertools.pairwise(cdf)])


def _check_samples(x: np.ndarray, pmf: np.ndarray, offset: int) -> None:
    """Chi-square over values expected >= 5 times (conditional on landing there) and a
    two-sided binomial test of the count outside them; each rejects at p < 1e-7."""
    n = x.size
    counts = np.bincount(x - offset, minlength=pmf.size)
    assert counts.size == pmf.size  # nothing outside the support
    keep = pmf * n >= 5
    p_out = float(pmf[~keep].sum())
    n_out = int(counts[~keep].sum())
    assert stats.binom.sf(n_out - 1, n, p_out) > 1e-7 or n_out == 0, (n_out, p_out)
    assert stats.binom.cdf(n_out, n, p_out) > 1e-7, (n_out, p_out)
    if keep.sum() >= 2:
        obs = counts[keep]
        expected = pmf[keep] / pmf[keep].sum() * obs.sum()
        chi2 = float(((obs - expected) ** 2 / expected).sum())
        assert stats.chi2.sf(chi2, obs.size - 1) > 1e-7, chi2


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_small_scale_sweep_tables_exact_and_samples_fit(kind: str) -> None:
    """sigma/scale 0.05 .. 2 step 0.05 (tail sums used to go negative and crash at 0.1, 0.15,
    0.45-0.85, 1.05, ...). Tables must build, match the exact pmf (deterministic, 1e-13
    absolute, 1e-9 relative above 1e-20), and FastNoise(seed 17) samples must fit
    it: 3 tests at 1e-7 per value, 80 values, false-failure rate 2.4e-5 for a random seed
    (deterministic with this seed)."""
    src = FastNoise(17)
    for p in SWEEP:
        if kind == "gaussian":
            t = discrete_gaussian_table(p)
            exact = dg_pmf(p, np.arange(t.offset, -t.offset + 1))
            x = src.discrete_gaussian(p, 20_000)
        else:
            t = discrete_laplace_table(p)
            exact = dl_pmf(p, np.arange(t.offset, -t.offset + 1))
            x = src.discrete_laplace(p, 20_000)
        got = _table_pmf(t)
        assert got.size == exact.size and (got >= 0).all(), p
        assert np.abs(got - exact).max() < 1e-13, p
        big = exact > 1e-20  # resolution 2**-128 = 2.9e-39 absolute
        assert (np.abs(got[big] - exact[big]) <= 1e-9 * exact[big]).all(), p
        _check_samples(x, exact, t.offset)


def test_supported_range_validated_eagerly() -> None:
    """validate_discrete_sigma / _laplace_scale: range errors name the fix; build=True builds."""
    assert validate_discrete_sigma(MIN_DISCRETE_SCALE, build=True) == MIN_DISCRETE_SCALE
    assert discrete_gaussian_table(MIN_DISCRETE_SCALE).offset == -2
    assert validate_discrete_laplace_scale(MIN_DISCRETE_SCALE, build=True) == MIN_DISCRETE_SCALE
    assert not SecureNoise().discrete_gaussian(MIN_DISCRETE_SCALE, 1000).any()
    with pytest.raises(SpecError, match="lower eps"):
        validate_discrete_sigma(MIN_DISCRETE_SCALE / 2)
    with pytest.raises(SpecError, match="lower eps"):
        validate_discrete_laplace_scale(1e-6)
    with pytest.raises(SpecError, match="raise eps"):
        validate_discrete_sigma(MAX_DISCRETE_SIGMA * 1.001)
    with pytest.raises(SpecError, match="raise eps"):
        validate_discrete_laplace_scale(MAX_DISCRETE_LAPLACE_SCALE * 1.001)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(SpecError, match="finite"):
            validate_discrete_sigma(bad)
    # the largest one-table sigma really fits the table limit (checked without building it)
    assert math.ceil(MAX_TABLE_SIGMA * math.sqrt(260 * math.log(2))) + 1 <= MAX_HALF_WIDTH
    assert math.ceil(MAX_DISCRETE_LAPLACE_SCALE * 130 * math.log(2)) + 1 <= MAX_HALF_WIDTH
