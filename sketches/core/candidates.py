"""The candidate set of LazyHH (paper 002, Algorithm 6, lines 9 and 12).

LazyHH keeps a small set ``C`` of items that may be heavy: every arriving item
joins ``C``; at each output time the set is evaluated against the sketch and
trimmed to the ``k~`` items with the largest noisy estimates. This module holds
that set as parallel numpy arrays, sorted by key, so membership tests
(``searchsorted``), additions and the trim are vectorised:

- ``keys``: the 64-bit item keys of :class:`sketches.core.hashing.HashSpec`
  (unique, ascending: the identity of an item inside the set); a *wide* set
  (LazyHH's str/bytes items) adds ``keys2``, and its identity is the 128-bit pair
  ``(keys, keys2)`` (unique, ascending by pair; equal first words may repeat);
- ``items``: the original items (``int64`` for integer streams, ``object``
  holding ``str``/``bytes`` otherwise), needed because the heavy hitters
  themselves are the published output;
- ``cells``: ``int64[d, n]`` flat indices ``row * w + bucket`` into the
  sketch matrix (:meth:`sketches.core.hashing.HashSpec.cells`), so an output is one
  gather.

The candidate set is private state (it is built from raw items); only the
thresholded heavy hitters derived from it are published.

Examples
--------
>>> import numpy as np
>>> c = CandidateSet(depth=2, integer_items=True)
>>> c.add(np.array([7, 3], dtype=np.uint64), np.array([7, 3]), np.array([[1, 0], [2, 2]]))
>>> c.add(np.array([9], dtype=np.uint64), np.array([9]), np.array([[4], [1]]))
>>> c.keys.tolist(), c.missing(np.array([3, 4], dtype=np.uint64)).tolist()
([3, 7, 9], [False, True])
>>> c.trim(np.array([1.0, 5.0, 5.0]), keep=2)   # estimates aligned with c.keys
>>> c.items.tolist()
[7, 9]
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from sketches.core import candidates_kernel

__all__ = [
    "CandidateSet",
    "decode_items",
    "encode_items",
    "public_item",
    "top_order",
    "unique_pairs",
]

def top_order(estimates: np.ndarray, keys: np.ndarray,
              keys2: np.ndarray | None = None) -> np.ndarray:
    """Indices sorting candidates by estimate (descending), ties by key (ascending).

    ``keys2``: second key words of a wide (128-bit) set; ties then by ``(keys, keys2)``.

    The tie-break makes ``arg top-k~`` (Algorithm 6, line 12) a deterministic
    function of (estimates, keys), independent of insertion order, so a batch
    run and an event-by-event run keep exactly the same candidates.

    Examples
    --------
    >>> top_order(np.array([1.0, 3.0, 3.0]), np.array([5, 9, 2], dtype=np.uint64)).tolist()
    [2, 1, 0]
    """
    est = -np.asarray(estimates, dtype=np.float64)
    if keys2 is None:
        return np.lexsort((keys, est))
    return np.lexsort((keys2, keys, est))


def unique_pairs(keys: np.ndarray, keys2: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct ``(keys, keys2)`` pair, in pair order.

    Examples
    --------
    >>> k = np.array([5, 5, 3, 5], dtype=np.uint64)
    >>> unique_pairs(k, np.array([2, 1, 9, 2], dtype=np.uint64)).tolist()
    [2, 1, 0]
    """
    order = np.lexsort((keys2, keys))  # stable: the first occurrence leads its group
    k1, k2 = keys[order], keys2[order]
    head = np.ones(order.size, dtype=bool)
    head[1:] = (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1])
    return order[head]


