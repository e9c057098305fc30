"""Lattice BLT counters (``counter: blt_int``): the contract of the calls the counter
tests did not pin (issue 24, survivors of ``counters/lattice.py``'s first mutation run):
``advance_empty``'s checks, results and atomicity, ``noise_now``, the stated error bound
against its formula, ``lattice_params`` passing every argument on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketches.core.noise import make_noise
from sketches.counters.factorization import CounterKind, factorization
from sketches.counters.lattice import (
    LatticeCounters,
    calibrate_lattice,
    eta_bound,
    lattice_params,
)
from sketches.errors import HorizonExceededError, SpecError
from tests.support.noise_sources import FailsAtDraw, Pattern

HORIZON = 16


def _counters(noise: object, n: int = 2, sigma: float = 3.0) -> LatticeCounters:
    lat = calibrate_lattice(HORIZON, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=n,
                            max_count=10**6)
    return LatticeCounters(n, HORIZON, lat.params, sigma, noise)  # type: ignore[arg-type]


def _opened(noise: object) -> LatticeCounters:
    c = _counters(noise)
    c.advance(np.array([[1, 0], [2, 5], [0, 3]]))
    return c


@pytest.mark.parametrize("ends", [[5, 6, 9], np.array([[5], [6], [9]]), [5.0, 6.0, 9.0]])
def test_advance_empty_equals_empty_advances_and_queries(ends: object) -> None:
    """``advance_empty(ends)`` is ``for e in ends: advance(empty rows up to e); query()``:
    the same draws in the same order, the same int64 releases, consecutive ends included;
    ends may come as any 1-d-able array of whole numbers."""
    fast, slow = _opened(Pattern()), _opened(Pattern())
    got = fast.advance_empty(ends)  # type: ignore[arg-type]
    want = []
    for e in (5, 6, 9):
        slow.advance(np.zeros((e - slow.rounds, 2), dtype=np.int64))
        want.append(slow.query())
    assert got.dtype == np.int64 and got.shape == (3, 2)
    assert np.array_equal(got, np.array(want))
    assert fast.rounds == 9 and fast.to_bytes() == slow.to_bytes()


def test_advance_empty_of_no_ends_opens_nothing() -> None:
    c = _opened(Pattern())
    before = c.to_bytes()
    out = c.advance_empty(np.zeros(0, dtype=np.int64))
    assert out.shape == (0, 2) and out.dtype == np.int64
    assert c.to_bytes() == before


@pytest.mark.parametrize("ends", [[3], [2], [3, 9], [5, 5], [5, 4], [6, 5, 9]])
def test_advance_empty_refuses_ends_not_strictly_increasing_past_the_round(ends: list) -> None:
    """Three rounds are open: every end must be > 3 and the ends strictly increasing;
    a refusal leaves the state as it was."""
    c = _opened(Pattern())
    before = c.to_bytes()
    with pytest.raises(SpecError, match=r"^ends: must be strictly increasing and > rounds=3"):
        c.advance_empty(np.array(ends))
    assert c.to_bytes() == before


def test_advance_empty_checks_the_last_end_against_the_horizon_first() -> None:
    """An end past the horizon (the last one; those before it are fine) is refused before
    any round opens: state unchanged, no noise drawn."""
    noise = Pattern()
    c = _opened(noise)
    before, drawn = c.to_bytes(), noise.i
    with pytest.raises(HorizonExceededError, match=r"^horizon: 17 rounds requested"):
        c.advance_empty(np.array([5, 6, HORIZON + 1]))
    assert c.rounds == 3 and c.to_bytes() == before and noise.i == drawn


@pytest.mark.parametrize("fail_at", [2, 3, 4])
def test_advance_empty_is_atomic_when_a_draw_fails(fail_at: int) -> None:
    """The noise source fails at the draw of the first, second or third end (call 1 opened
    the first three rounds): the source's own error propagates and the counter is left
    exactly as before the call (state and round count)."""
    noise = FailsAtDraw(fail_at)
    c = _opened(noise)
    assert noise.calls == 1
    before = c.to_bytes()
    with pytest.raises(RuntimeError, match="entropy source failed"):
        c.advance_empty(np.array([5, 6, 9]))
    assert c.rounds == 3 and c.to_bytes() == before


def test_noise_now_is_the_release_minus_the_exact_prefix() -> None:
    c = _opened(Pattern())
    assert np.array_equal(c.noise_now(), c.query() - np.array([3, 8]))
    assert np.any(c.noise_now() != 0)


@pytest.mark.parametrize(("counters", "steps", "at_round", "beta"),
                         [(None, 1, None, 0.05), (7, 3, None, 1e-3), (None, 2, 4, 0.2)])
def test_error_bound_follows_its_formula(counters: int | None, steps: int,
                                         at_round: int | None, beta: float) -> None:
    """``(sigma_L / s) sqrt(2 v ln(2 steps n / beta)) + abs_b (1/2 + eta) / s + zeta + 1/2``
    with ``v`` the row norm of ``B`` at ``at_round`` (the horizon's by default) and ``n``
    the counters asked about (all of them by default), written out here."""
    c = _counters(Pattern(), n=5)
    p = c.params
    v = factorization(CounterKind.BLT_INT, HORIZON).row_norm_sq(at_round)
    n = 5 if counters is None else counters
    want = (c.sigma / p.scale) * math.sqrt(2 * v * math.log(2 * steps * n / beta)) \
        + p.abs_b * (0.5 + p.eta) / p.scale + p.zeta + 0.5
    got = c.error_bound(beta=beta, steps=steps, counters=counters, at_round=at_round)
    assert got == pytest.approx(want, rel=1e-12, abs=0)
    if at_round is None and counters is None and steps == 1:
        assert got == c.error_bound(beta=beta)


def test_lattice_params_passes_cells_max_count_and_scale_on() -> None:
    """``lattice_params`` is ``calibrate_lattice(...).params`` with every argument: the
    cells (they bound the changed counters, hence the scale), a caller's ``max_count``
    (no clamp) and a fixed scale."""
    kw = dict(eps=1.0, delta=1e-6, m=8, unit_cap=1)
    for extra in ({"cells": 2}, {"max_count": 5000}, {"scale": 7},
                  {"cells": 3, "max_count": 999, "scale": 5}):
        assert lattice_params(HORIZON, **kw, **extra) == \
            calibrate_lattice(HORIZON, **kw, **extra).params  # type: ignore[arg-type]
    assert lattice_params(HORIZON, **kw, cells=2).scale != lattice_params(HORIZON, **kw).scale
    capped = lattice_params(HORIZON, **kw, max_count=5000)
    assert (capped.max_count, capped.round_cap) == (5000, 0)
    assert lattice_params(HORIZON, **kw, scale=7).scale == 7


# ------------------------------------------------ draws, reads, the checkpoint header


class Both(Pattern):
    """A source with the 32-bit-read sampler too; its values differ from the 64-bit one's."""

    def discrete_gaussian32(self, sigma: float, size: int) -> np.ndarray:
        return super().discrete_gaussian(sigma, size) * 3 + 1


def test_draws_use_the_32_bit_sampler_where_the_source_has_one() -> None:
    """The lattice's per-draw TV is ``discrete_gaussian32``'s (``lattice_sampler_tv``):
    a source offering it is drawn from it; any sigma > 0 draws (below 1 too); sigma 0
    draws nothing and adds no noise."""
    a = _counters(Both())
    a.advance(np.array([[1, 2]]))
    z = Both().discrete_gaussian32(3.0, 2)  # the first draw a made, if it used the 32-bit one
    assert not np.array_equal(z, Pattern().discrete_gaussian(3.0, 2))
    fed = _counters(type("Fed", (), {"kind": "fast",
                                     "discrete_gaussian": lambda self, s, k: z.copy()})())
    fed.advance(np.array([[1, 2]]))
    assert np.array_equal(a.query(), fed.query())
    small = Pattern()
    c = _counters(small, sigma=0.5)
    c.advance(np.array([[1, 2]]))
    assert small.i == 2 and np.any(c.noise_now() != 0)
    none = Pattern()
    d = _counters(none, sigma=0.0)
    d.advance(np.array([[1, 2]]))
    assert none.i == 0 and d.query().tolist() == [1, 2] and d.query().dtype == np.int64


def test_advance_past_the_horizon_is_refused_and_nothing_opens_nothing_drawn() -> None:
    noise = FailsAtDraw(2)  # a second draw call would raise
    c = _opened(noise)
    before = c.to_bytes()
    with pytest.raises(HorizonExceededError, match=r"^horizon: 17 rounds requested"):
        c.advance(np.zeros((HORIZON - 2, 2), dtype=np.int64))
    c.advance(np.zeros((0, 2), dtype=np.int64))  # no round: no draw call at all
    assert noise.calls == 1 and c.rounds == 3 and c.to_bytes() == before


def test_query_answers_behind_counters_one_round_back() -> None:
    """``behind`` counters read the release of round ``rounds - 1`` (0 after the first
    round), the others the current one; an all-False or missing mask reads the current
    releases; the result is the caller's copy."""
    c = _counters(Pattern())
    c.advance(np.array([[1, 2]]))
    r1 = c.query()
    assert c.query(np.array([True, False])).tolist() == [0, r1[1]]
    c.advance(np.array([[3, 4]]))
    r2 = c.query()
    got = c.query(np.array([True, False]))
    assert got.dtype == np.int64 and got.tolist() == [r1[0], r2[1]]
    assert c.query(np.array([False, False])).tolist() == r2.tolist()
    got[:] = 99
    c.query()[:] = 99
    assert c.query().tolist() == r2.tolist()


def _digest(theta: tuple[float, ...], omega: tuple[float, ...]) -> str:
    import hashlib

    raw = np.array(theta, dtype="<f8").tobytes() + np.array(omega, dtype="<f8").tobytes()
    return hashlib.sha256(raw).hexdigest()[:32]


def test_state_header_is_the_checkpoint_format() -> None:
    """The header a checkpoint stores, field for field (a reader of older or newer builds
    depends on it): the BLT digest is the first 32 hex digits of SHA-256 over theta then
    omega as little-endian float64."""
    c = _opened(Pattern())
    p = c.params
    assert c.state_header() == {
        "rounds": 3, "sigma": 3.0, "integer_noise": True, "horizon": HORIZON,
        "counter": "blt_int", "counter_version": 1, "scale": p.scale,
        "max_count": 10**6, "round_cap": 0, "blt": _digest(p.theta, p.omega)}


def _restored(header: dict, arrays: dict, params: object = None) -> LatticeCounters:
    base = _counters(Pattern())
    c = LatticeCounters(2, HORIZON, params or base.params, 3.0, Pattern())  # type: ignore[arg-type]
    c.restore(header, arrays)
    return c


def test_restore_owns_its_arrays() -> None:
    """A restored counter copies the checkpoint's arrays: its next rounds leave them as
    they were (a checkpoint cache keeps the arrays it handed out)."""
    c = _opened(Pattern())
    header, arrays = c.state_header(), {k: v.copy() for k, v in c.state_arrays().items()}
    kept = {k: v.copy() for k, v in arrays.items()}
    r = _restored(header, arrays)
    r.advance(np.array([[5, 7], [1, 1]]))
    for name, a in arrays.items():
        assert np.array_equal(a, kept[name]), name


@pytest.mark.parametrize("rounds", [0, HORIZON])
def test_restore_accepts_a_fresh_and_a_finished_epoch(rounds: int) -> None:
    c = _counters(Pattern())
    if rounds:
        c.advance(np.zeros((rounds, 2), dtype=np.int64))
    r = _restored(c.state_header(), c.state_arrays())
    assert r.rounds == rounds and r.to_bytes() == c.to_bytes()


def test_restore_without_round_cap_is_an_unclamped_counter() -> None:
    """Checkpoints written before the clamp existed have no ``round_cap``: they restore
    into an unclamped counter (round_cap 0), not into a clamped one."""
    c = _opened(Pattern())
    header = {k: v for k, v in c.state_header().items() if k != "round_cap"}
    assert _restored(header, c.state_arrays()).rounds == 3
    from sketches.errors import IncompatibleSpecError

    clamped = calibrate_lattice(HORIZON, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=2).params
    assert clamped.round_cap > 0
    with pytest.raises(IncompatibleSpecError, match=r"^calibration: "):
        LatticeCounters(2, HORIZON, clamped, 3.0, Pattern()).restore(  # type: ignore[arg-type]
            header, c.state_arrays())


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"counter": "blt"}, "IncompatibleSpecError", r"^counter: checkpoint counter 'blt'"),
    ({"counter_version": None}, "SerializationError", r"^counter_version: None unsupported"),
    ({"counter_version": 2}, "SerializationError", r"^counter_version: 2 unsupported"),
    ({"sigma": None}, "IncompatibleSpecError", r"^calibration: checkpoint sigma=nan"),
    ({"sigma": 3.0 * (1 + 1e-7)}, "IncompatibleSpecError", r"^calibration: "),
    ({"sigma": 4.5}, "IncompatibleSpecError", r"^calibration: "),
    ({"scale": None}, "IncompatibleSpecError", r"^calibration: "),
    ({"scale": "other"}, "IncompatibleSpecError", r"^calibration: "),
    ({"max_count": None}, "IncompatibleSpecError", r"^calibration: "),
    ({"max_count": 10**6 + 1}, "IncompatibleSpecError", r"^calibration: "),
    ({"round_cap": 5}, "IncompatibleSpecError", r"^calibration: "),
    ({"blt": None}, "IncompatibleSpecError", r"^counter: the checkpoint's BLT parameters"),
    ({"rounds": None}, "SerializationError", r"^counters: rounds -1 outside \[0, 16\]"),
    ({"rounds": HORIZON + 1}, "SerializationError", r"^counters: rounds 17 outside"),
])
def test_restore_refuses_each_mismatched_or_missing_header_field(change: dict, error: str,
                                                                 match: str) -> None:
    """Each field on its own (None: the field is missing): the kind, the state version,
    the calibration (sigma to 1e-9 relative, scale, max_count, round_cap), the BLT digest,
    the round count; nothing is loaded."""
    import sketches.errors as errors

    c = _opened(Pattern())
    header = dict(c.state_header())
    for k, v in change.items():
        if v is None:
            del header[k]
        elif v == "other":
            header[k] = c.params.scale + 1
        else:
            header[k] = v
    fresh = _counters(Pattern())
    before = fresh.to_bytes()
    with pytest.raises(getattr(errors, error), match=match):
        fresh.restore(header, c.state_arrays())
    assert fresh.to_bytes() == before


