"""Vectorised catch-up of a ``ContinualCounters`` over empty rounds.

:meth:`ContinualCounters.advance_empty(ends)
<sketches.counters.gauss_bm.ContinualCounters.advance_empty>` is, state and releases
alike, the loop::

    for e in ends:                      # rounds + 1 <= ends[0] < ends[1] < ...
        counters.advance(np.zeros((e - counters.rounds, n)))
        out.append(counters.query())

done with ``O(levels)`` numpy operations and **one** noise call instead of
one Python call and ``~1`` noise call per element of ``ends``. LazyHH uses it for its
length counter when a quiet shard catches up to the wall clock (thousands of
empty output boundaries; docs/OPERATIONS.md "LazyHH catch-up").

Noise (the canonical rule of :mod:`sketches.counters.gauss_bm`)
------------------------------------------------------
The loop's call ``i`` opens rounds ``(s_i, e_i]`` (``s_1 = rounds``,
``s_i = e_{i-1}``) and, per the canonical rule, draws for every level ``l``
(ascending) completed in it the noise of the *last* level-``l`` node completed
in it: the one ending at the largest odd multiple of ``2**l`` that is
``<= e_i``, drawn iff that end is ``> s_i``. The catch-up draws exactly that set of
nodes, in exactly that order (calls ascending, levels ascending, ``n`` values
each), as one call ``gaussian(sigma, D * n)`` / ``discrete_gaussian(sigma, D * n)``.
So

- every node that any of the outputs reads gets one independent draw, and a
  node read by several consecutive outputs is the same draw (each output reads,
  for every set bit ``l`` of ``e``, the node ending at ``(e >> l) << l``: the
  latest level-``l`` node ``<= e``, drawn in the call that completed it, or the
  stored ``node_noise[l]`` if it ended at or before ``s_1``): the joint
  distribution of all outputs and of the final state is that of the loop;
- a noise source whose ``m``-value draw is the concatenation of ``m``
  one-value draws (e.g. a source returning a fixed or counting pattern) gives
  bit-identical outputs and state; a batching sampler (the exact discrete
  Gaussian) gives other, identically distributed, values.

Final state: ``node_noise[l]`` is the last drawn level-``l`` node (unchanged if
none completed), the prefix is unchanged (zero increments), ``rounds = e_m``,
and the query cache is ``noise_sum(e_m)``, summed in :meth:`noise_sum`'s order
(ascending set bits, float bit-identical). Atomic: the draw and every array
are temporaries until the caller commits them.

Memory: ``len(ends) x levels x n`` values; meant for small ``n`` (LazyHH: 1).

Examples
--------
>>> import numpy as np
>>> count = iter(range(1, 100))
>>> draw = lambda size: np.array([next(count) for _ in range(size)], dtype=np.int64)
>>> sums, nodes = empty_rounds_noise(0, np.array([1, 2, 3]), np.zeros((2, 1), np.int64), draw)
>>> sums[:, 0].tolist(), nodes[:, 0].tolist()   # rounds 1, 2, 3: nodes [1], [1,2], [3]
([1, 2, 5], [3, 2])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["empty_rounds_noise"]


def empty_rounds_noise(
    r0: int, ends: np.ndarray, node_noise: np.ndarray, draw: Callable[[int], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Noise of ``advance``-calls of empty rounds ending at ``ends`` (module docstring).

    Parameters
    ----------
    r0 : int
        Rounds opened before the first call.
    ends : numpy.ndarray
        int64, strictly increasing, ``ends[0] > r0`` (validated by the caller).
    node_noise : numpy.ndarray
        ``(levels, n)`` stored noise of the latest node per level (not modified).
    draw : callable
        ``draw(size)`` returns ``size`` independent noise values (flat).

    Returns
    -------
    (sums, nodes) : tuple of numpy.ndarray
        ``sums[i] = noise_sum(ends[i])`` (shape ``(m, n)``) and the node noise
        after the last call (shape ``(levels, n)``).
    """
    levels, n = node_noise.shape
    m = ends.size
    starts = np.concatenate((np.array([r0], dtype=np.int64), ends[:-1]))
    lv = np.arange(levels, dtype=np.int64)
    q = ends[:, None] >> lv  # (m, levels)
    last_end = (q - (1 - (q & 1))) << lv  # largest odd multiple of 2**l <= e (< 0: none)
    done = last_end > starts[:, None]  # completed (and drawn) in call i; row-major = draw order
    d = int(np.count_nonzero(done))
    values = np.asarray(draw(d * n)).reshape(d, n) if d else np.zeros((0, n), node_noise.dtype)
    values = values.astype(node_noise.dtype, copy=False)
    # node of level l current after call i: drawn in the latest call <= i that completed level l
    slot = np.cumsum(done.ravel()).reshape(m, levels) - 1  # index into values where done
    latest = np.maximum.accumulate(np.where(done, np.arange(m)[:, None], -1), axis=0)
    pick = np.where(latest >= 0, slot[np.maximum(latest, 0), lv], d + lv)
    cur = np.concatenate((values, node_noise))[pick]  # (m, levels, n)
    sums = np.zeros((m, n), dtype=node_noise.dtype)
    for level in range(levels):  # noise_sum's order: ascending set bits (+0 elsewhere)
        bit = ((ends >> level) & 1).astype(bool)[:, None]
        sums += np.where(bit, cur[:, level], 0)
    return sums, cur[-1].copy()
