"""Tests of sketches.privacy (calibration.py + bounds.py re-exported).

Randomized tests are seeded (FastNoise / numpy default_rng with fixed seeds) and
therefore deterministic; their stated false-failure rates are for a random seed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from sketches.core.noise import FastNoise
from sketches.errors import PrivacyError, SpecError
from sketches.privacy import (
    BudgetAccountant,
    Calibrator,
    Clock,
    Relation,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    calibrate,
    check_clock,
    check_lemma6_delta,
    classic_gaussian_sigma,
    counter_error_bound,
    delta_tilde,
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    l2_sensitivity,
    lazy_cms_error_bound,
    lazy_cs_error_bound,
    lazyhh_depth,
    lazyhh_gamma,
    lazyhh_thresholds,
    lemma4_error,
    lemma5_depth,
    length_counter_calibration,
    neighbouring_cells,
    paper_sigma,
    split_budget,
    tree_levels,
    zcdp_delta,
    zcdp_eps,
)

EPS_GRID = [0.1, 0.5, 0.9]
DELTA_GRID = [1e-3, 1e-6, 1e-10]


# ---------------------------------------------------------------- semantics


def test_check_clock() -> None:
    check_clock(Relation.REPLACE, Clock.ARRIVAL)
    check_clock(Relation.REPLACE, Clock.TICK)
    check_clock(Relation.ADD_REMOVE, Clock.TICK)
    with pytest.raises(PrivacyError, match="clock='tick'"):
        check_clock(Relation.ADD_REMOVE, Clock.ARRIVAL)
    with pytest.raises(PrivacyError, match="relation"):
        check_clock("add_remove", "arrival")  # type: ignore[arg-type]


def test_neighbouring_cells_and_levels() -> None:
    assert [neighbouring_cells(Relation.REPLACE, d) for d in (1, 3)] == [2, 6]
    assert [neighbouring_cells(Relation.ADD_REMOVE, d) for d in (1, 3)] == [1, 3]
    assert neighbouring_cells(Relation.REPLACE, 3, signed=True) == 12
    assert neighbouring_cells(Relation.ADD_REMOVE, 3, signed=True) == 3
    for r in range(1, 5000):
        assert tree_levels(r) == math.ceil(math.log2(r + 1))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(SpecError):
            tree_levels(bad)  # type: ignore[arg-type]
        with pytest.raises(SpecError):
            neighbouring_cells(Relation.REPLACE, bad)  # type: ignore[arg-type]


def _tree_nodes(increments: np.ndarray) -> np.ndarray:
    """All complete dyadic node counts of one GaussBM counter (Alg. 1), level by level."""
    out = []
    r = increments.size
    level = 0
    while (1 << level) <= r:
        size = 1 << level
        full = (r // size) * size
        out.append(increments[:full].reshape(-1, size).sum(axis=1))
        level += 1
    return np.concatenate(out)


def _release(cells: np.ndarray) -> np.ndarray:
    """Exact node vector of a d x w sketch; cells[round, row, col] are the increments."""
    _, d, w = cells.shape
    return np.concatenate([_tree_nodes(cells[:, i, j]) for i in range(d) for j in range(w)])


def _sketch_cells(events: list[tuple[int, tuple[int, ...], tuple[int, ...]]], rounds: int,
                  d: int, w: int) -> np.ndarray:
    cells = np.zeros((rounds, d, w), dtype=np.int64)
    for rnd, buckets, signs in events:
        for i in range(d):
            cells[rnd, i, buckets[i]] += signs[i]
    return cells


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("relation", [Relation.ADD_REMOVE, Relation.REPLACE])
def test_sensitivity_bound_brute_force(signed: bool, relation: Relation) -> None:
    """Random neighbouring inputs never exceed Δ = c sqrt(m h), and the worst case attains it.

    Deterministic (seed 0). A unit of c events is added/removed or replaced.
    """
    rng = np.random.default_rng(0)
    d, w, rounds, c = 3, 4, 6, 3
    h = tree_levels(rounds)
    bound = l2_sensitivity(neighbouring_cells(relation, d, signed=signed), h, c)

    def rand_event() -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        sg = tuple(int(s) for s in rng.choice([-1, 1], d)) if signed else (1,) * d
        return int(rng.integers(rounds)), tuple(int(b) for b in rng.integers(w, size=d)), sg

    worst = 0.0
    for _ in range(400):
        base = [rand_event() for _ in range(10)]
        unit = [rand_event() for _ in range(int(rng.integers(1, c + 1)))]
        if relation is Relation.ADD_REMOVE:
            other = base
        else:
            other = base + [rand_event() for _ in range(len(unit))]
        diff = _release(_sketch_cells(base + unit, rounds, d, w)) - _release(
            _sketch_cells(other, rounds, d, w))
        norm = float(np.linalg.norm(diff))
        assert norm <= bound + 1e-9
        worst = max(worst, norm)
    # worst case: all c events in the same round and cells (and opposite signs for replace+CS)
    unit_ev = [(0, (0,) * d, (1,) * d)] * c
    if relation is Relation.ADD_REMOVE:
        x, y = unit_ev, []
    elif signed:
        x, y = unit_ev, [(0, (0,) * d, (-1,) * d)] * c
    else:
        x, y = unit_ev, [(0, (1,) * d, (1,) * d)] * c
    diff = _release(_sketch_cells(x, rounds, d, w)) - _release(_sketch_cells(y, rounds, d, w))
    assert float(np.linalg.norm(diff)) == pytest.approx(bound)


# ---------------------------------------------------------------- calibrators


def test_paper_calibrator_matches_alg1_and_refuses_eps_ge_1() -> None:
    cal = calibrate(0.5, 1e-3, m=8, rounds=100, calibrator=Calibrator.PAPER, unit_cap=2)
    h = math.ceil(math.log2(101))
    assert cal.sigma == pytest.approx(2 * math.sqrt(2 * h * 8 * math.log(1.25e3)) / 0.5)
    assert cal.levels == h and not cal.integer_noise
    assert paper_sigma(0.5, 1e-3, m=8, levels=h, unit_cap=2) == cal.sigma
    with pytest.raises(PrivacyError, match="analytic"):
        calibrate(1.0, 1e-3, m=8, rounds=100, calibrator=Calibrator.PAPER)


def _gaussian_delta_by_integration(eps: float, sigma: float, sens: float) -> float:
    """δ(ε) = ∫ max(0, p(x) - e^ε q(x)) dx with p = N(0,σ²), q = N(Δ,σ²) (numerical)."""
    x_star = sens / 2 - eps * sigma**2 / sens  # where p = e^ε q
    f = lambda x: stats.norm.pdf(x, 0, sigma) - math.exp(eps) * stats.norm.pdf(x, sens, sigma)  # noqa: E731
    val, _ = integrate.quad(f, -np.inf, x_star, epsabs=1e-16, epsrel=1e-10, limit=200)
    return max(val, 0.0)


@pytest.mark.parametrize("eps,delta", list(itertools.product(EPS_GRID, DELTA_GRID)))
def test_analytic_below_classic_for_eps_lt_1_and_valid(eps: float, delta: float) -> None:
    s = analytic_gaussian_sigma(eps, delta, 2.0)
    assert s < classic_gaussian_sigma(eps, delta, 2.0)
    assert analytic_gaussian_delta(eps, s, 2.0) <= delta
    assert analytic_gaussian_delta(eps, 0.999 * s, 2.0) > delta  # tight
    # independent numeric privacy profile
    assert _gaussian_delta_by_integration(eps, s, 2.0) <= delta * (1 + 1e-6)


@pytest.mark.parametrize("eps", [1.0, 3.0, 10.0, 20.0])
def test_analytic_valid_for_large_eps_where_classic_is_not(eps: float) -> None:
    delta = 1e-6
    s = analytic_gaussian_sigma(eps, delta, 1.0)
    assert _gaussian_delta_by_integration(eps, s, 1.0) <= delta * (1 + 1e-6)
    if eps >= 10:  # the classic formula really breaks here
        c = classic_gaussian_sigma(eps, delta, 1.0)
        assert _gaussian_delta_by_integration(eps, c, 1.0) > delta


def _discrete_gaussian_exact_delta(eps: float, sigma: float) -> float:
    """Exact δ(ε) of 1-d N_Z(0, σ²) at sensitivity 1: Σ_x max(0, p(x) - e^ε p(x-1))."""
    k = math.ceil(60 * sigma) + 10
    xs = np.arange(-k, k + 2, dtype=np.float64)
    logp = -(xs**2) / (2 * sigma**2)
    logq = -((xs - 1) ** 2) / (2 * sigma**2)
    z = np.exp(logp).sum()
    return float(np.clip(np.exp(logp) - np.exp(eps + logq), 0, None).sum() / z)


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-6), (1.0, 1e-6), (2.0, 1e-9), (8.0, 1e-6)])
def test_discrete_calibration_is_valid(eps: float, delta: float) -> None:
    s = discrete_gaussian_sigma(eps, delta, 1.0)
    assert discrete_gaussian_delta(eps, s, 1.0) <= delta
    assert discrete_gaussian_delta(eps, 0.999 * s, 1.0) > delta
    assert _discrete_gaussian_exact_delta(eps, s) <= delta  # zCDP bound is an upper bound
    cal = calibrate(eps, delta, m=4, rounds=255, calibrator=Calibrator.DISCRETE)
    assert cal.integer_noise and cal.sensitivity == pytest.approx(math.sqrt(4 * 8))
    assert zcdp_delta(cal.rho, eps) <= delta
    assert cal.error_bound(n=3, steps=9, beta=0.1) == counter_error_bound(
        cal.sigma, levels=8, n=3, steps=9, beta=0.1)


def test_zcdp_delta_matches_grid_minimum() -> None:
    for rho, eps in [(0.01, 0.5), (0.1, 1.0), (0.5, 3.0), (0.02, 2.0)]:
        alphas = 1 + np.geomspace(1e-6, 1e6, 200_001)
        logd = (alphas - 1) * (alphas * rho - eps) + alphas * np.log1p(-1 / alphas) - np.log(
            alphas - 1)
        grid = float(np.exp(logd.min()))
        got = zcdp_delta(rho, eps)
        assert got <= grid * (1 + 1e-9)
        assert got >= grid * (1 - 1e-3)
        assert zcdp_delta(rho, zcdp_eps(rho, 1e-6)) <= 1e-6


def test_monotonicity_and_linearity() -> None:
    for cal in Calibrator.ANALYTIC, Calibrator.DISCRETE:
        base = calibrate(0.8, 1e-6, m=8, rounds=1000, calibrator=cal).sigma
        assert calibrate(1.6, 1e-6, m=8, rounds=1000, calibrator=cal).sigma < base
        assert calibrate(0.8, 1e-4, m=8, rounds=1000, calibrator=cal).sigma < base
        assert calibrate(0.8, 1e-6, m=16, rounds=1000, calibrator=cal).sigma > base
        assert calibrate(0.8, 1e-6, m=8, rounds=5000, calibrator=cal).sigma > base
        capped = calibrate(0.8, 1e-6, m=8, rounds=1000, calibrator=cal, unit_cap=5).sigma
        assert capped == pytest.approx(5 * base, rel=1e-9)
    sig = [analytic_gaussian_sigma(e, 1e-6, 1.0) for e in np.linspace(0.05, 20, 60)]
    assert all(a > b for a, b in itertools.pairwise(sig))


@pytest.mark.parametrize("bad", [dict(eps=0.0), dict(eps=float("inf")), dict(delta=0.0),
                                 dict(delta=1.0), dict(m=0), dict(rounds=0), dict(unit_cap=0)])
def test_calibrate_rejects_bad_parameters(bad: dict[str, float]) -> None:
    args: dict = dict(eps=1.0, delta=1e-6, m=4, rounds=10, calibrator=Calibrator.ANALYTIC)
    args.update(bad)
    with pytest.raises(SpecError, match=next(iter(bad))):
        calibrate(args.pop("eps"), args.pop("delta"), **args)


# ---------------------------------------------------------------- bounds


def test_counter_error_bound_statistically() -> None:
    """Sums of h discrete-Gaussian node noises exceed the β=0.01 bound at most 1% of the time.

    FastNoise seed 5. The true exceedance is ~0.11%; with N=200k the count has
    std ~15, so the 1% threshold (2000) is > 100 std away (false failure ~0).
    A bound missing the sqrt(h) factor would be exceeded ~35% of the time.
    """
    sigma, h, n = 7.0, 12, 200_000
    noise = FastNoise(5).discrete_gaussian(sigma, (n, h)).sum(axis=1)
    bound = counter_error_bound(sigma, levels=h, n=1, steps=1, beta=0.01)
    assert np.count_nonzero(np.abs(noise) >= bound) <= 0.01 * n
    assert np.count_nonzero(np.abs(noise) >= 0.5 * bound) > 0.01 * n  # not vacuous


def test_lemma4_printed_vs_exact_sigma_bound() -> None:
    """Lemma 4's proof uses σ = sqrt(m h ln(1.25/δ))/ε (Theorem 1 proof), not Alg. 1's
    σ = sqrt(2 m h ln(1.25/δ))/ε: with the Alg. 1 σ the true bound is sqrt(2) larger
    (erratum, docs/PRIVACY.md). At T = 2^k, h = log T + 1 so the identity is exact."""
    for horizon in (1024, 2**16):
        h = tree_levels(horizon)
        assert h == math.log2(horizon) + 1
        printed = lemma4_error(0.5, 1e-5, m=6, horizon=horizon, n=100, steps=horizon, beta=0.05)
        proof_sigma = math.sqrt(6 * h * math.log(1.25e5)) / 0.5
        exact = counter_error_bound(proof_sigma, levels=h, n=100, steps=horizon, beta=0.05)
        assert exact == pytest.approx(printed)
        alg1 = paper_sigma(0.5, 1e-5, m=6, levels=h)
        exact_alg1 = counter_error_bound(alg1, levels=h, n=100, steps=horizon, beta=0.05)
        assert exact_alg1 == pytest.approx(math.sqrt(2) * printed)


def test_depths_and_lazy_bounds() -> None:
    for t, beta in [(2**20, 0.05), (1000, 1e-6)]:
        assert math.exp(-lemma5_depth(t, beta)) <= beta / (2 * t)
        assert 2.0 ** -lazyhh_depth(t, beta) <= beta / (4 * t)
    lo, hi = lazy_cms_error_bound(t=1e4, width=100, gamma=3.0)
    assert (lo, hi) == (-103.0, pytest.approx(math.e * 100 + 3.0))
    assert lazy_cms_error_bound(t=0, width=100, gamma=3.0, lag=0)[0] == -3.0
    lo, hi = lazy_cs_error_bound(f2=1200.0, width=12, gamma=1.0)
    assert hi == -lo == pytest.approx(math.sqrt(300.0) + 1 + 12)


def test_delta_tilde_and_lazyhh_thresholds() -> None:
    assert delta_tilde(0.5, 1e-3) == pytest.approx(2e-3 * (1.5 + math.exp(0.5) + 1e-3))
    th = lazyhh_thresholds(20.0, k=8, k_tilde=64, lag=64, unit_cap=2)
    t = 1e5
    assert th.lambda1 == 84.0 and th.lambda2(t) == 2 * t / 64 + 20
    assert th.tau2(t) == t / 64 + 84 + 2 * (2 * t / 64 + 20)
    assert th.threshold(t) == max(t / 8, th.tau2(t)) + 2
    assert th.threshold(t, t_up=2 * t) > th.threshold(t)
    with pytest.raises(SpecError, match="k_tilde"):
        lazyhh_thresholds(1.0, k=8, k_tilde=8)
    g = lazyhh_gamma(3.0, levels=10, depth=20, k_tilde=64, outputs=100, beta=1e-3)
    assert g == pytest.approx(3.0 * math.sqrt(2 * 10 * math.log(4 * 100 * 20 * 64 / 1e-3)))


# ---------------------------------------------------------------- budgets


def test_length_counter_and_splits() -> None:
    cal = length_counter_calibration(0.1, 1e-7, rounds=1000, unit_cap=3)
    assert (cal.m, cal.unit_cap, cal.sensitivity) == (1, 3, pytest.approx(3 * math.sqrt(10)))
    s = split_budget(2.0, 1e-6, length_fraction=0.25)
    assert (s.sketch_eps, s.length_eps) == (1.5, 0.5)
    assert s.sketch_delta + s.length_delta == pytest.approx(1e-6)
    with pytest.raises(SpecError, match="length_fraction"):
        split_budget(1.0, 1e-6, length_fraction=1.0)


def test_lemma6_delta_range() -> None:
    for ok in (1e-12, 1e-3, 0.49):
        check_lemma6_delta(ok)
    for bad in (0.0, 0.5, 0.9, -1e-3):
        with pytest.raises(SpecError, match=r"delta.*below 0\.5"):
            check_lemma6_delta(bad)
    with pytest.raises(SpecError, match="sketch_delta"):
        check_lemma6_delta(0.7, name="sketch_delta")


def test_discrete_calibration_refuses_unsupported_sigma_at_startup() -> None:
    """calibrate() checks the integer sampler's sigma range (no failure at the first draw)."""
    with pytest.raises(SpecError, match="lower eps"):
        calibrate(1e7, 1e-6, m=1, rounds=1, calibrator=Calibrator.DISCRETE)
    with pytest.raises(SpecError, match="raise eps or delta"):
        calibrate(1e-6, 1e-12, m=64, rounds=10**6, calibrator=Calibrator.DISCRETE)
    # the continuous calibrators have no table, hence no range
    assert calibrate(1e-6, 1e-12, m=64, rounds=10**6, calibrator=Calibrator.ANALYTIC).sigma > 1e8
    # a large eps that used to crash the table builder (sigma ~ 0.16) now calibrates and samples
    cal = calibrate(40.0, 1e-3, m=1, rounds=1, calibrator=Calibrator.DISCRETE)
    assert 0.1 < cal.sigma < 0.2
    assert FastNoise(5).discrete_gaussian(cal.sigma, 1000).dtype == np.int64


