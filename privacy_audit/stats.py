"""Clopper-Pearson intervals and the empirical eps lower bound (pure Python + numpy).

Method (Jagielski et al. 2020, "Auditing differentially private machine
learning"; Nasr et al. 2021, "Adversary instantiation"): a mechanism ``M`` is
(eps, delta)-DP only if every test ``R`` (a set of outputs) satisfies
``P[M(X') in R] <= e^eps P[M(X) in R] + delta`` for both orders of the
neighbours ``X, X'``. From ``n1`` runs on ``X'`` and ``n0`` runs on ``X`` we
get a one-sided Clopper-Pearson lower bound ``TPR_lo`` of ``P[M(X') in R]``
and an upper bound ``FPR_hi`` of ``P[M(X) in R]``; then, with the stated
confidence, ``eps >= ln((TPR_lo - delta) / FPR_hi)``.

:func:`eps_lower_bound` scans thresholds ``t`` of a scalar statistic ``s``
(tests ``s >= t`` and ``s < t``, both orders of the neighbours) and returns
the largest bound. The scan tries many tests on the same runs, so every
interval is computed at confidence ``1 - alpha / n_tests`` (Bonferroni): the
returned bound exceeds the true eps of the mechanism with probability at most
``alpha`` in total. :func:`eps_ceiling` is the largest bound the same
procedure can return with these trial counts (perfect separation of the two
samples): an audit cannot certify more than this, however strong the attack.

Examples
--------
>>> round(clopper_pearson(0, 100, 0.05)[1], 4)
0.0295
>>> import numpy as np
>>> r = eps_lower_bound(np.zeros(1000), np.ones(1000), delta=0.0, alpha=0.05)
>>> r.eps_lb == r.ceiling
True
>>> round(r.eps_lb, 2)
5.28
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["AuditBound", "ShiftEstimate", "betainc", "clopper_pearson", "eps_ceiling",
           "eps_lower_bound", "gaussian_delta", "gaussian_shift", "miss_probability", "mu_max"]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)`` (Numerical Recipes 6.4).

    Examples
    --------
    >>> round(betainc(2.0, 3.0, 0.4), 6)   # = P[Bin(4, 0.4) >= 2]
    0.5248
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def _beta_ppf(q: float, a: float, b: float) -> float:
    """Quantile of Beta(a, b) by bisection on :func:`betainc` (monotone in x)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-17 + 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds ``(lo, hi)`` for ``k`` successes in ``n`` trials.

    ``P[p < lo] <= alpha`` and ``P[p > hi] <= alpha`` separately (each bound
    is one-sided at level ``alpha``).
    """
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"k, n: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    lo = 0.0 if k == 0 else _beta_ppf(alpha, k, n - k + 1)
    hi = 1.0 if k == n else _beta_ppf(1.0 - alpha, k + 1, n - k)
    return lo, hi


@dataclass(frozen=True)
class AuditBound:
    """Result of :func:`eps_lower_bound`.

    ``eps_lb`` is ``-inf`` when no test certifies anything (``TPR_lo <= delta``).
    ``test`` describes the test attaining it (region, order, counts).
    """

    eps_lb: float
    ceiling: float
    n_tests: int
    alpha: float
    test: str


def _bound(k1: int, n1: int, k0: int, n0: int, delta: float, a: float) -> float:
    tpr_lo = clopper_pearson(k1, n1, a)[0]
    fpr_hi = clopper_pearson(k0, n0, a)[1]
    if tpr_lo <= delta or fpr_hi <= 0.0:
        return -math.inf
    return math.log((tpr_lo - delta) / fpr_hi)


def eps_ceiling(n0: int, n1: int, delta: float, alpha: float, n_tests: int = 1) -> float:
    """Largest bound :func:`eps_lower_bound` can return with ``n0``/``n1`` runs.

    Perfect separation: ``TPR = n1/n1`` and ``FPR = 0/n0`` at confidence
    ``1 - alpha / n_tests``.
    """
    a = alpha / max(n_tests, 1)
    return max(_bound(n1, n1, 0, n0, delta, a), _bound(n0, n0, 0, n1, delta, a))


def _candidates(s0: np.ndarray, s1: np.ndarray, max_thresholds: int) -> np.ndarray:
    both = np.concatenate([s0, s1])
    uniq = np.unique(both)
    if uniq.size <= max_thresholds:
        return uniq
    # tails matter most: thresholds at quantiles spaced more densely near both ends
    q = 0.5 - 0.5 * np.cos(np.pi * np.linspace(0.0, 1.0, max_thresholds))
    return np.unique(np.quantile(both, q, method="inverted_cdf"))


def eps_lower_bound(s0: np.ndarray, s1: np.ndarray, *, delta: float, alpha: float = 0.05,
                    max_thresholds: int = 64) -> AuditBound:
    """Empirical eps lower bound from statistic samples under ``X`` (``s0``) and ``X'`` (``s1``).

    Tests ``{s >= t}`` and ``{s < t}`` for every candidate threshold ``t``, each
    in both orders of the neighbours; Bonferroni over all of them (total
    confidence ``1 - alpha``). The candidate thresholds are fixed by the
    pooled sample only (at most ``max_thresholds``).
    """
    s0 = np.asarray(s0, dtype=np.float64).ravel()
    s1 = np.asarray(s1, dtype=np.float64).ravel()
    n0, n1 = s0.size, s1.size
    ts = _candidates(s0, s1, max_thresholds)
    n_tests = 4 * ts.size
    a = alpha / n_tests
    a0, a1 = np.sort(s0), np.sort(s1)
    ge0 = n0 - np.searchsorted(a0, ts, side="left")  # count s0 >= t
    ge1 = n1 - np.searchsorted(a1, ts, side="left")
    best, where = -math.inf, "none"
    cache: dict[tuple[int, int, int, int], float] = {}
    for t, g0, g1 in zip(ts.tolist(), ge0.tolist(), ge1.tolist(), strict=True):
        tests = (
            (f"s >= {t:.6g}, X' vs X", g1, n1, g0, n0),
            (f"s >= {t:.6g}, X vs X'", g0, n0, g1, n1),
            (f"s < {t:.6g}, X vs X'", n0 - g0, n0, n1 - g1, n1),
            (f"s < {t:.6g}, X' vs X", n1 - g1, n1, n0 - g0, n0),
        )
        for name, k_pos, n_pos, k_neg, n_neg in tests:
            key = (k_pos, n_pos, k_neg, n_neg)
            if key not in cache:
                # cheap pre-check: the point estimate must beat the best so far
                if k_pos / n_pos <= delta:
                    cache[key] = -math.inf
                elif best > -math.inf and (k_pos / n_pos - delta) <= math.exp(best) * (
                        k_neg / n_neg):
                    cache[key] = -math.inf
                else:
                    cache[key] = _bound(k_pos, n_pos, k_neg, n_neg, delta, a)
            e = cache[key]
            if e > best:
                best = e
                where = f"{name}: {k_pos}/{n_pos} vs {k_neg}/{n_neg}"
    return AuditBound(eps_lb=best, ceiling=eps_ceiling(n0, n1, delta, alpha, n_tests),
                      n_tests=n_tests, alpha=alpha, test=where)


# ---------------------------------------------------------------- parametric (Gaussian) check
_SQRT2 = math.sqrt(2.0)


def _phi(x: float) -> float:
    """Standard normal CDF, accurate in the tails (``erfc``)."""
    return 0.5 * math.erfc(-x / _SQRT2)


def _z(alpha: float) -> float:
    """``Phi^{-1}(1 - alpha)`` by bisection on :func:`_phi` (no scipy at run time)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 1.0 - _phi(mid) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def gaussian_delta(eps: float, mu: float) -> float:
    """Exact ``delta(eps)`` of the Gaussian mechanism with shift ``mu`` (sensitivity / sigma).

    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018,
    analytic Gaussian mechanism); increasing in ``mu``.

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1.0), 4)
    0.1269
    """
    if mu <= 0.0:
        return 0.0
    return max(0.0, _phi(-eps / mu + mu / 2.0) - math.exp(eps) * _phi(-eps / mu - mu / 2.0))


