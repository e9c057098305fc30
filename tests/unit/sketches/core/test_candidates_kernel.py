"""CandidateSet's compiled missing, merge and trim (``candidates_kernel.py``) == numpy's.

Twin sets (one with ``_compiled = False``) take the same random adds (new keys in
ascending order, unsorted, repeated first words refused by the fast path), trims and
restores: keys, items and cells must be equal after every step. Deterministic (seeded).
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core.candidates import CandidateSet


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_compiled_merge_and_trim_equal_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    depth = 3
    fast, slow = CandidateSet(depth, True), CandidateSet(depth, True)
    slow._compiled = False
    merged = 0
    for _ in range(200):
        pool = rng.integers(0, 400, size=int(rng.integers(0, 30))).astype(np.uint64)
        keys = np.unique(pool)
        keys = keys[fast.missing(keys)] if rng.random() < 0.8 else keys  # some members: no merge
        if rng.random() < 0.2:
            keys = keys[::-1].copy()  # not ascending: the fast path declines, add() sorts
        items = keys.astype(np.int64) * 7
        cells = rng.integers(0, 50, size=(depth, keys.size))
        probe = rng.integers(0, 420, size=int(rng.integers(0, 60))).astype(np.uint64)
        assert np.array_equal(fast.missing(probe), slow.missing(probe))  # binary search
        assert np.array_equal(fast.missing(probe), ~np.isin(probe, slow.keys))
        before = fast.keys.copy()
        if np.intersect1d(keys, before).size:  # add() requires missing keys
            keys = keys[fast.missing(keys)]
            items, cells = keys.astype(np.int64) * 7, cells[:, :keys.size]
        for c in (fast, slow):
            c.add(keys, items, cells)
        merged += keys.size
        assert np.array_equal(fast.keys, slow.keys)
        assert fast.items.dtype == slow.items.dtype and np.array_equal(fast.items, slow.items)
        assert np.array_equal(fast.cells, slow.cells)
        if fast.size > 60:
            est = rng.normal(size=fast.size)
            if rng.random() < 0.5:
                est = np.floor(est * 2)  # many ties at the cut: smaller keys first
            for c in (fast, slow):
                c.trim(est, 40)
    assert merged > 500


def test_compiled_merge_declines_equal_or_unsorted_keys() -> None:
    c = CandidateSet(1, True)
    c.add(np.array([5, 9], dtype=np.uint64), np.array([5, 9]), np.array([[0, 1]]))
    c.add(np.array([7, 6], dtype=np.uint64), np.array([7, 6]), np.array([[2, 3]]))  # unsorted
    assert c.keys.tolist() == [5, 6, 7, 9] and c.cells.tolist() == [[0, 3, 2, 1]]
