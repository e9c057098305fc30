"""The Gaussian mechanism's (ε, δ) accounting: noise scale for a given L2 sensitivity.

Independent of sketches and trees: every function takes the L2 sensitivity
``Δ`` of the whole release. :mod:`sketches.privacy.calibration` derives ``Δ`` for
GaussBM trees and picks one of these calibrators (it re-exports every public
name here; import them from :mod:`sketches.privacy`).

- classic: Lemma 1 of paper 002 (Dwork & Roth 2014, Thm A.1),
  ``σ = Δ sqrt(2 ln(1.25/δ)) / ε``, proven only for ``ε < 1``.
- analytic: Balle & Wang 2018 (ICML), Theorem 8: the exact privacy profile
  ``δ(ε) = Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ)`` and the smallest ``σ``
  meeting a target ``δ``, for any ``ε > 0``.
- discrete: integer noise ``N_Z(0, σ^2)`` is ``ρ = Δ^2/(2σ^2)``-zCDP
  (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for DP", Sec. 3, for
  integer-valued queries), converted to ``(ε, δ)`` with their tight bound
  ``δ = inf_{α>1} exp((α-1)(αρ-ε)) / (α-1) * (1-1/α)^α`` (CKS20 Sec. 2.3,
  Corollary 13 in arXiv:2004.00010v3).

Examples
--------
>>> s = discrete_gaussian_sigma(1.0, 1e-6, 2.0)
>>> discrete_gaussian_delta(1.0, s, 2.0) <= 1e-6 < discrete_gaussian_delta(1.0, 0.99 * s, 2.0)
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from sketches.errors import SpecError

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "check_eps_delta",
    "classic_gaussian_sigma",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "zcdp_delta",
]

#: The L2 sensitivities the sigma calibrators accept. Inside it, with ``sigma`` and
#: ``sensitivity / sigma`` kept in ``[1e-150, 1e150]`` (:data:`_SIGMA_RATIO_RANGE`), every
#: intermediate of both privacy profiles (``Δ²``, ``2σ²``, ``Δ/2σ``, ``εσ/Δ``) stays a
#: normal float, so the calibrated sigma is exact. Outside it the search used to overflow
#: (``2σ² = inf`` read as delta 0: a sigma far below the true one) or divide by zero.
#: Realistic sensitivities are far inside (counters: ``unit_cap * sqrt(m * norm)``; the
#: lattice calibration: sigma up to about 1e8).
SENSITIVITY_RANGE = (1e-100, 1e100)
_SIGMA_RATIO_RANGE = (1e-150, 1e150)


def check_eps_delta(eps: float, delta: float) -> None:
    """Refuse ``eps`` that is not finite and > 0, or ``delta`` outside (0, 1) (SpecError)."""
    if not (math.isfinite(eps) and eps > 0):
        raise SpecError(f"eps: must be a finite number > 0, got {eps!r}")
    if not (0 < delta < 1):
        raise SpecError(f"delta: must be in (0, 1), got {delta!r}; typical: 1e-6 or below 1/n")



def classic_gaussian_sigma(eps: float, delta: float, sensitivity: float) -> float:
    """Lemma 1 (Dwork & Roth 2014): ``sigma = Δ sqrt(2 ln(1.25/δ)) / ε``, valid for ``ε < 1``.

    Examples
    --------
    >>> round(classic_gaussian_sigma(0.5, 1e-5, 1.0), 4)
    9.6896
    """
    check_eps_delta(eps, delta)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / eps


def _phi(x: float) -> float:
    """Standard normal CDF via ``erfc`` (accurate in both tails)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def analytic_gaussian_delta(eps: float, sigma: float, sensitivity: float) -> float:
    """Exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``δ(ε) = Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ)``.

    Examples
    --------
    >>> analytic_gaussian_delta(1.0, 5.0, 1.0) < 1e-6
    True
    """
    a = sensitivity / (2.0 * sigma)
    b = eps * sigma / sensitivity
    second = _phi(-a - b)
    log_term = eps + math.log(second) if second > 0 else -math.inf
    term = math.exp(min(log_term, 700.0))
    return max(_phi(a - b) - term, 0.0)


def zcdp_delta(rho: float, eps: float) -> float:
    """Tight ``ρ``-zCDP to ``(ε, δ)`` conversion (CKS20 Sec. 2.3, Cor. 13).

    ``δ = inf_{α>1} exp((α-1)(αρ-ε) + α ln(1-1/α)) / (α-1)``. The exponent is
    convex in ``α``; its derivative ``(2α-1)ρ - ε + ln(1-1/α)`` is increasing,
    so bisection finds the minimiser. Any ``α`` gives a valid upper bound, so a
    slightly-off search only makes ``δ`` larger (still sound).

    Examples
    --------
    >>> 0 < zcdp_delta(0.025, 1.0) < 1e-5
    True
    """
    if rho <= 0:
        return 0.0
    lo, hi = 1.0 + 1e-9, max((eps + 1.0) / (2.0 * rho) + 2.0, 2.0)
    for _ in range(200):
        alpha = 0.5 * (lo + hi)
        if (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha) < 0:
            lo = alpha
        else:
            hi = alpha
    alpha = hi
    log_delta = (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha)
    log_delta -= math.log(alpha - 1)
    return min(math.exp(log_delta), 1.0) if log_delta < 700 else 1.0