def test_accountant() -> None:
    acc = BudgetAccountant(0.5, 1e-6, Relation.ADD_REMOVE, unit="user_id", unit_cap=4)
    ev = acc.per_event()
    assert (ev.eps, ev.delta) == (0.5, 1e-6) and "parallel composition" in ev.statement
    g = acc.per_unit(shards=3, epochs=2)
    assert (g.eps, g.delta) == (3.0, 6e-6) and "user_id" in g.statement and "4" in g.statement
    cal = calibrate(0.5, 1e-6, m=4, rounds=100, calibrator=Calibrator.ANALYTIC)
    acc_z = BudgetAccountant(0.5, 1e-6, Relation.ADD_REMOVE, rho=cal.rho)
    g2 = acc_z.per_unit(shards=10, epochs=10)
    assert g2.eps < 50.0 and "zCDP" in g2.statement
    assert zcdp_delta(100 * cal.rho, g2.eps) <= 100e-6
    with pytest.raises(SpecError):
        acc.per_unit(shards=0)


# ------------------------------------------------------------ issue 24: mutation score
@pytest.mark.parametrize(("call", "field"), [
    (lambda: neighbouring_cells(Relation.REPLACE, 0), "depth"),
    (lambda: neighbouring_cells(Relation.ADD_REMOVE, True), "depth"),  # a bool is no depth
    (lambda: calibrate(1.0, 1e-6, m=0, rounds=8, calibrator=Calibrator.ANALYTIC), "m"),
    (lambda: calibrate(1.0, 1e-6, m=2, rounds=8, calibrator=Calibrator.ANALYTIC,
                       unit_cap=0), "unit_cap"),
    (lambda: calibrate(1.0, 1e-6, m=2, rounds=0, calibrator=Calibrator.ANALYTIC), "rounds"),
    (lambda: tree_levels(0), "rounds"),
    (lambda: l2_sensitivity(0, 3), "m"),
    (lambda: l2_sensitivity(2, 0), "levels"),
    (lambda: l2_sensitivity(2, 3, unit_cap=0), "unit_cap"),
])
def test_invalid_calibration_inputs_are_refused_naming_the_field(call, field: str) -> None:
    """A non-positive (or bool) count is a configuration error: refused with a SpecError
    that starts with the parameter's name, so the operator knows which one to fix."""
    with pytest.raises(SpecError, match=rf"^{field}: must be an integer >= 1, got "):
        call()
    assert l2_sensitivity(2, 8) == 4.0  # the default cap is 1 (event level)


