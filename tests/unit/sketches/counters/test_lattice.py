"""Lattice BLT counters (``counter: blt_int``, docs/PRIVACY.md 13 "Lattice BLT"):
exactness, f against exact rational arithmetic, sensitivity by brute force, batch ==
sequential, round trip, the released noise's variance, calibration."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sketches.core.noise import make_noise
from sketches.counters.factorization import BLTFactorization, factorization
from sketches.counters.family import calibrate_counter, make_counters
from sketches.counters.lattice import (
    LatticeCounters,
    calibrate_lattice,
    changed_counters,
    eta_bound,
)
from sketches.errors import HorizonExceededError, IncompatibleSpecError, SpecError
from sketches.privacy import Calibrator
from sketches.privacy.gaussian_mechanism import discrete_gaussian_delta


class Pattern:
    """Deterministic integer noise; an ``m``-value draw is ``m`` one-value draws."""

    kind = "fast"

    def __init__(self) -> None:
        self.i = 0

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        idx = np.arange(self.i, self.i + int(size), dtype=np.int64)
        self.i += int(size)
        return (idx * 7919) % 20001 - 10000

    def gaussian(self, sigma: float, size: int) -> np.ndarray:  # pragma: no cover
        raise AssertionError("blt_int draws integer noise only")


def zero() -> object:
    return make_noise("zero", allow_insecure=True)


def counters(n: int, rounds: int, noise: object, *, sigma: float = 0.0, max_count: int = 1 << 31,
             m: int = 1) -> LatticeCounters:
    lat = calibrate_lattice(rounds, eps=1.0, delta=1e-6, m=m, unit_cap=1, cells=n,
                            max_count=max_count)
    return LatticeCounters(n, rounds, lat.params, sigma, noise)  # type: ignore[arg-type]


def exact_u(theta: tuple[float, ...], omega: tuple[float, ...], x: list[int]) -> list[Fraction]:
    """``(C x)_t = (B^-1 p)_t`` in exact rational arithmetic (theta, omega are dyadic)."""
    th = [Fraction(t) for t in theta]
    om = [Fraction(w) for w in omega]
    s_buf = [Fraction(0)] * len(th)
    p, out = 0, []
    for xt in x:
        p += xt
        u = p - sum(t * b for t, b in zip(th, s_buf, strict=True))
        s_buf = [w * b + u for w, b in zip(om, s_buf, strict=True)]
        out.append(u)
    return out


def test_zero_noise_releases_exact_prefixes() -> None:
    rng = np.random.default_rng(3)
    c = counters(6, 200, zero())
    exact = np.zeros(6, dtype=np.int64)
    while c.rounds < 190:
        k = int(rng.integers(1, 5))
        inc = rng.poisson(50, size=6)
        c.push(inc, k)
        exact += inc
        assert np.array_equal(c.query(), exact)
    ends = np.array([193, 195, 200])
    assert np.array_equal(c.advance_empty(ends), np.tile(exact, (3, 1)))


def test_f_within_half_plus_eta_of_exact_rational() -> None:
    """f (the kernel's) against s (C x)_t computed with Fractions, large counts."""
    n, cells = 48, 3
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**30, size=(n, cells))
    x[rng.random(size=x.shape) < 0.3] = 0
    bound = int(x.sum(axis=0).max())
    c = counters(cells, n, zero(), max_count=bound)
    c._f_log = []
    c.advance(x)
    f = np.concatenate(c._f_log)
    p = c.params
    worst = 0.0
    for j in range(cells):
        u = exact_u(p.theta, p.omega, x[:, j].tolist())
        for t in range(n):
            worst = max(worst, abs(float(Fraction(int(f[t, j])) - p.scale * u[t])))
    assert worst <= 0.5 + p.eta
    assert p.eta < 0.5  # the bound is meaningful at this scale and count bound


def test_eta_bound_scales_with_count_bound_and_scale() -> None:
    f = factorization("blt_int", 3600)
    assert isinstance(f, BLTFactorization)
    e1, _ = eta_bound(f.theta, f.omega, 3600, 1000, 10**6)
    e2, _ = eta_bound(f.theta, f.omega, 3600, 1000, 10**8)
    e3, _ = eta_bound(f.theta, f.omega, 3600, 4000, 10**8)
    assert e1 < e2 < e3 and e2 == pytest.approx(100 * e1, rel=0.01)
    assert e3 == pytest.approx(4 * e2, rel=0.01)
    with pytest.raises(SpecError, match="max_count"):
        eta_bound(f.theta, f.omega, 3600, 1000, 2**53)