def test_restore_tolerates_sigma_within_1e_9_relative() -> None:
    c = _opened(Pattern())
    header = {**c.state_header(), "sigma": 3.0 * (1 + 1e-12)}
    assert _restored(header, c.state_arrays()).rounds == 3


def test_restore_refuses_missing_fields_even_where_a_default_would_match() -> None:
    """A counter of scale 1 and max_count 1 (defaults a sloppy reader might assume): a
    header missing ``scale``, ``max_count``, ``rounds`` or ``counter_version`` is still
    refused, never read as 1."""
    import dataclasses

    from sketches.errors import IncompatibleSpecError, SerializationError

    base = _counters(Pattern()).params
    ones = dataclasses.replace(base, scale=1, max_count=1)
    c = LatticeCounters(2, HORIZON, ones, 3.0, Pattern())  # type: ignore[arg-type]
    c.advance(np.array([[1, 0]]))
    for field, err in (("scale", IncompatibleSpecError), ("max_count", IncompatibleSpecError),
                       ("counter_version", SerializationError)):
        header = {k: v for k, v in c.state_header().items() if k != field}
        with pytest.raises(err):
            LatticeCounters(2, HORIZON, ones, 3.0, Pattern()).restore(  # type: ignore[arg-type]
                header, c.state_arrays())
    header = {k: v for k, v in c.state_header().items() if k != "rounds"}
    with pytest.raises(SerializationError, match=r"^counters: rounds -1"):
        LatticeCounters(2, HORIZON, ones, 3.0, Pattern()).restore(  # type: ignore[arg-type]
            header, c.state_arrays())


