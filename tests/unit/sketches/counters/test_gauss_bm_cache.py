"""ContinualCounters' query cache (``noise_sum(rounds)`` kept per counter).

The cache must equal a fresh partition sum after every kind of call (one
round, many rounds, empty rounds, push, restore), bit for bit for float noise,
and a failing noise draw must leave it (and the counts) unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.core.noise import FastNoise
from sketches.counters.gauss_bm import ContinualCounters


def _random_calls(c: ContinualCounters, seed: int, until: int) -> None:
    rng = np.random.default_rng(seed)
    while c.rounds < until:
        k, empty = int(rng.integers(0, 3)), int(rng.integers(0, 4)) if rng.random() < 0.3 else 0
        if k + empty == 0:
            continue
        if k == 1 and empty == 0 and rng.random() < 0.5:
            c.push(rng.integers(0, 5, c.n), 1)
        else:
            c.advance(rng.integers(0, 5, (k, c.n)), empty_rounds=empty)
        assert np.array_equal(c.query(), c.state_arrays()["prefix"] + c.noise_sum(c.rounds))


@pytest.mark.parametrize("integer", [True, False])
def test_cache_equals_fresh_partition_sum_and_survives_restore(integer: bool) -> None:
    c = ContinualCounters(4, 2000, 3.0, integer, FastNoise(3))
    _random_calls(c, seed=1, until=1900)
    back = ContinualCounters(4, 2000, 3.0, integer, FastNoise(9))
    back.restore(c.state_header(), c.state_arrays())
    assert np.array_equal(back.query(), c.query())  # bit-identical after restore
    assert np.any(c.query() != c.state_arrays()["prefix"])  # noise is really there


def test_failing_draw_leaves_cache_and_counts_unchanged() -> None:
    class Failing(FastNoise):
        fail = False

        def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
            if self.fail:
                raise OverflowError("table")
            return super().discrete_gaussian(sigma, size)

    noise = Failing(5)
    c = ContinualCounters(3, 64, 2.0, True, noise)
    c.advance(np.ones((3, 3), dtype=np.int64))
    before = c.query()
    noise.fail = True
    with pytest.raises(OverflowError):
        c.push(np.full(3, 100), 1)
    assert np.array_equal(c.query(), before) and c.rounds == 3
