"""Compiled (numba) read bookkeeping of lazy node-noise counters.

For :class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`.

:meth:`LazyNoiseCounters.query_at <sketches.counters.gauss_bm_lazy.LazyNoiseCounters.query_at>`
does, per read, a dozen ``n``-wide numpy passes (read mask, counters outside the last
read set, undrawn old nodes, the noise-sum cache, ``prefix + noise``) for a read of a
few thousand counters. These kernels do the same work over the read counters
only, in two calls around the noise draw (the draw itself stays a call of the noise
source, in the documented order, so a seeded source gives bit-identical values):

- :func:`plan`: the read mask, the read counters ascending (``every``) and the
  ``(level, counter)`` slots of the undrawn old nodes outside the last read set
  (``need``, level-major), i.e. the draw order of :mod:`sketches.counters.gauss_bm_lazy`;
- :func:`apply`: stores the drawn values, marks them drawn, extends or recomputes the noise-sum
  cache on the read counters in the fixed order (top set bit first, then each lower
  set bit added: the same float operations as the numpy path, so bit-identical) and
  returns ``prefix + noise`` at the read cells;
- :func:`apply_min`: :func:`apply` fused with LazyHH's estimate, the minimum over the
  sketch rows of ``prefix + noise`` (:meth:`LazyNoiseCounters.query_min
  <sketches.counters.gauss_bm_lazy.LazyNoiseCounters.query_min>`), without the
  ``d x m`` intermediate.

Nothing here draws noise; the values come from the caller. Compiled on first use and
cached on disk like :mod:`sketches.continual.lazy_hh.kernel`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from sketches.core.jit import njit

__all__ = ["apply", "apply_min", "min_rows", "plan"]


@njit
def plan(idx: np.ndarray, n: int, read_mask: np.ndarray, drawn: np.ndarray,
         old: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """``(ok, mask, every, need)`` of a read of the counters ``idx`` (flat, repeats allowed).

    ``ok``: every index lies in ``[0, n)`` (else nothing else is computed: the caller
    takes the numpy path, which wraps negative indices and raises ``IndexError``).
    ``mask``: bool[n], the read set; ``every``: its counters ascending; ``need``: flat
    ``level * n + counter`` of the undrawn nodes at the levels ``old`` (ascending) of
    the read counters outside ``read_mask``, level-major then counter ascending.
    """
    mask = np.zeros(n, dtype=np.bool_)
    for t in range(idx.size):
        c = idx[t]
        if c < 0 or c >= n:
            return False, mask, idx[:0], idx[:0]
        mask[c] = True
    every = np.empty(n + 1, dtype=np.int64)
    outside = np.empty(n + 1, dtype=np.int64)  # read now, not by the last read
    k = q = 0
    for c in range(n):  # branch-free (a random mask mispredicts): write, then advance
        m = mask[c]
        every[k] = c
        outside[q] = c
        k += m
        q += m & (1 - read_mask[c])
    every = every[:k]
    need = np.empty(old.size * q + 1, dtype=np.int64)
    p = 0
    for j in range(old.size):
        b = old[j]
        for t in range(q):
            c = outside[t]
            need[p] = b * n + c
            p += 1 - drawn[b, c]
    return True, mask, every, need[:p]


@njit
def apply(values: np.ndarray, fresh: np.ndarray, every: np.ndarray, need: np.ndarray,
          node_noise: np.ndarray, drawn: np.ndarray, bits_desc: np.ndarray,
          prefix: np.ndarray, acc: np.ndarray, idx: np.ndarray, extend: bool,
          last_read: np.ndarray) -> np.ndarray:
    """Store ``values`` (``len(fresh) * every.size`` fresh node values, level by level
    ascending, then one per ``need`` slot), mark them drawn, set ``acc`` (the noise
    sum of the current nodes, levels ``bits_desc``) on ``every`` and return
    ``prefix[idx] + acc[idx]``.

    ``extend``: every node of the last read is still current, so ``acc`` holds the
    fixed-order sum of the old levels on ``last_read`` (the last read set); there
    the fresh levels (the lowest) are added, descending, which is the fixed-order sum.
    """
    start = 0
    for j in range(fresh.size):
        b = fresh[j]
        for t in range(every.size):
            c = every[t]
            node_noise[b, c] = values[start + t]
            drawn[b, c] = True
        start += every.size
    flat_noise, flat_drawn = node_noise.reshape(-1), drawn.reshape(-1)  # C-contiguous views
    for t in range(need.size):
        flat_noise[need[t]] = values[start + t]
        flat_drawn[need[t]] = True
    top = bits_desc[0]
    nf = fresh.size
    if extend:
        for t in range(every.size):
            c = every[t]
            if last_read[c]:
                s = acc[c]
                for j in range(nf - 1, -1, -1):
                    s += node_noise[fresh[j], c]
            else:
                s = node_noise[top, c]
                for j in range(1, bits_desc.size):
                    s += node_noise[bits_desc[j], c]
            acc[c] = s
    else:
        for t in range(every.size):  # level by level: the same additions per counter, in order
            c = every[t]
            acc[c] = node_noise[top, c]
        for j in range(1, bits_desc.size):
            b = bits_desc[j]
            for t in range(every.size):
                c = every[t]
                acc[c] += node_noise[b, c]
    out = np.empty(idx.size, dtype=acc.dtype)
    for t in range(idx.size):
        c = idx[t]
        out[t] = prefix[c] + acc[c]
    return out


@numba.njit(inline="always")
def min_rows(values: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``values[cells].min(axis=0)`` for ``cells`` of shape ``(d, m)`` (Alg. 4, min), row
    by row with a select: a branch on noisy values mispredicts (6x slower)."""
    d, m = cells.shape
    out = np.empty(m, dtype=values.dtype)
    for e in range(m):
        out[e] = values[cells[0, e]]
    for i in range(1, d):
        for e in range(m):
            x, v = values[cells[i, e]], out[e]
            out[e] = x if x < v else v
    return out