@pytest.mark.parametrize("bad", ["missing", "shape", "dtype"])
def test_restore_refuses_a_missing_or_misshapen_array(bad: str) -> None:
    from sketches.errors import SerializationError

    c = _opened(Pattern())
    arrays = dict(c.state_arrays())
    if bad == "missing":
        del arrays["lat_c"]
    elif bad == "shape":
        arrays["lat_c"] = np.zeros((arrays["lat_c"].shape[0], 3))
    else:
        arrays["lat_c"] = arrays["lat_c"].astype(np.float32)
    with pytest.raises(SerializationError, match=r"^counters: array 'lat_c' missing or not"):
        _restored(c.state_header(), arrays)


def test_restore_refuses_other_omega_with_the_same_theta() -> None:
    """The digest covers omega too: buffers built under other decay rates are refused."""
    import dataclasses

    from sketches.errors import IncompatibleSpecError

    c = _opened(Pattern())
    other = dataclasses.replace(c.params, omega=tuple(0.5 * w for w in c.params.omega))
    with pytest.raises(IncompatibleSpecError, match="BLT parameters"):
        _restored(c.state_header(), c.state_arrays(), other)


# ------------------------------------------------------- the float-error bound (eta, zeta)


@pytest.mark.parametrize(("n", "scale", "max_count"),
                         [(16, 1, 10**6), (64, 37, 2**31), (200, 5, 1000), (16, 3, 1)])
