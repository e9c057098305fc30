"""Seeded, vectorised 64-bit hashing of stream items (public, recomputable).

Every sketch row ``i`` needs a bucket function ``h_i: items -> [0, width)`` and,
for Count Sketch, a sign function ``g_i: items -> {-1, +1}``. Both are derived
from one 64-bit *key* per item. The hash is public: it travels in every sketch
release (:meth:`HashSpec.to_public`) so that readers can answer point queries.
It is *not* a cryptographic hash and it is never Python's ``hash()`` (which is
salted per process and would make releases unreadable).

Definition (all arithmetic modulo 2**64 on unsigned 64-bit integers)
--------------------------------------------------------------------
``fmix64(z)`` is the MurmurHash3 finaliser::

    z ^= z >> 33; z *= 0xFF51AFD7ED558CCD; z ^= z >> 33
    z *= 0xC4CEB9FE1A85EC53; z ^= z >> 33

Seed material, from the spec's integer ``seed`` (taken modulo 2**64)::

    base     = fmix64(seed ^ 0x9E3779B97F4A7C15)
    int_salt = fmix64(base ^ 0x1)          # integer items
    str_salt = fmix64(base ^ 0x2)          # str / bytes items

Item keys:

- integer item ``x`` (any integer dtype, reinterpreted as two's-complement
  uint64): ``key = fmix64(uint64(x) ^ int_salt)``.
- ``str`` items are encoded as UTF-8; ``bytes`` are used as is. Trailing NUL
  bytes are not significant (numpy fixed-width byte strings drop them). The
  byte string ``b`` of length ``L`` is zero-padded to a multiple of 8 and read
  as ``k = ceil(L / 8)`` little-endian uint64 words ``w_0 .. w_{k-1}`` (so a
  key never depends on the other items of a batch); then::

      h = str_salt
      for each word w_j:  h = fmix64(h ^ w_j)
      key = fmix64(h ^ L)

Row functions, for row ``i`` in ``0 .. depth-1``::

    a_i = fmix64(base ^ (2*i + 3)) | 1     # odd multiplier
    b_i = fmix64(base ^ (2*i + 4))
    y_i = key * a_i + b_i                  # mod 2**64
    bucket_i = ((y_i >> 32) * width) >> 32   # in [0, width)
    sign_i   = +1 if bit 31 of y_i is 0 else -1

``to_public()`` lists ``seed``, ``depth``, ``width``, the algorithm name and
the derived ``a_i``/``b_i`` so any reader can recompute buckets and signs.

Examples
--------
>>> import numpy as np
>>> spec = HashSpec(seed=7, depth=3, width=16)
>>> keys = spec.item_keys(np.array([1, 2, 3]))
>>> keys.dtype
dtype('uint64')
>>> b = spec.buckets(keys)
>>> b.shape, bool(((b >= 0) & (b < 16)).all())
((3, 3), True)
>>> bool((spec.item_keys(np.array(["10.0.0.1"])) ==
...       spec.item_keys(np.array([b"10.0.0.1"], dtype=object))).all())
True
>>> sorted(set(spec.signs(keys).ravel().tolist())) in ([-1], [1], [-1, 1])
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketches.errors import SpecError

__all__ = ["HASH_ALGORITHM", "HashSpec", "fmix64"]

HASH_ALGORITHM = "dpstream-fmix64-v1"

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
_MASK64 = (1 << 64) - 1


def _fmix64_int(z: int) -> int:
    """Scalar ``fmix64`` on a Python int (used for seed material)."""
    z &= _MASK64
    z ^= z >> 33
    z = (z * 0xFF51AFD7ED558CCD) & _MASK64
    z ^= z >> 33
    z = (z * 0xC4CEB9FE1A85EC53) & _MASK64
    z ^= z >> 33
    return z


def fmix64(z: np.ndarray) -> np.ndarray:
    """MurmurHash3 64-bit finaliser, vectorised, in place on a copy.

    Parameters
    ----------
    z : numpy.ndarray of uint64

    Returns
    -------
    numpy.ndarray of uint64

    Examples
    --------
    >>> int(fmix64(np.array([1], dtype=np.uint64))[0]) == _fmix64_int(1)
    True
    """
    z = np.array(z, dtype=np.uint64, copy=True)
    z ^= z >> _S33
    z *= _M1
    z ^= z >> _S33
    z *= _M2
    z ^= z >> _S33
    return z


def _fmix64_inplace(z: np.ndarray) -> None:
    z ^= z >> _S33
    z *= _M1
    z ^= z >> _S33
    z *= _M2
    z ^= z >> _S33


def _as_byte_matrix(items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (uint64 words [n, k], byte lengths [n]) for str/bytes items."""
    if items.dtype.kind == "U":
        width = items.dtype.itemsize // 4
        codes = items.view(np.uint32).reshape(items.shape[0], width) if width else None
        if codes is not None and codes.size and int(codes.max()) >= 128:
            arr = np.char.encode(items, "utf-8")
        else:
            # ASCII fast path: code points are the UTF-8 bytes.
            arr = (codes.astype(np.uint8) if codes is not None
                   else np.zeros((items.shape[0], 0), np.uint8))
            lengths = np.char.str_len(items).astype(np.uint64)
            return _pack_words(arr), lengths
    elif items.dtype.kind == "S":
        arr = items
    else:  # object array of str/bytes
        if items.size == 0:
            return np.zeros((0, 0), np.uint64), np.zeros(0, np.uint64)
        first = items[0]
        try:
            if isinstance(first, str):
                return _as_byte_matrix(items.astype(str))
            arr = items.astype(bytes)
        except (UnicodeError, TypeError, ValueError) as exc:
            raise SpecError(
                "items: expected an array of int, str or bytes; convert items to one of"
                f" these types before hashing ({exc})"
            ) from None
    n = arr.shape[0]
    itemsize = arr.dtype.itemsize
    lengths = np.char.str_len(arr).astype(np.uint64)
    mat = arr.view(np.uint8).reshape(n, itemsize) if itemsize else np.zeros((n, 0), np.uint8)
    return _pack_words(mat), lengths


