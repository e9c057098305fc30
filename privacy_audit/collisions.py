"""Constructing item-key collisions against a public (or known) str key chain.

dpstream keys a str/bytes item of true byte length ``L`` (padded to 8-byte
little-endian words ``w_j``) as ``key = fmix64(h ^ L)`` with ``h = salt``,
``h = fmix64(h ^ w_j)`` (:meth:`sketches.HashSpec.item_keys`). ``fmix64`` is a
bijection, so the chain is invertible: from the key of *one* known string of
at most 8 bytes we recover the salt (no access to the seed expansion needed),
and for any target key we solve for the last word of a 16-byte string whose
first word we choose. Trying random printable first words until the solved
last word is printable too (about ``(256/94)**8`` ~ 3000 tries) yields a
printable colliding string.

The audit uses it for the permanent collision regression tests
(tests/privacy/test_collisions.py): a mechanism that publishes item labels
must never publish the constructed string's label when the stream holds the
target 200 times and the constructed string once (SEMANTICS.md §11).

Examples
--------
>>> from sketches import HashSpec
>>> x = colliding_string(HashSpec(seed=0, depth=1, width=1).item_keys, "10.0.0.1")
>>> len(x), x != "10.0.0.1", x.isprintable()
(16, True, True)
>>> k = HashSpec(seed=0, depth=1, width=1).item_keys(["10.0.0.1", x])
>>> bool(k[0] == k[1])
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["colliding_string", "fmix64", "fmix64_inv", "recover_str_salt"]

_MASK = (1 << 64) - 1
_M1, _M2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_M1_INV, _M2_INV = pow(_M1, -1, 1 << 64), pow(_M2, -1, 1 << 64)
_PRINTABLE = np.frombuffer(bytes(range(0x21, 0x7F)), dtype=np.uint8)

KeyFn = Callable[[Sequence[Any]], np.ndarray]


def fmix64(z: int) -> int:
    """MurmurHash3's 64-bit finaliser (as in dpstream's key chain)."""
    z &= _MASK
    z ^= z >> 33
    z = (z * _M1) & _MASK
    z ^= z >> 33
    z = (z * _M2) & _MASK
    return z ^ (z >> 33)


def fmix64_inv(z: int) -> int:
    """Inverse of :func:`fmix64` (``z ^= z >> 33`` is an involution for shifts >= 32).

    >>> all(fmix64_inv(fmix64(v)) == v for v in (0, 1, 2**63 + 5, 2**64 - 1))
    True
    """
    z &= _MASK
    z ^= z >> 33
    z = (z * _M2_INV) & _MASK
    z ^= z >> 33
    z = (z * _M1_INV) & _MASK
    return z ^ (z >> 33)


def _word(b: bytes) -> int:
    return int.from_bytes(b.ljust(8, b"\0"), "little")


def recover_str_salt(key_fn: KeyFn, probe: str = "a") -> int:
    """The str salt of ``key_fn`` from the key of one string of at most 8 bytes."""
    raw = probe.encode()
    if not 0 < len(raw) <= 8:
        raise ValueError("probe: need a string of 1..8 UTF-8 bytes")
    key = int(key_fn([probe])[0])
    h1 = fmix64_inv(key) ^ len(raw)  # = fmix64(salt ^ w0)
    return fmix64_inv(h1) ^ _word(raw)


def colliding_string(key_fn: KeyFn, target: str, *, seed: int = 0,
                     max_tries: int = 2_000_000) -> str:
    """A printable 16-byte ASCII string whose key under ``key_fn`` equals ``target``'s.

    ``key_fn`` is the item-key function of the attacked chain (e.g.
    ``HashSpec(seed=0, depth=1, width=1).item_keys``). The result is checked
    with ``key_fn`` itself; ``ValueError`` if no string was found.
    """
    salt = recover_str_salt(key_fn)
    goal = int(key_fn([target])[0])
    h2 = fmix64_inv(goal) ^ 16  # state after both words
    pre = fmix64_inv(h2)  # = fmix64(salt ^ w0) ^ w1
    rng = np.random.default_rng(seed)
    prefix = target.encode()[:5] if target.isascii() else b""
    for _ in range(max_tries):
        tail = bytes(rng.choice(_PRINTABLE, 8 - len(prefix)).tolist())
        w0 = prefix + tail
        w1 = (pre ^ fmix64(salt ^ _word(w0))).to_bytes(8, "little")
        if all(0x21 <= c < 0x7F for c in w1):
            out = (w0 + w1).decode("ascii")
            keys = key_fn([target, out])
            if out != target and int(keys[0]) == int(keys[1]):
                return out
    raise ValueError(f"target: no printable collision found in {max_tries} tries")