def test_eta_bound_is_the_documented_derivation(n: int, scale: int, max_count: int) -> None:
    """``eta`` and ``zeta`` transcribed from ``eta_bound``'s docstring (Higham's
    ``gamma_k = k u / (1 - k u)``, magnitudes inflated by ``1 + kappa``, norms by 1.01,
    the release side with the sampler's support ``K = 14 sigma + 2`` at the largest table
    sigma), on the BLT kernels of ``n`` rounds (``_kernels``, not re-derived here)."""
    from sketches.core.noise_tables import MAX_TABLE_SIGMA
    from sketches.counters.lattice import _kernels, eta_bound, lattice_noise_support

    f = factorization(CounterKind.BLT_INT, n)
    th, om = f.theta, f.omega  # type: ignore[attr-defined]
    cmax, binv, g, kmax, geo = _kernels(tuple(th), tuple(om), n)
    u = 2.0**-53

    def gam(k: int) -> float:
        return k * u / (1 - k * u)

    m, kappa, safety = float(max_count), 1e-3, 1.01
    ubar = cmax * m * (1 + kappa)
    sbar = [k * m * (1 + kappa) for k in kmax]
    eps_u = gam(5) * (m + sum(abs(t) * s for t, s in zip(th, sbar, strict=True)))
    eps_s = [gam(2) * (abs(w) * s + ubar) for w, s in zip(om, sbar, strict=True)]
    e_max = safety * (binv * eps_u + sum(gi * ei for gi, ei in zip(g, eps_s, strict=True)))
    eta = scale * e_max + u * scale * (ubar + e_max) * safety
    kz = 14 * MAX_TABLE_SIGMA + 2
    assert lattice_noise_support(MAX_TABLE_SIGMA) == kz
    ybar = (scale * m + 0.5 + eta + kz) * 1.001
    vbar = [(scale * k * m + gs * (0.5 + eta + kz)) * 1.001
            for k, gs in zip(kmax, geo, strict=True)]
    local_out = gam(5) * (ybar + sum(abs(t) * v for t, v in zip(th, vbar, strict=True)))
    local_v = [gam(2) * (abs(w) * v + ybar) for w, v in zip(om, vbar, strict=True)]
    out_err = local_out + sum(abs(t) * gs * lv for t, gs, lv in zip(th, geo, local_v,
                                                                     strict=True))
    out_mag = ybar + sum(abs(t) * v for t, v in zip(th, vbar, strict=True))
    zeta = 1.01 * (out_err + u * (out_mag + out_err)) / scale
    # the same operations in the same order: bit for bit (eta moves ybar by about 1e-13
    # relative, below any tolerance but not below one ulp)
    assert eta_bound(tuple(th), tuple(om), n, scale, max_count) == (eta, zeta)


