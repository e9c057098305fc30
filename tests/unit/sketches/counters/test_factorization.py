"""The factorizations' construction (``sketches/counters/factorization.py``; issue 24,
mutation survivors): which BLT table entry a horizon uses, ``factorization``'s argument
checks and kinds, and the non-negativity check of ``C`` at exact zeros."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.counters.factorization import (
    BLT_TABLE,
    BLTFactorization,
    CounterKind,
    blt_params,
    columns_nonnegative,
    factorization,
)
from sketches.errors import SpecError


def _entry(rounds: int) -> int:
    """The smallest ``e >= 1`` with ``2**e >= rounds``, capped at the table's last entry."""
    e = 1
    while 2**e < rounds:
        e += 1
    return min(e, max(BLT_TABLE))


@pytest.mark.parametrize("rounds", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 3600, 4096, 4097,
                                    2**16, 2**16 + 1, 2**20])
def test_blt_uses_the_table_entry_of_the_smallest_power_of_two_at_least_the_horizon(
        rounds: int) -> None:
    theta, omega = blt_params(rounds)
    want_theta, want_omega = BLT_TABLE[_entry(rounds)]
    assert theta.dtype == omega.dtype == np.float64
    assert theta.tolist() == list(want_theta) and omega.tolist() == list(want_omega)
    f = factorization("blt", rounds)
    assert f.theta == want_theta and f.omega == want_omega


@pytest.mark.parametrize("kind", ["tree", "sqrt", "blt", "blt_int"])
def test_factorization_records_its_kind_and_rounds(kind: str) -> None:
    f = factorization(kind, 8)
    assert f.kind is CounterKind(kind) and f.rounds == 8
    assert factorization(CounterKind(kind), np.int64(8)).kind is CounterKind(kind)


@pytest.mark.parametrize("bad", [0, -3, True, False, 2.5, 8.0, "8", None])
def test_factorization_refuses_rounds_that_are_not_an_integer_of_at_least_one(
        bad: object) -> None:
    for kind in ("tree", "sqrt", "blt"):
        with pytest.raises(SpecError, match="rounds"):
            factorization(kind, bad)  # type: ignore[arg-type]


def test_zero_entries_of_c_count_as_non_negative() -> None:
    """``theta = omega = (1,)`` gives ``b_j = 1`` for every ``j``: ``B = A`` and ``C = I``, whose
    off-diagonal entries are exact zeros: ``C >= 0`` holds."""
    f = BLTFactorization(CounterKind.BLT, 8, (1.0,), (1.0,))
    assert f.b_coeffs().tolist() == [1.0] * 8
    assert f.c_coeffs().tolist() == [1.0] + [0.0] * 7
    assert columns_nonnegative(f)
    assert not columns_nonnegative(BLTFactorization(CounterKind.BLT, 8, (2.0,), (0.5,)))