@pytest.mark.parametrize("n", [6, 12])
def test_sensitivity_brute_force_all_vertex_placements(n: int) -> None:
    """One event added or removed at every round of one counter: ||f(x) - f(x')||_2 stays
    within s ||C col_t|| + (1 + 2 eta) sqrt(n - t + 1) <= the calibrated Delta_2."""
    rng = np.random.default_rng(n)
    lat = calibrate_lattice(n, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=1, max_count=10**6)
    p = lat.params
    f_fact = factorization("blt_int", n)
    assert isinstance(f_fact, BLTFactorization)
    col = f_fact.c_coeffs()

    def f_of(x: np.ndarray) -> np.ndarray:
        c = LatticeCounters(1, n, p, 0.0, zero())  # type: ignore[arg-type]
        c._f_log = []
        for xt in x:
            c.advance(np.array([[xt]]))
        return np.concatenate(c._f_log)[:, 0].astype(np.float64)

    worst = 0.0
    for _ in range(6):
        x = rng.integers(0, 1000, size=n)
        fx = f_of(x)
        for t in range(n):
            for sign in (1, -1):
                y = x.copy()
                y[t] += sign
                d = float(np.linalg.norm(f_of(y) - fx))
                per = p.scale * math.sqrt(float(np.sum(col[: n - t] ** 2))) \
                    + (1 + 2 * p.eta) * math.sqrt(n - t)
                assert d <= per + 1e-9
                worst = max(worst, d)
    assert worst <= lat.sensitivity
    assert worst >= p.scale * math.sqrt(p.column_norm_sq) - 2 * math.sqrt(n)  # near-tight


def test_calibration_meets_eps_delta_and_slack() -> None:
    cal = calibrate_counter("blt_int", 1.0, 1e-6, m=4, rounds=3600,
                            calibrator=Calibrator.DISCRETE, cells=1024)
    lat = cal.lattice
    main = lat.scale * math.sqrt(4 * lat.column_norm_sq)
    slack = (1 + 2 * lat.eta) * math.sqrt(3600 * 4)
    assert cal.sensitivity == pytest.approx(main + slack)
    assert 0.0095 <= slack / main <= 0.01  # the scale rule's target: 1%
    assert discrete_gaussian_delta(1.0, cal.sigma, cal.sensitivity) <= 1e-6
    blt = calibrate_counter("blt", 1.0, 1e-6, m=4, rounds=3600, calibrator=Calibrator.DISCRETE)
    tree = calibrate_counter("tree", 1.0, 1e-6, m=4, rounds=3600,
                             calibrator=Calibrator.DISCRETE)
    assert cal.release_sigma / blt.sigma < 1.02  # the lattice costs under 2% of noise
    assert cal.error_bound(n=1024, steps=3600, beta=0.05) \
        < 0.33 * tree.error_bound(n=1024, steps=3600, beta=0.05)
    with pytest.raises(SpecError, match="discrete"):
        calibrate_counter("blt_int", 1.0, 1e-6, m=4, rounds=3600,
                          calibrator=Calibrator.ANALYTIC)


def test_changed_counters_with_a_unit_cap() -> None:
    assert changed_counters(4, 1, 1024) == 4
    assert changed_counters(4, 3, 1024) == 12
    assert changed_counters(4, 3, 8) == 8


def test_sigma_above_the_sampler_range_lowers_the_scale_or_refuses() -> None:
    lat = calibrate_lattice(3600, eps=0.9, delta=5e-7, m=98, unit_cap=1, cells=49 * 512,
                            max_count=5 * 10**7)
    from sketches.core.noise_tables import MAX_TABLE_SIGMA as MAX_DISCRETE_SIGMA
    assert lat.sigma <= MAX_DISCRETE_SIGMA and lat.slack_share <= 0.05
    with pytest.raises(SpecError, match="sampler's range"):
        calibrate_lattice(3600, eps=0.05, delta=1e-9, m=98, unit_cap=4, cells=49 * 512)


