"""Lattice BLT counters (``counter: blt_int``): the BLT factorization on an integer lattice.

The float BLT counter (:mod:`sketches.counters.factorized`) adds a float64
Gaussian, which is not certified (docs/PRIVACY.md 13, "Lead's decision"). This
counter runs the same factorization ``A = B C`` (BLT, 4 buffers,
:data:`~sketches.counters.factorization.BLT_TABLE`) so that only an exact
integer mechanism touches the data:

    f_t = round(s (C x)_t)            integer, a deterministic function of x_1..x_t
    y_t = f_t + Z_t                   Z_t ~ N_Z(0, sigma_L^2), the exact table sampler
    release_t = round((B y)_t / s)    a post-processing of y

with a public integer scale ``s`` (:func:`lattice_params`). ``f`` is computed by
the bounded-state recurrence ``u_t = p_t - sum_i theta_i S_i``, ``S_i <- omega_i
S_i + u_t`` (``p`` the exact prefix: ``u = B^-1 p = C x``) in float64, and
:func:`eta_bound` bounds its floating-point error rigorously (forward error
analysis, given the public bound ``max_count`` on ``sum_t |x_t|`` per counter):
``|f_t - s (C x)_t| <= 1/2 + eta``. The bound is enforced on the data path: by the
caller's (LazyHH: its truncated ``event_horizon``), or by the counter's public clamp of
each round's increment to ``[-R, R]``, ``R = max_count // rounds`` (the default,
``LatticeParams.round_cap``; monotone and 1-Lipschitz per coordinate, so inside the
sensitivity bound below; docs/PRIVACY.md 13.1). The release runs the ``B`` recurrence on
``y`` (``out_t = y_t + sum_i theta_i V_i``, ``V_i <- omega_i V_i + y_t``).

Privacy (docs/PRIVACY.md 13, "Lattice BLT", [D]): for neighbouring inputs,
``||f(x) - f(x')||_2 <= s ||C (x - x')||_2 + ||e(x) - e(x')||_2`` with ``e = f -
s C x``, ``|e| <= 1/2 + eta``, nonzero difference only in the counters whose
increments change (at most ``changed = min(cells, c m)``), so

    Delta_2 = s c sqrt(m max_col(C)^2) + (1 + 2 eta) sqrt(rounds * changed)

and ``y`` is the discrete Gaussian mechanism on an integer-valued query:
``Delta_2^2 / (2 sigma_L^2)``-zCDP exactly (Canonne-Kamath-Steinke 2020).

State per counter: exact prefix and ``sum |x|`` (int64), 4 + 4 float64 buffers,
the released value now and one round before (int64): 12 numbers.

Rounds: ``advance(rows, empty_rounds)`` gives each row its own round;
``push(total, k)`` puts ``total`` in the first of its ``k`` rounds (LazyCMS and
LazyHH push a closed tick's increments so) and zeros in the others; every round
draws its own ``Z_t``: one ``discrete_gaussian32(sigma_L, r n)`` call (two composed
cache-sized tables, bits read lazily: docs/PRIVACY.md 13.1 "Sampler") per ``r =
max(1, 2^20 // n)`` rounds, in round order (a failing draw restores the state:
atomic). There is no exact jump over empty rounds
(``round`` is not linear): catch-up costs ``O(k n)``, in a compiled kernel.
Increments added to an already opened round (``push(total, 0)`` with a nonzero
total, ``add_to_current``) are refused: the round's ``f`` is already published.

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> zero = make_noise("zero", allow_insecure=True)
>>> p = lattice_params(8, eps=1.0, delta=1e-6, m=1, unit_cap=1, cells=2)
>>> c = LatticeCounters(2, 8, p, sigma=1.0, noise=zero)
>>> c.advance(np.array([[1, 0], [2, 5]]))
>>> c.query().tolist(), c.rounds
([3, 5], 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from sketches.core.jit import njit
from sketches.core.noise_tables import MAX_TABLE_SIGMA as MAX_DISCRETE_SIGMA
from sketches.core.serialization import pack, unpack
from sketches.counters.factorization import (
    BLTFactorization,
    CounterKind,
    check_columns_nonnegative,
    factorization,
)
from sketches.counters.gauss_bm import GaussianNoise
from sketches.counters.prefix import PrefixCounters, round_rows
from sketches.errors import (
    HorizonExceededError,
    IncompatibleSpecError,
    SerializationError,
    SpecError,
)
from sketches.privacy import counter_error_bound
from sketches.privacy.gaussian_mechanism import discrete_gaussian_sigma

__all__ = ["LATTICE_MAX_COUNT", "LatticeCounters", "LatticeParams", "eta_bound",
           "lattice_params", "lattice_sampler_tv"]

_STATE_VERSION = 1
#: Default public bound on ``sum_t |x_t|`` of one counter in one epoch (LazyCMS/LazyCS;
#: LazyHH uses its ``event_horizon``). A counter refuses increments beyond it.
LATTICE_MAX_COUNT = 1 << 31
#: Target share of the rounding slack in the sensitivity (``s`` is chosen for it).
SLACK_TARGET = 0.01
#: Largest share accepted when the sampler's range forces a smaller ``s``.
SLACK_MAX = 0.05
_U = 2.0**-53  # unit roundoff of float64 (round to nearest)
#: Values per ``discrete_gaussian`` call (a call opening many rounds draws in chunks)
_DRAW_VALUES = 1 << 20
_NO_F = np.zeros((0, 0), dtype=np.int64)


def _gamma(k: int) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``."""
    return k * _U / (1.0 - k * _U)