def test_eta_bound_refuses_count_bounds_outside_1_to_2_pow_52_and_scale_0_has_no_release() -> None:
    from sketches.counters.lattice import eta_bound

    f = factorization(CounterKind.BLT_INT, 16)
    th, om = tuple(f.theta), tuple(f.omega)  # type: ignore[attr-defined]
    for bad in (0, 2**52):
        with pytest.raises(SpecError, match=r"^max_count: must be in \[1, 2\^52\)"):
            eta_bound(th, om, 16, 1, bad)
    assert eta_bound(th, om, 16, 0, 1000) == (0.0, 0.0)
    assert eta_bound(th, om, 16, 1, 2**40)[0] > 0


class Recording(Pattern):
    def __init__(self, fail_at: int = 0) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.fail_at = fail_at

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.sizes.append(int(size))
        if len(self.sizes) == self.fail_at:
            raise RuntimeError("entropy source failed")
        return super().discrete_gaussian(sigma, size)


def test_rounds_are_drawn_in_chunks_of_the_draw_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """One draw call per ``r = max(1, _DRAW_VALUES // n)`` rounds, in round order, the
    last chunk the rest: each row's increments in its own round, so the state equals the
    one-call counter's (Pattern: a draw of m values is m one-value draws)."""
    import sketches.counters.lattice as lattice_mod

    rows = np.array([[1, 2, 3], [4, 0, 1], [0, 5, 0], [2, 2, 2], [7, 0, 1]])
    one = LatticeCounters(3, HORIZON, _counters(Pattern(), n=3).params, 3.0, Recording())
    one.advance(rows)
    assert one._noise_src.sizes == [15]  # type: ignore[attr-defined]
    monkeypatch.setattr(lattice_mod, "_DRAW_VALUES", 7)  # 7 // 3 = 2 rounds per call
    src = Recording()
    chunked = LatticeCounters(3, HORIZON, one.params, 3.0, src)
    chunked.advance(rows)
    assert src.sizes == [6, 6, 3]
    assert chunked.to_bytes() == one.to_bytes()
    monkeypatch.setattr(lattice_mod, "_DRAW_VALUES", 2)  # fewer values than counters: 1 round
    src1 = Recording()
    LatticeCounters(3, HORIZON, one.params, 3.0, src1).advance(rows[:3])
    assert src1.sizes == [3, 3, 3]


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_chunked_rounds_are_atomic_when_a_draw_fails(monkeypatch: pytest.MonkeyPatch,
                                                     fail_at: int) -> None:
    import sketches.counters.lattice as lattice_mod

    monkeypatch.setattr(lattice_mod, "_DRAW_VALUES", 7)
    c = LatticeCounters(3, HORIZON, _counters(Pattern(), n=3).params, 3.0, Recording(fail_at))
    before = c.to_bytes()
    with pytest.raises(RuntimeError, match="entropy source failed"):
        c.advance(np.arange(15).reshape(5, 3))
    assert c.rounds == 0 and c.to_bytes() == before


