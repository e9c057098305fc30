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


def test_the_guided_kernel_equals_numpys_search_at_every_boundary(monkeypatch) -> None:
    """The compiled guided search (batches of >= ``_KERNEL_SEARCH_MIN`` draws) returns the same
    samples as numpy's ``searchsorted`` for high words at every kind of boundary: equal to a
    table word (a tie: the low word decides), one above or below it, at a guide bucket's
    first word and one below it, 0 and 2**64 - 1; and the same low words are consumed."""
    from sketches.core import noise_tables
    from sketches.core.noise_tables import discrete_gaussian_table

    table = discrete_gaussian_table(3000.0)
    rng = np.random.default_rng(5)
    picks = table.hi[rng.integers(0, table.hi.size, 3000)]
    shift = np.uint64(table.guide_shift)
    buckets = rng.integers(0, table.guide.size - 1, 3000).astype(np.uint64) << shift
    u = np.concatenate([picks, picks + np.uint64(1), picks - np.uint64(1), buckets,
                        buckets - np.uint64(1), np.array([0, 2**64 - 1], dtype=np.uint64),
                        rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2)])
    lows = rng.integers(0, 2**63, u.size, dtype=np.uint64) * np.uint64(2)
    used: list[int] = []

    def draw(n: int) -> np.ndarray:
        out = lows[len(used): len(used) + n]
        used.extend(range(n))
        return out

    got = table.sample(u, draw)
    n_used = len(used)
    used.clear()
    monkeypatch.setattr(noise_tables, "_KERNEL_SEARCH_MIN", 1 << 62)  # numpy's search
    assert np.array_equal(got, table.sample(u, draw))
    assert len(used) == n_used >= 3000  # every pick tied and drew one low word