def _pack_words(mat: np.ndarray) -> np.ndarray:
    n, nbytes = mat.shape
    k = (nbytes + 7) // 8
    if k * 8 != nbytes:
        padded = np.zeros((n, k * 8), dtype=np.uint8)
        padded[:, :nbytes] = mat
        mat = padded
    else:
        mat = np.ascontiguousarray(mat)
    return mat.view("<u8").reshape(n, k).astype(np.uint64, copy=False)


@dataclass(frozen=True)
class HashSpec:
    """Seeded hash functions for a ``depth x width`` sketch.

    Parameters
    ----------
    seed : int
        Public seed (any integer; used modulo 2**64).
    depth : int
        Number of rows ``d`` (>= 1).
    width : int
        Number of columns ``w`` (1 <= w < 2**32).

    Examples
    --------
    >>> spec = HashSpec(seed=1, depth=2, width=8)
    >>> spec.to_public()["algorithm"]
    'dpstream-fmix64-v1'
    >>> HashSpec.from_public(spec.to_public()) == spec
    True
    """

    seed: int
    depth: int
    width: int
    _a: np.ndarray = field(init=False, repr=False, compare=False)
    _b: np.ndarray = field(init=False, repr=False, compare=False)
    _int_salt: np.uint64 = field(init=False, repr=False, compare=False)
    _str_salt: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int | np.integer) or isinstance(self.seed, bool):
            raise SpecError(f"hash_seed: must be an integer, got {self.seed!r}; pass an int")
        if not isinstance(self.depth, int | np.integer) or self.depth < 1:
            raise SpecError(f"depth: must be an integer >= 1, got {self.depth!r}")
        if not isinstance(self.width, int | np.integer) or not 1 <= self.width < 2**32:
            raise SpecError(f"width: must be an integer in [1, 2**32), got {self.width!r}")
        base = _fmix64_int(int(self.seed) ^ 0x9E3779B97F4A7C15)
        a = [_fmix64_int(base ^ (2 * i + 3)) | 1 for i in range(int(self.depth))]
        b = [_fmix64_int(base ^ (2 * i + 4)) for i in range(int(self.depth))]
        object.__setattr__(self, "_a", np.array(a, dtype=np.uint64))
        object.__setattr__(self, "_b", np.array(b, dtype=np.uint64))
        object.__setattr__(self, "_int_salt", np.uint64(_fmix64_int(base ^ 0x1)))
        object.__setattr__(self, "_str_salt", _fmix64_int(base ^ 0x2))

    # ------------------------------------------------------------------ keys
    def item_keys(self, items: np.ndarray | Sequence[Any]) -> np.ndarray:
        """Map items (ints, str or bytes) to seeded 64-bit keys.

        Parameters
        ----------
        items : array-like
            Integer array, or array of str (UTF-8) / bytes (``U``, ``S`` or
            object dtype).

        Returns
        -------
        numpy.ndarray of uint64, shape (n,)

        Examples
        --------
        >>> spec = HashSpec(seed=0, depth=1, width=4)
        >>> bool(spec.item_keys([5])[0] == spec.item_keys(np.array([5], np.int32))[0])
        True
        >>> bool(spec.item_keys(["a"])[0] != spec.item_keys(["b"])[0])
        True
        """
        arr = np.asarray(items)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        kind = arr.dtype.kind
        if kind in "iub":
            keys = arr.astype(np.int64, copy=False).view(np.uint64) ^ self._int_salt
            _fmix64_inplace(keys)
            return keys
        if kind in "USO":
            words, lengths = _as_byte_matrix(arr)
            h = np.full(arr.shape[0], self._str_salt, dtype=np.uint64)
            nwords = (lengths + np.uint64(7)) >> np.uint64(3)
            for j in range(words.shape[1]):
                t = h ^ words[:, j]
                _fmix64_inplace(t)
                # only the item's own words count (numpy pads to the longest item)
                np.copyto(h, t, where=nwords > np.uint64(j))
            h ^= lengths
            _fmix64_inplace(h)
            return h
        raise SpecError(
            f"items: unsupported dtype {arr.dtype}; pass integers, str or bytes"
        )

    # --------------------------------------------------------------- per row
    def _row_hash(self, keys: np.ndarray, row: int) -> np.ndarray:
        y = keys * self._a[row]
        y += self._b[row]
        return y

    def row_into(
        self, keys: np.ndarray, row: int, out: np.ndarray, signs_out: np.ndarray | None = None
    ) -> None:
        """Write row ``row``'s buckets into ``out`` (int64/uint64, shape (n,)), in place.

        Allocation-free hot-path variant of :meth:`buckets` (and of
        :meth:`signs` into ``signs_out``, any numeric dtype) for one row.
        """
        y = out.view(np.uint64)
        np.multiply(keys, self._a[row], out=y)
        y += self._b[row]
        if signs_out is not None:
            signs_out[...] = (y >> np.uint64(31)) & np.uint64(1)
            signs_out *= -2
            signs_out += 1
        y >>= _S32
        y *= np.uint64(self.width)
        y >>= _S32

    def buckets(self, keys: np.ndarray) -> np.ndarray:
        """Bucket of every key in every row, ``int64[depth, n]`` in ``[0, width)``.

        Examples
        --------
        >>> spec = HashSpec(seed=3, depth=2, width=5)
        >>> spec.buckets(spec.item_keys(np.arange(4))).shape
        (2, 4)
        """
        keys = np.asarray(keys, dtype=np.uint64)
        out = np.empty((self.depth, keys.shape[0]), dtype=np.int64)
        w = np.uint64(self.width)
        for i in range(self.depth):
            y = self._row_hash(keys, i)
            y >>= _S32
            y *= w
            y >>= _S32
            out[i] = y.view(np.int64)
        return out

    def signs(self, keys: np.ndarray) -> np.ndarray:
        """Sign (+1/-1) of every key in every row, ``int8[depth, n]``.

        Examples
        --------
        >>> spec = HashSpec(seed=3, depth=2, width=5)
        >>> s = spec.signs(spec.item_keys(np.arange(1000)))
        >>> bool(np.isin(s, [-1, 1]).all())
        True
        """
        keys = np.asarray(keys, dtype=np.uint64)
        out = np.empty((self.depth, keys.shape[0]), dtype=np.int8)
        one = np.uint64(1)
        for i in range(self.depth):
            y = self._row_hash(keys, i)
            bit = ((y >> np.uint64(31)) & one).astype(np.int8)
            out[i] = 1 - 2 * bit
        return out

    def buckets_and_signs(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both :meth:`buckets` and :meth:`signs`, sharing the row hashes."""
        keys = np.asarray(keys, dtype=np.uint64)
        b = np.empty((self.depth, keys.shape[0]), dtype=np.int64)
        s = np.empty((self.depth, keys.shape[0]), dtype=np.int8)
        w = np.uint64(self.width)
        for i in range(self.depth):
            y = self._row_hash(keys, i)
            s[i] = 1 - 2 * ((y >> np.uint64(31)) & np.uint64(1)).astype(np.int8)
            y >>= _S32
            y *= w
            y >>= _S32
            b[i] = y.view(np.int64)
        return b, s

    # ---------------------------------------------------------------- public
    def to_public(self) -> dict[str, Any]:
        """Everything a reader needs to recompute buckets and signs (JSON-able)."""
        return {
            "algorithm": HASH_ALGORITHM,
            "seed": int(self.seed),
            "depth": int(self.depth),
            "width": int(self.width),
            "row_multipliers": [int(x) for x in self._a],
            "row_offsets": [int(x) for x in self._b],
        }

    @classmethod
    def from_public(cls, data: dict[str, Any]) -> HashSpec:
        """Rebuild a spec from :meth:`to_public` output, checking the algorithm."""
        algo = data.get("algorithm", HASH_ALGORITHM)
        if algo != HASH_ALGORITHM:
            raise SpecError(
                f"hash.algorithm: unknown hash algorithm {algo!r}; this reader supports"
                f" {HASH_ALGORITHM!r}"
            )
        try:
            spec = cls(seed=int(data["seed"]), depth=int(data["depth"]),
                       width=int(data["width"]))
        except KeyError as exc:
            raise SpecError(f"hash.{exc.args[0]}: missing from hash spec; include it") from None
        if "row_multipliers" in data and [int(x) for x in data["row_multipliers"]] != [
            int(x) for x in spec._a
        ]:
            raise SpecError("hash.row_multipliers: do not match the seed; the release is corrupt")
        return spec
