"""Empirical privacy audit of dpstream's mechanisms (issue 8, item 10).

Runs every mechanism through the public :mod:`sketches` API on the production
noise source, many times, on worst-case neighbouring inputs, and turns the
best statistic of the public release into a lower bound on eps with
Clopper-Pearson intervals (Jagielski et al. 2020; Nasr et al. 2021). A
bound above the claimed eps refutes the stated guarantee.

- :mod:`privacy_audit.stats`: Clopper-Pearson, eps lower bound, ceiling; the
  parametric check of the Gaussian mechanisms (``mu_hat`` of the linear
  statistic against ``mu_max(eps, delta)`` of the analytic Gaussian mechanism).
- :mod:`privacy_audit.noise`: broken noise variants for the power check.
- :mod:`privacy_audit.cases`: the mechanisms, inputs and statistics.
- :mod:`privacy_audit.audit`: running a case, the results table.
- :mod:`privacy_audit.collisions`: constructing item-key collisions.
- :mod:`privacy_audit.duplicates`: release ids published with different payloads
  (two writers of one release; issue 19).

``scripts/privacy_audit.py`` writes ``results/privacy_audit.md``;
``tests/privacy`` runs a small version in CI.
"""

from privacy_audit.audit import (
    AuditResult,
    ShiftResult,
    markdown_table,
    run_case,
    run_shift,
    shift_table,
)
from privacy_audit.cases import CASES, Case, Parametric, all_cases, case
from privacy_audit.duplicates import DuplicateReport, conflicting_releases, duplicate_report
from privacy_audit.noise import ScaledNoise
from privacy_audit.stats import (
    AuditBound,
    ShiftEstimate,
    clopper_pearson,
    eps_ceiling,
    eps_lower_bound,
    gaussian_delta,
    gaussian_shift,
    miss_probability,
    mu_max,
)

__all__ = [
    "CASES",
    "AuditBound",
    "AuditResult",
    "Case",
    "DuplicateReport",
    "Parametric",
    "ScaledNoise",
    "ShiftEstimate",
    "ShiftResult",
    "all_cases",
    "case",
    "clopper_pearson",
    "conflicting_releases",
    "duplicate_report",
    "eps_ceiling",
    "eps_lower_bound",
    "gaussian_delta",
    "gaussian_shift",
    "markdown_table",
    "miss_probability",
    "mu_max",
    "run_case",
    "run_shift",
    "shift_table",
]
