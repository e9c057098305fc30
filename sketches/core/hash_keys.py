"""Item keys: ints, str and bytes to 64-bit keys, vectorised (see :mod:`sketches.core.hashing`).

Definition (the module docstring of :mod:`sketches.core.hashing` is normative):
an integer ``x`` maps to ``fmix64(uint64(x) ^ int_salt)`` (a bijection); a
str (UTF-8) or bytes value of *true* byte length ``L`` -- trailing NUL bytes
included -- is read as ``ceil(L/8)`` zero-padded little-endian uint64 words
``w_j`` and maps to ``fmix64(h ^ L)`` with ``h = str_salt``,
``h = fmix64(h ^ w_j)`` per word. The pair (words, ``L``) determines the byte
string, so the encoding is injective.

Cost. Time and memory are proportional to the bytes present, never to
batch size x longest item: for object arrays and lists, peak memory is at
most ``48 x (characters present + 16 x items) + 64 KiB`` (tested with
adversarial batches in tests/unit/test_hashing.py). Short items (IPv4
text) go through one fixed-width matrix when padding to the longest item
costs at most ``_PAD_FACTOR`` times the characters present; otherwise every
item is hashed over its own words only (:func:`_ragged_keys`). A ``U``/``S``
array is already padded by its creator, and is hashed in place.

numpy's fixed-width ``S``/``U`` dtypes strip trailing NULs when an array is
built, so the true length is taken from the Python objects whenever the
input holds objects (object arrays, lists); a ``U``/``S`` array's elements
never end in NUL, so for them the stripped length is the true length.

Examples
--------
>>> import numpy as np
>>> k = item_keys(np.array(["ab", "ab\\x00", "ab\\x00\\x00"], dtype=object), 1, 2)
>>> len(set(k.tolist()))
3
>>> bool(item_keys(["ab"], 1, 2)[0] == item_keys(np.array(["ab"]), 1, 2)[0])
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sketches.errors import SpecError

__all__ = ["fmix64", "fmix64_inplace", "fmix64_int", "item_keys"]

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_MASK64 = (1 << 64) - 1


def fmix64_int(z: int) -> int:
    """Scalar ``fmix64`` (MurmurHash3 finaliser) on a Python int.

    Examples
    --------
    >>> fmix64_int(0)
    0
    """
    z &= _MASK64
    z ^= z >> 33
    z = (z * 0xFF51AFD7ED558CCD) & _MASK64
    z ^= z >> 33
    z = (z * 0xC4CEB9FE1A85EC53) & _MASK64
    z ^= z >> 33
    return z


def fmix64_inplace(z: np.ndarray) -> None:
    """``fmix64`` of a uint64 array, in place."""
    z ^= z >> _S33
    z *= _M1
    z ^= z >> _S33
    z *= _M2
    z ^= z >> _S33


def fmix64(z: np.ndarray) -> np.ndarray:
    """``fmix64`` of a copy of ``z`` (uint64).

    Examples
    --------
    >>> int(fmix64(np.array([1], dtype=np.uint64))[0]) == fmix64_int(1)
    True
    """
    out = np.array(z, dtype=np.uint64, copy=True)
    fmix64_inplace(out)
    return out


def _bad_items(exc: Exception) -> SpecError:
    return SpecError(
        "items: expected an array of int, str or bytes (one type per batch); convert items"
        f" to one of these types before hashing ({exc})"
    )


def _object_lengths(items: np.ndarray) -> np.ndarray:
    try:
        return np.fromiter(map(len, items), dtype=np.int64, count=items.shape[0])
    except TypeError as exc:
        raise _bad_items(exc) from None


def _byte_matrix(items: np.ndarray, true_len: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Return (uint8 matrix [n, width], true byte lengths uint64 [n]).

    ``true_len``: the ``len`` of every object of an object array, if known.
    """
    n = items.shape[0]
    kind = items.dtype.kind
    if kind == "O":
        if n == 0:
            return np.zeros((0, 0), np.uint8), np.zeros(0, np.uint64)
        true_len = _object_lengths(items) if true_len is None else true_len
        try:
            if isinstance(items[0], str):
                mat, nbytes, nchars = _unicode_matrix(items.astype(str))
                # U strips trailing NUL chars; each is one UTF-8 byte
                return mat, nbytes + (true_len - nchars).astype(np.uint64)
            arr = items.astype(bytes)
        except (UnicodeError, TypeError, ValueError) as exc:
            raise _bad_items(exc) from None
        lengths = true_len.astype(np.uint64)
    elif kind == "U":
        mat, nbytes, _ = _unicode_matrix(items)
        return mat, nbytes
    else:  # "S"
        arr = items
        lengths = np.char.str_len(arr).astype(np.uint64)
    itemsize = arr.dtype.itemsize
    mat = arr.view(np.uint8).reshape(n, itemsize) if itemsize else np.zeros((n, 0), np.uint8)
    return mat, lengths


