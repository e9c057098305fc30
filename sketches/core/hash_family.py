"""The row hash family of :class:`sketches.core.hashing.HashSpec` (normative definition).

Family: vector multiply-add-shift (Dietzfelbinger, STACS 1996; stated for
vectors in M. Thorup, *High Speed Hashing for Integers and Strings*,
arXiv:1504.06804, Section 3.3). Split the key into 32-bit limbs
``x = (x_lo, x_hi)``; with ``a, a', b`` uniform in ``[2**64]``::

    H(x) = ((a * x_lo + a' * x_hi + b) mod 2**64) >> (64 - l)

is *strongly universal* onto ``[2**l]`` for ``l <= 33`` (Thorup's condition
``wbar >= w + l - 1`` with limb width ``w = 32``, ``wbar = 64``): for keys
``x != y`` the pair ``(H(x), H(y))`` is uniform on ``[2**l]**2``. Rows use
independent ``(a, a', b)``, so rows are mutually independent.

- bucket: ``z = H(x)`` with ``l = 32``; ``bucket = (z * width) >> 32``. For a
  power-of-two width this is exactly uniform and pairwise independent. For
  other widths every bucket has ``floor`` or ``ceil`` of ``2**32 / width``
  preimages, so ``P[bucket = j] <= 1/width + 2**-32`` and, for ``x != y``,
  ``P[h(x) = j, h(y) = j'] <= (1/width + 2**-32)**2`` (bias bound: add
  ``2**-32`` to every ``1/width`` of an analysis; Lemma 6 uses ``1/k~``).
- sign: a second, independent row hash ``H'`` (own ``(c, c', e)``), ``l = 1``:
  ``sign = +1`` if the top bit of ``c x_lo + c' x_hi + e`` is 0, else ``-1``.

Parameters. ``2 + 6 d`` uint64 words ``u_0, u_1, ...``: ``int_salt = u_0``,
``str_salt = u_1`` (item keys, :mod:`sketches.core.hash_keys`), and for row ``i``
``(a, a', b, c, c', e) = u_{2+6i} .. u_{7+6i}``. From a public integer
``seed`` (seed expansion, recomputable by any reader):
``u = SHAKE-256(b"dpstream-hash-v2" || uint64_le(seed mod 2**64))`` read as
little-endian uint64 words (:func:`expand_seed`); secret random words come
from :meth:`sketches.core.hashing.HashSpec.random`.

Examples
--------
>>> import numpy as np
>>> p = np.array(expand_seed(7, n_params(1)), dtype=np.uint64)
>>> lo, hi = limbs(np.arange(5, dtype=np.uint64))
>>> out, sgn = np.empty(5, np.int64), np.empty(5, np.int8)
>>> eval_row(p, 16, lo, hi, 0, out, sgn, np.empty(5, np.uint64))
>>> bool(((out >= 0) & (out < 16)).all()), bool(np.isin(sgn, [-1, 1]).all())
(True, True)
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["eval_row", "expand_seed", "limbs", "n_params"]

_SEED_TAG = b"dpstream-hash-v2"
_S32 = np.uint64(32)
_S63 = np.uint64(63)
_LO32 = np.uint64(0xFFFFFFFF)
_MASK64 = (1 << 64) - 1


def n_params(depth: int) -> int:
    """Number of uint64 parameter words of a depth-``d`` spec: ``2 + 6 d``."""
    return 2 + 6 * int(depth)


def expand_seed(seed: int, n: int) -> tuple[int, ...]:
    """Documented seed expansion: ``n`` uint64 words of SHAKE-256 (see module docstring).

    Examples
    --------
    >>> expand_seed(1, 3) == expand_seed(1, 8)[:3]
    True
    """
    msg = _SEED_TAG + (int(seed) & _MASK64).to_bytes(8, "little")
    raw = hashlib.shake_256(msg).digest(8 * n)
    return tuple(int(x) for x in np.frombuffer(raw, dtype="<u8"))


def limbs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x_lo, x_hi)``: the 32-bit limbs of uint64 keys, as uint64 arrays."""
    keys = np.asarray(keys, dtype=np.uint64)
    return keys & _LO32, keys >> _S32


def _mas(lo: np.ndarray, hi: np.ndarray, abc: np.ndarray, out: np.ndarray,
         tmp: np.ndarray) -> None:
    """``out = a*lo + a'*hi + b`` (mod 2**64), in place."""
    np.multiply(lo, abc[0], out=out)
    np.multiply(hi, abc[1], out=tmp)
    out += tmp
    out += abc[2]


def eval_row(
    params: np.ndarray, width: int, lo: np.ndarray, hi: np.ndarray, row: int,
    out: np.ndarray, signs_out: np.ndarray | None, tmp: np.ndarray,
) -> None:
    """Row ``row``'s buckets of the keys with limbs ``(lo, hi)`` into ``out``, in place.

    ``params`` are the ``2 + 6 d`` uint64 words; ``out`` is int64 or uint64 of
    shape (n,); ``signs_out`` (any numeric dtype, optional) receives the row's
    signs; ``tmp`` is a uint64 work array of shape (n,).
    """
    y = out.view(np.uint64)
    if signs_out is not None:
        _mas(lo, hi, params[5 + 6 * row: 8 + 6 * row], y, tmp)
        y >>= _S63
        signs_out[...] = y
        signs_out *= -2
        signs_out += 1
    _mas(lo, hi, params[2 + 6 * row: 5 + 6 * row], y, tmp)
    y >>= _S32
    y *= np.uint64(width)
    y >>= _S32
