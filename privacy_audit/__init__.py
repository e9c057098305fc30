"""Empirical privacy audit of dpstream's mechanisms (issue 8, item 10).

Runs every mechanism through the public :mod:`sketches` API on the production
noise source, many times, on worst-case neighbouring inputs, and turns the
best statistic of the public release into a lower bound on eps with
Clopper-Pearson intervals (Jagielski et al. 2020; Nasr et al. 2021). A
bound above the claimed eps refutes the stated guarantee.

- :mod:`privacy_audit.stats`: Clopper-Pearson, eps lower bound, ceiling.
- :mod:`privacy_audit.noise`: broken noise variants for the power check.
- :mod:`privacy_audit.cases`: the mechanisms, inputs and statistics.
- :mod:`privacy_audit.audit`: running a case, the results table.
- :mod:`privacy_audit.collisions`: constructing item-key collisions.

``scripts/privacy_audit.py`` writes ``results/privacy_audit.md``;
``tests/privacy`` runs a small version in CI.
"""

from privacy_audit.audit import AuditResult, markdown_table, run_case
from privacy_audit.cases import CASES, Case, all_cases, case
from privacy_audit.noise import ScaledNoise
from privacy_audit.stats import AuditBound, clopper_pearson, eps_ceiling, eps_lower_bound

__all__ = [
    "CASES",
    "AuditBound",
    "AuditResult",
    "Case",
    "ScaledNoise",
    "all_cases",
    "case",
    "clopper_pearson",
    "eps_ceiling",
    "eps_lower_bound",
    "markdown_table",
    "run_case",
]