def _unicode_matrix(items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UTF-8 (uint8 matrix, byte lengths uint64, char lengths int64) of a ``U`` array."""
    n = items.shape[0]
    codes = items.view(np.uint32).reshape(n, items.dtype.itemsize // 4)
    nchars = np.char.str_len(items).astype(np.int64)
    if codes.size and int(codes.max()) >= 128:
        arr = np.char.encode(items, "utf-8")
        nbytes = np.char.str_len(arr).astype(np.uint64)
        width = arr.dtype.itemsize
        mat = arr.view(np.uint8).reshape(n, width) if width else np.zeros((n, 0), np.uint8)
        return mat, nbytes, nchars
    # ASCII fast path: code points are the UTF-8 bytes
    return codes.astype(np.uint8), nchars.astype(np.uint64), nchars


def _pack_words(mat: np.ndarray, nwords: int) -> np.ndarray:
    """uint8 [n, b] -> little-endian uint64 words [n, nwords] (zero padded)."""
    n, nbytes = mat.shape
    if nbytes != nwords * 8:
        padded = np.zeros((n, nwords * 8), dtype=np.uint8)
        padded[:, :nbytes] = mat[:, : nwords * 8]
        mat = padded
    else:
        mat = np.ascontiguousarray(mat)
    return mat.view("<u8").reshape(n, nwords).astype(np.uint64, copy=False)


def _as_array(items: np.ndarray | Sequence[Any]) -> np.ndarray:
    if isinstance(items, np.ndarray):
        return items.reshape(-1)
    arr = np.asarray(items)
    if arr.dtype.kind in "US":  # a list of str/bytes: keep trailing NULs
        obj = np.empty(len(items), dtype=object)
        obj[:] = list(items)
        return obj
    return arr.reshape(-1)


def _ragged_keys(blobs: Sequence[bytes], str_salt: int) -> np.ndarray:
    """Keys of byte strings at a cost proportional to the bytes present (no padding
    to the longest item): the values are packed back to back, each zero-padded only
    to its own word boundary, and word ``j`` is mixed into the items that have one.
    Items are visited longest first, so step ``j`` touches a prefix of the sorted
    hashes and the total work is the total number of words plus one numpy call per
    word of the longest item.
    """
    n = len(blobs)
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=n)
    nwords = (lengths + 7) >> 3
    words = np.frombuffer(b"".join([b + _ZEROS[-len(b) & 7] for b in blobs]), dtype="<u8")
    starts = np.cumsum(nwords) - nwords
    order = np.argsort(-nwords, kind="stable")
    sorted_words = nwords[order]
    sorted_starts = starts[order]
    h = np.full(n, str_salt, dtype=np.uint64)
    k = int(sorted_words[0]) if n else 0
    active = np.searchsorted(-sorted_words, -np.arange(k), side="left")
    for j in range(k):
        c = int(active[j])
        if c <= _SCALAR_TAIL:  # a few long items left: finish them word by word
            for i in range(c):
                hv, lo = int(h[i]), int(sorted_starts[i])
                hi = lo + int(sorted_words[i])
                for c0 in range(lo + j, hi, 1024):  # bounded temporaries
                    for w in words[c0: min(c0 + 1024, hi)].tolist():
                        hv = fmix64_int(hv ^ w)
                h[i] = hv
            break
        sub = h[:c]
        sub ^= words[sorted_starts[:c] + j]
        fmix64_inplace(sub)
    out = np.empty(n, dtype=np.uint64)
    out[order] = h
    out ^= lengths.astype(np.uint64)
    fmix64_inplace(out)
    return out


_ZEROS = tuple(bytes(i) for i in range(8))
_SCALAR_TAIL = 4
"""Below this many items still having words, :func:`_ragged_keys` finishes them in
plain Python (one numpy call per word costs more than a scalar step)."""
_PAD_FACTOR = 4
"""A fixed-width matrix (padded to the longest item) is used only while its size is
at most this many times the characters present plus 16 per item; otherwise the
ragged path (:func:`_ragged_keys`), whose cost is proportional to the bytes present."""


def _padding_bounded(true_len: np.ndarray) -> bool:
    n = int(true_len.shape[0])
    return n * int(true_len.max()) <= _PAD_FACTOR * (int(true_len.sum()) + 16 * n)


def _object_blobs(items: np.ndarray) -> list[bytes]:
    """UTF-8 bytes of an object array of str (or the bytes themselves); one type per batch."""
    try:
        if isinstance(items[0], str):
            return [s.encode("utf-8") for s in items]
        blobs = list(items)
        if set(map(type, blobs)) - {bytes}:
            raise TypeError("mixed item types")
        return blobs
    except (UnicodeError, TypeError, AttributeError) as exc:
        raise _bad_items(exc) from None


def item_keys(items: np.ndarray | Sequence[Any], int_salt: int, str_salt: int) -> np.ndarray:
    """64-bit keys of ``items`` (see module docstring), ``uint64[n]``.

    Cost and memory are proportional to the bytes present: a fixed-width
    matrix is used only when padding every item to the longest one costs at
    most a constant factor (short items such as IPv4 addresses, the fast
    path), otherwise each item is hashed over its own words only.

    Raises
    ------
    SpecError
        For other dtypes (floats, mixed objects) and str items that are not
        encodable as UTF-8 (lone surrogates).
    """
    arr = _as_array(items)
    kind = arr.dtype.kind
    if kind in "iub":
        keys = arr.astype(np.int64, copy=False).view(np.uint64) ^ np.uint64(int_salt)
        fmix64_inplace(keys)
        return keys
    if kind not in "USO":
        raise SpecError(f"items: unsupported dtype {arr.dtype}; pass integers, str or bytes")
    true_len = _object_lengths(arr) if kind == "O" and arr.shape[0] else None
    if true_len is not None and not _padding_bounded(true_len):
        return _ragged_keys(_object_blobs(arr), str_salt)
    mat, lengths = _byte_matrix(arr, true_len)
    nwords = (lengths + np.uint64(7)) >> np.uint64(3)
    k = int(nwords.max()) if nwords.size else 0
    words = _pack_words(mat, k)
    h = np.full(arr.shape[0], str_salt, dtype=np.uint64)
    t = np.empty_like(h)
    for j in range(k):
        np.bitwise_xor(h, words[:, j], out=t)
        fmix64_inplace(t)
        # only the item's own words count (the matrix is padded to the longest item)
        np.copyto(h, t, where=nwords > np.uint64(j))
    h ^= lengths
    fmix64_inplace(h)
    return h