def lattice_sampler_tv(sigma: float) -> float:
    """Total-variation distance of one ``N_Z(0, sigma^2)`` draw to the exact law.

    The lattice draws with ``discrete_gaussian32`` (bits read 32 at a time; from
    ``COMPOSE32_MIN`` two composed cache-sized tables, docs/PRIVACY.md 9.1 and 13.1):
    ``2^-104`` for one table, ``2 * 2^-104 +`` the smoothing term (``< 2^-102.99``)
    composed; ``sigma`` stays within ``MAX_TABLE_SIGMA`` (the float-error bound uses the
    support, :func:`lattice_noise_support`).
    """
    from sketches.core.noise_compose import discrete_gaussian32_tv

    return discrete_gaussian32_tv(sigma)


def lattice_noise_support(sigma: float) -> float:
    """``K``: the lattice's sampler never returns ``|Z| > K`` (``K <= 14 sigma + 2``).

    One table: ``K = ceil(13.42 sigma) + 1``. Composed (``sigma >= COMPOSE32_MIN``):
    ``m K_c + K_f <= 13.42 (m sigma_c + sigma_f) + 2m + 2 <= 13.42 (sigma + 3m + 10^-3)
    + 2m + 2``, below ``14 sigma + 2`` once ``0.58 sigma >= 42.3 sqrt(sigma / 3)``, i.e.
    ``sigma >= 1,762`` (tests check the exact supports on a grid).
    """
    return 14.0 * float(sigma) + 2.0


@dataclass(frozen=True)
class LatticeParams:
    """Everything public about one lattice BLT counter family (module docstring)."""

    rounds: int
    theta: tuple[float, ...]
    omega: tuple[float, ...]
    scale: int
    max_count: int
    #: floating-point error of ``s u`` (``|f - s C x| <= 1/2 + eta``)
    eta: float
    column_norm_sq: float
    row_norm_sq: float
    #: ``sum_{j<rounds} |b_j|`` (bias of the release: ``<= abs_b (1/2 + eta) / s``)
    abs_b: float
    #: float error of the release ``(B y)_t / s`` before its final rounding
    zeta: float = 0.0
    #: ``R > 0``: each round's increment of a counter is clamped to ``[-R, R]`` before it
    #: enters ``f`` (``R = max_count // rounds``, so ``sum_t |x_t| <= max_count`` on every
    #: input, enforced on the data path: LazyCMS/LazyCS); ``0``: the caller's data path
    #: bounds ``sum_t |x_t|`` (LazyHH: the truncated ``event_horizon``), an excess raises
    round_cap: int = 0

    def slack(self, changed: int) -> float:
        """Rounding slack of ``Delta_2``: ``(1 + 2 eta) sqrt(rounds * changed)``."""
        return (1.0 + 2.0 * self.eta) * math.sqrt(self.rounds * changed)

    def main_term(self, m: int, unit_cap: int) -> float:
        """``s c sqrt(m max_col(C)^2)``: the sensitivity of ``s C x``."""
        return self.scale * unit_cap * math.sqrt(m * self.column_norm_sq)

    def sensitivity(self, m: int, unit_cap: int, changed: int) -> float:
        return self.main_term(m, unit_cap) + self.slack(changed)

    def bias(self) -> float:
        """Deterministic bound on ``|(B e)_t| / s`` (the rounding of ``f``)."""
        return self.abs_b * (0.5 + self.eta) / self.scale


@njit
def _response(theta: np.ndarray, omega: np.ndarray, n: int, inject_u: bool,
              inject_s: int) -> float:  # pragma: no cover - compiled
    """``sum_t |e_t|`` of the error recurrence's impulse response (``inject_s < 0``: none)."""
    k = theta.size
    e_state = np.zeros(k)
    total = 0.0
    for t in range(n):
        acc = 0.0
        for i in range(k):
            acc += theta[i] * e_state[i]
        e = -acc + (1.0 if (t == 0 and inject_u) else 0.0)
        total += abs(e)
        for i in range(k):
            e_state[i] = omega[i] * e_state[i] + e
        if t == 0 and inject_s >= 0:
            e_state[inject_s] += 1.0
    return total