@pytest.mark.parametrize("norms", [
    {"counter": "blt"},                                            # no norms at all
    {"counter": "blt", "column_norm_sq": 4.0},                     # a row norm missing
    {"counter": "blt", "row_norm_sq": 4.0},                        # a column norm missing
    {"counter": "blt", "column_norm_sq": 4.0, "row_norm_sq": 0.5},  # below 1
    {"counter": "blt", "column_norm_sq": 0.5, "row_norm_sq": 4.0},
    {"counter": "blt", "column_norm_sq": math.inf, "row_norm_sq": 4.0},
    {"counter": "blt", "column_norm_sq": 4.0, "row_norm_sq": math.nan},
    {"column_norm_sq": 4.0},                                       # norms without a counter
])
def test_a_factorized_calibration_needs_both_finite_norms(norms: dict) -> None:
    """A factorized counter is calibrated from its column norm (sensitivity) and row norm
    (error): a missing or invalid one must be refused, never silently calibrated as a tree
    (whose sensitivity ``sqrt(m h)`` is not the counter's)."""
    kw = {"counter": "tree", "column_norm_sq": None, "row_norm_sq": None} | norms
    if "counter" not in norms:
        kw["row_norm_sq"] = None
    with pytest.raises(SpecError, match=r"^counter: .* needs finite column_norm_sq"):
        calibrate(1.0, 1e-6, m=2, rounds=64, calibrator=Calibrator.ANALYTIC, **kw)


