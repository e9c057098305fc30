"""Compiled (numba) merge of :class:`~sketches.core.candidates.CandidateSet` (integer items).

:meth:`CandidateSet._merge <sketches.core.candidates.CandidateSet>` places new keys
(ascending) among the members (ascending) with two ``searchsorted`` and scatters
keys, items and cells: about twenty numpy calls on arrays of a few hundred entries
at every LazyHH output. :func:`merge` does the same merge in one pass. Exact: the
same arrays (tests/unit/sketches/core/test_candidates_kernel.py).
Compiled on first use and cached on disk like :mod:`sketches.continual.lazy_hh.kernel`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np

__all__ = ["merge"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _njit(fn: _F) -> _F:
    """``numba.njit(cache=True, nogil=True)``; compiled once per process when no cache
    location is writable (numba refuses ``cache=True`` then)."""
    try:
        return cast(_F, numba.njit(cache=True, nogil=True)(fn))
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return cast(_F, numba.njit(nogil=True)(fn))


@_njit
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
    out_cells = np.empty((d, n0 + m), dtype=old_cells.dtype)
    i = j = 0
    for p in range(n0 + m):
        if j >= m or (i < n0 and old_keys[i] < keys[j]):
            out_keys[p] = old_keys[i]
            out_items[p] = old_items[i]
            for r in range(d):
                out_cells[r, p] = old_cells[r, i]
            i += 1
        else:
            if i < n0 and old_keys[i] == keys[j]:
                return False, old_keys[:0], old_items[:0], old_cells[:, :0]
            out_keys[p] = keys[j]
            out_items[p] = items[j]
            for r in range(d):
                out_cells[r, p] = cells[r, j]
            j += 1
    return True, out_keys, out_items, out_cells
