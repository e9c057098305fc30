"""Lattice BLT counters (``counter: blt_int``): the contract of the calls the counter
tests did not pin (issue 24, survivors of ``counters/lattice.py``'s first mutation run):
``advance_empty``'s checks, results and atomicity, ``noise_now``, the stated error bound
against its formula, ``lattice_params`` passing every argument on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketches.counters.factorization import CounterKind, factorization
from sketches.counters.lattice import LatticeCounters, calibrate_lattice, lattice_params
from sketches.errors import HorizonExceededError, SpecError
from tests.support.noise_sources import Pattern

HORIZON = 16


class FailsAtDraw(Pattern):
    """``Pattern`` whose ``fail_at``-th draw call (1-based) raises."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.calls, self.fail_at = 0, fail_at

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("entropy source failed")
        return super().discrete_gaussian(sigma, size)


def _counters(noise: object, n: int = 2) -> LatticeCounters:
    lat = calibrate_lattice(HORIZON, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=n,
                            max_count=10**6)
    return LatticeCounters(n, HORIZON, lat.params, 3.0, noise)  # type: ignore[arg-type]


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
