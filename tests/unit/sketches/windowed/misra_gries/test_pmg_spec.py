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
