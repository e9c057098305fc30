"""The composed large-sigma discrete Gaussian (sketches.core.noise_compose).

Three kinds of test:

- the parameter rule (deterministic): exact variance identity, table ranges, TV bounds;
- the composition theorem (deterministic): at small sigma the composed law is computed
  exactly (50-digit decimal convolution) and its TV to ``N_Z(0, sigma^2)`` must be at
  most :func:`smoothing_tv` (and within a factor 5 of it: the bound is not vacuous);
  the same with the real tables' exact 128-bit laws;
- statistics of seeded FastNoise samples against the exact law at many sigma, each
  statistic at false-failure rate ``ALPHA = 1e-6`` (probability over the seed if the
  sampler were exact; it is within ``2**-102.99`` per sample, adding ``< 1e-24``), six
  statistics per sigma; the seeds are fixed, so the outcome is deterministic. Power:
  sigma x 0.99, ``m + 1`` / ``m - 1`` in the combination, and an ``m`` too large for the
  fine table (no smoothing) must each be rejected.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from scipy import stats

from sketches.core.noise import FastNoise, SecureNoise, ZeroNoise
from sketches.core.noise_compose import (
    COMPOSE32_MIN,
    COMPOSE_THRESHOLD,
    MAX_DISCRETE_SIGMA,
    ComposedSampler,
    composed_params,
    composed_sampler,
    discrete_gaussian32_sampler,
    discrete_gaussian32_support,
    discrete_gaussian32_tv,
    discrete_gaussian_sampler,
    discrete_gaussian_tv,
    smoothing_tv,
    split_sigma,
    validate_discrete_sigma,
)
from sketches.core.noise_tables import (
    MAX_TABLE_SIGMA,
    TABLE_TV_BOUND,
    IntegerTable,
    discrete_gaussian_table,
    discrete_gaussian_variance_table,
)
from sketches.errors import SpecError

ALPHA = 1e-6  # false-failure rate of each statistic below
Z_ALPHA = float(stats.norm.isf(ALPHA / 2))  # two-sided z threshold, 4.89
N = 2_000_000  # samples per sigma
BINS = 100

SIGMAS = [
    COMPOSE_THRESHOLD * (1 + 1e-9),  # first composed sigma
    2e5, 333_333.3, 1e6, 2_718_281.8, 5e6, 7_777_777.7, 1e7, MAX_DISCRETE_SIGMA,
]


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize("sigma", [*SIGMAS, 1.234567890123e6, 9_999_999.999999])
def test_rule_is_exact_and_inside_the_tables(sigma: float) -> None:
    """sigma^2 = m^2 sigma_c^2 + sigma_f^2 exactly; sigma_f >= 3m; both in table range;
    smoothing term < 2**-250; total TV < 2**-100 (deterministic)."""
    p = composed_params(sigma)
    with localcontext() as ctx:
        ctx.prec = 200
        v = Decimal(repr(sigma)) ** 2
        vc = Decimal(repr(p.coarse_sigma)) ** 2
        vf = Decimal(p.fine_variance)
        assert Decimal(p.m) ** 2 * vc + vf == v
        assert vf >= Decimal(3 * p.m) ** 2
    assert p.coarse_sigma <= MAX_TABLE_SIGMA and math.sqrt(float(vf)) <= MAX_TABLE_SIGMA
    assert p.coarse_sigma < 20_000 and math.sqrt(float(vf)) < 20_000  # fast builds
    assert 0 < p.smoothing_tv < 2.0**-250
    tv = discrete_gaussian_tv(sigma)
    assert 2 * TABLE_TV_BOUND < tv < 2.0**-102.99 < 2.0**-100
    assert p == composed_params(sigma)  # deterministic


def test_threshold_and_range() -> None:
    """One table up to COMPOSE_THRESHOLD (the very same cached object, so byte-identical
    draws), composed above, nothing above MAX_DISCRETE_SIGMA."""
    assert COMPOSE_THRESHOLD == MAX_TABLE_SIGMA
    for s in (1e-3, 10.0, 1e3):
        assert discrete_gaussian_sampler(s) is discrete_gaussian_table(s)
    for s in (1e-3, 1e5, COMPOSE_THRESHOLD):
        assert discrete_gaussian_tv(s) == TABLE_TV_BOUND == 2.0**-104
    assert isinstance(discrete_gaussian_sampler(2e5), ComposedSampler)
    assert validate_discrete_sigma(MAX_DISCRETE_SIGMA) == MAX_DISCRETE_SIGMA >= 1e7
    for bad in (MAX_DISCRETE_SIGMA * 1.001, 1e9):
        with pytest.raises(SpecError, match="raise eps"):
            validate_discrete_sigma(bad)
        with pytest.raises(SpecError, match="raise eps"):
            discrete_gaussian_tv(bad)
    with pytest.raises(SpecError, match="one table"):
        composed_params(1e5)
    with pytest.raises(SpecError, match="table limit"):
        discrete_gaussian_table(2e5)  # a single table still refuses
    assert ZeroNoise().discrete_gaussian(1e7, 3).tolist() == [0, 0, 0]
    x = SecureNoise().discrete_gaussian(1e7, (2, 3))
    assert x.shape == (2, 3) and x.dtype == np.int64


def test_fast_noise_seeded_draws_reproducible() -> None:
    a = FastNoise(3).discrete_gaussian(1e6, 1000)
    b = FastNoise(3).discrete_gaussian(1e6, 1000)
    assert np.array_equal(a, b) and a.dtype == np.int64


# ------------------------------------------------------------ the theorem


def _dg_law(variance: Decimal, k: int) -> list[Decimal]:
    """Exact (50-digit) N_Z(0, variance) on [-k, k]; the mass outside is < 1e-60 for the
    k used below (k >= 17 sigma)."""
    w = [(-(Decimal(x) ** 2) / (2 * variance)).exp() for x in range(-k, k + 1)]
    total = sum(w, Decimal(0))
    return [x / total for x in w]


def _table_law(t: IntegerTable) -> list[Decimal]:
    """The exact law a table samples: differences of its 128-bit CDF words."""
    words = [0] + [(int(h) << 64) | int(lo) for h, lo in zip(t.hi, t.lo, strict=True)]
    words.append(1 << 128)
    return [Decimal(b - a) / Decimal(2) ** 128 for a, b in itertools.pairwise(words)]


def _compose(coarse: list[Decimal], fine: list[Decimal], m: int) -> dict[int, Decimal]:
    kc, kf = (len(coarse) - 1) // 2, (len(fine) - 1) // 2
    out: dict[int, Decimal] = {}
    for i, py in enumerate(coarse):
        base = m * (i - kc) - kf
        for j, pz in enumerate(fine):
            out[base + j] = out.get(base + j, Decimal(0)) + py * pz
    return out


def _tv_to_dg(law: dict[int, Decimal], variance: Decimal) -> Decimal:
    k = max(abs(x) for x in law)
    ref = _dg_law(variance, k)
    return sum((abs(law.get(x, Decimal(0)) - ref[x + k]) for x in range(-k, k + 1)),
               Decimal(0)) / 2


# (sigma, m, fine floor): tau about 0.5, 1.0, 1.3 (bounds about 2e-2, 1e-8, 1e-15)
SMALL = [(30.0, 10, 5), (40.0, 8, 8), (60.0, 6, 8)]


@pytest.mark.parametrize(("sigma", "m", "floor"), SMALL)
def test_composition_bound_holds_and_is_tight_on_exact_laws(sigma: float, m: int,
                                                            floor: int) -> None:
    """Exact laws of Y ~ N_Z(0, sigma_c^2), Z ~ N_Z(0, sigma_f^2) (50-digit decimal),
    exact convolution of m Y + Z: TV to N_Z(0, sigma^2) <= smoothing_tv, and >= 1/5 of it
    (the bound's leading term is 2 exp(-a), the true one about (2/pi) exp(-a))."""
    p = split_sigma(sigma, m, floor)
    with localcontext() as ctx:
        ctx.prec = 50
        vc = Decimal(repr(p.coarse_sigma)) ** 2
        vf = Decimal(p.fine_variance)
        law = _compose(_dg_law(vc, math.ceil(17 * p.coarse_sigma)),
                       _dg_law(vf, math.ceil(17 * math.sqrt(float(vf)))), m)
        tv = _tv_to_dg(law, Decimal(repr(sigma)) ** 2)
    bound = p.smoothing_tv
    assert bound == smoothing_tv(m, vc, vf)
    assert 1e-16 < bound < 0.1
    assert float(tv) <= bound, (float(tv), bound)
    assert float(tv) >= bound / 5, (float(tv), bound)


@pytest.mark.parametrize(("sigma", "m", "floor"), SMALL[1:])
def test_composition_of_the_real_tables_within_the_total_bound(sigma: float, m: int,
                                                               floor: int) -> None:
    """The laws the two tables actually sample (their 128-bit CDF words, exactly),
    convolved: TV to N_Z(0, sigma^2) <= coarse.tv_bound + fine.tv_bound + smoothing_tv.
    Checks the table built from an exact variance as well."""
    p = split_sigma(sigma, m, floor)
    coarse = discrete_gaussian_table(p.coarse_sigma)
    fine = discrete_gaussian_variance_table(p.fine_variance)
    with localcontext() as ctx:
        ctx.prec = 50
        law = _compose(_table_law(coarse), _table_law(fine), m)
        tv = _tv_to_dg(law, Decimal(repr(sigma)) ** 2)
    assert float(tv) <= coarse.tv_bound + fine.tv_bound + p.smoothing_tv


def test_variance_table_equals_sigma_table() -> None:
    """discrete_gaussian_variance_table(s^2) is word-for-word discrete_gaussian_table(s)."""
    for s, v in ((1.0, "1"), (2.5, "6.25"), (1733.099656, "3003634.417627318336")):
        a, b = discrete_gaussian_table(s), discrete_gaussian_variance_table(v)
        assert a.offset == b.offset
        assert np.array_equal(a.hi, b.hi) and np.array_equal(a.lo, b.lo)
    with pytest.raises(Exception, match="Inexact"):
        discrete_gaussian_variance_table("1." + "1" * 70)


# ------------------------------------------------------------ statistics


def _bin_edges(sigma: float) -> np.ndarray:
    """Integer edges of BINS roughly equiprobable bins: bin j is edges[j-1] <= x < edges[j]."""
    q = stats.norm.ppf(np.arange(1, BINS) / BINS)
    return np.unique(np.round(sigma * q).astype(np.int64))


def _cdf_below(sigma: float, x: np.ndarray) -> np.ndarray:
    """P[X < x] for integer x under N_Z(0, sigma^2), as Phi((x - 1/2) / sigma).

    For sigma >= 1.5e5 this is the exact law to ~1e-12 (midpoint rule: |f''| <= 1/sigma^2
    per unit cell; Poisson summation: the normaliser is sigma sqrt(2 pi) up to
    exp(-2 pi^2 sigma^2)); test_bin_probabilities_match_direct_sum checks it by direct
    summation at the smallest sigma."""
    return stats.norm.cdf((x.astype(np.float64) - 0.5) / sigma)


def _bin_probs(sigma: float, edges: np.ndarray) -> np.ndarray:
    c = np.concatenate([[0.0], _cdf_below(sigma, edges), [1.0]])
    return np.diff(c)


def test_bin_probabilities_match_direct_sum() -> None:
    """The closed form of _cdf_below vs. summing the exact pmf (float64) at sigma = 1.5e5."""
    sigma = 1.5e5
    k = math.ceil(14 * sigma)
    xs = np.arange(-k, k + 1, dtype=np.float64)
    w = np.exp(-(xs**2) / (2 * sigma**2))
    cdf = np.concatenate([[0.0], np.cumsum(w / w.sum())])  # cdf[i] = P[X < xs[i]]
    edges = _bin_edges(sigma)
    direct = cdf[edges + k]
    assert np.abs(direct - _cdf_below(sigma, edges)).max() < 1e-11


def _failures(x: np.ndarray, sigma: float, moduli: tuple[int, ...]) -> list[str]:
    """Names of the statistics of ``x`` that reject N_Z(0, sigma^2), each at level ALPHA:
    chi-square on BINS bins, mean and variance z-tests (CLT; variance sd sqrt(2/n)
    sigma^2), binomial tails |x| > 4 sigma and > 5.5 sigma (two-sided), chi-square of
    residues mod each modulus in 50 classes (uniform to exp(-2 pi^2 sigma^2/q^2))."""
    n, out = x.size, []
    edges = _bin_edges(sigma)
    obs = np.bincount(np.searchsorted(edges, x, side="right"), minlength=edges.size + 1)
    exp = n * _bin_probs(sigma, edges)
    if stats.chi2.sf(((obs - exp) ** 2 / exp).sum(), obs.size - 1) < ALPHA:
        out.append("chi2")
    xf = x.astype(np.float64)
    if abs(xf.mean()) > Z_ALPHA * sigma / math.sqrt(n):
        out.append("mean")
    if abs((xf**2).mean() / sigma**2 - 1) > Z_ALPHA * math.sqrt(2 / n):
        out.append("variance")
    for t in (4.0, 5.5):
        cut = math.floor(t * sigma)
        p = 2 * float(stats.norm.sf((cut + 0.5) / sigma))  # P[|X| > cut]
        if stats.binomtest(int((np.abs(x) > cut).sum()), n, p).pvalue < ALPHA:
            out.append(f"tail{t}")
    for q in moduli:
        cls = np.bincount((x % q) * 50 // q, minlength=50)
        probs = np.bincount(np.arange(q) * 50 // q, minlength=50) / q
        e = n * probs
        if stats.chi2.sf(((cls - e) ** 2 / e).sum(), 49) < ALPHA:
            out.append(f"residue{q}")
    return out


def _draws(sampler: ComposedSampler, seed: int, n: int = N) -> np.ndarray:
    bits = np.random.Generator(np.random.PCG64(seed)).bit_generator
    return sampler.draw(lambda k: bits.random_raw(k).astype(np.uint64), n)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_composed_samples_fit_the_exact_law(sigma: float) -> None:
    """FastNoise(seed 2026) at each sigma: all statistics of _failures pass (6 at
    ALPHA = 1e-6: false-failure rate <= 6e-6 per sigma, 5.4e-5 over the 9 sigma)."""
    x = FastNoise(2026).discrete_gaussian(sigma, N)
    m = composed_params(sigma).m
    assert _failures(x, sigma, (m,)) == []


def test_power_sigma_scaled_by_099() -> None:
    """A sampler at 0.99 sigma is rejected (chi-square and variance) at every scale."""
    for sigma in (2e5, 1e6, 1e7):
        x = FastNoise(7).discrete_gaussian(0.99 * sigma, N)
        bad = _failures(x, sigma, (composed_params(sigma).m,))
        assert "chi2" in bad and "variance" in bad, (sigma, bad)


@pytest.mark.parametrize("delta_m", [1, -1])
def test_power_wrong_m_in_the_combination(delta_m: int) -> None:
    """(m +- 1) Y + Z with the rule's tables at sigma = 2e5 (variance off by ~0.8%): rejected
    by the variance test (same seed, the right m passes: test above)."""
    sigma = 2e5
    good = composed_sampler(sigma)
    wrong = ComposedSampler(params=dataclasses.replace(good.params, m=good.params.m + delta_m),
                            coarse=good.coarse, fine=good.fine)
    assert "variance" in _failures(_draws(wrong, 11), sigma, (good.params.m,))
    assert _failures(_draws(good, 11), sigma, (good.params.m,)) == []


def test_power_m_too_large_for_the_fine_table() -> None:
    """An exact variance split with m = 20000, sigma_f ~ 0.3 m at sigma = 1e6 has the right
    variance but no smoothing (its bound is vacuous): the residue test rejects it."""
    sigma = 1e6
    p = split_sigma(sigma, 20_000, 6_000)
    assert p.smoothing_tv > 0.1
    lumpy = ComposedSampler(params=p, coarse=discrete_gaussian_table(p.coarse_sigma),
                            fine=discrete_gaussian_variance_table(p.fine_variance))
    bad = _failures(_draws(lumpy, 13), sigma, (p.m,))
    assert "residue20000" in bad, bad


def test_guided_search_gives_the_same_samples(monkeypatch) -> None:
    """IntegerTable.sample searches large batches with the compiled guided kernel: the same
    samples as numpy's search, ties included (their low words are drawn in order)."""
    from sketches.core import noise_tables
    from sketches.core.noise_tables import _KERNEL_SEARCH_MIN, discrete_gaussian_table

    table = discrete_gaussian_table(1000.0)
    rng = np.random.default_rng(3)
    u = rng.integers(0, 2**63, 30 * _KERNEL_SEARCH_MIN, dtype=np.uint64) * np.uint64(2)
    u[:50] = table.hi[rng.integers(0, table.hi.size, 50)]  # forced ties
    lows = rng.integers(0, 2**63, 1000, dtype=np.uint64)

    def draw(n: int) -> np.ndarray:
        return lows[:n].copy()

    got = table.sample(u, draw)
    monkeypatch.setattr(noise_tables, "_KERNEL_SEARCH_MIN", 1 << 62)  # numpy's search
    assert np.array_equal(got, table.sample(u, draw))


# --------------------------------------- the lattice's sampler (discrete_gaussian32)

SIGMAS32 = [COMPOSE32_MIN, 33_333.3, 67_707.2, 156_136.9]  # LazyCMS / LazyHH sigma_L


@pytest.mark.parametrize("sigma", SIGMAS32)
def test_composed32_samples_fit_the_exact_law(sigma: float) -> None:
    """``discrete_gaussian32`` from ``COMPOSE32_MIN`` (the rule below the one-table limit,
    both tables read 32 bits at a time), FastNoise(seed 2027): all statistics of _failures
    pass (6 at ALPHA = 1e-6: false-failure rate <= 6e-6 per sigma, 2.4e-5 over the 4)."""
    x = FastNoise(2027).discrete_gaussian32(sigma, N)
    m = discrete_gaussian32_sampler(sigma).params.m  # type: ignore[union-attr]
    assert _failures(x, sigma, (m,)) == []


def test_composed32_power_sigma_scaled_by_099_and_wrong_m() -> None:
    """The same statistics reject 0.99 sigma (chi-square and variance) at both lattice
    sigma, and (m + 1) Y + Z at the LazyHH sigma (variance), same seed."""
    for sigma in (67_707.2, 156_136.9):
        bad = _failures(FastNoise(7).discrete_gaussian32(0.99 * sigma, N), sigma,
                        (discrete_gaussian32_sampler(sigma).params.m,))  # type: ignore[union-attr]
        assert "chi2" in bad and "variance" in bad, (sigma, bad)
    good = discrete_gaussian32_sampler(156_136.9)
    assert isinstance(good, ComposedSampler)
    wrong = ComposedSampler(params=dataclasses.replace(good.params, m=good.params.m + 1),
                            coarse=good.coarse, fine=good.fine)
    bits = np.random.Generator(np.random.PCG64(11)).bit_generator
    x = wrong.draw_lazy(lambda k: bits.random_raw(k).astype(np.uint64), N)
    assert "variance" in _failures(x, 156_136.9, (good.params.m,))


def test_composed32_rule_support_and_tv_on_a_grid() -> None:
    """From COMPOSE32_MIN to the one-table limit: the rule's identity is exact (as above),
    the support is within 14 sigma + 2 (the lattice's float-error bound uses it) and the TV
    below 2^-102.99; below COMPOSE32_MIN one table (TV 2^-104)."""
    for sigma in np.geomspace(COMPOSE32_MIN, MAX_TABLE_SIGMA, 13):
        s = float(round(float(sigma), 3))
        smp = discrete_gaussian32_sampler(s)
        assert isinstance(smp, ComposedSampler)
        p = smp.params
        with localcontext() as ctx:
            ctx.prec = 100
            assert Decimal(p.m) ** 2 * Decimal(repr(p.coarse_sigma)) ** 2 \
                + Decimal(p.fine_variance) == Decimal(repr(s)) ** 2
        assert discrete_gaussian32_support(s) <= 14 * s + 2
        assert TABLE_TV_BOUND < discrete_gaussian32_tv(s) < 2.0**-102.99
    assert isinstance(discrete_gaussian32_sampler(COMPOSE32_MIN - 1), IntegerTable)
    assert discrete_gaussian32_tv(COMPOSE32_MIN - 1) == TABLE_TV_BOUND


def _table_pmf64(t: IntegerTable) -> np.ndarray:
    """The table's exact pmf on ``offset .. -offset`` from its 128-bit CDF words (integer
    differences, then float64: each entry within one rounding of the exact word)."""
    cdf = [(int(h) << 64) | int(lo) for h, lo in zip(t.hi.tolist(), t.lo.tolist(), strict=True)]
    steps = np.diff(np.array([0, *cdf, 1 << 128], dtype=object))
    return np.array([math.ldexp(float(s), -128) for s in steps], dtype=np.float64)


@pytest.mark.parametrize("sigma", [16384.0, 67707.2, 156136.9])
def test_composed32_exact_law_at_production_sigma(sigma: float) -> None:
    """Review 20r finding 6: the law the lattice's composed sampler actually draws at the
    production sigmas, ``m Y + Z`` rebuilt exactly from both tables' CDF words (direct
    convolution in float64, no sampling): ``max |P/N - 1| < 1e-13`` over ``|x| <= 6 sigma``,
    TV to ``N_Z(0, sigma^2)`` below ``1e-14`` (bound: ``discrete_gaussian32_tv``), support
    ``m K_c + K_f <= 14 sigma + 2``."""
    smp = discrete_gaussian32_sampler(sigma)
    assert isinstance(smp, ComposedSampler)
    m, pc, pf = smp.params.m, _table_pmf64(smp.coarse), _table_pmf64(smp.fine)
    kc, kf = -int(smp.coarse.offset), -int(smp.fine.offset)
    assert pc.size == 2 * kc + 1 and pf.size == 2 * kf + 1
    support = m * kc + kf
    assert support == discrete_gaussian32_support(sigma) <= 14 * sigma + 2
    law = np.zeros(2 * support + 1)
    for j, w in enumerate(pc):  # y = j - kc contributes w * P_Z at m y + z
        lo = m * j  # index of x = m y - kf, i.e. (m (j - kc) - kf) + support
        law[lo:lo + pf.size] += w * pf
    assert abs(law.sum() - 1.0) < 1e-12
    x = np.arange(-support, support + 1, dtype=np.float64)
    ideal = np.exp(-(x * x) / (2.0 * sigma * sigma)) / (math.sqrt(2.0 * math.pi) * sigma)
    inner = np.abs(x) <= 6 * sigma
    rel = float(np.max(np.abs(law[inner] / ideal[inner] - 1.0)))
    tv = 0.5 * float(np.sum(np.abs(law - ideal))) + 0.5 * (1.0 - float(ideal.sum()))
    assert rel < 1e-13, rel
    assert tv < 1e-14, tv
    assert discrete_gaussian32_tv(sigma) < 2.0**-102.99


# ------------------------------------------- edges of the rule (issue 24, session 5)


def test_composed_params_refuses_the_threshold_itself_and_names_its_limits() -> None:
    """Composition starts strictly above ``COMPOSE_THRESHOLD`` (one table samples the
    threshold itself); out of range, the error names the parameter (``sigma``) and the
    composed sampler's own limit, not the one-table limit."""
    with pytest.raises(SpecError, match=r"^sigma: .* is sampled by one table"):
        composed_params(COMPOSE_THRESHOLD)
    assert composed_params(COMPOSE_THRESHOLD * (1 + 1e-9)).m == math.isqrt(
        math.floor(COMPOSE_THRESHOLD * (1 + 1e-9)) // 3)
    with pytest.raises(SpecError, match=r"^sigma: 2e\+08 exceeds .*\(composed-sampler limit "
                                        r"1e\+08\)"):
        composed_params(2e8)
    with pytest.raises(SpecError, match=r"^sigma: must be a finite number > 0"):
        composed_params(0.0)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 1000.0, 4096.0])
def test_discrete_gaussian32_support_of_one_table_is_its_half_width(sigma: float) -> None:
    """Below ``COMPOSE32_MIN`` (one table) the largest ``|X|`` is the table's half-width
    ``K``: positive, past ``13 sigma`` (where the tail the table drops is below its TV bound)
    and within the ``14 sigma + 2`` the lattice's float-error bound assumes; the table's
    first value is ``-K`` (its ``offset``)."""
    k = discrete_gaussian32_support(sigma)
    assert 13 * sigma < k <= 14 * sigma + 2
    table = discrete_gaussian_table(sigma)
    assert table.offset == -k


def test_a_composed_samplers_tv_bound_adds_its_smoothing_term() -> None:
    """``tv_bound`` (what the guarantee charges per draw) is ``2 x 2^-104`` *plus* the
    smoothing term, rounded up: checked on a deliberately weak split (``sigma_f = 1.92 m``,
    ``tau`` about 1.9: a smoothing term about half the tables' ``2 x 2^-104``, so both
    terms show in the float sum; the rule's own term, ``< 2^-250``, does not)."""
    p = split_sigma(1e4, 100, 192)
    assert 0.1 * TABLE_TV_BOUND < p.smoothing_tv < 2 * TABLE_TV_BOUND
    smp = ComposedSampler(params=p, coarse=discrete_gaussian_table(p.coarse_sigma),
                          fine=discrete_gaussian_variance_table(p.fine_variance))
    assert smp.tv_bound == math.nextafter(2 * TABLE_TV_BOUND + p.smoothing_tv, math.inf)
    assert smp.tv_bound > 2 * TABLE_TV_BOUND + 0.9 * p.smoothing_tv


@pytest.mark.parametrize("broken", ["smoothing_tv", "coarse_sigma", "fine_variance"])
def test_the_rule_refuses_a_split_outside_its_proven_bounds(monkeypatch, broken: str) -> None:
    """The rule's own guard: a split whose smoothing term exceeds ``2^-250``, or whose
    coarse or fine table would leave the table range, is refused (RuntimeError), each
    condition on its own (the others in bounds)."""
    from sketches.core import noise_compose

    good = noise_compose.split_sigma
    bad = {"smoothing_tv": 2.0**-200, "coarse_sigma": MAX_TABLE_SIGMA * 2,
           "fine_variance": str(Decimal(repr(MAX_TABLE_SIGMA)) ** 2 * 4)}[broken]

    def split(sigma: float, m: int, fine_floor: int | str) -> object:
        return dataclasses.replace(good(sigma, m, fine_floor), **{broken: bad})

    monkeypatch.setattr(noise_compose, "split_sigma", split)
    with pytest.raises(RuntimeError, match="rule out of bounds"):
        noise_compose._rule(1e6)


@pytest.mark.parametrize("edge", ["smoothing_tv", "coarse_sigma", "fine_variance"])
def test_the_rule_accepts_a_split_exactly_at_its_bounds(monkeypatch, edge: str) -> None:
    """The guard's bounds are inclusive: a smoothing term of exactly ``2^-250``, a coarse
    sigma of exactly ``MAX_TABLE_SIGMA``, a fine variance of exactly ``MAX_TABLE_SIGMA^2``
    are inside the proven range (each table is defined up to its limit)."""
    from sketches.core import noise_compose

    good = noise_compose.split_sigma
    at = {"smoothing_tv": noise_compose.SMOOTHING_TV_LIMIT, "coarse_sigma": MAX_TABLE_SIGMA,
          "fine_variance": str(Decimal(repr(MAX_TABLE_SIGMA)) ** 2)}[edge]
    assert edge != "fine_variance" or float(at) == MAX_TABLE_SIGMA**2

    def split(sigma: float, m: int, fine_floor: int | str) -> object:
        return dataclasses.replace(good(sigma, m, fine_floor), **{edge: at})

    monkeypatch.setattr(noise_compose, "split_sigma", split)
    assert getattr(noise_compose._rule(1e6), edge) == at


def test_split_sigma_is_exact_or_refused_at_its_edges() -> None:
    """``split_sigma``'s contract at its edges: a coarse sigma below 1 is a valid split
    (exact identity); ``fine_floor`` must be strictly below sigma; a coarse sigma that
    rounds to 0 at 6 decimals, or that a float cannot carry exactly, is no valid split; a
    split whose identity needs more than the 100-digit precision is refused (the Inexact
    trap), never rounded (the identity would then be off)."""
    import decimal

    p = split_sigma(10.0, 20, 5)
    assert (p.sigma, p.m, p.coarse_sigma) == (10.0, 20, 0.433012)
    assert Decimal(10) ** 2 == 400 * Decimal("0.433012") ** 2 + Decimal(p.fine_variance)
    # a fine variance below 1 (fine_floor 0.5) and a multiplier of 1 are valid splits
    q = split_sigma(10.0, 20, "0.5")
    assert 0.25 < Decimal(q.fine_variance) < 1
    assert Decimal(100) == 400 * Decimal(repr(q.coarse_sigma)) ** 2 + Decimal(q.fine_variance)
    one = split_sigma(40.0, 1, 8)
    assert one.m == 1 and Decimal(1600) == Decimal(repr(one.coarse_sigma)) ** 2 + Decimal(
        one.fine_variance)
    for bad_m in (0, -1, 2.0):
        with pytest.raises(SpecError, match=r"^m: must be an int >= 1"):
            split_sigma(40.0, bad_m, 8)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"^split_sigma: no valid split"):
        split_sigma(40.0, 8, 0)  # sigma_c = 5 exactly: nothing left for the fine table
    for floor in (40, 41):
        with pytest.raises(SpecError, match=r"^fine_floor: "):
            split_sigma(40.0, 8, floor)
    with pytest.raises(SpecError, match=r"^split_sigma: no valid split"):
        split_sigma(40.0, 8, "39.99999999999999")  # sigma_c about 1e-7: 0 at 6 decimals
    with pytest.raises(SpecError, match=r"^split_sigma: no valid split"):
        split_sigma(1e13, 1, 1)  # sigma_c = 9999999999999.999999: 19 digits
    # sigma_c = 0.509901 is short, but m^2 sigma_c^2 has about 133 digits
    with pytest.raises(decimal.Inexact):
        split_sigma(5.0990195e59, 10**60 + 1, 1)
    with pytest.raises(decimal.Inexact):  # a fine_floor whose square has 120 digits
        split_sigma(40.0, 8, "3." + "3" * 59)


@pytest.mark.parametrize(("m", "vc", "vf"), [(1, "0.2", "0.2"), (2, "4", "1"), (3, "2", "5"),
                                             (10, "400", "900"), (1, "0.1", "0.1"),
                                             (1, "0.05", "0.05")])
def test_smoothing_tv_follows_its_formula(m: int, vc: str, vf: str) -> None:
    """``e / (1 - e)``, ``e = 2 exp(-a) / (1 - exp(-3a))``, ``a = 2 pi^2 tau^2``, ``1/tau^2 =
    m^2/vf + 1/vc``, computed here in float64 (relative error about 1e-15) and compared at
    1e-12: at small ``tau`` the ``1 - exp(-3a)`` term is far from 1, so each factor shows;
    ``e >= 1``, or ``e / (1 - e) > 1`` (``tau^2 = 0.05``: ``e`` about 0.79), gives the
    trivial bound 1."""
    tau2 = 1.0 / (m * m / float(vf) + 1.0 / float(vc))
    a = 2 * math.pi**2 * tau2
    e = 2 * math.exp(-a) / (1 - math.exp(-3 * a))
    want = 1.0 if e >= 1 else min(1.0, e / (1 - e))
    got = smoothing_tv(m, Decimal(vc), Decimal(vf))
    assert got == pytest.approx(want, rel=1e-12, abs=0)
    assert got >= want * (1 - 1e-14)  # rounded up


def test_smoothing_tv_is_the_trivial_bound_when_e_is_exactly_one() -> None:
    """At ``e = 1`` exactly (in the 60-digit arithmetic: ``tau^2`` at the root of ``2x = 1 -
    x^3``, ``x = exp(-a)``, found by a search over the last digits) the bound is the
    trivial 1, not ``e / (1 - e)`` (a division by zero)."""
    v = Decimal("0.08014360945932302233844857567254521860927142944230474474927755497401509"
                "26999996080295911880")
    assert smoothing_tv(1, v, v) == 1.0


def test_the_threshold_itself_is_sampled_by_one_table(monkeypatch) -> None:
    """``discrete_gaussian_sampler(COMPOSE_THRESHOLD)`` is the one table of that sigma (the
    largest one: building it takes seconds, so the builder is replaced by a recorder)."""
    from sketches.core import noise_compose

    built: list[float] = []
    monkeypatch.setattr(noise_compose, "discrete_gaussian_table",
                        lambda s: built.append(s) or ("table", s))
    assert noise_compose.discrete_gaussian_sampler(COMPOSE_THRESHOLD) == (
        "table", COMPOSE_THRESHOLD)
    # validate_discrete_sigma(build=True) builds that same table (and no composed one)
    assert noise_compose.validate_discrete_sigma(COMPOSE_THRESHOLD, build=True) == \
        COMPOSE_THRESHOLD
    assert built == [COMPOSE_THRESHOLD, COMPOSE_THRESHOLD]


def test_validate_discrete_sigma_names_sigma_and_the_composed_limit() -> None:
    """Above ``MAX_DISCRETE_SIGMA`` the refusal names the parameter and the composed
    sampler's limit (the one-table limit is not the one that applies)."""
    with pytest.raises(SpecError, match=r"^sigma: 1e\+09 exceeds .*\(composed-sampler limit "
                                        r"1e\+08\); lower it: raise eps"):
        validate_discrete_sigma(1e9)