def test_batch_equals_sequential() -> None:
    rng = np.random.default_rng(5)
    x = rng.poisson(4, size=(40, 5))
    a = counters(5, 64, Pattern(), sigma=1000.0)
    b = counters(5, 64, Pattern(), sigma=1000.0)
    a.advance(x[:1], empty_rounds=9)  # one call: round 1 with x[0], then 9 empty rounds
    b.advance(x[:1])
    for _ in range(9):
        b.advance(np.zeros((1, 5), dtype=np.int64))
    assert np.array_equal(a.query(), b.query())
    out = a.advance_empty(np.array([12, 20]))
    b.advance(np.zeros((2, 5), dtype=np.int64))
    q12 = b.query()
    b.advance(np.zeros((8, 5), dtype=np.int64))
    assert np.array_equal(out, np.stack([q12, b.query()]))
    for k, v in a.state_arrays().items():
        assert np.array_equal(v, b.state_arrays()[k]), k


def test_chunked_draws_equal_one_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    import sketches.counters.lattice as lattice_mod

    a = counters(3, 100, Pattern(), sigma=1000.0)
    b = counters(3, 100, Pattern(), sigma=1000.0)
    a.push(np.array([5, 0, 7]), 50)
    monkeypatch.setattr(lattice_mod, "_DRAW_VALUES", 7)  # 2 rounds per draw
    b.push(np.array([5, 0, 7]), 50)
    assert np.array_equal(a.query(), b.query())


def test_checkpoint_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(9)
    x = rng.poisson(3, size=(30, 4))
    a = counters(4, 30, Pattern(), sigma=500.0)
    a.advance(x[:13])
    noise_b = Pattern()
    noise_b.i = a._noise_src.i  # type: ignore[attr-defined]
    b = LatticeCounters.from_bytes(a.to_bytes(), a.params, noise_b)  # type: ignore[arg-type]
    a.advance(x[13:])
    b.advance(x[13:])
    assert np.array_equal(a.query(), b.query())
    other = calibrate_lattice(30, eps=2.0, delta=1e-6, m=1, unit_cap=1, cells=4)
    c = LatticeCounters(4, 30, other.params, other.sigma, Pattern())  # type: ignore[arg-type]
    with pytest.raises(IncompatibleSpecError):
        c.restore(a.state_header(), a.state_arrays())


def test_refuses_adding_to_a_released_round_and_enforces_the_count_bound() -> None:
    c = counters(2, 10, zero(), max_count=100)
    c.push(np.array([1, 2]), 1)
    with pytest.raises(SpecError, match="already released"):
        c.push(np.array([1, 0]), 0)
    with pytest.raises(SpecError, match="already released"):
        c.add_to_current(np.array([1, 0]))
    before = {k: v.copy() for k, v in c.state_arrays().items()}
    with pytest.raises(HorizonExceededError, match="max_count"):
        c.push(np.array([100, 0]), 1)
    for k, v in c.state_arrays().items():
        assert np.array_equal(v, before[k])
    assert c.rounds == 1


def test_released_noise_variance_matches_sigma_over_s() -> None:
    """Seeded FastNoise: released minus exact at round t, over 4000 counters, has variance
    (sigma_L / s)^2 ||B row t||^2 (+ rounding, < 1/4 + bias). The check allows 5 standard
    errors of a sample variance: false-failure rate below 1e-6 for a fresh seed (fixed here)."""
    n, rounds = 4000, 40
    cal = calibrate_counter("blt_int", 1.0, 1e-6, m=1, rounds=rounds,
                            calibrator=Calibrator.DISCRETE, cells=n)
    noise = make_noise("fast", seed=20, allow_insecure=True)
    c = make_counters("blt_int", n, rounds, cal, noise)
    rng = np.random.default_rng(1)
    for t in (1, 17, 40):
        while c.rounds < t:
            c.advance(rng.poisson(2, size=(1, n)))
        err = (c.query() - c._prefix).astype(np.float64)
        var_z = (cal.sigma / cal.lattice.scale) ** 2 * factorization("blt_int", rounds) \
            .row_norm_sq(t)
        se = var_z * math.sqrt(2 / (n - 1))
        assert abs(err.var() - var_z) <= 5 * se + 0.25 + cal.lattice.bias()
        assert abs(err.mean()) <= 5 * math.sqrt(var_z / n) + 0.5


def test_memory_is_twelve_numbers_per_counter() -> None:
    c = counters(100, 3600, zero())
    assert c.memory_bytes() == 100 * 12 * 8


