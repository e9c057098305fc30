"""Run an audit case many times and bound its eps from below (see :mod:`privacy_audit.stats`).

Examples
--------
>>> from privacy_audit.cases import case
>>> from sketches import SecureNoise
>>> r = run_case(case("dp_cms"), trials=50, noise=SecureNoise())
>>> r.eps_lb <= r.eps_claimed
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from privacy_audit.cases import Case
from privacy_audit.stats import ShiftEstimate, eps_lower_bound, gaussian_shift, mu_max
from sketches import NoiseSource

__all__ = ["AuditResult", "ShiftResult", "markdown_table", "run_case", "run_shift",
           "shift_table"]


@dataclass(frozen=True)
class AuditResult:
    """One audited case: what was claimed, what the audit certified, and what it could."""

    name: str
    mechanism: str
    clock: str
    relation: str
    eps_claimed: float
    delta_claimed: float
    trials: int
    statistic: str
    inputs: str
    source: str
    noise: str
    eps_lb: float
    ceiling: float
    alpha: float
    test: str
    seconds: float
    shift: ShiftResult | None = None

    @property
    def passed(self) -> bool:
        """Neither check refuted the claim (``eps_lb <= eps_claimed``, ``mu_lo <= mu_max``)."""
        return self.eps_lb <= self.eps_claimed and (self.shift is None or self.shift.passed)


@dataclass(frozen=True)
class ShiftResult:
    """The parametric check of one case (:class:`privacy_audit.cases.Parametric`).

    ``passed`` is False when the lower confidence limit of ``mu_hat`` exceeds
    ``mu_max``, the largest shift a Gaussian mechanism may have under the
    claimed (eps, delta): a refuted claim (false alarm probability <= ``alpha``
    when the statistic is Gaussian). ``ratio = mu_hat / mu_calibrated`` should be
    about 1 (about ``1/factor`` with :class:`privacy_audit.ScaledNoise`).
    """

    name: str
    noise: str
    est: ShiftEstimate
    mu_calibrated: float
    mu_max: float
    claim: tuple[float, float]
    claim_note: str
    seconds: float

    @property
    def passed(self) -> bool:
        return self.est.lo <= self.mu_max

    @property
    def ratio(self) -> float:
        return self.est.mu_hat / self.mu_calibrated


def _shift(case: Case, s0: np.ndarray | None, s1: np.ndarray, alpha: float, noise_name: str,
           seconds: float) -> ShiftResult:
    p = case.parametric
    assert p is not None
    est = gaussian_shift(s0, s1, alpha=alpha, mean0=p.mean0)
    return ShiftResult(name=case.name, noise=noise_name, est=est, mu_calibrated=p.mu_calibrated,
                       mu_max=mu_max(*p.claim), claim=p.claim, claim_note=p.claim_note,
                       seconds=seconds)


def run_shift(case: Case, trials: int, noise: NoiseSource, *, alpha: float,
              noise_name: str | None = None) -> ShiftResult:
    """The parametric check alone, one-sample: ``trials`` runs on ``X'`` only.

    The mean under ``X`` is the case's exact noise-free statistic
    (``Parametric.mean0``; the discrete Gaussian is centred), which halves the
    trials needed for a given precision (:func:`privacy_audit.gaussian_shift`).
    """
    if case.parametric is None:
        raise ValueError(f"case: {case.name!r} has no parametric check (not a Gaussian "
                         "mechanism with a linear statistic)")
    t0 = time.perf_counter()
    s1 = np.array([case.run(noise, True) for _ in range(trials)])
    return _shift(case, None, s1, alpha, noise_name or repr(noise), time.perf_counter() - t0)


def run_case(case: Case, trials: int, noise: NoiseSource, *, alpha: float = 0.05,
             noise_name: str | None = None) -> AuditResult:
    """Run ``case`` ``trials`` times on ``X`` and on ``X'`` and bound eps at the claimed delta.

    ``noise`` is used for every run (the production :class:`sketches.SecureNoise`,
    or a broken variant for the power check). The bound holds with confidence
    ``1 - alpha`` (Bonferroni over all thresholds tried). Cases with a
    :class:`privacy_audit.cases.Parametric` also get the two-sample parametric
    check (``shift``) at level ``alpha``.
    """
    t0 = time.perf_counter()
    s0 = np.empty(trials)
    s1 = np.empty(trials)
    for i in range(trials):
        s0[i] = case.run(noise, False)
        s1[i] = case.run(noise, True)
    eps, delta = case.claimed()
    b = eps_lower_bound(s0, s1, delta=delta, alpha=alpha)
    name = noise_name or repr(noise)
    shift = None if case.parametric is None else _shift(
        case, s0, s1, alpha, name, time.perf_counter() - t0)
    return AuditResult(
        name=case.name, mechanism=case.mechanism, clock=case.clock, relation=case.relation,
        eps_claimed=eps, delta_claimed=delta, trials=trials, statistic=case.statistic,
        inputs=case.inputs, source=case.source, noise=name,
        eps_lb=b.eps_lb, ceiling=b.ceiling, alpha=alpha, test=b.test,
        seconds=time.perf_counter() - t0, shift=shift)


def _fmt(x: float) -> str:
    return "none (TPR_lo <= delta)" if x == -math.inf else f"{x:.3f}"


def markdown_table(results: list[AuditResult]) -> str:
    """The results table of ``results/privacy_audit.md``."""
    head = ("| mechanism | clock | relation | claimed (eps, delta) | noise | trials (X, X') "
            "| statistic | empirical eps lower bound | ceiling for these trials |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in results:
        rows.append(
            f"| {r.mechanism} | {r.clock} | {r.relation} | ({r.eps_claimed:.4g}, "
            f"{r.delta_claimed:.3g}) | {r.noise} | {r.trials} + {r.trials} | {r.statistic} "
            f"| {_fmt(r.eps_lb)} | {_fmt(r.ceiling)} |")
    return head + "\n".join(rows) + "\n"


def shift_table(results: list[ShiftResult]) -> str:
    """The parametric table of ``results/privacy_audit.md``."""
    head = ("| case | noise | trials (X, X') | mu_hat [one-sided CIs] | mu_calibrated "
            "| mu_hat / mu_calibrated | bounded by (eps, delta) | mu_max | verdict |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in results:
        e = r.est
        rows.append(
            f"| {r.name} | {r.noise} | {e.n0} + {e.n1} | {e.mu_hat:.4f} [{e.lo:.4f}, {e.hi:.4f}] "
            f"| {r.mu_calibrated:.4f} | {r.ratio:.3f} | ({r.claim[0]:.4g}, {r.claim[1]:.3g}) "
            f"{r.claim_note} | {r.mu_max:.4f} | "
            f"{'pass' if r.passed else '**refuted** (mu_lo > mu_max)'} |")
    return head + "\n".join(rows) + "\n"