def mu_max(eps: float, delta: float) -> float:
    """Largest shift ``mu`` whose Gaussian mechanism is ``(eps, delta)``-DP (bisection).

    Examples
    --------
    >>> round(mu_max(1.0, 1e-6), 4)
    0.2367
    >>> gaussian_delta(1.0, mu_max(1.0, 1e-6)) <= 1e-6
    True
    """
    if not (eps >= 0.0 and 0.0 < delta < 1.0):
        raise ValueError(f"eps, delta: need eps >= 0 and 0 < delta < 1, got {eps}, {delta}")
    lo, hi = 0.0, 1.0
    while gaussian_delta(eps, hi) <= delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(eps, mid) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class ShiftEstimate:
    """Result of :func:`gaussian_shift`: ``mu_hat`` and its one-sided confidence limits.

    ``lo``/``hi``: each holds with confidence ``1 - alpha`` (normal approximation
    of the standardized mean difference, thousands of trials).
    """

    mu_hat: float
    lo: float
    hi: float
    alpha: float
    n0: int
    n1: int


def gaussian_shift(s0: np.ndarray | None, s1: np.ndarray, *, alpha: float,
                   mean0: float | None = None) -> ShiftEstimate:
    """Mean shift of ``s`` from ``X`` to ``X'`` in units of its standard deviation.

    Two-sample (``s0`` given): ``(mean(s1) - mean(s0)) / pooled sd``, standard
    error ``sqrt(1/n0 + 1/n1 + mu^2 / (2 (n0 + n1)))``. One-sample (``s0`` is
    None, ``mean0`` the exact mean under ``X``: the exact statistic of ``X`` when
    the noise is centred, as the discrete Gaussian is): ``(mean(s1) - mean0) /
    sd(s1)``, standard error ``sqrt(1/n1 + mu^2 / (2 n1))``, half the trials for
    the same precision. Assumes the statistic is Gaussian with the same variance
    under ``X`` and ``X'`` (a linear statistic of Gaussian noise).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> e = gaussian_shift(rng.normal(0, 2, 20000), rng.normal(1, 2, 20000), alpha=0.01)
    >>> e.lo < 0.5 < e.hi
    True
    """
    x1 = np.asarray(s1, dtype=np.float64).ravel()
    n1 = x1.size
    if s0 is None:
        if mean0 is None:
            raise ValueError("mean0: the one-sample estimate needs the exact mean under X")
        sd = float(x1.std(ddof=1))
        diff = float(x1.mean()) - mean0
        n0 = 0
    else:
        x0 = np.asarray(s0, dtype=np.float64).ravel()
        n0 = x0.size
        pooled = ((n0 - 1) * x0.var(ddof=1) + (n1 - 1) * x1.var(ddof=1)) / (n0 + n1 - 2)
        sd = math.sqrt(pooled)
        diff = float(x1.mean()) - float(x0.mean())
    if sd == 0.0:  # no noise: the shift is infinite (or nothing moves)
        mu = 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
        return ShiftEstimate(mu_hat=mu, lo=mu, hi=mu, alpha=alpha, n0=n0, n1=n1)
    mu = diff / sd
    if s0 is None:
        se = math.sqrt(1.0 / n1 + mu * mu / (2.0 * n1))
    else:
        se = math.sqrt(1.0 / n0 + 1.0 / n1 + mu * mu / (2.0 * (n0 + n1)))
    z = _z(alpha)
    return ShiftEstimate(mu_hat=mu, lo=mu - z * se, hi=mu + z * se, alpha=alpha, n0=n0, n1=n1)