def test_sensitivity_brute_force_with_a_unit_cap_over_two_cells() -> None:
    """A unit of c = 2 events may hit two cells of a row: the rounding term counts both
    cells (changed = min(cells, c m) = 2), which the calibrated Delta_2 covers at every
    placement (the brief's sqrt(m) (1 + 2 eta) sqrt(n) would count one)."""
    n = 6
    lat = calibrate_lattice(n, eps=1.0, delta=1e-6, m=1, unit_cap=2, cells=2, max_count=10**6)
    p = lat.params
    assert changed_counters(1, 2, 2) == 2

    def f_of(x: np.ndarray) -> np.ndarray:
        c = LatticeCounters(2, n, p, 0.0, zero())  # type: ignore[arg-type]
        c._f_log = []
        c.advance(x)
        return np.concatenate(c._f_log).astype(np.float64)

    rng = np.random.default_rng(7)
    for _ in range(3):
        x = rng.integers(0, 1000, size=(n, 2))
        fx = f_of(x)
        for t1 in range(n):
            for t2 in range(n):
                for cells in ((0, 1), (0, 0)):
                    y = x.copy()
                    y[t1, cells[0]] += 1
                    y[t2, cells[1]] += 1
                    assert float(np.linalg.norm(f_of(y) - fx)) <= lat.sensitivity


def test_restore_refuses_other_blt_parameters() -> None:
    """Independent review of issue 20, finding 3: the checkpoint pins theta/omega; S
    buffers restored under re-optimised BLT parameters would break |f - sCx| <= 1/2 + eta."""
    import dataclasses

    from sketches.core.noise import make_noise
    from sketches.counters.lattice import LatticeCounters, calibrate_lattice
    from sketches.errors import IncompatibleSpecError

    lat = calibrate_lattice(64, eps=1.0, delta=1e-6, m=2, unit_cap=1, cells=8)
    noise = make_noise("fast", seed=1, allow_insecure=True)
    a = LatticeCounters(8, 64, lat.params, lat.sigma, noise)
    a.advance(np.arange(8, dtype=np.int64)[None, :])
    header, arrays = a.state_header(), a.state_arrays()
    b = LatticeCounters(8, 64, lat.params, lat.sigma, noise)
    b.restore(header, arrays)
    other = dataclasses.replace(lat.params, theta=tuple(0.9 * t for t in lat.params.theta))
    c = LatticeCounters(8, 64, other, lat.sigma, noise)
    with pytest.raises(IncompatibleSpecError, match="BLT parameters"):
        c.restore(header, arrays)


def reference_rounds(c: LatticeCounters, incs: np.ndarray, z: np.ndarray) -> tuple[
        list[list[int]], list[int]]:
    """The counter-by-counter loop in plain Python floats (IEEE double, round half to even:
    numpy's ``rint``): ``f`` per round and the release after the last round."""
    th, om, s = c.params.theta, c.params.omega, float(c.params.scale)
    fs: list[list[int]] = [[0] * c.n for _ in range(incs.shape[0])]
    rel = []
    for j in range(c.n):
        q = int(c._prefix[j])
        cs = [float(v) for v in c._cs[:, j]]
        vb = [float(v) for v in c._vb[:, j]]
        out = 0
        for t in range(incs.shape[0]):
            q += int(incs[t, j])
            acc = 0.0
            for i in range(len(th)):
                acc += th[i] * cs[i]
            u = float(q) - acc
            cs = [om[i] * cs[i] + u for i in range(len(th))]
            f = round(s * u)
            fs[t][j] = f
            yf = float(f + int(z[t, j]))
            acc = 0.0
            for i in range(len(th)):
                acc += th[i] * vb[i]
            o = yf + acc
            vb = [om[i] * vb[i] + yf for i in range(len(th))]
            out = round(o / s)
        rel.append(out)
    return fs, rel


def test_kernel_is_bit_identical_to_the_counter_by_counter_loop() -> None:
    """The compiled kernel (counters innermost, SIMD) gives the values of the analysed
    counter-by-counter operation order, bit for bit, on large counts and large noise."""
    rng = np.random.default_rng(21)
    n, rounds, cells = 300, 300, 37
    x = rng.integers(0, 2**24, size=(n, cells))
    x[rng.random(size=x.shape) < 0.5] = 0
    c = counters(cells, rounds, zero(), max_count=int(x.sum(axis=0).max()))
    c.advance(x[:100])  # nonzero buffers first
    z = rng.integers(-10**6, 10**6, size=(200, cells))
    fs, rel = reference_rounds(c, x[100:], z)
    c._f_log = []
    c._run(x[100:], z)
    assert np.array_equal(np.concatenate(c._f_log), np.array(fs))
    assert c.query().tolist() == rel


