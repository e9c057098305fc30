"""Privacy: calibration, Gaussian mechanisms, error bounds and budget accounting.

- :mod:`~sketches.privacy.calibration`: relations, clocks, sensitivity, calibrators;
- :mod:`~sketches.privacy.gaussian_mechanism`: analytic and discrete Gaussian
  mechanisms; :mod:`~sketches.privacy.gshm`: the Gaussian sparse histogram
  mechanism (PAMG's release);
- :mod:`~sketches.privacy.bounds`: paper 002's error bounds and LazyHH thresholds;
- :mod:`~sketches.privacy.accountant`: the stream-length counter budget split and
  ``BudgetAccountant``.

This package re-exports what the former ``sketches/privacy.py`` module exported,
so ``from sketches.privacy import X`` is a deliberate public path (mechanisms and
readers import from here).

May import: :mod:`sketches.errors`, ``sketches.core`` and ``sketches.privacy``
itself. Never counters, continual or windowed, never Kafka.
"""

from sketches.privacy.accountant import (
    BudgetAccountant,
    BudgetSplit,
    Guarantee,
    length_counter_calibration,
    split_budget,
    zcdp_eps,
)
from sketches.privacy.bounds import (
    LazyHHThresholds,
    alg6_gamma,
    check_lemma6_delta,
    counter_error_bound,
    delta_tilde,
    lazy_cms_error_bound,
    lazy_cs_error_bound,
    lazyhh_depth,
    lazyhh_gamma,
    lazyhh_thresholds,
    lemma4_error,
    lemma5_depth,
    lemma5_gamma,
    lemma6_gamma,
    theorem4_gamma,
)
from sketches.privacy.calibration import (
    Calibration,
    Calibrator,
    Clock,
    Relation,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    calibrate,
    check_clock,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    l2_sensitivity,
    neighbouring_cells,
    paper_sigma,
    tree_levels,
    zcdp_delta,
)

__all__ = [
    "BudgetAccountant",
    "BudgetSplit",
    "Calibration",
    "Calibrator",
    "Clock",
    "Guarantee",
    "LazyHHThresholds",
    "Relation",
    "alg6_gamma",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "calibrate",
    "check_clock",
    "check_lemma6_delta",
    "classic_gaussian_sigma",
    "counter_error_bound",
    "delta_tilde",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "l2_sensitivity",
    "lazy_cms_error_bound",
    "lazy_cs_error_bound",
    "lazyhh_depth",
    "lazyhh_gamma",
    "lazyhh_thresholds",
    "lemma4_error",
    "lemma5_depth",
    "lemma5_gamma",
    "lemma6_gamma",
    "length_counter_calibration",
    "neighbouring_cells",
    "paper_sigma",
    "split_budget",
    "theorem4_gamma",
    "tree_levels",
    "zcdp_delta",
    "zcdp_eps",
]
