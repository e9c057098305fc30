"""Privacy accounting of one thresholded TrieHH level (paper 001, Lemmas 1-3).

One level releases the Poisson-sampled (rate ``p``) count ``X`` of each
prefix iff ``X >= theta``; there is no additive noise. Two accountants:

- paper 001's (corrected) closed form, :func:`level_privacy` and
  :func:`theta_for_delta`: ``eps_l = -ln(1 - theta p)``,
  ``delta_l = exp(-(theta-1)^2/(theta+1))``;
- our exact per-level hockey-stick divergence, :func:`exact_level_delta`
  (sup over the count ``k`` of the other events, with a Chernoff tail), and
  :func:`exact_calibration`, the (theta, p) minimising the detection limit
  ``theta/p`` under it.

Used by :mod:`sketches.windowed.triehh.triehh`; derivations in docs/MECHANISMS_000_001.md.

Examples
--------
>>> theta = theta_for_delta(1e-6)
>>> e, d = level_privacy(0.01, theta)
>>> theta, d <= 1e-6, round(e, 4)
(17, True, 0.1863)
"""

from __future__ import annotations

import functools
import math

import numpy as np

from sketches.errors import SpecError

__all__ = ["exact_calibration", "exact_level_delta", "level_privacy", "theta_for_delta"]


def level_privacy(p: float, theta: int) -> tuple[float, float]:
    """(eps_l, delta_l) of one thresholded level (paper 001, Lemmas 1-3, exact form).

    ``eps_l = -ln(1 - theta p)``: the likelihood ratio of a released count
    ``tau <= theta (k+1) p`` is ``(k+1)(1-p)/(k+1-tau) <= 1/(1 - theta p)``
    (Lemma 2 under Poisson sampling; the reverse ratio is ``<= 1/(1-p)``).
    ``delta_l = exp(-(theta-1)^2/(theta+1))`` bounds the Chernoff tail event
    (Lemma 1; the additive case ``exp(-theta ln theta + theta - 1)`` is smaller).

    Examples
    --------
    >>> e, d = level_privacy(0.012, 15)
    >>> round(e, 3), f"{d:.1e}"
    (0.198, '4.8e-06')
    """
    if not 0 < theta * p < 1:
        raise SpecError(f"sampling_rate, theta: need 0 < theta*p < 1, got {theta}*{p}")
    return -math.log1p(-theta * p), math.exp(-((theta - 1) ** 2) / (theta + 1))


def theta_for_delta(delta_l: float) -> int:
    """Smallest integer theta >= 2 with ``exp(-(theta-1)^2/(theta+1)) <= delta_l``.

    Examples
    --------
    >>> theta_for_delta(1e-6)
    17
    """
    theta = 2
    while math.exp(-((theta - 1) ** 2) / (theta + 1)) > delta_l:
        theta += 1
    return theta


def exact_level_delta(eps_l: float, p: float, theta: int, tail: float = 1e-30) -> float:
    """Exact delta(eps_l) of one level: sup over k of the hockey-stick divergence.

    Our derivation (not in paper 001; checked against scipy in the tests). The
    levels' cells are independent under Poisson sampling, so only the cell of
    the differing event matters: ``X1 ~ Bin(k+1, p)`` vs ``X0 ~ Bin(k, p)``,
    output ``X`` if ``X >= theta`` else suppressed.

    - Reverse direction: ``P0(t)/P1(t) <= 1/(1-p)`` for every output (and for
      the suppressed one), so it costs nothing when ``eps_l >= -ln(1-p)``
      (required here; otherwise 1.0 is returned).
    - Forward: ``sum_{t >= theta} [P1(t) - e^eps P0(t)]_+``, computed exactly
      for ``k+1 <= K``. The ratio ``P1/P0 = (k+1)(1-p)/(k+1-t)`` exceeds
      ``e^eps`` only for ``t > c (k+1)``, ``c = 1 - (1-p) e^-eps``, so for
      ``k+1 > K`` the divergence is at most ``Pr[Bin(k+1,p) >= c(k+1)] <=
      exp(-(k+1) KL(c||p))`` (Chernoff); K is chosen so that this is <= ``tail``,
      and the result is at least that bound (never an underestimate).

    Examples
    --------
    >>> f"{exact_level_delta(-math.log(1 - 6 * 0.05), 0.05, 6):.3e}"
    '5.533e-06'
    """
    if not (0 < p < 1) or eps_l < -math.log1p(-p) or theta < 1:
        return 1.0
    c = 1.0 - (1.0 - p) * math.exp(-eps_l)
    kl = c * math.log(c / p) + (1 - c) * math.log((1 - c) / (1 - p))
    big = max(theta, math.ceil(math.log(1.0 / tail) / kl))
    lf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, big + 2)))])
    n1 = np.arange(theta, big + 1)[:, None]  # copies in the larger neighbour
    tau = np.arange(theta, big + 1)[None, :]
    lp, lq = math.log(p), math.log1p(-p)

    def pmf(n: np.ndarray) -> np.ndarray:
        rest = np.clip(n - tau, 0, None)
        v = lf[n] - lf[tau] - lf[rest] + tau * lp + rest * lq
        return np.where(tau <= n, np.exp(v), 0.0)

    div = np.clip(pmf(n1) - math.exp(eps_l) * pmf(n1 - 1), 0, None).sum(axis=1)
    return float(max(div.max(initial=0.0), math.exp(-(big + 1) * kl)))


@functools.lru_cache(maxsize=256)
def exact_calibration(eps_l: float, delta_l: float, max_theta: int = 40) -> tuple[int, float]:
    """(theta, p) minimising theta/p (the detection limit) with exact delta <= delta_l.

    ``p <= 1 - e^-eps_l`` (reverse direction). For each theta a bisection on p
    keeps only values whose :func:`exact_level_delta` was verified <= delta_l.

    Examples
    --------
    >>> theta, p = exact_calibration(1.0, 1e-6)
    >>> exact_level_delta(1.0, p, theta) <= 1e-6 and theta / p < 100
    True
    """
    pmax = -math.expm1(-eps_l) * (1 - 1e-12)
    tail = delta_l * 1e-3
    best: tuple[float, int, float] | None = None
    for theta in range(1, max_theta + 1):
        if best is not None and theta / pmax >= best[0]:
            break  # p <= pmax: no larger theta can beat the best detection limit
        if exact_level_delta(eps_l, pmax, theta, tail) <= delta_l:
            cand = pmax
        else:
            lo, hi = 0.0, pmax
            for _ in range(28):
                mid = 0.5 * (lo + hi)
                if exact_level_delta(eps_l, mid, theta, tail) <= delta_l:
                    lo = mid
                else:
                    hi = mid
            cand = lo
        if cand > 0 and (best is None or theta / cand < best[0]):
            best = (theta / cand, theta, cand)
    if best is None:
        raise SpecError(f"eps, delta: no theta <= {max_theta} reaches delta_l={delta_l}")
    return best[1], best[2]
