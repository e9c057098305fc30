"""A secret keyed PRF for item keys: SipHash-2-4, vectorised over a batch (numpy).

Why: a mechanism whose privacy proof needs distinct items to get unrelated
keys that the adversary cannot predict (LazyHH, paper 002 Lemma 6; SEMANTICS.md
§11) must not key str/bytes items with a public or merely salted
invertible chain: whoever knows (or can probe) the chain can build a second
string with the same 64-bit key. SipHash-2-4 (Aumasson and Bernstein,
"SipHash: a fast short-input PRF", INDOCRYPT 2012) is a pseudorandom function
keyed by 128 secret bits with a 64-bit output, designed for exactly this use
(hash-flooding resistance). With a uniformly random secret key, two fixed
distinct byte strings share a key with probability ``2**-64`` (up to the PRF
advantage, negligible), so among ``N`` distinct items *any* collision has
probability at most ``N (N - 1) / 2**65``; a mechanism adds that to its
``delta`` (:func:`collision_bound`).

Definition: the reference SipHash-2-4 of the item's exact bytes (str as
UTF-8; trailing NUL bytes count), key = 16 bytes, output read as a
little-endian uint64. Checked against the reference test vectors and a scalar
implementation (``tests/unit/sketches/continual/lazy_hh/test_keyed_items.py``).

Vectorisation: the items' bytes are laid out in one flat buffer, each item
padded to its own ``ceil((L + 1) / 8)`` words (the last one carries ``L mod
256`` in its top byte, as in the reference), so memory and work are
proportional to the bytes present, never to the longest item times the batch
size. Items are processed longest first so that word ``j`` is one contiguous
prefix slice of the state arrays.

Examples
--------
>>> key = bytes(range(16))
>>> hex(int(siphash24(key, [bytes(range(15))])[0]))
'0xa129ca6149be45e5'
>>> bool(siphash24(key, ["10.0.0.1"])[0] == siphash24(key, [b"10.0.0.1"])[0])
True
>>> collision_bound(10**7) < 2.8e-6
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sketches.errors import SpecError

__all__ = ["KEY_BYTES", "collision_bound", "item_bytes", "siphash24", "siphash24_multi",
           "siphash24_scalar"]

KEY_BYTES = 16
_MASK64 = (1 << 64) - 1
_C = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def collision_bound(n_items: int) -> float:
    """Probability bound that any two of ``n_items`` distinct items share a key: ``n(n-1)/2**65``.

    Examples
    --------
    >>> collision_bound(1), collision_bound(2) == 2**-64
    (0.0, True)
    """
    n = max(int(n_items), 0)
    return n * (n - 1) / 2.0**65


def item_bytes(items: np.ndarray | Sequence[Any]) -> list[bytes]:
    """The exact bytes of str (UTF-8) / bytes items; raises SpecError for other types.

    Fixed-width numpy ``S``/``U`` arrays have already lost trailing NULs when
    they were built (numpy strips them); pass object arrays or lists to keep them.

    Examples
    --------
    >>> item_bytes(["a\\x00", b"b"])
    [b'a\\x00', b'b']
    """
    arr = items if isinstance(items, np.ndarray) else None
    values = arr.reshape(-1).tolist() if arr is not None else list(items)
    try:
        if arr is not None and arr.dtype.kind == "U":
            return [s.encode("utf-8") for s in values]
        if arr is not None and arr.dtype.kind == "S":
            return values
        return [x.encode("utf-8") if isinstance(x, str) else _exact(x) for x in values]
    except UnicodeError as exc:
        raise SpecError(f"items: a str item is not encodable as UTF-8 ({exc}); drop or "
                        "re-encode it") from None


def _exact(x: Any) -> bytes:
    if isinstance(x, bytes | bytearray | memoryview):
        return bytes(x)
    raise SpecError(f"items: expected str or bytes items, got {type(x).__name__}; use "
                    "item_kind 'int' for integers or convert the items to str")


def _rotl(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    np.right_shift(x, np.uint64(64 - r), out=tmp)
    np.left_shift(x, np.uint64(r), out=x)
    np.bitwise_or(x, tmp, out=x)


def _round(v0: np.ndarray, v1: np.ndarray, v2: np.ndarray, v3: np.ndarray,
           tmp: np.ndarray) -> None:
    v0 += v1
    _rotl(v1, 13, tmp)
    v1 ^= v0
    _rotl(v0, 32, tmp)
    v2 += v3
    _rotl(v3, 16, tmp)
    v3 ^= v2
    v0 += v3
    _rotl(v3, 21, tmp)
    v3 ^= v0
    v2 += v1
    _rotl(v1, 17, tmp)
    v1 ^= v2
    _rotl(v2, 32, tmp)


def siphash24(key: bytes, items: np.ndarray | Sequence[Any]) -> np.ndarray:
    """SipHash-2-4 of every item's exact bytes under the 16-byte ``key``, ``uint64[n]``.

    Raises
    ------
    SpecError
        A key that is not 16 bytes, or items that are not str/bytes.
    """
    return siphash24_multi((key,), items)[0]


def siphash24_multi(keys: Sequence[bytes], items: np.ndarray | Sequence[Any]) -> np.ndarray:
    """:func:`siphash24` of the items under each of ``keys``: ``uint64[len(keys), n]``.

    The items are encoded and laid out once for all keys (the costly part).

    Examples
    --------
    >>> k1, k2 = bytes(range(16)), bytes(16)
    >>> two = siphash24_multi([k1, k2], ["a", b"bc"])
    >>> two[1].tolist() == siphash24(k2, ["a", b"bc"]).tolist()
    True
    """
    for key in keys:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise SpecError(f"key: SipHash needs a {KEY_BYTES}-byte secret key; draw it with "
                            f"noise.random_bytes({KEY_BYTES})")
    data = item_bytes(items)
    n = len(data)
    if n == 0:
        return np.zeros((len(keys), 0), np.uint64)
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    nwords = lengths // 8 + 1  # the last word carries the length byte
    order = np.argsort(-nwords, kind="stable")  # longest first: word j = a prefix slice
    nw_sorted = nwords[order]
    starts = np.zeros(n, np.int64)  # first word of each item in the flat buffer
    np.cumsum(nwords[:-1], out=starts[1:])
    buf = np.zeros(int(nwords.sum()) * 8, dtype=np.uint8)
    blob = np.frombuffer(b"".join(data), dtype=np.uint8)
    if blob.size:
        src_start = np.zeros(n, np.int64)
        np.cumsum(lengths[:-1], out=src_start[1:])
        dest = np.repeat(starts * 8 - src_start, lengths) + np.arange(blob.size)
        buf[dest] = blob
    buf[(starts + nwords) * 8 - 1] = (lengths & 0xFF).astype(np.uint8)
    words = buf.view("<u8").astype(np.uint64, copy=False)
    base = starts[order]
    result = np.empty((len(keys), n), np.uint64)
    for i, key in enumerate(keys):
        result[i, order] = _sip_rounds(key, words, base, nw_sorted)
    return result


def _sip_rounds(key: bytes, words: np.ndarray, base: np.ndarray,
                nw_sorted: np.ndarray) -> np.ndarray:
    n = base.size
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:], "little")
    v0 = np.full(n, k0 ^ _C[0], np.uint64)
    v1 = np.full(n, k1 ^ _C[1], np.uint64)
    v2 = np.full(n, k0 ^ _C[2], np.uint64)
    v3 = np.full(n, k1 ^ _C[3], np.uint64)
    tmp = np.empty(n, np.uint64)
    active = n
    for j in range(int(nw_sorted[0])):
        while active and nw_sorted[active - 1] <= j:
            active -= 1  # items with fewer words are done (nw_sorted is non-increasing)
        a = active
        m = words[base[:a] + j]
        s0, s1, s2, s3, t = v0[:a], v1[:a], v2[:a], v3[:a], tmp[:a]
        s3 ^= m
        _round(s0, s1, s2, s3, t)
        _round(s0, s1, s2, s3, t)
        s0 ^= m
    v2 ^= np.uint64(0xFF)
    for _ in range(4):
        _round(v0, v1, v2, v3, tmp)
    return v0 ^ v1 ^ v2 ^ v3


def siphash24_scalar(key: bytes, data: bytes) -> int:
    """Plain-Python reference SipHash-2-4 (tests; slow).

    Examples
    --------
    >>> hex(siphash24_scalar(bytes(range(16)), b""))
    '0x726fdb47dd0e0e31'
    """
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:16], "little")
    v = [k0 ^ _C[0], k1 ^ _C[1], k0 ^ _C[2], k1 ^ _C[3]]

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & _MASK64

    def rnd() -> None:
        v[0] = (v[0] + v[1]) & _MASK64
        v[1] = rotl(v[1], 13) ^ v[0]
        v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & _MASK64
        v[3] = rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & _MASK64
        v[3] = rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & _MASK64
        v[1] = rotl(v[1], 17) ^ v[2]
        v[2] = rotl(v[2], 32)

    tail = len(data) % 8
    for i in range(0, len(data) - tail, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    m = int.from_bytes(data[len(data) - tail:], "little") | ((len(data) & 0xFF) << 56)
    v[3] ^= m
    rnd()
    rnd()
    v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]