@pytest.mark.parametrize("calibrator", [Calibrator.ANALYTIC, Calibrator.DISCRETE])
@pytest.mark.parametrize("norm", [1.0, 4.0])
def test_factorized_calibration_records_every_input(calibrator: Calibrator, norm: float) -> None:
    """The returned Calibration is the full record of what the noise was derived from
    (releases and checkpoints state it): sigma from ``Δ = c sqrt(m col)``, every input
    as given, integer noise exactly for ``discrete``. Norms of exactly 1 (one round) are
    valid."""
    from sketches.privacy import Calibration

    cal = calibrate(0.8, 1e-7, m=2, rounds=100, calibrator=calibrator, unit_cap=3,
                    counter="blt", column_norm_sq=norm, row_norm_sq=norm**2)
    sens = 3 * math.sqrt(2 * norm)
    want = (analytic_gaussian_sigma if calibrator is Calibrator.ANALYTIC
            else discrete_gaussian_sigma)(0.8, 1e-7, sens)
    assert cal == Calibration(sigma=want, calibrator=calibrator, eps=0.8, delta=1e-7, m=2,
                              levels=7, unit_cap=3,
                              integer_noise=calibrator is Calibrator.DISCRETE,
                              counter="blt", column_norm_sq=norm, row_norm_sq=norm**2)
    assert type(cal.eps) is float and type(cal.delta) is float
    assert cal.sensitivity == pytest.approx(sens)