def discrete_gaussian_delta(eps: float, sigma: float, sensitivity: float) -> float:
    """``δ(ε)`` of the discrete Gaussian with L2 sensitivity ``Δ`` via ``ρ = Δ²/(2σ²)``.

    Examples
    --------
    >>> discrete_gaussian_delta(1.0, 5.0, 1.0) < 1e-4
    True
    """
    return zcdp_delta(sensitivity**2 / (2.0 * sigma**2), eps)


def _smallest_sigma(f: Callable[[float], float], target: float, start: float) -> float:
    """Smallest sigma (to 1e-12 relative) with ``delta_of_sigma(sigma) <= target``.

    ``f`` (delta as a function of sigma) is non-increasing. Returns the upper
    end of the bracket, so the result always satisfies the target.
    """
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


def _check_sensitivity(sensitivity: float) -> None:
    """Refuse a sensitivity that is not a finite number in :data:`SENSITIVITY_RANGE`."""
    lo, hi = SENSITIVITY_RANGE
    if not (lo <= sensitivity <= hi):  # also refuses nan
        raise SpecError(f"sensitivity: must be a finite number in [{lo:g}, {hi:g}]"
                        f" (the L2 sensitivity of one release), got {sensitivity!r}")


def _float_safe(f: Callable[[float], float], eps: float, delta: float,
                sensitivity: float) -> Callable[[float], float]:
    """``f`` for the sigma search, refusing a probe where the privacy profile would over- or
    underflow: ``sigma`` or ``sensitivity / sigma`` outside :data:`_SIGMA_RATIO_RANGE`
    (reached only by extreme ``eps``/``delta``). Never changes a value ``f`` returns."""
    lo, hi = _SIGMA_RATIO_RANGE

    def g(sigma: float) -> float:
        if not (lo <= sigma <= hi and lo <= sensitivity / sigma <= hi):
            raise SpecError(f"eps, delta, sensitivity: ({eps!r}, {delta!r}, {sensitivity!r})"
                            f" need a sigma outside the float-safe range (sigma and"
                            f" sensitivity / sigma in [{lo:g}, {hi:g}]); use a realistic eps"
                            f" and delta")
        return f(sigma)

    return g


def _calibrated_sigma(profile: Callable[[float, float, float], float], eps: float,
                      delta: float, sensitivity: float) -> float:
    """The smallest ``σ`` with ``profile(eps, σ, sensitivity) <= delta``: the inputs checked,
    the search kept in the float-safe range (both calibrators below)."""
    check_eps_delta(eps, delta)
    _check_sensitivity(sensitivity)
    f = _float_safe(lambda s: profile(eps, s, sensitivity), eps, delta, sensitivity)
    return _smallest_sigma(f, delta, sensitivity)


@functools.lru_cache(maxsize=1024)  # pure; a restore recalibrates every shard
def analytic_gaussian_sigma(eps: float, delta: float, sensitivity: float) -> float:
    """Balle & Wang 2018 analytic Gaussian mechanism: smallest exact ``σ`` for ``(ε, δ)``.

    Bisection on ``σ`` of :func:`analytic_gaussian_delta` (monotone in ``σ``).
    ``sensitivity`` must lie in :data:`SENSITIVITY_RANGE`, and an ``(ε, δ)`` whose ``σ``
    would leave the float-safe range is refused (SpecError).

    Examples
    --------
    >>> s = analytic_gaussian_sigma(0.5, 1e-5, 1.0)
    >>> s < classic_gaussian_sigma(0.5, 1e-5, 1.0)
    True
    >>> analytic_gaussian_delta(0.5, s, 1.0) <= 1e-5
    True
    """
    return _calibrated_sigma(analytic_gaussian_delta, eps, delta, sensitivity)


@functools.lru_cache(maxsize=1024)  # pure; a restore recalibrates every shard
def discrete_gaussian_sigma(eps: float, delta: float, sensitivity: float) -> float:
    """Smallest ``σ`` with ``zcdp_delta(Δ²/(2σ²), ε) <= δ`` (discrete Gaussian, CKS20).

    ``sensitivity`` must lie in :data:`SENSITIVITY_RANGE`, and an ``(ε, δ)`` whose ``σ``
    would leave the float-safe range is refused (SpecError), as for
    :func:`analytic_gaussian_sigma`.

    Examples
    --------
    >>> s = discrete_gaussian_sigma(1.0, 1e-6, 1.0)
    >>> discrete_gaussian_delta(1.0, s, 1.0) <= 1e-6
    True
    """
    return _calibrated_sigma(discrete_gaussian_delta, eps, delta, sensitivity)