@njit
def _geo_conv_max(c: np.ndarray, w: float) -> float:  # pragma: no cover - compiled
    """``max_m |sum_{j<=m} w^(m-j) c_j|`` over ``m < c.size`` (the recurrence ``r_m = w
    r_(m-1) + c_m``: O(n), where the convolution it replaced was O(n^2))."""
    r = 0.0
    best = 0.0
    for m in range(c.size):
        r = w * r + c[m]
        best = max(best, abs(r))
    return best


@lru_cache(maxsize=32)
def _kernels(theta_t: tuple[float, ...], omega_t: tuple[float, ...],
             n: int) -> tuple[float, float, list[float], list[float], list[float]]:
    """``max|c_j|``, ``||B^-1||_1``, ``||g_i||_1`` (state-error responses), kernel maxima,
    ``L_i = sum_{j<n} omega_i^j``. Compiled, O(k n) (a plan explores many horizons)."""
    theta, omega = np.array(theta_t), np.array(omega_t)
    f = factorization(CounterKind.BLT_INT, n)
    assert isinstance(f, BLTFactorization)
    c = np.ascontiguousarray(f.c_coeffs(), dtype=np.float64)
    k = theta.size
    binv = float(_response(theta, omega, n, True, -1))
    g = [float(_response(theta, omega, n, False, i)) for i in range(k)]
    kmax, geo_sum = [], []
    for i in range(k):
        kmax.append(float(_geo_conv_max(c, float(omega[i]))))
        geo_sum.append(float((omega[i] ** np.arange(n)).sum()))
    return float(np.abs(c).max()), binv, g, kmax, geo_sum


def eta_bound(theta: tuple[float, ...], omega: tuple[float, ...], n: int,
              scale: int, max_count: int) -> tuple[float, float]:
    """``(eta, zeta)``: rigorous float64 error bounds of the two recurrences.

    ``eta`` bounds ``|fl(s u_t) - s (C x)_t|`` for every input with ``sum_t |x_t| <=
    M = max_count`` (then ``|f_t - s (C x)_t| <= 1/2 + eta``); ``zeta`` bounds the
    float error of the release ``(B y)_t / s`` before its final rounding.

    Derivation (standard forward error analysis, Higham 2002 ch. 3): the computed
    ``u`` satisfies ``u^ = p - sum theta_i S^_i + eps_t``, ``|eps| <= gamma_5 (|p| + sum
    |theta_i S^_i|)``, and ``S^_i' = omega_i S^_i + u^ + eps'_i``, ``|eps'_i| <= gamma_2
    (|omega_i S^_i| + |u^|)``. The error ``e = u^ - u`` obeys ``e B(z) = eps - sum_i
    theta_i z / (1 - omega_i z) eps'_i``, so ``|e| <= ||B^-1||_1 max|eps| + sum_i ||g_i||_1
    max|eps'_i|`` with ``g_i`` the impulse response of ``theta_i z / ((1 - omega_i z)
    B(z))`` over ``n`` rounds. Magnitudes: ``|p| <= M``, ``|u_t| = |sum_j c_j x_{t-j}| <=
    max|c| M``, ``|S_i| <= max_m |(omega_i^. * c)_m| M``, each inflated by ``(1 + kappa)``
    (``kappa = 1e-3``) and checked a posteriori (errors ``<= kappa`` times the
    magnitude: induction over rounds). Norms computed in float64 get a factor 1.01.
    """
    th, om = np.array(theta, dtype=np.float64), np.array(omega, dtype=np.float64)
    if not 1 <= max_count < 2**52:
        raise SpecError(f"max_count: must be in [1, 2^52), got {max_count}")
    cmax, binv, g, kmax, geo_sum = _kernels(tuple(theta), tuple(omega), n)
    safety, kappa = 1.01, 1e-3
    m = float(max_count)
    ubar = cmax * m * (1 + kappa)
    sbar = [k * m * (1 + kappa) for k in kmax]
    eps_u = _gamma(5) * (m + sum(abs(t) * s for t, s in zip(th, sbar, strict=True)))
    eps_s = [_gamma(2) * (abs(w) * s + ubar) for w, s in zip(om, sbar, strict=True)]
    e_max = safety * (binv * eps_u + sum(gi * ei for gi, ei in zip(g, eps_s, strict=True)))
    state_err = [safety * gs * (e_max + es) for gs, es in zip(geo_sum, eps_s, strict=True)]
    if e_max > kappa * ubar / 2 or any(
            se > kappa * s / 2 for se, s in zip(state_err, sbar, strict=True)):
        raise SpecError("max_count: the float64 error bound is not self-consistent for this"
                        " bound; lower max_count (event_horizon)")  # pragma: no cover
    eta = scale * e_max + _U * scale * (ubar + e_max) * safety
    # release side: y = f + Z with |f| <= s ubar + 1/2 + eta, |Z| <= K; V_i = sum omega^j y
    return eta, 0.0 if scale < 1 else _release_error(th, om, kmax, geo_sum, scale, m, eta)


