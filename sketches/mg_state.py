"""Misra-Gries state shared by PMG, PAMG and TrieHH (paper 000, Algorithm 1).

- :class:`ItemCodec`: items -> uint64 keys (ints exactly, str/bytes by the
  seeded 64-bit hash of :mod:`sketches.hashing`) and keys -> public labels.
- :class:`MGState`: Algorithm 1 of paper 000 (Misra-Gries keeping zero
  counters, fixed total order for replacement), sequential and O(n) total.
- :func:`worker_params`: the worker's common privacy fields, checked for the
  window-scoped mechanisms of papers 000/001.

Examples
--------
>>> import numpy as np
>>> st = MGState(2)
>>> st.update(np.array([5, 5, 7, 5, 9, 5], dtype=np.uint64))
>>> keys, counts = st.real_items()
>>> keys.tolist(), counts.tolist(), st.decrements
([5, 7], [3, 0], 1)
>>> ItemCodec("int", 0).labels(ItemCodec("int", 0).keys(np.array([-1, 3])))
[-1, 3]
>>> worker_params({"relation": "add_remove", "clock": "tick", "horizon": 60, "k": 8}, "pmg")
({'k': 8}, 60)
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from sketches.errors import SerializationError, SpecError

__all__ = ["ItemCodec", "MGState", "worker_params"]


# ---------------------------------------------------------------------------
# Item keys
# ---------------------------------------------------------------------------
class ItemCodec:
    """Map items to uint64 keys and keys back to public labels.

    ``"int"``: the key is the integer itself (two's complement uint64 view), an
    exact bijection. ``"str"``: the seeded 64-bit key of
    :meth:`sketches.hashing.HashSpec.item_keys`; the original str of each stored
    key is remembered for the release (a 64-bit collision merges two items,
    probability about ``D^2 / 2^65`` for ``D`` distinct items).
    """

    def __init__(self, kind: str, seed: int) -> None:
        if kind not in ("int", "str"):
            raise SpecError(f"item_kind: use 'int' or 'str', got {kind!r}")
        self.kind = kind
        self.seed = seed
        self.names: dict[int, str] = {}

    def keys(self, items: Any) -> np.ndarray:
        arr = np.asarray(items)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        if self.kind == "int":
            if arr.size and arr.dtype.kind not in "iu":
                raise SpecError("items: item_kind='int' needs an integer array; "
                                "use item_kind='str' for str/bytes items")
            return arr.astype(np.int64, copy=False).view(np.uint64)
        from sketches.hashing import HashSpec

        if arr.size == 0:
            return np.zeros(0, np.uint64)
        keys = HashSpec(seed=self.seed, depth=1, width=1).item_keys(arr)
        names = self.names
        uk, first = np.unique(keys, return_index=True)
        for key, i in zip(uk.tolist(), first.tolist(), strict=True):
            if key not in names:
                v = arr[i]
                if isinstance(v, bytes):
                    v = v.decode("utf-8", "backslashreplace")
                names[key] = str(v)
        return keys

    def labels(self, keys: np.ndarray) -> list[Any]:
        if self.kind == "int":
            return keys.astype(np.uint64).view(np.int64).tolist()
        return [self.names.get(k, f"#{k:016x}") for k in keys.tolist()]

    def prune(self, keep: np.ndarray) -> None:
        """Forget labels of keys no longer stored (bounded memory)."""
        if self.kind == "str" and len(self.names) > 2 * keep.size + 64:
            ks = set(keep.tolist())
            self.names = {k: v for k, v in self.names.items() if k in ks}

    def memory_bytes(self) -> int:
        return sum(16 + len(v) for v in self.names.values())


# ---------------------------------------------------------------------------
# Algorithm 1 state
# ---------------------------------------------------------------------------
class MGState:
    """Algorithm 1 of paper 000 (MG keeping zero counters), sequential and fast.

    Counters are stored as ``raw - base`` where ``base`` counts decrements
    (Branch 2), so a decrement of all ``k`` counters is O(1) plus an O(k) scan
    for the counters that became zero (at most ``n/(k+1)`` scans). Zero
    counters sit in a heap ordered by the fixed total order: dummy ``i`` has
    order ``i - k`` (before every real key), real key ``x`` has order ``x``
    (its unsigned 64-bit key). Heap entries are checked lazily on pop.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.n = 0
        self.base = 0
        self.raw = [0] * k
        self.ordk = list(range(-k, 0))
        self.slot_of: dict[int, int] = {}
        self.heap = [(o, i) for i, o in enumerate(self.ordk)]
        self.nzero = k

    @property
    def decrements(self) -> int:
        """Number of Branch-2 executions (``l`` in the paper)."""
        return self.base

    def _scan_zeros(self) -> None:
        base, heap, ordk = self.base, self.heap, self.ordk
        for i, r in enumerate(self.raw):
            if r == base:
                heapq.heappush(heap, (ordk[i], i))
                self.nzero += 1
        if len(heap) > 4 * self.k + 64:  # drop stale entries
            self.heap = [(ordk[i], i) for i, r in enumerate(self.raw) if r == base]
            heapq.heapify(self.heap)

    def _pop_zero(self) -> int:
        heap, ordk, raw, base = self.heap, self.ordk, self.raw, self.base
        while True:
            o, s = heapq.heappop(heap)
            if ordk[s] == o and raw[s] == base:
                return s

    def _replace_zero(self, x: int, count: int) -> None:
        """Branch 3: the smallest zero counter (total order) now holds ``x`` with ``count``."""
        s = self._pop_zero()
        old = self.ordk[s]
        if old >= 0:
            del self.slot_of[old]
        self.ordk[s] = x
        self.slot_of[x] = s
        self.raw[s] = self.base + count
        self.nzero -= 1

    def update(self, keys: np.ndarray) -> None:
        """Process ``keys`` one by one, exactly as Algorithm 1."""
        slot_of, raw = self.slot_of, self.raw
        get = slot_of.get
        for x in keys.tolist():
            s = get(x)
            if s is not None:  # Branch 1
                r = raw[s]
                if r == self.base:
                    self.nzero -= 1
                raw[s] = r + 1
            elif self.nzero == 0:  # Branch 2: decrement all, drop x
                self.base += 1
                self._scan_zeros()
            else:  # Branch 3: replace the smallest zero key
                self._replace_zero(x, 1)
        self.n += keys.size

    def update_weighted(self, keys: np.ndarray, weights: np.ndarray) -> None:
        """Same as ``update(np.repeat(keys, weights))``, O(k) per decrementing item."""
        slot_of, raw = self.slot_of, self.raw
        for x, w in zip(keys.tolist(), weights.tolist(), strict=True):
            self.n += w
            while w > 0:
                s = slot_of.get(x)
                if s is not None:
                    if raw[s] == self.base:
                        self.nzero -= 1
                    raw[s] += w
                    break
                if self.nzero == 0:
                    j = min(w, min(raw) - self.base)
                    self.base += j
                    w -= j
                    self._scan_zeros()
                    continue
                self._replace_zero(x, w)
                break

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys uint64[k], is_dummy bool[k], counts int64[k]) in slot order."""
        ordk = np.array(self.ordk, dtype=object)
        dummy = np.array([o < 0 for o in self.ordk], dtype=bool)
        keys = np.array([o + self.k if o < 0 else o for o in ordk.tolist()], dtype=np.uint64)
        counts = np.array(self.raw, dtype=np.int64) - self.base
        return keys, dummy, counts

    def real_items(self) -> tuple[np.ndarray, np.ndarray]:
        """Stored real keys sorted by key (zero counters included) and their counts."""
        keys, dummy, counts = self.arrays()
        keys, counts = keys[~dummy], counts[~dummy]
        order = np.argsort(keys, kind="stable")
        return keys[order], counts[order]

    @classmethod
    def from_arrays(cls, k: int, keys: np.ndarray, dummy: np.ndarray, counts: np.ndarray,
                    n: int, decrements: int) -> MGState:
        if not (keys.size == dummy.size == counts.size == k) or (counts.size and counts.min() < 0):
            raise SerializationError("MG state: arrays must have length k and counts >= 0")
        st = cls(k)
        st.n, st.base = n, decrements
        st.raw = (counts + decrements).tolist()
        st.ordk = [int(x) - k if d else int(x) for x, d in zip(keys.tolist(), dummy.tolist(),
                                                              strict=True)]
        st.slot_of = {o: i for i, o in enumerate(st.ordk) if o >= 0}
        st.heap = [(st.ordk[i], i) for i, c in enumerate(counts.tolist()) if c == 0]
        heapq.heapify(st.heap)
        st.nzero = len(st.heap)
        return st

    def memory_bytes(self) -> int:
        return 16 * self.k + 8 * len(self.heap)


def worker_params(params: Any, name: str) -> tuple[dict[str, Any], int | None]:
    """Strip the worker's common privacy fields; refuse what these mechanisms cannot honour.

    The worker passes ``relation``, ``clock``, ``horizon`` and ``unit_cap`` to
    every mechanism. Papers 000/001 are calibrated for add/remove neighbours,
    and a window must be cut by the (data-independent) tick clock. Returns the
    remaining params and the horizon (ticks per window).
    """
    p = dict(params)
    relation = str(p.pop("relation", "add_remove"))
    clock = str(p.pop("clock", "tick"))
    horizon = p.pop("horizon", None)
    if relation != "add_remove":
        raise SpecError(f"relation: {name} is calibrated for add/remove neighbours "
                        "(papers 000/001); use relation: add_remove")
    if clock != "tick":
        raise SpecError(f"clock: {name} windows must be cut by the tick clock (an event-count "
                        "window is data-dependent under add/remove); use clock: tick")
    return p, None if horizon is None else int(horizon)
