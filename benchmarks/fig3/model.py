"""The memory model of paper 002's Fig. 3: a byte budget -> sketch widths.

The paper states one data point (24 KB -> CMS 2000 / LazyCMS 55 /
PunctualCMS 33 columns at d=3, T=2**20); :func:`cell_bytes` is the simplest
model found that reproduces it.
"""

from __future__ import annotations

import math

KINDS: tuple[str, ...] = ("CMS", "CS", "LazyCMS", "LazyCS", "PunctualCMS", "PunctualCS")
PAPER_WIDTHS_24KB = {"CMS": 2000, "LazyCMS": 55, "PunctualCMS": 33}


#: Bytes of one counter of a non-private sketch (32-bit integer).
PLAIN_COUNTER_BYTES = 4
#: Bytes of one GaussBM tree level (a 64-bit count and a 64-bit noise value).
NODE_BYTES = 16
#: Tree levels the paper's memory accounting leaves out (empirical fit, see cell_bytes).
LEVEL_OFFSET = 6


def tree_levels(rounds: int) -> int:
    """Nodes per GaussBM counter, ``h = ceil(log2(rounds + 1))`` (paper 002, Alg. 1 line 4).

    Examples
    --------
    >>> tree_levels(2**20), tree_levels(math.ceil(2**20 / 55)), tree_levels(1)
    (21, 15, 1)
    """
    return max(1, math.ceil(math.log2(rounds + 1)))


def cell_bytes(kind: str, width: int, horizon: int) -> int:
    """Bytes the paper charges for one cell of a ``kind`` sketch of width ``width``.

    The paper (Sec. 6.4) says each continual-observation cell stores "one node
    per level of the binary tree" over the stream it sees: ``T`` rounds for
    Punctual, ``ceil(T/w)`` for Lazy. It gives one data point: 24 KB yields
    widths 2000 / 55 / 33 for CMS / LazyCMS / PunctualCMS at d=3, T=2**20.
    The model below is the simplest one we found that reproduces all three
    widths exactly (memory = 24,000 bytes, widest ``w`` with ``d*w*cell <= M``):

    - CMS/CS: ``4`` bytes per counter (24000 / (3*4) = 2000);
    - Lazy/Punctual: ``16 * (h(R) - 6)`` bytes, ``h`` from :func:`tree_levels`,
      ``R = T`` (Punctual: 16*(21-6) = 240 B -> w = 33) or ``R = ceil(T/w)``
      (Lazy: 16*(15-6) = 144 B -> w = 55).

    16 bytes per level matches a (count, noise) pair of 64-bit values; the
    offset of 6 levels is not explained by the paper (it equals a tree over
    ``R/64`` rounds). Without the offset, 16*h bytes gives 31 / 23 columns
    (Lazy / Punctual) and 8*h bytes gives 71 / 47, not the text's 55 / 33.

    Examples
    --------
    >>> cell_bytes("CMS", 2000, 2**20), cell_bytes("PunctualCMS", 33, 2**20)
    (4, 240)
    >>> cell_bytes("LazyCS", 55, 2**20)
    144
    """
    if kind in ("CMS", "CS"):
        return PLAIN_COUNTER_BYTES
    rounds = horizon if kind.startswith("Punctual") else math.ceil(horizon / width)
    return NODE_BYTES * max(1, tree_levels(rounds) - LEVEL_OFFSET)


def model_memory(kind: str, depth: int, width: int, horizon: int) -> int:
    """Bytes of a ``depth x width`` sketch under :func:`cell_bytes`.

    Examples
    --------
    >>> model_memory("LazyCMS", 3, 55, 2**20)
    23760
    """
    return depth * width * cell_bytes(kind, width, horizon)


def matched_width(kind: str, memory: int, depth: int, horizon: int) -> int:
    """Widest sketch of ``kind`` whose :func:`model_memory` fits in ``memory`` bytes.

    Examples
    --------
    >>> [matched_width(k, 24_000, 3, 2**20) for k in ("CMS", "LazyCMS", "PunctualCMS")]
    [2000, 55, 33]
    """
    lo, hi = 1, max(1, memory // (depth * PLAIN_COUNTER_BYTES))
    while lo < hi:  # model_memory is non-decreasing in width
        mid = (lo + hi + 1) // 2
        if model_memory(kind, depth, mid, horizon) <= memory:
            lo = mid
        else:
            hi = mid - 1
    return lo