def miss_probability(mu: float, mu_max: float, n1: int, alpha: float) -> float:
    """Probability that the one-sample check of :func:`gaussian_shift` misses a true shift ``mu``.

    The check refutes a claim when ``lo = mu_hat - z se(mu_hat) > mu_max``; ``lo`` grows with
    ``mu_hat``, so it misses when ``mu_hat`` falls below the ``t`` solving ``lo(t) = mu_max``,
    with probability ``Phi((t - mu) / se(mu))`` under the normal approximation (``se(m) =
    sqrt(1/n1 + m^2 / (2 n1))``). The design check of a power test: a broken mechanism too close
    to ``mu_max`` makes a test that fails at random.

    Examples
    --------
    >>> miss_probability(0.3121, 0.2367, 4500, 0.01) < 6e-3   # dp_cms, sigma / sqrt(2)
    True
    >>> round(miss_probability(0.3731, 0.2367, 600, 0.01), 2)  # BLT, sigma / 2: 1 run in 6
    0.18
    """
    if not (mu_max > 0.0 and n1 > 1 and 0.0 < alpha < 0.5):
        raise ValueError(f"need mu_max > 0, n1 > 1, 0 < alpha < 0.5; got {mu_max}, {n1}, {alpha}")
    z = _z(alpha)

    def se(m: float) -> float:
        return math.sqrt(1.0 / n1 + m * m / (2.0 * n1))

    lo, hi = mu_max, mu_max + 1.0
    while hi - z * se(hi) <= mu_max:
        hi = 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid - z * se(mid) <= mu_max:
            lo = mid
        else:
            hi = mid
    return _phi((lo - mu) / se(mu))
