"""PMGSpec (``sketches/windowed/misra_gries/pmg_spec.py``): validation of the user-level cap
(issue 24: a cap of 0 was accepted by a mutant without a failing test)."""

from __future__ import annotations

import pytest

from sketches.errors import SpecError
from sketches.windowed.misra_gries.pmg_spec import PMGSpec


@pytest.mark.parametrize("cap", [0, -1, 1.5, "2"])
def test_unit_cap_must_be_a_positive_int(cap: object) -> None:
    """The per-unit contribution cap divides the budget (``eps / m``): 0 or a non-int is a
    configuration error, refused naming the field."""
    with pytest.raises(SpecError, match=r"^unit_cap: need an int >= 1"):
        PMGSpec(k=4, eps=1.0, delta=1e-6, unit_cap=cap)  # type: ignore[arg-type]
    assert PMGSpec(k=4, eps=1.0, delta=1e-6, unit_cap=1).event_budget() == (1.0, 1e-6)


@pytest.mark.parametrize(("eps", "k"), [(0.5, 100), (2.0, 7)])
def test_error_bound_is_the_threshold_plus_twice_the_noise_bound_of_k_plus_1_draws(
        eps: float, k: int) -> None:
    """Lemma 7: ``tau + 2 t`` with ``t`` bounding all ``k + 1`` draws w.p. ``1 - beta``:
    Laplace ``ln((k+1)/beta)/eps``; geometric (two-sided, ``a = e^-eps``)
    ``ln(2 (k+1) / ((1 + a) beta)) / eps``; ``beta`` defaults to 0.05."""
    import math

    from sketches.windowed.misra_gries.pmg_spec import pmg_error_bound, pmg_threshold

    for noise, t in (("laplace", math.log((k + 1) / 0.05) / eps),
                     ("geometric", math.log(2 * (k + 1) / ((1 + math.exp(-eps)) * 0.05)) / eps)):
        tau = pmg_threshold(eps, 1e-6, noise)
        assert pmg_error_bound(k, eps, 1e-6, noise) == pytest.approx(tau + 2 * t, rel=1e-12)
        assert pmg_error_bound(k, eps, 1e-6, noise, beta=0.01) > pmg_error_bound(
            k, eps, 1e-6, noise)