@numba.njit(inline="always")
def _full_sum(node_noise: np.ndarray, bits_desc: np.ndarray, n_high: int, c: int,
              high: np.ndarray) -> Any:
    """The fixed-order noise sum of counter ``c``; with ``n_high > 0`` its prefix over
    the high levels (the first ``n_high`` of ``bits_desc``) is stored in ``high[c]``."""
    s = node_noise[bits_desc[0], c]
    for j in range(1, bits_desc.size):
        if j == n_high:
            high[c] = s
        s += node_noise[bits_desc[j], c]
    if n_high == bits_desc.size:
        high[c] = s
    return s


@njit
def apply_min(values: np.ndarray, fresh: np.ndarray, every: np.ndarray, need: np.ndarray,
              node_noise: np.ndarray, drawn: np.ndarray, bits_desc: np.ndarray, n_high: int,
              prefix: np.ndarray, acc: np.ndarray, extend: bool, last_read: np.ndarray,
              high: np.ndarray, high_ok: bool, cells: np.ndarray) -> np.ndarray:
    """:func:`apply` without a gather, then LazyHH's estimate: the minimum over the rows
    of ``cells`` (``(d, m)``) of ``prefix + acc`` (``query_at(cells).min(axis=0)``).

    The same stores, cache values and minima as :func:`apply` followed by the numpy
    ``min``: each sum is the same sequence of additions in the fixed order (top level
    first), so bit-identical. Counter by counter, in one pass:

    - ``extend`` and read last time: the fresh levels are added to ``acc``;
    - otherwise, with ``n_high > 0`` high levels (the first ``n_high`` of
      ``bits_desc``), ``high[c]``, the fixed-order sum of the high levels' nodes (a
      prefix of the fixed order), is reused when ``high_ok`` (the caller's promise:
      ``high`` is valid on the last read set at these high levels) and the counter was
      read last time; else it is formed and stored. The low levels are added to it: a
      carry costs one load plus the low levels instead of every level;
    - otherwise every level is added.

    A transient work array (``[n]``) holds ``prefix + acc`` on the read counters, so
    the minimum (:func:`min_rows`) gathers one array, not two.
    """
    nf, ne, nb = fresh.size, every.size, bits_desc.size
    start = 0
    for j in range(nf):  # fresh levels ascending, each over the read counters ascending
        b = fresh[j]
        for t in range(ne):
            c = every[t]
            node_noise[b, c] = values[start + t]
            drawn[b, c] = True
        start += ne
    flat_noise, flat_drawn = node_noise.reshape(-1), drawn.reshape(-1)  # C-contiguous views
    for t in range(need.size):
        flat_noise[need[t]] = values[start + t]
        flat_drawn[need[t]] = True
    scratch = np.empty(prefix.size, dtype=acc.dtype)
    if extend and nf == 1:  # LazyHH's common round: add the one fresh level
        low = node_noise[fresh[0]]
        for t in range(ne):
            c = every[t]
            if last_read[c]:
                s = acc[c] + low[c]
            else:
                s = _full_sum(node_noise, bits_desc, n_high, c, high)
            acc[c] = s
            scratch[c] = prefix[c] + s
    else:
        for t in range(ne):
            c = every[t]
            if extend and last_read[c]:
                s = acc[c]
                for j in range(nf - 1, -1, -1):
                    s += node_noise[fresh[j], c]
            elif high_ok and last_read[c]:
                s = high[c]
                for j in range(n_high, nb):
                    s += node_noise[bits_desc[j], c]
            else:
                s = _full_sum(node_noise, bits_desc, n_high, c, high)
            acc[c] = s
            scratch[c] = prefix[c] + s
    return min_rows(scratch, cells)
