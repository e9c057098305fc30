"""What every continual counter shares (``sketches/counters/prefix.py``): ``round_rows``'s
contract, ``advance`` with nothing to open, and ``add_to_current`` only into an open round
(issue 24, survivors of the module's first mutation run)."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core.noise import make_noise
from sketches.counters.family import calibrate_counter, make_counters
from sketches.counters.prefix import round_rows
from sketches.errors import SpecError
from sketches.privacy import Calibrator


def test_round_rows_totals_the_rows_and_counts_rows_plus_empty_rounds() -> None:
    """``(int64 column totals or None, rounds)``: no empty rounds unless asked; no rows is
    no total (``None``, not a zero vector), whatever the width."""
    total, k = round_rows(np.array([[1, 2, 3], [4, 5, 6]]), 3)
    assert total is not None and total.tolist() == [5, 7, 9] and total.dtype == np.int64
    assert k == 2
    assert round_rows(np.zeros((0, 3), dtype=np.int64), 3) == (None, 0)
    assert round_rows(np.zeros((0, 3), dtype=np.int64), 3, empty_rounds=4) == (None, 4)
    with pytest.raises(SpecError, match=r"^increments: expected shape \(k, 3\)"):
        round_rows(np.zeros(3, dtype=np.int64), 3)


def _counters(kind: str, n: int = 3, rounds: int = 16):
    cal = calibrate_counter(kind, 1.0, 1e-6, m=1, rounds=rounds, calibrator=Calibrator.DISCRETE,
                            cells=n)
    return make_counters(kind, n, rounds, cal, make_noise("fast", seed=11, allow_insecure=True))


@pytest.mark.parametrize("kind", ["tree", "blt", "sqrt", "blt_int"])
def test_advance_with_nothing_to_open_changes_no_state(kind: str) -> None:
    """``advance`` of zero rows and zero empty rounds opens no round: the state (and the
    value one round behind, which a zero-round commit would move) is unchanged."""
    c = _counters(kind)
    c.advance(np.array([[1, 0, 2], [3, 1, 0], [0, 0, 5]]))
    before = c.to_bytes()
    behind = c.query(np.ones(3, dtype=bool)).copy()
    c.advance(np.zeros((0, 3), dtype=np.int64))
    assert c.rounds == 3
    assert c.to_bytes() == before
    assert np.array_equal(c.query(np.ones(3, dtype=bool)), behind)


@pytest.mark.parametrize("kind", ["tree", "blt"])
def test_add_to_current_needs_an_open_round_then_adds_exactly(kind: str) -> None:
    """Before any round is open there is nothing to add to (refused, state unchanged);
    from the first open round on, the increments go into the current round's prefix."""
    c = _counters(kind)
    with pytest.raises(SpecError, match=r"^increments: no round is open yet"):
        c.add_to_current(np.array([1, 2, 3]))
    assert c.rounds == 0 and c._prefix.tolist() == [0, 0, 0]
    c.advance(np.array([[1, 0, 2]]))
    noise = c.query() - c._prefix
    c.add_to_current(np.array([4, 5, 6]))
    assert c.rounds == 1 and c._prefix.tolist() == [5, 5, 8]
    assert np.array_equal(c.query() - c._prefix, noise)
    with pytest.raises(SpecError, match=r"^increments: expected shape \(3,\)"):
        c.add_to_current(np.array([1, 2]))