def _release_error(th: np.ndarray, om: np.ndarray, kmax: list[float], geo_sum: list[float],
                   scale: int, m: float, eta: float, sigma: float = MAX_DISCRETE_SIGMA) -> float:
    """Float error of ``(B y)_t / s`` (before the final rounding), any ``sigma`` in range."""
    kz = lattice_noise_support(sigma)
    ybar = (scale * m + 0.5 + eta + kz) * 1.001
    vbar = [(scale * k * m + gs * (0.5 + eta + kz)) * 1.001 for k, gs in zip(kmax, geo_sum,
                                                                         strict=True)]
    local_out = _gamma(5) * (ybar + sum(abs(t) * v for t, v in zip(th, vbar, strict=True)))
    local_v = [_gamma(2) * (abs(w) * v + ybar) for w, v in zip(om, vbar, strict=True)]
    out_err = local_out + sum(abs(t) * gs * lv for t, gs, lv in zip(th, geo_sum, local_v,
                                                                   strict=True))
    out_mag = ybar + sum(abs(t) * v for t, v in zip(th, vbar, strict=True))
    return 1.01 * (out_err + _U * (out_mag + out_err)) / scale


@dataclass(frozen=True)
class LatticeCalibration:
    """:func:`lattice_params` output: the parameters, ``sigma_L`` and the chosen terms."""

    params: LatticeParams
    sigma: float
    sensitivity: float
    slack_share: float
    zeta: float


def lattice_params(rounds: int, *, eps: float, delta: float, m: int, unit_cap: int,
                   cells: int | None = None, max_count: int | None = None,
                   scale: int | None = None) -> LatticeParams:
    """The public parameters of a lattice BLT counter (:func:`calibrate_lattice`)."""
    return calibrate_lattice(rounds, eps=eps, delta=delta, m=m, unit_cap=unit_cap, cells=cells,
                             max_count=max_count, scale=scale).params


def changed_counters(m: int, unit_cap: int, cells: int | None) -> int:
    """Counters whose increments one unit can change: ``min(cells, c m)``.

    ``m`` (``neighbouring_cells``) bounds the cells one event changes (``d``
    add/remove, ``2d`` replace or truncation, ``4d`` signed replace counts a cell
    twice); a unit of ``c`` events changes at most ``c`` times as many.
    """
    changed = int(unit_cap) * int(m)
    return changed if cells is None else max(1, min(int(cells), changed))


