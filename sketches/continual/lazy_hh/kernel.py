"""Compiled (numba) kernels of LazyHH's per-event hot path; exact, integer-only work.

Each kernel computes exactly what the numpy code of
:class:`~sketches.continual.lazy_hh.sketch.LazyHH` computes (same integers,
bit for bit; ``tests/unit/sketches/continual/lazy_hh/test_kernel.py`` runs both
paths on random streams), without the numpy path's per-row temporaries:

- :func:`siphash_pair`: the two SipHash-2-4 words of str/bytes items
  (:func:`sketches.core.keyed_prf.siphash24_multi` under two keys) from one
  byte blob and offsets;
- :func:`cell_counts`: the increments of every (slot, sketch cell) of a batch,
  i.e. ``bincount(slot * d * w + row * w + bucket)`` with the row hash of
  :mod:`sketches.core.hash_family`, without materialising the ``d x n``
  buckets;
- :func:`first_of_pairs` / :func:`first_of_keys`: the first occurrence of
  every distinct identity in a batch (open addressing), so candidate
  maintenance sees each distinct item once.

Compiled on first use and cached on disk (``cache=True``: later processes load
the machine code; the first call of a process still costs about 0.5 s of numba
start-up). The cache lives in ``__pycache__`` next to this file, else in the user's
cache directory or ``NUMBA_CACHE_DIR`` (the container image sets it to
``/tmp/numba-cache``); with none writable the kernels compile once per process.
Nothing here draws noise or touches private state besides the arrays passed in.
"""

from __future__ import annotations

import numba
import numpy as np

from sketches.core.jit import njit
from sketches.counters.lazy_kernel import min_rows

__all__ = ["ascii_blob", "cell_counts", "cells", "first_of_keys", "first_of_pairs", "round_sums",
           "siphash_pair"]

_U = np.uint64

_C0, _C1 = _U(0x736F6D6570736575), _U(0x646F72616E646F6D)
_C2, _C3 = _U(0x6C7967656E657261), _U(0x7465646279746573)


