"""Compiled (numba) merge and trim of :class:`~sketches.core.candidates.CandidateSet`.

Integer items of a narrow set only (str/bytes items stay on the numpy path).

:meth:`CandidateSet.missing <sketches.core.candidates.CandidateSet.missing>` rebuilds a
direct-mapped table after every change of the set (every LazyHH output) to find the keys
not in it; :func:`missing` binary-searches the sorted members instead (no table).
:meth:`CandidateSet._merge <sketches.core.candidates.CandidateSet>` places new keys
(ascending) among the members (ascending) with two ``searchsorted`` and scatters
keys, items and cells: about twenty numpy calls on arrays of a few hundred entries
at every LazyHH output. :func:`merge` does the same merge in one pass, :func:`trim`
the top-``keep`` selection (same ties rule) and its gathers. Exact: the same arrays
(tests/unit/sketches/core/test_candidates_kernel.py).
Compiled on first use and cached on disk like :mod:`sketches.continual.lazy_hh.kernel`.
"""

from __future__ import annotations

import numpy as np

from sketches.core.jit import njit

__all__ = ["merge", "missing", "trim"]


@njit
def merge(old_keys: np.ndarray, old_items: np.ndarray, old_cells: np.ndarray,
          keys: np.ndarray, items: np.ndarray, cells: np.ndarray
          ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """``(ok, keys, items, cells)`` of the members ``old_*`` (keys ascending, unique)
    merged with the new ``keys`` (``cells``: ``(d, m)``). ``ok`` False (and empty
    arrays) when the new keys are not strictly increasing or one equals a member."""
    n0, m = old_keys.size, keys.size
    d = old_cells.shape[0]
    for j in range(1, m):
        if not keys[j] > keys[j - 1]:
            return False, old_keys[:0], old_items[:0], old_cells[:, :0]
    out_keys = np.empty(n0 + m, dtype=old_keys.dtype)
    out_items = np.empty(n0 + m, dtype=old_items.dtype)
    src = np.empty(n0 + m, dtype=np.int64)  # >= 0: member src, < 0: new key -1 - src
    i = j = 0
    for p in range(n0 + m):
        if j >= m or (i < n0 and old_keys[i] < keys[j]):
            out_keys[p] = old_keys[i]
            out_items[p] = old_items[i]
            src[p] = i
            i += 1
        else:
            if i < n0 and old_keys[i] == keys[j]:
                return False, old_keys[:0], old_items[:0], old_cells[:, :0]
            out_keys[p] = keys[j]
            out_items[p] = items[j]
            src[p] = -1 - j
            j += 1
    out_cells = np.empty((d, n0 + m), dtype=old_cells.dtype)
    for r in range(d):  # row by row: rows 4 KiB apart would collide in the cache column-wise
        for p in range(n0 + m):
            q = src[p]
            out_cells[r, p] = old_cells[r, q] if q >= 0 else cells[r, -1 - q]
    return True, out_keys, out_items, out_cells


@njit
def trim(keys: np.ndarray, items: np.ndarray, cells: np.ndarray, est: np.ndarray,
         keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``keep`` members with the largest ``est`` (ties: smaller key, i.e. earlier:
    ``keys`` ascending), in key order: :meth:`CandidateSet.trim
    <sketches.core.candidates.CandidateSet.trim>`'s arrays (``keep < keys.size``)."""
    n = est.size
    v = np.partition(est, n - keep)[n - keep]  # the keep-th largest
    above = 0
    for t in range(n):
        above += est[t] > v
    ties = keep - above
    top = np.empty(keep, dtype=np.int64)
    k = 0
    for t in range(n):
        if est[t] > v:
            top[k] = t
            k += 1
        elif est[t] == v and ties > 0:
            top[k] = t
            k += 1
            ties -= 1
    d = cells.shape[0]
    out_cells = np.empty((d, keep), dtype=cells.dtype)
    for r in range(d):
        for j in range(keep):
            out_cells[r, j] = cells[r, top[j]]
    return keys[top], items[top], out_cells


@njit
def missing(members: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Boolean mask of ``keys`` not in ``members`` (ascending, unique; uint64), by binary
    search: :meth:`CandidateSet.missing <sketches.core.candidates.CandidateSet.missing>`."""
    n = members.size
    out = np.empty(keys.size, dtype=np.bool_)
    for t in range(keys.size):
        x = keys[t]
        lo, hi = 0, n
        while lo < hi:  # first member >= x
            mid = (lo + hi) >> 1
            if members[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        out[t] = lo == n or members[lo] != x
    return out