@pytest.mark.parametrize("calibrator", list(Calibrator))
def test_tree_calibration_records_every_input(calibrator: Calibrator) -> None:
    """Same for the tree: ``levels = ceil(log2(rounds + 1))``, no factorized norms."""
    from sketches.privacy import Calibration

    cal = calibrate(0.5, 1e-6, m=4, rounds=100, calibrator=calibrator, unit_cap=2)
    sens = 2 * math.sqrt(4 * 7)
    want = {Calibrator.ANALYTIC: analytic_gaussian_sigma(0.5, 1e-6, sens),
            Calibrator.DISCRETE: discrete_gaussian_sigma(0.5, 1e-6, sens),
            Calibrator.PAPER: 2 * math.sqrt(2 * 7 * 4 * math.log(1.25 / 1e-6)) / 0.5}[calibrator]
    assert cal == Calibration(sigma=pytest.approx(want, rel=1e-12), calibrator=calibrator,
                              eps=0.5, delta=1e-6, m=4, levels=7, unit_cap=2,
                              integer_noise=calibrator is Calibrator.DISCRETE)
    assert cal.counter == "tree" and cal.column_norm_sq is None and cal.row_norm_sq is None


def test_factorized_error_bound_and_noise_levels_come_from_the_row_norm() -> None:
    """A factorized counter's released noise has variance ``sigma^2 max_row(B)^2``
    (``noise_levels``), and its integer releases add at most 1/2 of rounding to the
    Gaussian bound; float releases do not."""
    kw = {"m": 2, "rounds": 100, "counter": "blt", "column_norm_sq": 3.0, "row_norm_sq": 9.0}
    disc = calibrate(1.0, 1e-6, calibrator=Calibrator.DISCRETE, **kw)
    ana = calibrate(1.0, 1e-6, calibrator=Calibrator.ANALYTIC, **kw)
    assert disc.noise_levels == 9.0 and ana.noise_levels == 9.0
    assert calibrate(1.0, 1e-6, m=2, rounds=100, calibrator=Calibrator.ANALYTIC
                     ).noise_levels == 7.0
    for cal, rounding in ((disc, 0.5), (ana, 0.0)):
        gauss = counter_error_bound(cal.sigma, levels=1, n=10, steps=100, beta=0.01) * 3.0
        assert cal.error_bound(n=10, steps=100, beta=0.01) == pytest.approx(gauss + rounding,
                                                                         rel=1e-12)