@lru_cache(maxsize=64)
def calibrate_lattice(rounds: int, *, eps: float, delta: float, m: int, unit_cap: int,
                      cells: int | None = None, max_count: int | None = None,
                      scale: int | None = None, clamp: bool | None = None
                      ) -> LatticeCalibration:
    """Scale ``s``, ``eta`` and the discrete ``sigma_L`` of a lattice BLT counter.

    Rule for ``s`` (deterministic, public inputs only): the smallest integer with
    rounding slack ``(1 + 2 eta(s)) sqrt(rounds changed) <= 1%`` of ``s c sqrt(m
    max_col^2)`` (``eta`` grows linearly with ``s``); if
    ``sigma_L`` would exceed the exact sampler's range (``MAX_DISCRETE_SIGMA``), the
    largest ``s`` that fits, refused (SpecError) when its slack exceeds 5%.

    ``max_count`` (public bound on ``sum_t |x_t|`` per counter): ``None`` is
    :data:`LATTICE_MAX_COUNT` enforced by the counter's per-round clamp at ``R =
    max_count // rounds`` (``clamp`` defaults to ``max_count is None``); a given bound
    is the caller's (its data path enforces it; the counter raises past it).
    """
    if clamp is None:
        clamp = max_count is None
    max_count = LATTICE_MAX_COUNT if max_count is None else int(max_count)
    round_cap = max(1, int(max_count) // int(rounds)) if clamp else 0
    f = factorization(CounterKind.BLT_INT, rounds)
    assert isinstance(f, BLTFactorization)
    check_columns_nonnegative(f)  # true for every table entry
    n = int(rounds)
    col, row = f.column_norm_sq(), f.row_norm_sq()
    abs_b = float(np.abs(f.b_coeffs()).sum())
    changed = changed_counters(m, unit_cap, cells)

    def build(s: int) -> LatticeCalibration:
        eta, zeta = eta_bound(f.theta, f.omega, n, s, int(max_count))
        p = LatticeParams(n, f.theta, f.omega, s, int(max_count), eta, col, row, abs_b, zeta,
                          round_cap)
        sens = p.sensitivity(m, unit_cap, changed)
        sigma = discrete_gaussian_sigma(eps, delta, sens)
        return LatticeCalibration(p, sigma, sens, p.slack(changed) / p.main_term(m, unit_cap),
                                  zeta)

    if scale is not None:
        if isinstance(scale, bool) or int(scale) < 1:
            raise SpecError(f"scale: must be an integer >= 1, got {scale!r}")
        return build(int(scale))
    # slack / main = (1 + 2 a s) r / (s k) with eta = a s (eta is linear in s)
    r, k_main = math.sqrt(n * changed), unit_cap * math.sqrt(m * col)
    a = eta_bound(f.theta, f.omega, n, 1, int(max_count))[0]
    room = SLACK_TARGET * k_main - 2 * a * r
    s = max(1, math.ceil(r / room)) if room > 0 else max(1, math.ceil(r / (SLACK_TARGET * k_main)))
    cal = build(s)
    if cal.sigma > MAX_DISCRETE_SIGMA:
        s = max(1, int(s * MAX_DISCRETE_SIGMA / cal.sigma * 0.999))
        cal = build(s)
        while cal.sigma > MAX_DISCRETE_SIGMA and s > 1:  # pragma: no cover - one step suffices
            s = max(1, int(s * 0.99))
            cal = build(s)
        if cal.sigma > MAX_DISCRETE_SIGMA or cal.slack_share > SLACK_MAX:
            raise SpecError(
                f"counter: blt_int needs sigma_L = s sigma <= {MAX_DISCRETE_SIGMA:.0f} (the exact"
                f" sampler's range); at scale s={s} the rounding slack is"
                f" {100 * cal.slack_share:.1f}% of the sensitivity (limit"
                f" {100 * SLACK_MAX:.0f}%); raise eps or delta, lower unit_cap, depth or"
                " rounds per epoch, or use counter: tree")
    return cal


@njit
def _run(prefix0: np.ndarray, incs: np.ndarray, z: np.ndarray, cs: np.ndarray,
         vb: np.ndarray, theta: np.ndarray, omega: np.ndarray, scale: float,
         now: np.ndarray, prev: np.ndarray, f_out: np.ndarray) -> None:  # pragma: no cover
    """``k = z.shape[0]`` rounds of every counter, in place (``cs``, ``vb``, ``now``, ``prev``).

    Round ``t`` of the call adds ``incs[t]`` (shape ``(k, n)``) to the prefix (exact
    int64). Fixed operation order per counter (the one :func:`eta_bound` analyses):
    ``acc = ((theta_0 S_0 + theta_1 S_1) + theta_2 S_2) + theta_3 S_3``, ``u = p - acc``,
    ``S_i <- omega_i S_i + u``, ``f = rint(scale u)``; the release the same on ``y = f + z``.
    The loops run over the counters innermost (contiguous rows of ``cs``/``vb``: SIMD), each
    counter's operations in that order, so the values are those of the counter-by-counter
    loop (tests/unit/sketches/counters/test_lattice.py compares them bit for bit).
    ``f_out`` (shape ``(k, n)``, or ``(0, 0)`` to skip) receives ``f`` (tests).
    """
    keep = f_out.shape[0] > 0
    k, n = z.shape
    nb = theta.shape[0]
    q = prefix0.copy()
    acc = np.empty(n)
    u = np.empty(n)
    yf = np.empty(n)
    for t in range(k):
        for j in range(n):
            q[j] += incs[t, j]
            acc[j] = 0.0
        for i in range(nb):
            th = theta[i]
            for j in range(n):
                acc[j] += th * cs[i, j]
        for j in range(n):
            u[j] = float(q[j]) - acc[j]
        for i in range(nb):
            om = omega[i]
            for j in range(n):
                cs[i, j] = om * cs[i, j] + u[j]
        for j in range(n):
            f = np.int64(np.rint(scale * u[j]))
            if keep:
                f_out[t, j] = f
            yf[j] = float(f + z[t, j])
            acc[j] = 0.0
        for i in range(nb):
            th = theta[i]
            for j in range(n):
                acc[j] += th * vb[i, j]
        for i in range(nb):
            om = omega[i]
            for j in range(n):
                vb[i, j] = om * vb[i, j] + yf[j]
        for j in range(n):
            prev[j] = now[j]
            now[j] = np.int64(np.rint((yf[j] + acc[j]) / scale))


class LatticeCounters(PrefixCounters):
    """``n`` lattice BLT counters (module docstring).

    Parameters
    ----------
    n, horizon : int
        Counters and rounds (``params.rounds`` must equal ``horizon``).
    params : LatticeParams
    sigma : float
        ``sigma_L``, the discrete Gaussian's scale on the lattice.
    noise : GaussianNoise
        Its ``discrete_gaussian`` draws ``Z``.
    """

    kind = CounterKind.BLT_INT
    integer_noise = True

    def __init__(self, n: int, horizon: int, params: LatticeParams, sigma: float,
                 noise: GaussianNoise) -> None:
        if n < 1:
            raise SpecError(f"n: number of counters must be >= 1, got {n}")
        if params.rounds != int(horizon):
            raise SpecError(f"params: built for {params.rounds} rounds, horizon is {horizon}")
        if not sigma >= 0.0 or not np.isfinite(sigma):
            raise SpecError(f"sigma: must be a finite number >= 0, got {sigma}")
        self.n = int(n)
        self.horizon = int(horizon)
        self.params = params
        self.sigma = float(sigma)
        self._noise_src = noise
        self._theta = np.array(params.theta, dtype=np.float64)
        self._omega = np.array(params.omega, dtype=np.float64)
        self.rounds = 0
        self._prefix = np.zeros(self.n, dtype=np.int64)
        self._mass = np.zeros(self.n, dtype=np.int64)  # sum_t |x_t| (bounded by max_count)
        self._cs = np.zeros((self._theta.size, self.n), dtype=np.float64)
        self._vb = np.zeros((self._theta.size, self.n), dtype=np.float64)
        self._now = np.zeros(self.n, dtype=np.int64)
        self._prev = np.zeros(self.n, dtype=np.int64)
        #: tests set a list: every round's ``f`` (private) is appended
        self._f_log: list[np.ndarray] | None = None

    # ------------------------------------------------------------ updates
    def _draw(self, k: int) -> np.ndarray:
        if self.sigma <= 0:
            return np.zeros((k, self.n), dtype=np.int64)
        # the table's law with the bits read 32 at a time where the source offers it
        # (IntegerTable.draw32: half the CSPRNG words; docs/PRIVACY.md 13.1 "Sampler")
        draw = getattr(self._noise_src, "discrete_gaussian32", None) \
            or self._noise_src.discrete_gaussian
        z = np.asarray(draw(self.sigma, k * self.n))
        return z.astype(np.int64, copy=False).reshape(k, self.n)

    def _commit(self, total: np.ndarray | None, k: int) -> None:
        incs = np.zeros((k, self.n), dtype=np.int64)
        if total is not None:
            incs[0] = total
        self._commit_rows(incs)

    def advance(self, increments: np.ndarray, empty_rounds: int = 0) -> None:
        """Open ``k + empty_rounds`` rounds; row ``i`` of ``increments`` (shape ``(k, n)``)
        is round ``rounds + 1 + i`` (each row its own round), the empty rounds follow."""
        _, k = round_rows(increments, self.n, empty_rounds)
        self._check_horizon(self.rounds + k)
        if k > 0:
            incs = np.zeros((k, self.n), dtype=np.int64)
            rows = np.asarray(increments)
            incs[: rows.shape[0]] = rows
            self._commit_rows(incs)

    def _commit_rows(self, incs: np.ndarray) -> None:
        """Open ``incs.shape[0]`` rounds, row ``t`` the increments of round ``rounds + 1 + t``."""
        k = incs.shape[0]
        cap = self.params.round_cap
        if cap:  # the public per-round clamp (R rounds <= max_count: the check cannot fail)
            incs = np.clip(incs, -cap, cap)
        mass = self._mass + np.abs(incs).sum(axis=0)
        if int(mass.max(initial=0)) > self.params.max_count:
            raise HorizonExceededError(
                f"max_count: a counter would exceed its public bound of {self.params.max_count}"
                " increments per epoch (the float error bound of counter: blt_int assumes it);"
                " start a new epoch or raise the bound")
        per = max(1, _DRAW_VALUES // self.n)  # rounds per draw call: bounded memory
        if k <= per:
            z = self._draw(k)  # the draw first; the compiled kernel cannot fail: atomic
            self._run(incs, z)
        else:  # several draws: restore the state if one fails (atomic all the same)
            saved = {name: a.copy() for name, a in self.state_arrays().items()}, self.rounds
            try:
                for r0 in range(0, k, per):
                    z = self._draw(min(per, k - r0))
                    self._run(incs[r0:r0 + z.shape[0]], z)
            except BaseException:
                self._load(*saved)
                raise
        self._mass = mass
        self.rounds += k

    def _run(self, incs: np.ndarray, z: np.ndarray) -> None:
        """Run ``z.shape[0]`` rounds (increments ``incs``) on the buffers, in place."""
        f_out = _NO_F if self._f_log is None else np.zeros(z.shape, dtype=np.int64)
        _run(self._prefix, np.ascontiguousarray(incs), np.ascontiguousarray(z), self._cs,
             self._vb, self._theta, self._omega, float(self.params.scale), self._now,
             self._prev, f_out)
        if self._f_log is not None:
            self._f_log.append(f_out)
        self._prefix += incs.sum(axis=0)

    def push(self, total: np.ndarray, new_rounds: int) -> None:
        """Add ``total`` (shape ``(n,)``) in the first of ``new_rounds >= 1`` new rounds."""
        inc, k = self._push_args(total, new_rounds)
        if k == 0:
            if np.any(inc):
                raise SpecError("total: counter blt_int cannot add to an already released"
                                " round; open a new round (one round per tick)")
            return
        self._commit(inc.astype(np.int64, copy=False), k)

    def add_to_current(self, increments: np.ndarray) -> None:
        """Refused: the open round's ``f`` is already part of a release."""
        if np.any(np.asarray(increments)):
            raise SpecError("increments: counter blt_int cannot add to an already released"
                            " round; open a new round")

    def advance_empty(self, ends: np.ndarray) -> np.ndarray:
        """Open empty rounds in calls ending at ``ends``; the query after each call."""
        e = np.asarray(ends, dtype=np.int64).reshape(-1)
        if not e.size:
            return np.zeros((0, self.n), dtype=np.int64)
        if int(e[0]) <= self.rounds or np.any(np.diff(e) <= 0):
            raise SpecError(f"ends: must be strictly increasing and > rounds={self.rounds}")
        self._check_horizon(int(e[-1]))
        saved = {k: v.copy() for k, v in self.state_arrays().items()}, self.rounds
        out = np.empty((e.size, self.n), dtype=np.int64)
        try:
            for i, end in enumerate(e.tolist()):
                self._commit(None, end - self.rounds)
                out[i] = self._now
        except BaseException:
            self._load(saved[0], saved[1])
            raise
        return out

    # ------------------------------------------------------------- queries
    def query(self, behind: np.ndarray | None = None) -> np.ndarray:
        """Released estimates; ``behind`` counters are answered at round ``rounds - 1``."""
        if behind is not None and self.rounds > 0 and bool(np.any(behind)):
            return np.where(behind, self._prev, self._now)
        return self._now.copy()

    def query_at(self, cells: np.ndarray) -> np.ndarray:
        return self._now[np.asarray(cells, dtype=np.int64)]

    def noise_now(self) -> np.ndarray:
        """Released minus exact prefix (tests and benchmarks only: uses the private prefix)."""
        return self._now - self._prefix

    def error_bound(self, *, beta: float, steps: int = 1, counters: int | None = None,
                    at_round: int | None = None) -> float:
        """Max ``|release - prefix|`` of ``counters`` counters at ``steps`` releases, w.p.
        ``1 - beta``: ``(sigma_L / s) sqrt(2 v ln(2 steps n / beta)) + bias + zeta + 1/2``."""
        f = factorization(CounterKind.BLT_INT, self.horizon)
        v = f.row_norm_sq(at_round)
        return lattice_error_bound(self.params, self.sigma, v,
                                   n=self.n if counters is None else counters,
                                   steps=steps, beta=beta)

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Prefix, mass, 2 x 4 buffers, released now/previous: 12 x 8 bytes per counter."""
        return int(sum(a.nbytes for a in self.state_arrays().values()))

    def state_arrays(self) -> dict[str, np.ndarray]:
        return {"prefix": self._prefix, "lat_mass": self._mass, "lat_c": self._cs,
                "lat_b": self._vb, "lat_now": self._now, "lat_prev": self._prev}

    def state_header(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "sigma": self.sigma, "integer_noise": True,
                "horizon": self.horizon, "counter": self.kind.value,
                "counter_version": _STATE_VERSION, "scale": self.params.scale,
                "max_count": self.params.max_count, "round_cap": self.params.round_cap,
                "blt": self._blt_digest()}

    def _blt_digest(self) -> str:
        """The BLT parameters the buffers were built with (a restored S buffer combined
        with other theta/omega would break |f - sCx| <= 1/2 + eta: independent review)."""
        import hashlib

        raw = np.ascontiguousarray(self._theta, dtype="<f8").tobytes() + \
            np.ascontiguousarray(self._omega, dtype="<f8").tobytes()
        return hashlib.sha256(raw).hexdigest()[:32]

    def _load(self, arrays: dict[str, np.ndarray], rounds: int) -> None:
        self.rounds = rounds
        self._prefix = arrays["prefix"].astype(np.int64, copy=True)
        self._mass = arrays["lat_mass"].astype(np.int64, copy=True)
        self._cs = arrays["lat_c"].astype(np.float64, copy=True)
        self._vb = arrays["lat_b"].astype(np.float64, copy=True)
        self._now = arrays["lat_now"].astype(np.int64, copy=True)
        self._prev = arrays["lat_prev"].astype(np.int64, copy=True)

    def restore(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Load :meth:`state_arrays` / :meth:`state_header` output (checks kind and calibration)."""
        if header.get("counter") != self.kind.value:
            raise IncompatibleSpecError(
                f"counter: checkpoint counter {header.get('counter', 'tree')!r} differs from"
                f" {self.kind.value!r}; start a new epoch instead of restoring")
        if int(header.get("counter_version", -1)) != _STATE_VERSION:
            raise SerializationError(
                f"counter_version: {header.get('counter_version')!r} unsupported"
                f" (this build reads {_STATE_VERSION})")
        stored = float(header.get("sigma", float("nan")))
        if not math.isclose(stored, self.sigma, rel_tol=1e-9) \
                or int(header.get("scale", -1)) != self.params.scale \
                or int(header.get("max_count", -1)) != self.params.max_count \
                or int(header.get("round_cap", 0)) != self.params.round_cap:
            raise IncompatibleSpecError(
                f"calibration: checkpoint sigma={stored}, scale={header.get('scale')},"
                f" max_count={header.get('max_count')}, round_cap={header.get('round_cap', 0)}"
                f" differ from the current sigma={self.sigma}, scale={self.params.scale},"
                f" max_count={self.params.max_count}, round_cap={self.params.round_cap};"
                " start a new epoch instead of restoring")
        if header.get("blt") != self._blt_digest():
            raise IncompatibleSpecError(
                f"counter: the checkpoint's BLT parameters ({header.get('blt')!r}) differ from "
                f"this build's ({self._blt_digest()!r}: BLT_TABLE changed); start a new epoch "
                "instead of restoring")
        rounds = int(header.get("rounds", -1))
        if not 0 <= rounds <= self.horizon:
            raise SerializationError(f"counters: rounds {rounds} outside [0, {self.horizon}]")
        k = self._theta.size
        need = {"prefix": ((self.n,), np.int64), "lat_mass": ((self.n,), np.int64),
                "lat_c": ((k, self.n), np.float64), "lat_b": ((k, self.n), np.float64),
                "lat_now": ((self.n,), np.int64), "lat_prev": ((self.n,), np.int64)}
        for name, (shape, dtype) in need.items():
            a = arrays.get(name)
            if a is None or a.shape != shape or a.dtype != dtype:
                raise SerializationError(
                    f"counters: array {name!r} missing or not {np.dtype(dtype).name} {shape}")
        self._load(arrays, rounds)

    def to_bytes(self) -> bytes:
        """Versioned binary state of this counter array alone (no pickle)."""
        return pack("counter_blt_int", {"n": self.n, "horizon": self.horizon},
                    self.state_header(), self.state_arrays())

    @classmethod
    def from_bytes(cls, data: bytes, params: LatticeParams,
                   noise: GaussianNoise) -> LatticeCounters:
        """Restore :meth:`to_bytes` output for counters built with ``params``."""
        header, arrays = unpack(data)
        st, spec = header.get("state", {}), header.get("spec", {})
        if header.get("mechanism") != "counter_blt_int":
            raise SerializationError(f"mechanism: {header.get('mechanism')!r} is not blt_int")
        try:
            c = cls(int(spec["n"]), int(spec["horizon"]), params, float(st["sigma"]), noise)
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"counter state: malformed header ({exc!r})") from None
        c.restore(st, arrays)
        return c


def lattice_error_bound(params: LatticeParams, sigma: float, row_norm_sq: float, *, n: int,
                        steps: int, beta: float) -> float:
    """``(sigma_L / s) sqrt(2 v ln(2 steps n / beta)) + bias + zeta + 1/2`` [D].

    ``(B Z)_t / s`` is ``sigma_L^2 v_t / s^2``-subgaussian (a linear combination of
    independent discrete Gaussians, each ``sigma_L^2``-subgaussian: CKS20 Cor. 9), so the
    Gaussian tail and the union bound of :func:`sketches.privacy.counter_error_bound`
    apply; ``bias`` is the deterministic ``|(B e)_t| / s``, ``zeta`` the release's float
    error, ``1/2`` the final rounding.
    """
    base = counter_error_bound(sigma / params.scale, levels=1, n=n, steps=steps, beta=beta)
    # the same formula as Calibration.error_bound for a lattice calibration
    return float(base) * math.sqrt(row_norm_sq) + params.bias() + params.zeta + 0.5