def test_the_default_count_bound_is_a_per_round_clamp_not_an_error() -> None:
    """Without a caller's bound (LazyCMS/LazyCS) the counter clamps each round's increment to
    ``[-R, R]``, ``R = LATTICE_MAX_COUNT // rounds``: one cell's burst past the bound is
    counted up to R and the counter keeps releasing (it used to raise HorizonExceededError,
    stopping the shard on one event: independent review of issue 20, finding 1)."""
    from sketches.counters.lattice import LATTICE_MAX_COUNT

    lat = calibrate_lattice(8, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=2)
    cap = LATTICE_MAX_COUNT // 8
    assert lat.params.round_cap == cap and lat.params.max_count == LATTICE_MAX_COUNT
    c = LatticeCounters(2, 8, lat.params, 0.0, zero())  # type: ignore[arg-type]
    c.push(np.array([LATTICE_MAX_COUNT + 5, 3]), 1)
    c.advance(np.array([[-(cap + 9), 4], [cap, 1]]))
    assert c.query().tolist() == [cap, 8]  # cap, then -cap (clamped), then cap
    assert int(c._mass.max()) <= LATTICE_MAX_COUNT
    a = LatticeCounters.from_bytes(c.to_bytes(), lat.params, zero())  # type: ignore[arg-type]
    assert a.query().tolist() == c.query().tolist()
    unclamped = calibrate_lattice(8, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=2,
                                  max_count=LATTICE_MAX_COUNT)
    assert unclamped.params.round_cap == 0  # a caller's bound: its data path enforces it
    with pytest.raises(IncompatibleSpecError, match="round_cap"):
        LatticeCounters(2, 8, unclamped.params, 0.0, zero()).restore(  # type: ignore[arg-type]
            c.state_header(), c.state_arrays())


@pytest.mark.parametrize("signed", [False, True])
def test_sensitivity_brute_force_with_the_clamp(signed: bool) -> None:
    """With a small clamp (R = 3) and counts around it, one event added or removed at every
    round: ||f(x) - f(x')||_2 stays within s ||C col_t|| + (1 + 2 eta) sqrt(n - t + 1) <=
    Delta_2 (the clamp is monotone and 1-Lipschitz per coordinate, docs/PRIVACY.md 13.1)."""
    n = 10
    rng = np.random.default_rng(40 + signed)
    lat = calibrate_lattice(n, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=1, max_count=3 * n,
                            clamp=True)
    p = lat.params
    assert p.round_cap == 3
    col = factorization("blt_int", n).c_coeffs()  # type: ignore[attr-defined]

    def f_of(x: np.ndarray) -> np.ndarray:
        c = LatticeCounters(1, n, p, 0.0, zero())  # type: ignore[arg-type]
        c._f_log = []
        c.advance(x.reshape(n, 1))
        return np.concatenate(c._f_log)[:, 0].astype(np.float64)

    clamped = 0
    for _ in range(8):
        x = rng.integers(-5 if signed else 0, 6, size=n)
        fx = f_of(x)
        for t in range(n):
            for sign in (1, -1):
                y = x.copy()
                y[t] += sign
                clamped += int(abs(y[t]) > 3 or abs(x[t]) > 3)
                d = float(np.linalg.norm(f_of(y) - fx))
                per = p.scale * math.sqrt(float(np.sum(col[: n - t] ** 2))) \
                    + (1 + 2 * p.eta) * math.sqrt(n - t)
                assert d <= per + 1e-9
                assert d <= lat.sensitivity
    assert clamped > 20  # the clamp was really exercised


def _unit_deltas(n: int, rows: int, width: int, c: int, replace: bool,
                 signed: bool) -> np.ndarray:
    """Every change one unit of ``c`` events makes to the ``(n, rows * width)`` increments:
    each event at a round ``t`` adds its sign to one cell per row (add/remove) or moves
    from one cell to another per row (replace: ``-s_a`` at ``a``, ``+s_b`` at ``b``; signed,
    ``a == b`` with opposite signs moves a cell by 2). Multisets of events, exhaustive."""
    import itertools

    cells = rows * width
    signs = (1, -1) if signed else (1,)
    per_row = [(a, b, sa, sb) for a in range(width) for b in range(width)
               for sa in signs for sb in signs] if replace else \
        [(a, 0, sa, 0) for a in range(width) for sa in signs]
    events = []
    for t in range(n):
        for choice in itertools.product(per_row, repeat=rows):
            e = np.zeros((n, cells), dtype=np.int64)
            for r, (a, b, sa, sb) in enumerate(choice):
                if replace:
                    e[t, r * width + a] -= sa
                    e[t, r * width + b] += sb
                else:
                    e[t, r * width + a] += sa
            events.append(e)
    out = [sum(combo) for combo in itertools.combinations_with_replacement(events, c)]
    return np.stack([d for d in out if np.any(d)])