def ascii_blob(items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(blob uint8, starts int64[n], ends int64[n])``: item ``i`` of an object/``U`` array
    of ASCII str items is ``blob[starts[i]:ends[i]]`` (its UTF-8 bytes).

    None when any item is not a str or not ASCII (the caller then takes the
    general path, :func:`sketches.core.keyed_prf.item_bytes`, which also raises
    the errors). The items are joined with the separator byte ``0xFF`` (Latin-1
    ``\\xff``): with ASCII items the blob holds exactly ``n - 1`` bytes ``>= 0x80``,
    the separators, which locate the items without a Python call per item.
    """
    if items.dtype.kind not in "OU" or items.size == 0:
        return None
    try:
        raw = "\xff".join(items.tolist()).encode("latin-1")
    except (TypeError, UnicodeEncodeError):  # a bytes (or other) item, or a char > U+00FF
        return None
    blob = np.frombuffer(raw, dtype=np.uint8)
    seps = np.flatnonzero(blob >= 0x80)
    n = items.size
    if seps.size != n - 1:  # a non-ASCII Latin-1 character inside an item
        return None
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    np.add(seps, 1, out=starts[1:])
    ends = np.empty(n, dtype=np.int64)
    ends[-1] = blob.size
    ends[:-1] = seps
    return blob, starts, ends


@numba.njit(inline="always")
def _rotl(x: np.uint64, b: int) -> np.uint64:
    return (x << _U(b)) | (x >> _U(64 - b))


@numba.njit(inline="always")
def _sipround(v0: np.uint64, v1: np.uint64, v2: np.uint64,
              v3: np.uint64) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """One SipRound (SipHash-2-4 does 2 per message word and 4 to finalise)."""
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@numba.njit(inline="always")
def _sip(blob: np.ndarray, a: int, b: int, k0: np.uint64, k1: np.uint64) -> np.uint64:
    v0, v1, v2, v3 = k0 ^ _C0, k1 ^ _C1, k0 ^ _C2, k1 ^ _C3
    n = b - a
    full = n // 8
    for j in range(full + 1):
        m = _U(0)
        if j < full:
            for t in range(8):
                m |= _U(blob[a + 8 * j + t]) << _U(8 * t)
        else:
            for t in range(n - 8 * full):
                m |= _U(blob[a + 8 * j + t]) << _U(8 * t)
            m |= _U(n & 0xFF) << _U(56)
        v3 ^= m
        for _ in range(2):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    v2 ^= _U(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@njit
def siphash_pair(blob: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: np.ndarray,
                 out: np.ndarray) -> None:
    """``out[0, i], out[1, i]``: SipHash-2-4 of item ``i`` (``blob[starts[i]:ends[i]]``)
    under the keys ``(keys[0], keys[1])`` and ``(keys[2], keys[3])`` (uint64 little-endian
    halves of the 16-byte keys)."""
    for i in range(starts.size):
        a, b = starts[i], ends[i]
        out[0, i] = _sip(blob, a, b, keys[0], keys[1])
        out[1, i] = _sip(blob, a, b, keys[2], keys[3])


@numba.njit(inline="always")
def _bucket(key: np.uint64, params: np.ndarray, i: int, width: int) -> np.int64:
    """Row ``i``'s bucket of ``key``: ``((((a lo + a' hi + b) mod 2**64) >> 32) * w) >> 32``
    with ``(a, a', b) = params[2 + 6 i : 5 + 6 i]`` (sketches.core.hash_family)."""
    y = (params[2 + 6 * i] * (key & _U(0xFFFFFFFF)) + params[3 + 6 * i] * (key >> _U(32))
         + params[4 + 6 * i])
    return np.int64(((y >> _U(32)) * _U(width)) >> _U(32))


@njit
def cells(keys: np.ndarray, params: np.ndarray, depth: int, width: int) -> np.ndarray:
    """``int64[depth, n]`` flat cells ``row * width + bucket``
    (:meth:`sketches.core.hashing.HashSpec.cells`)."""
    out = np.empty((depth, keys.size), dtype=np.int64)
    for i in range(depth):
        for e in range(keys.size):
            out[i, e] = i * width + _bucket(keys[e], params, i, width)
    return out


@njit
def cell_counts(keys: np.ndarray, slot: np.ndarray, params: np.ndarray, depth: int,
                width: int, slots: int) -> np.ndarray:
    """``int64[slots, depth * width]``: events per (slot, cell ``row * width + bucket``).

    Repeated ``(slot, key)`` pairs are counted first (open addressing), then each
    distinct pair's ``depth`` buckets are hashed once and incremented by its count.
    """
    n = keys.size
    size = _table_size(n)
    table = np.full(size, -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)  # count[e]: occurrences of the pair first seen at e
    for e in range(n):
        k = keys[e]
        s = np.int64((k ^ (k >> _U(29)) ^ _U(slot[e] * 0x9E3779B1)) & _U(size - 1))
        while True:
            j = table[s]
            if j < 0:
                table[s] = e
                count[e] = 1
                break
            if keys[j] == k and slot[j] == slot[e]:
                count[j] += 1
                break
            s = (s + 1) & (size - 1)
    acc = np.zeros((slots, depth * width), dtype=np.int64)
    for e in range(n):
        c = count[e]
        if c:
            row = acc[slot[e]]
            for i in range(depth):
                row[i * width + _bucket(keys[e], params, i, width)] += c
    return acc


@numba.njit(inline="always")
def _table_size(n: int) -> int:
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@njit
def first_of_pairs(k1: np.ndarray, k2: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of every distinct ``(k1, k2)`` pair, ascending."""
    n = k1.size
    size = _table_size(n)
    mask = _U(size - 1)
    table = np.full(size, -1, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    m = 0
    for e in range(n):
        s = np.int64((k1[e] ^ (k2[e] >> _U(7))) & mask)
        while True:
            j = table[s]
            if j < 0:
                table[s] = e
                out[m] = e
                m += 1
                break
            if k1[j] == k1[e] and k2[j] == k2[e]:
                break
            s = (s + 1) & (size - 1)
    return out[:m]


@njit
def first_of_keys(k1: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of every distinct key, ascending."""
    n = k1.size
    size = _table_size(n)
    mask = _U(size - 1)
    table = np.full(size, -1, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    m = 0
    for e in range(n):
        s = np.int64((k1[e] ^ (k1[e] >> _U(29))) & mask)
        while True:
            j = table[s]
            if j < 0:
                table[s] = e
                out[m] = e
                m += 1
                break
            if k1[j] == k1[e]:
                break
            s = (s + 1) & (size - 1)
    return out[:m]


@njit
def round_sums(keys: np.ndarray, s0: int, params: np.ndarray, depth: int, width: int,
               slots: int) -> np.ndarray:
    """``int64[slots, depth * width]``: the arrival clock's increments per (local round, cell).

    Event ``s = s0 + e`` with bucket ``j`` in row ``i`` is pushed at step
    ``P = s + ((j - s) mod w)`` (``LazyHH._round_sums``): in its own round
    ``s // w`` if ``j >= s mod w``, else in the next (Alg. 5 line 15); local round
    ``P // w - s0 // w``, cell ``i * w + j``. Row by row, so the cells written stay
    cache-sized; in each row the buckets and target cells are computed first in a loop
    without stores to ``acc`` (vectorised: 2.4x faster than one loop per event), then
    the increments are scattered.
    """
    dw = depth * width
    m = keys.size
    acc = np.zeros(slots * dw, dtype=np.int64)
    base = np.empty(m, dtype=np.int64)  # local round of event e ((s0 + e) // w - s0 // w), x dw
    off = np.empty(m, dtype=np.int64)  # (s0 + e) mod w
    r, o = 0, s0 % width
    for e in range(m):
        base[e] = r
        off[e] = o
        o += 1
        if o == width:
            o = 0
            r += dw
    lo = np.empty(m, dtype=np.uint64)
    hi = np.empty(m, dtype=np.uint64)
    for e in range(m):
        lo[e] = keys[e] & _U(0xFFFFFFFF)
        hi[e] = keys[e] >> _U(32)
    idx = np.empty(m, dtype=np.int64)
    for i in range(depth):
        a, a2, b = params[2 + 6 * i], params[3 + 6 * i], params[4 + 6 * i]
        col0 = i * width
        for e in range(m):  # _bucket, inlined over the row; the next round (+dw) when j < off
            y = a * lo[e] + a2 * hi[e] + b
            j = np.int64(((y >> _U(32)) * _U(width)) >> _U(32))
            idx[e] = base[e] + col0 + j - ((j - off[e]) >> 63) * dw
        for e in range(m):
            acc[idx[e]] += 1
    return acc.reshape(slots, dw)


@njit
def used_cells(cells: np.ndarray, n: int) -> np.ndarray:
    """The distinct values of ``cells`` (``(d, m)`` flat cell indices in ``[0, n)``), in
    order of first appearance (candidate-major: the candidate cells are column-major)."""
    seen = np.zeros(n, dtype=np.bool_)
    d, m = cells.shape
    out = np.empty(min(n, d * m) + 1, dtype=np.int64)  # +1: the branch-free tail write
    k = 0
    for e in range(m):
        for i in range(d):  # branch-free (first sightings are random): write, then advance
            c = cells[i, e]
            out[k] = c
            k += 1 - seen[c]
            seen[c] = True
    return out[:k]


@njit
def min_over_rows(cells: np.ndarray, used: np.ndarray, read: np.ndarray, n: int) -> np.ndarray:
    """``values[cells].min(axis=0)`` (Alg. 4, min) for ``cells`` of shape ``(d, m)``, where
    ``values[used] = read`` (``used`` holds every cell of ``cells``)."""
    values = np.empty(n, dtype=read.dtype)
    for t in range(used.size):
        values[used[t]] = read[t]
    return min_rows(values, cells)