class CandidateSet:
    """Unique candidate items (sorted by key) with cached sketch cells.

    Parameters
    ----------
    depth : int
        Number of sketch rows ``d`` (first dimension of :attr:`cells`).
    integer_items : bool
        True for integer item streams (items stored as ``int64``), False for
        ``str``/``bytes`` streams (items stored as Python objects).
    wide : bool
        True: a candidate's identity is the 128-bit pair ``(keys, keys2)``
        (:attr:`keys2` holds the second word; two items with equal first word
        are distinct candidates); sorted by the pair. False (default): the
        64-bit ``keys`` alone, :attr:`keys2` is None.
    """

    _compiled = True  # integer merges through candidates_kernel (False: numpy; same arrays)

    def __init__(self, depth: int, integer_items: bool, wide: bool = False) -> None:
        self._depth = int(depth)
        self._integer = bool(integer_items)
        self._keys = np.empty(0, dtype=np.uint64)
        self._keys2: np.ndarray | None = np.empty(0, dtype=np.uint64) if wide else None
        self._table2: np.ndarray | None = None
        self._items: np.ndarray = np.empty(0, dtype=np.int64 if integer_items else object)
        self._cells = np.empty((self._depth, 0), dtype=np.int64)
        self._table: np.ndarray | None = None  # membership cache of missing(), rebuilt lazily

    @property
    def keys(self) -> np.ndarray:
        """``uint64[n]`` keys of the candidates, ascending."""
        return self._keys

    @property
    def keys2(self) -> np.ndarray | None:
        """``uint64[n]`` second key words (wide sets), aligned with :attr:`keys`; else None."""
        return self._keys2

    @property
    def items(self) -> np.ndarray:
        """The candidate items, aligned with :attr:`keys`."""
        return self._items

    @property
    def cells(self) -> np.ndarray:
        """``int64[d, n]`` cached flat cell indices, aligned with :attr:`keys`."""
        return self._cells

    @property
    def size(self) -> int:
        """Number of candidates."""
        return int(self._keys.size)

    @property
    def integer_items(self) -> bool:
        """True if the items are integers."""
        return self._integer

    def missing(self, keys: np.ndarray, keys2: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask of ``keys`` (wide sets: pairs ``(keys, keys2)``) not candidates yet.

        Narrow sets: a binary search of the sorted members (compiled). Otherwise a
        direct-mapped table (slot = low key bits) confirms most members in
        O(1) each; the rest (new keys, and members that lost their slot to
        another) are checked exactly by binary search.
        """
        keys = np.asarray(keys, dtype=np.uint64)
        if self._keys.size == 0:
            return np.ones(keys.shape, dtype=bool)
        if self._compiled and self._keys2 is None and keys.ndim == 1:  # no table to rebuild
            return candidates_kernel.missing(self._keys, keys)
        if self._table is None:
            size = 1 << max(8, (4 * self._keys.size - 1).bit_length())
            # empty slot s holds s ^ 1: never a key of slot s (its low bits differ)
            self._table = np.arange(size, dtype=np.uint64) ^ np.uint64(1)
            self._table[self._keys & np.uint64(size - 1)] = self._keys
            if self._keys2 is not None:
                self._table2 = np.zeros(size, dtype=np.uint64)
                self._table2[self._keys & np.uint64(size - 1)] = self._keys2
        slot = keys & np.uint64(self._table.size - 1)
        out = self._table[slot] != keys
        if self._keys2 is not None:
            assert self._table2 is not None and keys2 is not None
            keys2 = np.asarray(keys2, dtype=np.uint64)
            out |= self._table2[slot] != keys2
        check = np.flatnonzero(out)
        if check.size:
            sub = keys[check]
            pos = np.minimum(np.searchsorted(self._keys, sub), self._keys.size - 1)
            miss = self._keys[pos] != sub
            if self._keys2 is not None:
                assert keys2 is not None
                sub2 = keys2[check]
                miss |= self._keys2[pos] != sub2
                # equal first word, different second: scan the (rare) run of equal first words
                for j in np.flatnonzero(miss & (self._keys[pos] == sub)).tolist():
                    p = int(pos[j])
                    while p < self._keys.size and self._keys[p] == sub[j]:
                        if self._keys2[p] == sub2[j]:
                            miss[j] = False
                            break
                        p += 1
            out[check] = miss
        return out

    def add(self, keys: np.ndarray, items: np.ndarray, cells: np.ndarray,
            keys2: np.ndarray | None = None) -> None:
        """Add items that are not candidates yet (``keys`` unique and all missing).

        ``cells`` is ``int64[d, len(keys)]``. Use :meth:`missing` to filter first.
        Wide sets: ``keys2`` (required) and the pairs are unique and missing.
        """
        keys = np.asarray(keys, dtype=np.uint64)
        if keys.size == 0:
            return None
        if self._merge(keys, items, cells, keys2):
            return None
        all_keys = np.concatenate([self._keys, keys])
        if self._keys2 is None:
            order = np.argsort(all_keys, kind="stable")
        else:
            if keys2 is None:
                raise ValueError("keys2: a wide CandidateSet needs the second key words")
            all2 = np.concatenate([self._keys2, np.asarray(keys2, dtype=np.uint64)])
            order = np.lexsort((all2, all_keys))
            self._keys2 = all2[order]
        self._keys = all_keys[order]
        new_items = np.asarray(items).astype(self._items.dtype, copy=False)
        self._items = np.concatenate([self._items, new_items])[order]
        self._cells = np.concatenate([self._cells, np.asarray(cells, np.int64)], axis=1)[:, order]
        self._table = None
        return None

    def _merge(self, keys: np.ndarray, items: np.ndarray, cells: np.ndarray,
               keys2: np.ndarray | None) -> bool:
        """Fast path of :meth:`add` for new keys given in ascending order whose first
        words are strictly increasing and differ from every member's: the pair order
        is then the first-word order, so a merge (no sort) gives :meth:`add`'s exact
        arrays. Returns False (nothing changed) when the keys do not qualify.
        Integer items of a narrow set: one compiled pass (:mod:`candidates_kernel
        <sketches.core.candidates_kernel>`, the same arrays)."""
        if (self._compiled and self._keys2 is None and keys2 is None
                and self._items.dtype.kind in "iu"):
            new_items = np.asarray(items).astype(self._items.dtype, copy=False)
            ok, out_keys, out_items, out_cells = candidates_kernel.merge(
                self._keys, self._items, self._cells, keys, new_items,
                np.asarray(cells, np.int64))
            if not ok:
                return False
            self._keys, self._items, self._cells = out_keys, out_items, out_cells
            self._table = None
            return True
        if (keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1]))) or (
                self._keys2 is not None and keys2 is None):
            return False
        at = np.searchsorted(self._keys, keys)  # new key j goes before member at[j]
        if self._keys.size and bool(np.any(self._keys[np.minimum(at, self._keys.size - 1)]
                                           == keys)):
            return False  # an equal first word: the pair order needs the second words
        n0, m = self._keys.size, keys.size
        new_pos = at + np.arange(m)
        old_pos = np.arange(n0) + np.searchsorted(keys, self._keys)
        out_keys = np.empty(n0 + m, dtype=np.uint64)
        out_keys[old_pos], out_keys[new_pos] = self._keys, keys
        if self._keys2 is not None:
            assert keys2 is not None
            out2 = np.empty(n0 + m, dtype=np.uint64)
            out2[old_pos], out2[new_pos] = self._keys2, np.asarray(keys2, dtype=np.uint64)
            self._keys2 = out2
        out_items = np.empty(n0 + m, dtype=self._items.dtype)
        out_items[old_pos] = self._items
        out_items[new_pos] = np.asarray(items).astype(self._items.dtype, copy=False)
        out_cells = np.empty((self._depth, n0 + m), dtype=np.int64)
        out_cells[:, old_pos] = self._cells
        out_cells[:, new_pos] = np.asarray(cells, np.int64)
        self._keys, self._items, self._cells = out_keys, out_items, out_cells
        self._table = None
        return True

    def trim(self, estimates: np.ndarray, keep: int) -> None:
        """Keep the ``keep`` candidates with the largest estimates (ties: smaller key)."""
        if self._keys.size <= keep:
            return None
        est = np.asarray(estimates, dtype=np.float64)
        if (self._compiled and keep >= 1 and self._keys2 is None
                and self._items.dtype.kind in "iu" and est.shape == self._keys.shape
                and not np.isnan(est).any()):
            self._keys, self._items, self._cells = candidates_kernel.trim(
                self._keys, self._items, self._cells, est, int(keep))
            self._table = None
            return None
        v = np.partition(est, est.size - keep)[est.size - keep]  # the keep-th largest
        chosen = est > v
        ties = np.flatnonzero(est == v)  # in key order: keys are sorted
        chosen[ties[: keep - int(np.count_nonzero(chosen))]] = True
        top = np.flatnonzero(chosen)  # same set as top_order(...)[:keep], key order
        self._keys = self._keys[top]
        if self._keys2 is not None:
            self._keys2 = self._keys2[top]
        self._items = self._items[top]
        self._cells = self._cells[:, top]
        self._table = None
        return None

    def restore(self, keys: np.ndarray, items: np.ndarray, cells: np.ndarray,
                keys2: np.ndarray | None = None) -> None:
        """Replace the whole set (deserialisation); sorts by key."""
        self._table = None
        self._keys = np.empty(0, dtype=np.uint64)
        if self._keys2 is not None:
            self._keys2 = np.empty(0, dtype=np.uint64)
        self._items = self._items[:0]
        self._cells = np.empty((self._depth, 0), dtype=np.int64)
        self.add(keys, items, np.asarray(cells, dtype=np.int64).reshape(self._depth, -1), keys2)
        return None

    def memory_bytes(self) -> int:
        """Bytes of numpy state (object items count their pointer only)."""
        table = 0 if self._table is None else self._table.nbytes
        if self._keys2 is not None:
            table += self._keys2.nbytes + (0 if self._table2 is None else self._table2.nbytes)
        return int(self._keys.nbytes + self._items.nbytes + self._cells.nbytes + table)


def public_item(item: Any) -> Any:
    """JSON form of a released item: ``int`` as int, ``str`` as str, ``bytes`` as base64 str.

    Examples
    --------
    >>> public_item(np.int64(5)), public_item("10.0.0.1"), public_item(b"\\x00\\x01")
    (5, '10.0.0.1', 'AAE=')
    """
    if isinstance(item, bytes | bytearray):
        return base64.b64encode(bytes(item)).decode("ascii")
    if isinstance(item, np.integer | int):
        return int(item)
    return str(item)


def encode_items(items: np.ndarray) -> dict[str, np.ndarray]:
    """Arrays encoding str/bytes items (state serialization, never pickle).

    ``blob`` (uint8) holds the UTF-8 / raw bytes back to back, ``lengths``
    (int64) their sizes, ``is_bytes`` (uint8) 1 for ``bytes`` items.

    Examples
    --------
    >>> enc = encode_items(np.array(["ab", b"c"], dtype=object))
    >>> decode_items(enc).tolist()
    ['ab', b'c']
    """
    raw = [x if isinstance(x, bytes) else str(x).encode("utf-8") for x in items.tolist()]
    flags = [1 if isinstance(x, bytes) else 0 for x in items.tolist()]
    return {
        "blob": np.frombuffer(b"".join(raw), dtype=np.uint8),
        "lengths": np.array([len(r) for r in raw], dtype=np.int64),
        "is_bytes": np.array(flags, dtype=np.uint8),
    }


def decode_items(enc: dict[str, np.ndarray]) -> np.ndarray:
    """Inverse of :func:`encode_items` (object array of str / bytes)."""
    blob = enc["blob"].astype(np.uint8).tobytes()
    ends = np.cumsum(enc["lengths"]).tolist()
    out = np.empty(len(ends), dtype=object)
    start = 0
    for i, (end, flag) in enumerate(zip(ends, enc["is_bytes"].tolist(), strict=True)):
        chunk = blob[start:end]
        out[i] = chunk if flag else chunk.decode("utf-8")
        start = end
    return out
