"""LazyNoiseCounters' compiled read (``sketches/counters/lazy_kernel.py``) == its numpy path.

Twin counters (same seeded noise), one reading through the kernels and one through
the numpy path (``_compiled = False``), take the same random pushes and reads (read
sets that overlap the last one, grow, shrink, repeat cells, and reads after a
restore): every read, every draw and the checkpoint bytes must be equal bit for bit
(float and integer noise). Deterministic (seeded), no false-failure rate.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core.noise import FastNoise
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters


def _twins(integer: bool, n: int, horizon: int) -> tuple[LazyNoiseCounters, LazyNoiseCounters]:
    fast = LazyNoiseCounters(n, horizon, 3.0, integer, FastNoise(11))
    slow = LazyNoiseCounters(n, horizon, 3.0, integer, FastNoise(11))
    slow._compiled = False
    return fast, slow


def _same_state(a: LazyNoiseCounters, b: LazyNoiseCounters) -> None:
    sa, sb = a.state_arrays(), b.state_arrays()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and np.array_equal(sa[k], sb[k]), k


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("max_push", [1, 3])  # 1: LazyHH's arrival clock (one round per output)
def test_compiled_reads_equal_the_numpy_path(integer: bool, seed: int, max_push: int) -> None:
    rng = np.random.default_rng(seed)
    n, horizon = 97, 300
    fast, slow = _twins(integer, n, horizon)
    assert fast._compiled and not slow._compiled
    reads = 0
    while fast.rounds < horizon - 8:
        k = int(rng.integers(1, max_push + 1))
        total = rng.integers(0, 5, size=n).astype(np.int64)
        fast.push(total, k)
        slow.push(total, k)
        for _ in range(int(rng.integers(0, 3))):
            shape = (int(rng.integers(1, 5)), int(rng.integers(0, 40)))
            cells = rng.integers(0, n, size=shape)
            if shape[1] and rng.random() < 0.5:  # LazyHH's read: the min over rows
                got, want = fast.query_min(cells), slow.query_at(cells).min(axis=0)
            else:
                got, want = fast.query_at(cells), slow.query_at(cells)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want)  # float: bit for bit (exact equality)
            reads += 1
        if rng.random() < 0.05:  # checkpoint and continue from it (no valid read set)
            for c in (fast, slow):
                c.restore(c.state_header(), {k: v.copy() for k, v in c.state_arrays().items()})
        _same_state(fast, slow)
        assert fast.drawn_count() == slow.drawn_count()
    assert reads > 50
    assert np.array_equal(fast.query(), slow.query())
    _same_state(fast, slow)


def test_compiled_read_refuses_out_of_range_cells_like_numpy() -> None:
    fast, slow = _twins(False, 8, 16)
    for c in (fast, slow):
        c.push(np.ones(8, dtype=np.int64), 1)
        with pytest.raises(IndexError):
            c.query_at(np.array([0, 8]))
    assert np.array_equal(fast.query_at(np.array([-1, 0])), slow.query_at(np.array([-1, 0])))