@pytest.mark.parametrize(("c", "rows", "width", "n"),
                         [(1, 2, 2, 4), (2, 1, 2, 4), (2, 1, 3, 3), (3, 1, 2, 3),
                          (3, 1, 3, 2), (2, 2, 2, 2)])
@pytest.mark.parametrize(("replace", "signed"),
                         [(False, False), (False, True), (True, False), (True, True)])
def test_sensitivity_brute_force_with_the_clamp_units_cells_relations(
        c: int, rows: int, width: int, n: int, replace: bool, signed: bool) -> None:
    """Review 20r finding 2: every neighbour pair of a unit of ``c`` events over two or
    more cells (add/remove, signed add/remove, replace, signed replace), with the clamp
    active (``R = 2``, counts around it): ``s ||C (x~ - x~')|| <=`` the main term
    ``s c sqrt(m max_col^2)`` (``x~`` the clamped increments; ``m`` = ``neighbouring_cells``),
    ``||f(x) - f(x')|| <= s ||C (x~ - x~')|| + (1 + 2 eta) sqrt(n k)`` (``k`` changed
    cells) ``<= Delta_2`` (docs/PRIVACY.md 13.1)."""
    cells, cap = rows * width, 2
    m = rows * ((4 if signed else 2) if replace else 1)
    lat = calibrate_lattice(n, eps=1.0, delta=1e-6, m=m, unit_cap=c, cells=cells,
                            max_count=cap * n, clamp=True)
    p = lat.params
    assert p.round_cap == cap and lat.sensitivity == pytest.approx(
        p.main_term(m, c) + p.slack(changed_counters(m, c, cells)))
    col = factorization("blt_int", n).c_coeffs()[:n]  # type: ignore[attr-defined]
    C = np.array([[col[i - j] if i >= j else 0.0 for j in range(n)] for i in range(n)])
    deltas = _unit_deltas(n, rows, width, c, replace, signed)
    rng = np.random.default_rng(7 * c + 3 * rows + width + 2 * replace + signed)

    def f_of(x: np.ndarray) -> np.ndarray:  # (K, n, cells) -> f, same shape
        k = x.shape[0]
        cnt = LatticeCounters(k * cells, n, p, 0.0, zero())  # type: ignore[arg-type]
        cnt._f_log = []
        cnt.advance(x.transpose(1, 0, 2).reshape(n, k * cells))
        f = np.concatenate(cnt._f_log).astype(np.float64)
        return f.reshape(n, k, cells).transpose(1, 0, 2)

    clamped = worst = 0.0
    for _ in range(3):
        x = rng.integers(-3 if signed else 0, 4, size=(n, cells))
        for sign in (1, -1):  # x' = x + unit (added) and x - unit (removed / replaced back)
            xs = x[None] + sign * deltas
            fx, fy = f_of(x[None])[0], f_of(xs)
            d = np.linalg.norm((fy - fx[None]).reshape(len(xs), -1), axis=1)
            tilde = np.clip(xs, -cap, cap) - np.clip(x, -cap, cap)[None]
            exact = p.scale * np.linalg.norm(np.einsum("ij,kjc->kic", C, tilde).reshape(
                len(xs), -1), axis=1)
            k = np.count_nonzero(np.any(tilde != 0, axis=1), axis=1)
            clamped += float(np.sum(np.any(np.abs(xs) > cap, axis=(1, 2))))
            assert np.all(exact <= p.main_term(m, c) * (1 + 1e-12))
            assert np.all(d <= exact + (1 + 2 * p.eta) * np.sqrt(n * k) + 1e-9)
            assert np.all(d <= lat.sensitivity + 1e-9)
            worst = max(worst, float(np.max(exact)) / p.main_term(m, c))
    assert clamped > 0  # the clamp was exercised
    assert worst > 0.3  # and the bound is not vacuous