@pytest.mark.parametrize("which", ["analytic", "discrete"])
@pytest.mark.parametrize(("eps", "delta", "sens"), [(0.5, 1e-6, 1.0), (2.0, 1e-9, 3.0),
                                                    (8.0, 1e-5, 0.25), (0.05, 0.2, 40.0),
                                                    (1.0, 1e-6, 1e-3)])  # sigma << 1
def test_calibrated_sigma_is_the_smallest_meeting_delta_and_linear_in_sensitivity(
        which: str, eps: float, delta: float, sens: float) -> None:
    """The sigma search returns the *smallest* sigma meeting delta (to 1e-9 relative: any
    smaller sigma misses it, any larger one wastes utility), and sigma scales linearly with
    the sensitivity (delta depends only on ``Δ/σ``). Deterministic."""
    sigma_of, delta_of = {"analytic": (analytic_gaussian_sigma, analytic_gaussian_delta),
                          "discrete": (discrete_gaussian_sigma, discrete_gaussian_delta)}[which]
    s = sigma_of(eps, delta, sens)
    assert delta_of(eps, s, sens) <= delta
    assert delta_of(eps, s * (1 - 1e-9), sens) > delta
    assert sigma_of(eps, delta, 2 * sens) == pytest.approx(2 * s, rel=1e-9)


def test_zcdp_delta_edges_and_a_minimiser_below_alpha_2() -> None:
    """``rho <= 0`` is perfectly private (delta 0, no search); a huge ``rho`` gives delta 1
    (the minimiser is within 1e-9 of alpha = 1: the search must stay above 1); and a
    minimiser below alpha = 2 (rho = eps = 1: alpha* ~ 1.53) is found (the grid minimum)."""
    assert zcdp_delta(0.0, 1.0) == 0.0 and zcdp_delta(-1.0, 1.0) == 0.0
    for rho in (50.0, 1e8, 1e12):  # the bound exceeds 1 (1e12: past the exp cap): 1
        assert zcdp_delta(rho, 1.0) == 1.0
    # a minimiser far from 2 (alpha* ~ 30.5): the search bracket must contain it
    alphas = 1 + np.geomspace(1e-6, 1e4, 400_001)
    logd = (alphas - 1) * (alphas * 0.1 - 6.0) + alphas * np.log1p(-1 / alphas) - np.log(
        alphas - 1)
    grid = float(np.exp(logd.min()))
    assert 1e-45 < grid < 1e-35
    assert grid * (1 - 1e-6) <= zcdp_delta(0.1, 6.0) <= grid * (1 + 1e-9)
    alphas = 1 + np.geomspace(1e-6, 1e2, 200_001)
    logd = (alphas - 1) * (alphas - 1.0) + alphas * np.log1p(-1 / alphas) - np.log(alphas - 1)
    assert alphas[int(np.argmin(logd))] < 2.0
    grid = float(np.exp(logd.min()))
    assert grid * (1 - 1e-6) <= zcdp_delta(1.0, 1.0) <= grid * (1 + 1e-9)


def test_analytic_delta_of_a_tiny_sigma_is_one_not_zero() -> None:
    """Almost no noise (``Δ/σ = 100``): the mechanism is not private, delta ~ 1. The
    second term underflows to 0 there; it must count as 0 (``e^eps * 0``), not as an
    overflow that zeroes delta (which would certify no noise as private)."""
    assert analytic_gaussian_delta(1.0, 0.01, 1.0) == pytest.approx(1.0)
    assert analytic_gaussian_delta(5.0, 0.001, 2.0) == pytest.approx(1.0)


def test_paper_noise_bounds_equal_their_printed_formulas() -> None:
    """The paper's printed bounds, each computed here from its formula (paper 002: Lemma 5,
    Theorem 4, Lemma 6 eq. (1), Alg. 6 line 4), at two parameter points (a wrong constant,
    log base or operator moves the value). ``log`` is base 2, ``ln`` natural."""
    from sketches.privacy.bounds import alg6_gamma, lemma5_gamma, lemma6_gamma, theorem4_gamma

    log2, ln, sqrt = math.log2, math.log, math.sqrt
    assert lemma5_depth(1000, 0.1109) == 10  # ln(2T/beta) = 9.80 (ln(3T/beta) would be 10.2)
    for eps, delta, t, w, kt, d, beta in [(0.5, 1e-6, 2**20, 256, 512, 18, 0.05),
                                          (2.0, 1e-9, 10**5, 10, 40, 30, 1e-4)]:
        assert lemma5_depth(t, beta) == math.ceil(ln(2 * t / beta))
        assert lemma5_gamma(eps, delta, horizon=t, width=w, depth=d, beta=beta) == \
            pytest.approx(3 * log2(t / w) / eps * sqrt(d * ln(2 * t * d / beta)
                                                       * ln(1.25 / delta)), rel=1e-12)
        core = log2(4 * t / beta) * ln(2 * t * log2(4 * t / beta) / beta)
        assert theorem4_gamma(eps, delta, horizon=t, beta=beta) == pytest.approx(
            3 * log2(t) / eps * sqrt(core * ln(1.25 / delta)), rel=1e-12)
        assert lemma6_gamma(eps, delta, horizon=t, k_tilde=kt, beta=beta) == pytest.approx(
            3 * log2(t / kt) / eps * sqrt(core * ln(1.25 / delta)), rel=1e-12)
        dd = log2(4 * t / beta)
        assert alg6_gamma(eps, delta, horizon=t, k_tilde=kt, beta=beta) == pytest.approx(
            3 * log2(t / kt) / eps * sqrt(dd * ln(4 * t * dd / beta) * ln(1.25 / delta)),
            rel=1e-12)