def test_gamma_is_highams_k_u_over_1_minus_k_u() -> None:
    """``gamma_k = k u / (1 - k u)`` with ``u = 2^-53``, at a ``k`` where ``k u = 1/8`` so
    every factor shows (``1/7``), and at small ``k`` to the last bit."""
    from fractions import Fraction

    from sketches.counters.lattice import _gamma

    assert _gamma(2**50) == 1 / 7
    for k in (1, 2, 5):
        ku = Fraction(k, 2**53)
        assert _gamma(k) == pytest.approx(float(ku / (1 - ku)), rel=1e-15, abs=0)


def test_changed_counters_is_at_least_one_and_at_most_the_cells() -> None:
    from sketches.counters.lattice import changed_counters

    assert changed_counters(1, 1, 5) == 1
    assert changed_counters(4, 2, 1) == 1
    assert changed_counters(4, 2, 3) == 3
    assert changed_counters(4, 2, None) == 8


@pytest.mark.parametrize("sigma", [-1.0, float("inf"), float("nan")])
def test_a_negative_or_infinite_sigma_is_refused(sigma: float) -> None:
    params = _counters(Pattern()).params
    with pytest.raises(SpecError, match=r"^sigma: must be a finite number >= 0"):
        LatticeCounters(2, HORIZON, params, sigma, Pattern())  # type: ignore[arg-type]

