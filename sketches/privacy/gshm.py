"""Gaussian sparse histogram mechanism (GSHM): exact calibration and release.

Paper 000 Theorem 5 (Wilkins, Kifer, Zhang & Karrer, Thm 5.4): a sparse
histogram whose neighbours differ by at most 1 in at most ``l`` stored keys,
in the ±1 monotone way of Misra-Gries/PAMG sketches, is released by adding
``N(0, sigma^2)`` to every stored count and keeping the counts ``>= tau``.
:func:`gshm_delta` is the exact delta of Theorem 5, :func:`gshm_calibrate`
the (sigma, tau) minimising tau for a target (eps, delta), and
:func:`gshm_release` the release itself (noise injected). Used by
:mod:`sketches.windowed.misra_gries.pamg` (PAMG, merged MG sketches).

Examples
--------
>>> round(gshm_delta(1.0, 54.3, 336.6, 100), 9) < 1e-7
True
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> keys, est = gshm_release(np.array([3, 9], np.uint64), np.array([500, 2]), 40.0, 200.0,
...                          make_noise("zero", allow_insecure=True))
>>> keys.tolist(), est.tolist()
([3], [500.0])
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from sketches.privacy.calibration import analytic_gaussian_delta, analytic_gaussian_sigma

__all__ = ["gshm_calibrate", "gshm_delta", "gshm_release"]


def _log_phi(x: float) -> float:
    v = 0.5 * math.erfc(-x / math.sqrt(2.0))
    if v > 0:
        return math.log(v)
    return -0.5 * x * x - math.log(-x * math.sqrt(2 * math.pi))  # Mills ratio, x << 0


def gshm_delta(eps: float, sigma: float, tau: float, ell: int) -> float:
    """Smallest delta for which GSHM(sigma, tau) is (eps, delta)-DP (Theorem 5).

    With ``P = Phi((tau - 1)/sigma)`` and ``dBW(e; D) = analytic Gaussian delta
    of sensitivity D at eps e`` (Balle & Wang, :mod:`sketches.privacy.calibration`)::

        max{ 1 - P^l,
             max_{a<l} 1 - P^a + P^a dBW(eps - a ln P; sqrt(l - a)),
             max_{a<l} dBW(eps + a ln P; sqrt(l - a)) }

    ``a`` counts differing keys that exist in one sketch only (count 1).
    """
    lp = _log_phi((tau - 1.0) / sigma)
    best = -math.expm1(ell * lp)
    for a in range(ell):
        pa = math.exp(a * lp)
        d = math.sqrt(ell - a)
        add = (1.0 - pa) + pa * analytic_gaussian_delta(eps - a * lp, sigma, d)
        rem = analytic_gaussian_delta(eps + a * lp, sigma, d)
        best = max(best, add, rem)
    return best


def _min_tau(eps: float, delta: float, sigma: float, ell: int) -> float:
    lo, hi = 1.0, 1.0 + sigma * 50.0
    if gshm_delta(eps, sigma, hi, ell) > delta:
        return math.inf
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if gshm_delta(eps, sigma, mid, ell) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


@functools.lru_cache(maxsize=64)
def gshm_calibrate(eps: float, delta: float, ell: int) -> tuple[float, float]:
    """(sigma, tau) minimising tau s.t. :func:`gshm_delta` <= delta (golden search on sigma).

    The start is the analytic-Gaussian sigma for l2-sensitivity ``sqrt(l)``
    (the threshold part needs some slack above it). Cost O(l) per evaluation,
    ~1000 evaluations; cached.

    Examples
    --------
    >>> s, t = gshm_calibrate(1.0, 1e-6, 100)
    >>> 40 < s < 48 and 230 < t < 255
    True
    """
    s0 = analytic_gaussian_sigma(eps, delta, math.sqrt(ell))
    lo, hi = math.log(s0 * 1.0001), math.log(s0 * 4.0)
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = _min_tau(eps, delta, math.exp(x1), ell), _min_tau(eps, delta, math.exp(x2), ell)
    for _ in range(18):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = _min_tau(eps, delta, math.exp(x1), ell)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = _min_tau(eps, delta, math.exp(x2), ell)
    sigma = math.exp(x1 if f1 <= f2 else x2)
    return sigma, min(f1, f2)


def gshm_release(keys: np.ndarray, counts: np.ndarray, sigma: float, tau: float,
                 noise: Any) -> tuple[np.ndarray, np.ndarray]:
    """Keys whose ``count + N(0, sigma^2)`` is ``>= tau``, with the rounded noisy counts.

    Rounding the released values is post-processing (it removes the low-order
    bits of the floating-point noise).
    """
    vals = counts + noise.gaussian(sigma, keys.size)
    keep = vals >= tau
    return keys[keep], np.rint(vals[keep])  # rounding: post-processing against FP leaks