@pytest.mark.parametrize("beta", [0.0, 1.0, 1.5, -0.1])
def test_failure_probability_outside_the_open_unit_interval_is_refused(beta: float) -> None:
    """``beta`` is a probability of failure in (0, 1): 0 (no failure, infinite bounds) and
    1 are refused by every bound that takes it, naming ``beta``."""
    from sketches.privacy.bounds import lemma5_gamma

    for call in (lambda: counter_error_bound(1.0, levels=3, n=2, steps=2, beta=beta),
                 lambda: lemma5_depth(100, beta), lambda: lazyhh_depth(100, beta),
                 lambda: lemma5_gamma(1.0, 1e-6, horizon=100, width=4, depth=3, beta=beta)):
        with pytest.raises(SpecError, match=r"^beta: "):
            call()


def test_lemma6_delta_check_names_delta_by_default_and_k_must_be_positive() -> None:
    """The default field name of the LazyHH delta check is ``delta``; ``k = 0`` is refused
    (Theorem 4 needs ``1 <= k < k~``)."""
    with pytest.raises(SpecError, match=r"^delta: LazyHH needs a sketch delta"):
        check_lemma6_delta(0.5)
    with pytest.raises(SpecError, match="k_tilde"):
        lazyhh_thresholds(1.0, k=0, k_tilde=8)


@pytest.mark.parametrize("which", ["analytic", "discrete"])
@pytest.mark.parametrize("sens", [1e154, 1e155, 1e300, 1e-162, 1e-170, 0.0, -1.0,
                                  math.inf, math.nan, 1.01e100, 0.99e-100])
def test_sigma_calibration_refuses_a_sensitivity_outside_the_documented_range(
        which: str, sens: float) -> None:
    """The sensitivity must be finite and in ``[1e-100, 1e100]`` (SENSITIVITY_RANGE): past
    about 1e154 the search overflowed (``2 sigma^2`` = inf, so delta 0 was accepted: the
    discrete sigma at 1e154 was 0.95 x sensitivity instead of 39.5 x; the analytic one was
    inf), near 1e-162 ``sigma^2`` underflowed (ZeroDivisionError). Refused, naming it."""
    sigma_of = {"analytic": analytic_gaussian_sigma, "discrete": discrete_gaussian_sigma}[which]
    with pytest.raises(SpecError, match=r"^sensitivity: "):
        sigma_of.__wrapped__(0.1, 1e-6, sens)


@pytest.mark.parametrize("which", ["analytic", "discrete"])
@pytest.mark.parametrize("sens", [1e-100, 1e-50, 1e-3, 1e8, 1e50, 1e100])
def test_sigma_calibration_is_exact_across_the_documented_sensitivity_range(
        which: str, sens: float) -> None:
    """Inside the range sigma / sensitivity is the same as at sensitivity 1 (to the search's
    1e-12 precision) and sigma meets delta: nothing over- or underflows."""
    sigma_of, delta_of = {"analytic": (analytic_gaussian_sigma, analytic_gaussian_delta),
                          "discrete": (discrete_gaussian_sigma, discrete_gaussian_delta)}[which]
    s = sigma_of.__wrapped__(0.1, 1e-6, sens)
    assert delta_of(0.1, s, sens) <= 1e-6
    assert s / sens == pytest.approx(sigma_of.__wrapped__(0.1, 1e-6, 1.0), rel=1e-9)


@pytest.mark.parametrize(("which", "eps", "delta"), [
    ("discrete", 1e-300, 1e-300), ("discrete", 1e300, 0.5), ("analytic", 1e300, 0.5)])
def test_sigma_calibration_refuses_a_sigma_outside_the_float_safe_range(
        which: str, eps: float, delta: float) -> None:
    """A valid sensitivity with an extreme (eps, delta) whose sigma would leave
    ``[1e-150, 1e150]`` (or make ``sensitivity / sigma`` do so) is refused, naming the
    parameters, instead of returning a sigma computed from overflowed intermediates (the
    discrete search accepted ``2 sigma^2`` = inf as delta 0, a sigma far below the true one)."""
    sigma_of = {"analytic": analytic_gaussian_sigma, "discrete": discrete_gaussian_sigma}[which]
    with pytest.raises(SpecError, match=r"^eps, delta, sensitivity: "):
        sigma_of.__wrapped__(eps, delta, 1.0)


