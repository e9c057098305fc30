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
from privacy_audit.stats import eps_lower_bound
from sketches import NoiseSource

__all__ = ["AuditResult", "markdown_table", "run_case"]


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

    @property
    def passed(self) -> bool:
        """The audit did not refute the claim (``eps_lb <= eps_claimed``)."""
        return self.eps_lb <= self.eps_claimed


def run_case(case: Case, trials: int, noise: NoiseSource, *, alpha: float = 0.05,
             noise_name: str | None = None) -> AuditResult:
    """Run ``case`` ``trials`` times on ``X`` and on ``X'`` and bound eps at the claimed delta.

    ``noise`` is used for every run (the production :class:`sketches.SecureNoise`,
    or a broken variant for the power check). The bound holds with confidence
    ``1 - alpha`` (Bonferroni over all thresholds tried).
    """
    t0 = time.perf_counter()
    s0 = np.empty(trials)
    s1 = np.empty(trials)
    for i in range(trials):
        s0[i] = case.run(noise, False)
        s1[i] = case.run(noise, True)
    eps, delta = case.claimed()
    b = eps_lower_bound(s0, s1, delta=delta, alpha=alpha)
    return AuditResult(
        name=case.name, mechanism=case.mechanism, clock=case.clock, relation=case.relation,
        eps_claimed=eps, delta_claimed=delta, trials=trials, statistic=case.statistic,
        inputs=case.inputs, source=case.source, noise=noise_name or repr(noise),
        eps_lb=b.eps_lb, ceiling=b.ceiling, alpha=alpha, test=b.test,
        seconds=time.perf_counter() - t0)


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
