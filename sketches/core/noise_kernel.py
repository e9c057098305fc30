"""Compiled (numba) Gaussian draws of :class:`~sketches.core.noise.FastNoise`.

numpy's ``Generator.normal(0, sigma, n)`` costs about 10.5 ns per value here (its
ziggurat behind the generic ``cont`` broadcasting loop); numba's implementation of
the same ``Generator.normal`` (a port of numpy's ziggurat that calls the bit
generator's own ``next_uint64``/``next_double``) costs about 4 ns, and consumes the
same words of the same bit generator, so the values are bit-identical and the
generator's state after the call is the same (tests/unit/sketches/core/
test_noise_kernel.py compares millions of values, tails included).

Passing the generator into compiled code costs about 7.5 us per call, so
:meth:`FastNoise.gaussian <sketches.core.noise.FastNoise.gaussian>` uses
:func:`normal` only from 2,048 values (LazyHH's lazy node noise draws
about 11,000 per output on the Fig. 4 stream). Compiled on first use and cached on
disk like :mod:`sketches.continual.lazy_hh.kernel`.
"""

from __future__ import annotations

import numpy as np

from sketches.core.jit import njit

__all__ = ["normal", "table_search", "table_search32", "table_search_prefix"]


@njit
def normal(rng: np.random.Generator, sigma: float, n: int) -> np.ndarray:
    """``rng.normal(0.0, sigma, n)``: the same values, drawn in compiled code.

    >>> a = normal(np.random.default_rng(3), 2.0, 5)
    >>> bool((a == np.random.default_rng(3).normal(0.0, 2.0, 5)).all())
    True
    """
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = rng.normal(0.0, sigma)
    return out


@njit
def table_search(hi: np.ndarray, guide: np.ndarray, shift: int, u: np.ndarray,
                 idx: np.ndarray, tie: np.ndarray) -> int:  # pragma: no cover - compiled
    """``idx[i] = #{j : hi[j] <= u[i]}`` (``hi.searchsorted(u, "right")``) through a guide.

    ``guide[b]`` is the first ``j`` with ``hi[j] >= b << shift`` (``guide[-1] = hi.size``),
    so every entry with the top bits ``b = u >> shift`` of ``u`` lies in
    ``[guide[b], guide[b + 1])`` and the binary search runs inside that bucket (one or two
    steps near the mode: the guide has about one bucket per entry). ``tie[i]`` is set when
    ``hi[idx[i] - 1] == u[i]`` (the low word decides; only possible inside the bucket).
    Returns the number of ties. Integer comparisons only: the same ``idx`` as numpy's
    search for every input (tests/unit/sketches/core/test_noise_tables.py).

    >>> import numpy as np
    >>> hi = np.array([5, 5, 9], dtype=np.uint64)
    >>> g = np.array([0, 3, 3], dtype=np.uint32)  # 2 buckets: top bit 0 / 1 (shift 63)
    >>> idx, tie = np.empty(3, np.int64), np.empty(3, np.bool_)
    >>> table_search(hi, g, 63, np.array([4, 5, 10], dtype=np.uint64), idx, tie)
    1
    >>> idx.tolist(), tie.tolist()
    ([0, 2, 3], [False, True, False])
    """
    ties = 0
    sh = np.uint64(shift)
    for i in range(u.size):
        x = u[i]
        b = np.int64(x >> sh)
        first = np.int64(guide[b])
        lo = first
        top = np.int64(guide[b + 1])
        while lo < top:
            mid = (lo + top) >> 1
            if hi[mid] <= x:
                lo = mid + 1
            else:
                top = mid
        idx[i] = lo
        t = lo > first and hi[lo - 1] == x
        tie[i] = t
        if t:
            ties += 1
    return ties


@njit
def table_search32(hi: np.ndarray, guide: np.ndarray, shift: int, w: np.ndarray,
                   idx: np.ndarray, open_: np.ndarray) -> int:  # pragma: no cover - compiled
    """:func:`table_search_prefix` with 32-bit prefixes ``w`` (uint32).

    >>> import numpy as np
    >>> hi = np.array([5 << 32, (5 << 32) + 9, 9 << 32], dtype=np.uint64)
    >>> g = np.array([0, 3, 3], dtype=np.uint32)
    >>> idx, op = np.empty(3, np.int64), np.empty(3, np.bool_)
    >>> table_search32(hi, g, 63, np.array([4, 5, 6], dtype=np.uint32), idx, op)
    1
    >>> idx.tolist(), op.tolist()
    ([0, 0, 2], [False, True, False])
    """
    return table_search_prefix(hi, guide, shift, w, 32, idx, open_)


@njit
def table_search_prefix(hi: np.ndarray, guide: np.ndarray, shift: int, w: np.ndarray,
                        bits: int, idx: np.ndarray,
                        open_: np.ndarray) -> int:  # pragma: no cover - compiled
    """The search of :func:`table_search` knowing only the top ``bits`` bits ``w`` of each
    word (``bits`` at least the guide's ``64 - shift``).

    A word ``u = w 2^(64-bits) + r`` (``r`` not yet drawn) lies in ``[w 2^(64-bits),
    (w + 1) 2^(64-bits) - 1]``; when no table word has the top bits ``w``, ``#{j : hi[j] <=
    u}`` is the same for every ``r``: ``idx[i] = #{j : hi[j] < w 2^(64-bits)}``. Otherwise
    ``open_[i]`` is set (the caller draws ``r`` and searches the full word). Returns the
    number of open draws (about ``2K / 2^bits``, fewer where the CDF is flat). The guide
    reads come first (independent loads: their cache misses overlap).
    """
    sh = np.uint64(shift)
    sb = np.uint64(64 - bits)
    n = w.size
    end = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = np.int64((np.uint64(w[i]) << sb) >> sh)
        idx[i] = guide[b]
        end[i] = guide[b + 1]
    opened = 0
    for i in range(n):
        lo = idx[i]
        stop = end[i]
        if lo == stop:  # no table word in the bucket: decided by the guide alone
            open_[i] = False
            continue
        wi = np.uint64(w[i])
        x = wi << sb
        top = stop
        while lo < top:  # first j in the bucket with hi[j] >= x
            mid = (lo + top) >> 1
            if hi[mid] < x:
                lo = mid + 1
            else:
                top = mid
        idx[i] = lo
        o = lo < stop and (hi[lo] >> sb) == wi
        open_[i] = o
        if o:
            opened += 1
    return opened