def _documented_sigma_search(f, target: float, start: float) -> float:
    """The search ``_smallest_sigma`` documents, step for step: double ``hi`` from the
    sensitivity until ``f(hi) <= target``, walk down by halving while ``f(lo) <= target``,
    then geometric bisection until ``hi - lo <= 1e-12 hi``; return ``hi``."""
    hi = start
    while f(hi) > target:
        hi *= 2.0
    lo = hi / 2.0
    while lo > 1e-300 and f(lo) <= target:
        hi, lo = lo, lo / 2.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if f(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


@pytest.mark.parametrize(("eps", "delta", "sens"), [
    (0.01, 1e-15, 1.0), (0.5, 1e-5, 1.0), (1.0, 1e-6, 2.0), (2.0, 0.5, 1.0),
    (2.0, 0.5, math.sqrt(2.0)), (5.0, 1e-9, 7.3), (0.1, 1e-3, 1e-3)])
def test_calibrated_sigma_is_the_documented_search_bit_for_bit(
        eps: float, delta: float, sens: float) -> None:
    """The calibrators' contract is a deterministic search (bracket by doubling from the
    sensitivity, halve down, bisect geometrically to 1e-12 relative), and the calibrated
    sigma feeds the noise scale, the checkpoint header and the golden bytes: it must be the
    value that search yields, bit for bit, not just any sigma within 1e-12 of the boundary
    (another bracket growth, walk step or stop rule returns other low bits: mutants
    ``_smallest_sigma`` 6, 9, 17, 27). ``__wrapped__`` bypasses the lru_cache."""
    a = _documented_sigma_search(lambda s: analytic_gaussian_delta(eps, s, sens), delta, sens)
    assert analytic_gaussian_sigma.__wrapped__(eps, delta, sens) == a
    d = _documented_sigma_search(lambda s: discrete_gaussian_delta(eps, s, sens), delta, sens)
    assert discrete_gaussian_sigma.__wrapped__(eps, delta, sens) == d


@pytest.mark.parametrize("s", [0.5, math.sqrt(0.5)])
def test_a_sigma_meeting_delta_exactly_is_the_smallest_sigma(s: float) -> None:
    """A sigma whose delta equals the target exactly meets it (``<=``), so it is returned
    itself when the search reaches it: 0.5 is a halving step from the start 1, sqrt(0.5) the
    first geometric midpoint of (0.5, 1) (mutants ``_smallest_sigma`` 14 and 24, which test
    ``<``, end 1e-12 above it)."""
    target = analytic_gaussian_delta(1.0, s, 1.0)
    assert analytic_gaussian_sigma.__wrapped__(1.0, target, 1.0) == s


def test_a_sigma_near_the_top_of_the_float_safe_range_is_calibrated() -> None:
    """The search never probes beyond its bracket: a sigma just under the float-safe limit
    1e150 (sensitivity 1e100, the doubling ends at 1e100 * 2^166 = 9.35e149) is calibrated,
    not refused, and scales with the sensitivity (mutant ``_smallest_sigma`` 8 first probes
    2 hi = 1.87e150, outside the range: SpecError)."""
    s = discrete_gaussian_sigma.__wrapped__(1e-60, 1e-50, 1e100)
    assert 5e149 < s < 1e150 and discrete_gaussian_delta(1e-60, s, 1e100) <= 1e-50
    assert s / 1e100 == pytest.approx(discrete_gaussian_sigma.__wrapped__(1e-60, 1e-50, 1.0),
                                      rel=1e-9)


def _documented_zcdp_delta(rho: float, eps: float) -> float:
    lo, hi = 1.0 + 1e-9, max((eps + 1.0) / (2.0 * rho) + 2.0, 2.0)
    for _ in range(200):
        alpha = 0.5 * (lo + hi)
        if (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha) < 0:
            lo = alpha
        else:
            hi = alpha
    alpha = hi  # the smallest float alpha whose derivative is >= 0 (an exact 0 included)
    log_delta = (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha)
    log_delta -= math.log(alpha - 1)
    return min(math.exp(log_delta), 1.0) if log_delta < 700 else 1.0


@pytest.mark.parametrize(("rho", "eps"), [
    (0.0744473274106922, 0.0016617145120820652), (0.012644402363989459, 0.001321830882684331),
    (0.0013200884008314167, 0.01), (0.002643081486974103, 0.01)])
def test_zcdp_delta_is_the_documented_bisection_where_the_derivative_is_exactly_zero(
        rho: float, eps: float) -> None:
    """``zcdp_delta`` is a deterministic bisection whose alpha is the smallest float with a
    derivative ``>= 0``; at these (rho, eps) the computed derivative is exactly 0.0 at a
    float, which must count as ``>= 0`` (mutant ``zcdp_delta`` 37, ``<= 0``, ends one ulp
    higher and moves delta in the last bits, hence the discrete sigma)."""
    assert zcdp_delta(rho, eps) == _documented_zcdp_delta(rho, eps)
