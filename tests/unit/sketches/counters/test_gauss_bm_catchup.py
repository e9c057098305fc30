"""ContinualCounters.advance_empty: the vectorised catch-up equals the round-by-round loop."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.counters.gauss_bm import ContinualCounters
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import HorizonExceededError, SpecError
from tests.support.noise_sources import Failing, Pattern


def _loop(c: ContinualCounters, ends: np.ndarray) -> np.ndarray:
    out = []
    for e in ends.tolist():
        c.advance(np.zeros((e - c.rounds, c.n), dtype=np.int64))
        out.append(c.query())
    return np.array(out)


@pytest.mark.parametrize("integer", [True, False])
def test_matches_the_round_by_round_loop(integer: bool) -> None:
    rng = np.random.default_rng(0)
    for _ in range(150):
        n, horizon = int(rng.integers(1, 4)), int(rng.integers(2, 300))
        fast = ContinualCounters(n, horizon, 1.0, integer, Pattern())
        slow = ContinualCounters(n, horizon, 1.0, integer, Pattern())
        pre = int(rng.integers(0, horizon))
        if pre:  # some history with data and stored node noise
            inc = rng.integers(0, 5, (pre, n))
            fast.advance(inc)
            slow.advance(inc)
        pool = np.arange(pre + 1, horizon + 1)
        ends = np.sort(rng.choice(pool, size=int(rng.integers(1, pool.size + 1)), replace=False))
        got, want = fast.advance_empty(ends), _loop(slow, ends)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert fast.rounds == slow.rounds
        assert np.array_equal(fast._node_noise, slow._node_noise)
        assert np.array_equal(fast._noise_now, slow._noise_now)
        assert np.array_equal(fast.noise_sum(fast.rounds), fast._noise_now)
        assert fast._noise_src.i == slow._noise_src.i  # type: ignore[attr-defined]  # same number of values drawn
        if fast.rounds < horizon:  # and it continues identically
            fast.advance(np.ones((1, n), dtype=np.int64))
            slow.advance(np.ones((1, n), dtype=np.int64))
        assert np.array_equal(fast.query(), slow.query())


def test_one_noise_call_for_the_whole_catch_up() -> None:
    calls: list[int] = []

    class Counting(Pattern):
        def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
            calls.append(int(size))
            return super().discrete_gaussian(sigma, size)

    c = ContinualCounters(1, 4096, 2.0, True, Counting())
    c.advance_empty(np.arange(1, 3601))
    assert calls == [3600]  # output_every = 1: one node completes per round


def test_atomic_and_validated() -> None:
    c = ContinualCounters(1, 64, 1.0, True, Pattern())
    c.advance(np.ones((5, 1), dtype=np.int64))
    before = (c.rounds, c._prefix.copy(), c._node_noise.copy(), c.query())
    c._noise_src = Failing()
    with pytest.raises(RuntimeError):
        c.advance_empty(np.arange(6, 40))
    assert c.rounds == before[0] and np.array_equal(c._node_noise, before[2])
    assert np.array_equal(c.query(), before[3])
    for bad in ([5, 7], [7, 7], [9, 8]):
        with pytest.raises(SpecError):
            c.advance_empty(np.array(bad))
    with pytest.raises(HorizonExceededError):
        c.advance_empty(np.array([10, 65]))
    assert c.advance_empty(np.zeros(0, dtype=np.int64)).shape == (0, 1)
    with pytest.raises(SpecError):
        LazyNoiseCounters(2, 8, 1.0, True, Pattern()).advance_empty(np.array([1]))
