"""Integer noise tables (``sketches/core/noise_tables.py``): the 128-bit inverse-CDF lookup
at the exact boundaries (issue 24: a tie on the high word, resolved with the low word, is
reached with probability ~2^-60 per draw, so no random test ever exercised it)."""

from __future__ import annotations

import numpy as np

from sketches.core.noise_tables import IntegerTable


def test_a_uniform_equal_to_a_cdf_entry_maps_above_it_on_both_words() -> None:
    """``sample`` returns ``offset + #{x : F(x) <= u}`` with ``u = (u_hi, u_lo)`` and
    ``F(x) = (hi, lo)`` compared as 128-bit numbers. Table: F(-1) = (5, 10), F(0) = (5, 20),
    F(1) = (9, 0). A ``u`` equal to an entry counts it (``<=``), on the low word (a tie of
    high words) as on the high word."""
    table = IntegerTable(offset=-1, hi=np.array([5, 5, 9], dtype=np.uint64),
                         lo=np.array([10, 20, 0], dtype=np.uint64), tv_bound=0.0)

    def sample(u_hi: int, u_lo: int) -> int:
        return int(table.sample(np.array([u_hi], dtype=np.uint64),
                                lambda n: np.full(n, u_lo, dtype=np.uint64))[0])

    assert sample(4, 0) == -1          # below every entry
    assert sample(5, 9) == -1          # tie on hi, below F(-1) on lo
    assert sample(5, 10) == 0          # exactly F(-1): counted
    assert sample(5, 19) == 0
    assert sample(5, 20) == 1          # exactly F(0): counted
    assert sample(9, 0) == 2           # exactly F(1) (high word 9, low 0)
    assert sample(2**64 - 1, 0) == 2   # above every entry