# ---- marks the independent review of lattice.py's equivalents found distinguishable ----
# (issue 24, session 6; each test fails on its mutant, verified on a scratch copy)


def _eq_zero_counter():
    zero = make_noise("zero", allow_insecure=True)
    p = lattice_params(8, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=2)
    return LatticeCounters(2, 8, p, sigma=1.0, noise=zero), p, zero


def test_lattice_restore_does_not_alias_caller_mass():
    """_load__mutmut_12/17: restore must copy lat_mass, not keep the caller's buffer."""
    a, p, zero = _eq_zero_counter()
    a.advance(np.array([[1, 0]]))
    arrays = {k: v.copy() for k, v in a.state_arrays().items()}
    b = LatticeCounters(2, 8, p, sigma=1.0, noise=zero)
    b.restore(a.state_header(), arrays)
    arrays["lat_mass"][:] = p.max_count  # the caller reuses its buffer
    b.push(np.array([1, 1]), 1)  # the mutant sees mass = max_count and refuses
    assert b.query().tolist() == [2, 1]


def test_lattice_push_int64_max_is_clamped_up():
    """push__mutmut_13: astype(None) sends 2^63-1 through float64 (2^63, wraps to -2^63)."""
    c, p, _ = _eq_zero_counter()
    assert p.round_cap > 0
    c.push(np.array([2**63 - 1, 3], dtype=np.int64), 1)
    assert c.query().tolist() == [p.round_cap, 3]


def test_lattice_query_at_accepts_plain_lists():
    """query_at__mutmut_2/4: an empty list is float64 for np.asarray, a bool list a mask."""
    c, _, _ = _eq_zero_counter()
    c.advance(np.array([[1, 5]]))
    assert c.query_at([]).tolist() == []
    assert c.query_at([True, False]).tolist() == [5, 1]  # indices 1, 0


def test_eta_bound_self_consistency_check_fires():
    """x_eta_bound__mutmut_85/86/94/96/101: the a-posteriori check refuses an unstable
    recurrence (non-table theta/omega through the public eta_bound)."""
    with pytest.raises(SpecError, match="self-consistent"):
        eta_bound((-1.0,), (0.5,), 64, 1, 2**20)  # state_err over its limit (85, 94, 101)
    with pytest.raises(SpecError, match="self-consistent"):
        eta_bound((-3.0,), (-1.75,), 32, 1, 2**20)  # e_max 1.37x its limit (94, 96)
    with pytest.raises(SpecError, match="self-consistent"):
        eta_bound((1e-30,), (1.5,), 100, 1, 2**20)  # state_err >> limit, es >> e_max (85, 86, 94)


def test_eta_bound_self_consistency_check_limits_not_tighter():
    """x_eta_bound__mutmut_98/103: e_max at 0.67x and state_err at 0.96x of kappa/2
    are accepted (the mutants' kappa/3 limits refuse)."""
    eta, _ = eta_bound((-1.0,), (2.0,), 16, 1, 2**20)
    assert eta > 0


def test_eta_bound_rejects_mismatched_theta_omega():
    """x_eta_bound__mutmut_65/68/69: zip(om, sbar, strict=True) refuses a longer omega even
    when scale < 1 skips the release-side bound."""
    with pytest.raises(ValueError):
        eta_bound((0.5,), (0.5, 0.5), 16, 0, 1)
