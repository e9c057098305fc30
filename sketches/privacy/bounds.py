"""Error bounds of paper 002 and their exact-sigma versions (re-exported by privacy.py).

``log`` is base 2 (tree heights, Markov-halving depths), ``ln`` natural, as in
the paper's proofs. Each function cites the statement it implements. Functions
named after a lemma reproduce the printed formula (which assumes the paper's
sigma); :func:`counter_error_bound` is the same bound for the sigma actually
used, which is what a release must carry (any calibrator).

Paper discrepancies found while implementing (the proofs win):

- Lemma 4's proof writes ``σ sqrt(2h ln(2|I|n/β)) = (h/ε) sqrt(2m ln(1.25/δ)
  ln(2|I|n/β))``, which holds for ``σ = sqrt(m h ln(1.25/δ))/ε`` (Theorem 1's
  proof) but not for Alg. 1's ``σ = sqrt(2 m h ln(1.25/δ))/ε``: with the sigma
  the algorithm actually uses, the bound is ``sqrt 2`` larger. Lemma 5's and
  Lemma 6's ``γ`` inherit this; their ``3 log`` slack covers it only when
  ``log(T/w) >~ 17`` (e.g. ``T = 2^20, w = 1024, d = 4, ε = 0.5, δ = 1e-3``:
  Lemma 5 ``γ = 1394.5`` < exact ``1472.5``). Releases therefore carry
  :func:`counter_error_bound` of the actual sigma, and LazyHH's suppression
  threshold must use :func:`lazyhh_gamma` (or the max with the printed form).

- LazyHH ``γ``: Theorem 4 prints ``3 log T``, Lemma 6 eq. (1) ``3 log(T/k~)``
  with ``ln(2T log(4T/β)/β)``, Alg. 6 line 4 ``3 log(T/k~) sqrt(d ln(4Td/β)
  ln(1.25/δ))``. The proof of Lemma 6 applies Lemma 4 with failure ``β/2`` to
  ``d k~`` counters at ``T/k~`` times, i.e. ``ln(4Td/β)`` -- Alg. 6's form. All
  three are provided; :func:`lazyhh_gamma` is the exact-sigma version.
- LazyHH depth: the text says ``d = ln(4T/β)``, Alg. 6 ``log(4T/β)``. The proof
  needs per-row failure ``1/2`` for the ``2t/k~`` collision error (Markov), so
  ``2^-d <= β/(4T)``: ``d = ceil(log2(4T/β))`` (:func:`lazyhh_depth`).

Examples
--------
>>> round(delta_tilde(0.5, 1e-3), 7)
0.0062994
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sketches.errors import SpecError


def _check_beta(beta: float) -> None:
    if not (0 < beta < 1):
        raise SpecError(f"beta: failure probability must be in (0, 1), got {beta!r}")


def lemma4_error(
    eps: float, delta: float, *, m: int, horizon: int, n: int, steps: int, beta: float
) -> float:
    """Lemma 4 as printed: ``(1/ε)(log T + 1) sqrt(2 m ln(1.25/δ) ln(2|I|n/β))``.

    Max additive noise error of ``n`` GaussBM counters (paper calibration) over
    ``|I| = steps`` query times, with probability ``>= 1 - β``.

    Examples
    --------
    >>> round(lemma4_error(1.0, 1e-6, m=1, horizon=1024, n=1, steps=1024, beta=0.05), 2)
    189.95
    """
    _check_beta(beta)
    return (
        (math.log2(horizon) + 1)
        / eps
        * math.sqrt(2 * m * math.log(1.25 / delta) * math.log(2 * steps * n / beta))
    )


def counter_error_bound(sigma: float, *, levels: int, n: int, steps: int, beta: float) -> float:
    """Exact-sigma Lemma 4: ``σ sqrt(2 h ln(2 |I| n / β))`` (proof of Lemma 4, Fact 1).

    A prefix query sums at most ``h`` independent node noises, each
    ``σ²``-subgaussian (true for ``N(0, σ²)`` and for the discrete ``N_Z(0, σ²)``,
    CKS20 Sec. 2), so ``P[|Y| >= a] <= 2 exp(-a²/(2hσ²))``; a union bound over
    ``n`` counters and ``|I|`` times gives failure ``<= β``.

    Examples
    --------
    >>> round(counter_error_bound(10.0, levels=4, n=1, steps=1, beta=0.05), 3)
    54.324
    """
    _check_beta(beta)
    return sigma * math.sqrt(2 * levels * math.log(2 * steps * n / beta))


def lemma5_depth(horizon: int, beta: float) -> int:
    """Lemma 5 (proof): ``d = ceil(ln(2T/β))`` rows for LazyCMS/LazyCS.

    Examples
    --------
    >>> lemma5_depth(2**20, 0.05)
    18
    """
    _check_beta(beta)
    return math.ceil(math.log(2 * horizon / beta))


def lemma5_gamma(eps: float, delta: float, *, horizon: int, width: int, depth: int,
                 beta: float) -> float:
    """Lemma 5 noise term: ``γ = 3 log(T/w)/ε sqrt(d ln(2Td/β) ln(1.25/δ))`` (paper sigma).

    Examples
    --------
    >>> round(lemma5_gamma(1.0, 1e-3, horizon=2**20, width=1024, depth=4, beta=0.05), 2)
    697.26
    """
    _check_beta(beta)
    return (
        3 * math.log2(horizon / width) / eps
        * math.sqrt(depth * math.log(2 * horizon * depth / beta) * math.log(1.25 / delta))
    )


def lazy_cms_error_bound(*, t: float, width: int, gamma: float,
                         lag: float | None = None) -> tuple[float, float]:
    """Lemma 5, LazyCMS: ``-γ - lag <= f̂ - f <= η t + γ`` with ``η = e/w``.

    ``lag`` is the largest count of one item not yet pushed: ``w`` on the arrival
    clock (default); on the tick clock the worker passes its own bound.

    Examples
    --------
    >>> lo, hi = lazy_cms_error_bound(t=1000, width=272, gamma=5.0)
    >>> lo, round(hi, 3)
    (-277.0, 14.994)
    """
    w = float(width) if lag is None else float(lag)
    return (-gamma - w, math.e / width * t + gamma)


def lazy_cs_error_bound(*, f2: float, width: int, gamma: float,
                        lag: float | None = None) -> tuple[float, float]:
    """Lemma 5, LazyCS: ``|f̂ - f| <= η sqrt(F2) + γ + lag`` with ``η = sqrt(3/w)``.

    Examples
    --------
    >>> lazy_cs_error_bound(f2=300.0, width=3, gamma=1.0, lag=0)
    (-18.320508075688775, 18.320508075688775)
    """
    w = float(width) if lag is None else float(lag)
    half = math.sqrt(3.0 * f2 / width) + gamma + w
    return (-half, half)


def sketch_point_query(spec: Any, events: float, noise: float, *,
                       median: bool) -> tuple[float, float]:
    """Worst-case range of a point query's ``estimate - count`` of a CMS/CS sketch of
    ``spec.width`` after ``events`` events whose cells are within ``noise`` (Lemma 5 with
    no lag; ``median``: Count Sketch with the worst case ``F2 <= events^2``).

    The ``point_query`` capability of the sketches' registry entries.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> sketch_point_query(SimpleNamespace(width=3), 10.0, 1.0, median=True)
    (-11.0, 11.0)
    """
    if median:
        return lazy_cs_error_bound(f2=float(events) ** 2, width=spec.width, gamma=noise, lag=0)
    return lazy_cms_error_bound(t=float(events), width=spec.width, gamma=noise, lag=0)


def check_lemma6_delta(delta: float, *, name: str = "delta") -> None:
    """Refuse a LazyHH sketch ``δ`` outside ``(0, 0.5)``: Lemma 6 assumes ``δ ∈ (0, 0.5)``.

    Theorem 3's proof rests on Lemma 6 (good events with probability ``>= 1 - β
    >= 1 - δ``), which is stated for ``δ < 0.5`` only. LazyHH specs call this
    with the sketch's ``δ`` (``δ_s`` after the length-counter split).

    Examples
    --------
    >>> check_lemma6_delta(1e-3)
    >>> try:
    ...     check_lemma6_delta(0.5)
    ... except SpecError as err:
    ...     print("below 0.5" in str(err))
    True
    """
    if not (0 < delta < 0.5):
        raise SpecError(
            f"{name}: LazyHH needs a sketch delta in (0, 0.5) (paper 002, Lemma 6), got "
            f"{delta!r}; choose a delta below 0.5 (typically 1e-6 or below 1/n)"
        )


def delta_tilde(eps: float, delta: float) -> float:
    """Theorem 3/4: LazyHH is ``(ε, δ~)``-DP with ``δ~ = 2δ(3/2 + e^ε + δ)``.

    Examples
    --------
    >>> delta_tilde(1.0, 0.0)
    0.0
    """
    return 2.0 * delta * (1.5 + math.exp(eps) + delta)


def lazyhh_depth(horizon: int, beta: float) -> int:
    """Lemma 6 proof: ``d = ceil(log2(4T/β))`` so each estimate's collision error ``<= 2t/k~``
    fails with probability ``<= 2^-d <= β/(4T)`` (Markov: ``1/2`` per row).

    Examples
    --------
    >>> lazyhh_depth(2**20, 1e-4)
    36
    """
    _check_beta(beta)
    return math.ceil(math.log2(4 * horizon / beta))


def _hh_core(horizon: int, beta: float) -> float:
    lg = math.log2(4 * horizon / beta)
    return lg * math.log(2 * horizon * lg / beta)


def theorem4_gamma(eps: float, delta: float, *, horizon: int, beta: float) -> float:
    """Theorem 4 as printed: ``3 log T/ε sqrt(log(4T/β) ln(2T log(4T/β)/β) ln(1.25/δ))``.

    Examples
    --------
    >>> theorem4_gamma(0.5, 1e-3, horizon=2**20, beta=1e-4) > 0
    True
    """
    _check_beta(beta)
    return 3 * math.log2(horizon) / eps * math.sqrt(
        _hh_core(horizon, beta) * math.log(1.25 / delta))


def lemma6_gamma(eps: float, delta: float, *, horizon: int, k_tilde: int, beta: float) -> float:
    """Lemma 6 eq. (1): ``3 log(T/k~)/ε sqrt(log(4T/β) ln(2T log(4T/β)/β) ln(1.25/δ))``.

    Examples
    --------
    >>> g = lemma6_gamma(0.5, 1e-3, horizon=2**20, k_tilde=256, beta=1e-4)
    >>> g < theorem4_gamma(0.5, 1e-3, horizon=2**20, beta=1e-4)
    True
    """
    _check_beta(beta)
    return 3 * math.log2(horizon / k_tilde) / eps * math.sqrt(
        _hh_core(horizon, beta) * math.log(1.25 / delta))


def alg6_gamma(eps: float, delta: float, *, horizon: int, k_tilde: int, beta: float) -> float:
    """Alg. 6 line 4: ``3 log(T/k~)/ε sqrt(d ln(4Td/β) ln(1.25/δ))`` with ``d = log(4T/β)``.

    Examples
    --------
    >>> alg6_gamma(0.5, 1e-3, horizon=2**20, k_tilde=256, beta=1e-4) > 0
    True
    """
    _check_beta(beta)
    d = math.log2(4 * horizon / beta)
    return 3 * math.log2(horizon / k_tilde) / eps * math.sqrt(
        d * math.log(4 * horizon * d / beta) * math.log(1.25 / delta))


def lazyhh_gamma(sigma: float, *, levels: int, depth: int, k_tilde: int, outputs: int,
                 beta: float) -> float:
    """Exact-sigma Lemma 6 eq. (3): noise bound over ``d k~`` counters at ``|I|`` output times,
    failure ``β/2``: ``σ sqrt(2 h ln(4 |I| d k~ / β))``.

    Examples
    --------
    >>> g = lazyhh_gamma(10.0, levels=12, depth=20, k_tilde=256, outputs=4096, beta=1e-4)
    >>> g == counter_error_bound(10.0, levels=12, n=20 * 256, steps=4096, beta=5e-5)
    True
    """
    return counter_error_bound(sigma, levels=levels, n=depth * k_tilde, steps=outputs,
                               beta=beta / 2)


@dataclass(frozen=True)
class LazyHHThresholds:
    """Alg. 6 ``output`` thresholds for given ``γ`` (Lemma 6 error interval ``[-λ1, λ2]``).

    ``λ1 = γ + lag`` (paper: ``γ + k~``, the lazy-update lag), ``λ2(t) = 2t/k~ +
    γ``, ``τ1 = t/k``, ``τ2 = t/k~ + λ1 + 2 λ2``, publish if ``f̂ > max(τ1, τ2) +
    c``. The ``+1`` of the paper is the neighbour's change of one count; with a
    unit cap ``c`` it is ``+c``. ``t_up`` is an upper bound on the true length
    (the DP length count plus its error bound under add/remove); ``τ2`` must use
    it, ``τ1`` (utility only) may use the estimate.

    Examples
    --------
    >>> th = lazyhh_thresholds(10.0, k=10, k_tilde=100, lag=100)
    >>> th.lambda1, th.lambda2(1000.0), th.threshold(1000.0)
    (110.0, 30.0, 181.0)
    """

    gamma: float
    k: int
    k_tilde: int
    lag: float
    unit_cap: int = 1

    @property
    def lambda1(self) -> float:
        """Lower error magnitude ``λ1 = γ + lag``."""
        return self.gamma + self.lag

    def lambda2(self, t_up: float) -> float:
        """Upper error ``λ2 = 2 t/k~ + γ``."""
        return 2.0 * t_up / self.k_tilde + self.gamma

    def tau1(self, t: float) -> float:
        """Heavy-hitter threshold ``τ1 = t/k``."""
        return t / self.k

    def tau2(self, t_up: float) -> float:
        """Suppression threshold ``τ2 = t/k~ + λ1 + 2 λ2``."""
        return t_up / self.k_tilde + self.lambda1 + 2.0 * self.lambda2(t_up)

    def threshold(self, t: float, t_up: float | None = None) -> float:
        """``max(τ1(t), τ2(t_up)) + c`` (``t_up`` defaults to ``t``: paper, replace model)."""
        up = t if t_up is None else t_up
        return max(self.tau1(t), self.tau2(up)) + self.unit_cap


def lazyhh_thresholds(gamma: float, *, k: int, k_tilde: int, lag: float | None = None,
                      unit_cap: int = 1) -> LazyHHThresholds:
    """Build :class:`LazyHHThresholds`; ``lag`` defaults to ``k~`` (arrival clock, Alg. 6).

    Requires ``k~ > k`` (Theorem 4).

    Examples
    --------
    >>> lazyhh_thresholds(1.0, k=4, k_tilde=16).lag
    16.0
    """
    if not (0 < k < k_tilde):
        raise SpecError(f"k_tilde: must exceed k >= 1 (Theorem 4), got k={k}, k_tilde={k_tilde}")
    return LazyHHThresholds(
        gamma=float(gamma), k=k, k_tilde=k_tilde,
        lag=float(k_tilde if lag is None else lag), unit_cap=unit_cap,
    )
