"""LazyNoiseCounters' read interface (issue 24, mutation survivors of
``sketches/counters/gauss_bm_lazy.py``): ``noise_sum`` at round 0 and after it, and
``query`` with an all-False ``behind`` mask."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import SpecError


class Counting:
    """Deterministic noise, never 0: an ``m``-value draw is ``m`` one-value draws."""

    kind = "fast"

    def __init__(self) -> None:
        self.i = 0

    def _next(self, size: int) -> np.ndarray:
        idx = np.arange(self.i, self.i + int(size), dtype=np.int64)
        self.i += int(size)
        return idx % 7 + 1

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self._next(size) * 0.5

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self._next(size)


@pytest.mark.parametrize("integer", [True, False])
def test_noise_sum_is_zero_at_round_0_and_the_released_noise_after(integer: bool) -> None:
    want = np.int64 if integer else np.float64
    c = LazyNoiseCounters(3, 16, 1.0, integer, Counting())
    z = c.noise_sum(0)
    assert z.shape == (3,) and z.dtype == want and not np.any(z)
    for rounds in (1, 3, 4):
        c.push(np.array([1, 0, 2]), rounds - c.rounds)
        s = c.noise_sum(rounds)
        assert s.dtype == want and np.all(s > 0)  # every node drawn, all draws positive
        assert (c.query() - c._prefix).tolist() == s.tolist()
    with pytest.raises(SpecError, match="r"):
        c.noise_sum(2)


@pytest.mark.parametrize("integer", [True, False])
def test_query_with_no_counter_behind_is_the_plain_query(integer: bool) -> None:
    c = LazyNoiseCounters(2, 16, 1.0, integer, Counting())
    c.push(np.array([3, 4]), 2)
    assert c.query(behind=np.array([False, False])).tolist() == c.query().tolist()
    with pytest.raises(SpecError, match="behind"):
        c.query(behind=np.array([True, False]))

