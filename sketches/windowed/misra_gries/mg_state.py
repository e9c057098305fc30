"""Misra-Gries state shared by PMG, PAMG and TrieHH (paper 000, Algorithm 1).

- :class:`ItemCodec`: items -> exact keys (ints as uint64, str/bytes as their
  exact bytes) and keys -> public labels.
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

from sketches.core.candidates import decode_items, encode_items, public_item
from sketches.core.keyed_prf import item_bytes
from sketches.errors import SerializationError, SpecError

__all__ = ["ItemCodec", "MGState", "worker_params"]


# ---------------------------------------------------------------------------
# Item keys
# ---------------------------------------------------------------------------
class ItemCodec:
    """Map items to exact keys and keys back to public labels.

    ``"int"``: the key is the integer itself (two's complement uint64 view), an
    exact bijection. ``"str"``: the key is the item's exact bytes (str as
    UTF-8; ``"a"`` and ``b"a"`` are one item), held as Python ``bytes`` in an
    object array. Distinct items never share a key, so one event can never
    change the label another item is published under (SEMANTICS.md §11; a
    64-bit hash with a public seed let anyone forge a colliding string, issue
    8). A Misra-Gries sketch holds at most ``k`` keys, so exact keys cost
    O(k) memory; the fixed total order of Algorithm 1 on str items is the
    bytewise (lexicographic) order of their bytes, which depends on nothing
    but the items. ``seed`` is kept for compatibility of specs and merges; it
    no longer affects str keys.

    The public label of a str key is the decoded str when the bytes are valid
    UTF-8, else the base64 of the bytes with ``"item_encoding": "base64"``
    next to it (:meth:`entries`), as LazyHH publishes bytes items.
    """

    def __init__(self, kind: str, seed: int) -> None:
        if kind not in ("int", "str"):
            raise SpecError(f"item_kind: use 'int' or 'str', got {kind!r}")
        self.kind = kind
        self.seed = seed

    def keys(self, items: Any) -> np.ndarray:
        """``uint64[n]`` (int) or an object array of ``bytes`` (str) keys of ``items``."""
        if self.kind == "int":
            arr = np.asarray(items)
            if arr.ndim != 1:
                arr = arr.reshape(-1)
            if arr.size and arr.dtype.kind not in "iu":
                raise SpecError("items: item_kind='int' needs an integer array; "
                                "use item_kind='str' for str/bytes items")
            return arr.astype(np.int64, copy=False).view(np.uint64)
        if isinstance(items, np.ndarray) and items.dtype.kind in "iufcb" and items.size:
            raise SpecError("items: item_kind='str' needs str or bytes items; "
                            "use item_kind='int' for integer items")
        data = item_bytes(items if isinstance(items, np.ndarray) else list(items))
        out = np.empty(len(data), dtype=object)
        out[:] = data
        return out

    def empty_keys(self) -> np.ndarray:
        """A zero-length key array of this kind."""
        return np.zeros(0, np.uint64) if self.kind == "int" else np.empty(0, dtype=object)

    def key_array(self, keys: list[Any]) -> np.ndarray:
        """Keys of this kind (a list) as an array (uint64 or object)."""
        if self.kind == "int":
            return np.array(keys, dtype=np.uint64)
        out = np.empty(len(keys), dtype=object)
        out[:] = keys
        return out

    def labels(self, keys: np.ndarray) -> list[Any]:
        """Items of ``keys``: ints, or str (valid UTF-8) / bytes (exact, never lossy)."""
        if self.kind == "int":
            return keys.astype(np.uint64).view(np.int64).tolist()
        return [_label(k) for k in keys.tolist()]

    def entries(self, keys: np.ndarray, estimates: list[Any]) -> list[dict[str, Any]]:
        """Release entries ``{"item", "estimate"}`` (+ ``item_encoding`` for non-UTF-8 bytes)."""
        return [{"item": public_item(x), "estimate": e}
                | ({"item_encoding": "base64"} if isinstance(x, bytes) else {})
                for x, e in zip(self.labels(keys), estimates, strict=True)]

    def encode(self, keys: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
        """Arrays storing ``keys`` in a checkpoint (``prefix`` + ``keys`` or blob/lengths)."""
        if self.kind == "int":
            return {f"{prefix}keys": np.asarray(keys, dtype=np.uint64)}
        enc = encode_items(np.asarray(keys, dtype=object))
        return {f"{prefix}key_blob": enc["blob"], f"{prefix}key_lengths": enc["lengths"]}

    def decode(self, arrays: dict[str, np.ndarray], prefix: str) -> np.ndarray:
        """Inverse of :meth:`encode`."""
        if self.kind == "int":
            return arrays[f"{prefix}keys"].astype(np.uint64)
        lengths = arrays[f"{prefix}key_lengths"]
        return decode_items({"blob": arrays[f"{prefix}key_blob"], "lengths": lengths,
                             "is_bytes": np.ones(lengths.size, np.uint8)})


def _label(key: bytes) -> str | bytes:
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return key


# ---------------------------------------------------------------------------
# Algorithm 1 state
# ---------------------------------------------------------------------------
class MGState:
    """Algorithm 1 of paper 000 (MG keeping zero counters), sequential and fast.

    Keys are ints (uint64 view of int items) or ``bytes`` (exact str/bytes
    items); one state holds one kind. Counters are stored as ``raw - base``
    where ``base`` counts decrements (Branch 2), so a decrement of all ``k``
    counters is O(1) plus an O(k) scan for the counters that became zero (at
    most ``n/(k+1)`` scans). The fixed total order puts dummy ``i`` (slot
    ``i`` initially) before every real key and orders real keys by value
    (unsigned 64-bit ints, or bytes lexicographically). Dummies are always
    zero counters and are replaced in slot order (a decrement needs every
    counter positive, so none is left by then); zero real keys sit in a heap
    checked lazily on pop.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.n = 0
        self.base = 0
        self.raw = [0] * k
        self.ordk: list[Any] = [None] * k  # key of each slot, None = dummy
        self.slot_of: dict[Any, int] = {}
        self.heap: list[tuple[Any, int]] = []  # (key, slot) of zero real counters (lazy)
        self.next_dummy = 0  # dummies left: slots next_dummy..k-1
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
        if self.next_dummy < self.k:  # dummies come first in the total order
            self.next_dummy += 1
            return self.next_dummy - 1
        heap, ordk, raw, base = self.heap, self.ordk, self.raw, self.base
        while True:
            o, s = heapq.heappop(heap)
            if ordk[s] == o and raw[s] == base:
                return s

    def _replace_zero(self, x: Any, count: int) -> None:
        """Branch 3: the smallest zero counter (total order) now holds ``x`` with ``count``."""
        s = self._pop_zero()
        old = self.ordk[s]
        if old is not None:
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
        """(keys[k], is_dummy bool[k], counts int64[k]) in slot order.

        Keys are uint64 (a dummy's key is its index) for int keys, else an
        object array of bytes (a dummy's key is ``b""``).
        """
        dummy = np.array([o is None for o in self.ordk], dtype=bool)
        if any(isinstance(o, bytes) for o in self.ordk):
            keys = np.empty(self.k, dtype=object)
            keys[:] = [b"" if o is None else o for o in self.ordk]
        else:
            keys = np.array([i if o is None else o for i, o in enumerate(self.ordk)],
                            dtype=np.uint64)
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
        ndummy = int(dummy.sum())
        if ndummy and (not dummy[k - ndummy:].all() or decrements or counts[dummy].any()):
            raise SerializationError("MG state: dummies must be the last slots, with zero "
                                     "counts and no decrement yet (Algorithm 1)")
        st = cls(k)
        st.n, st.base = n, decrements
        st.raw = (counts + decrements).tolist()
        raw_keys = keys.tolist()
        st.ordk = [None if d else (x if isinstance(x, bytes) else int(x))
                   for x, d in zip(raw_keys, dummy.tolist(), strict=True)]
        st.next_dummy = k - ndummy
        st.slot_of = {o: i for i, o in enumerate(st.ordk) if o is not None}
        st.heap = [(st.ordk[i], i) for i, c in enumerate(counts.tolist())
                   if c == 0 and st.ordk[i] is not None]
        heapq.heapify(st.heap)
        st.nzero = len(st.heap) + ndummy
        return st

    def memory_bytes(self) -> int:
        keys = sum(len(o) + 33 for o in self.ordk if isinstance(o, bytes))
        return 16 * self.k + 8 * len(self.heap) + keys


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
