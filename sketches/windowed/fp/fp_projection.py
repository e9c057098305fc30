"""Secret p-stable projection columns for the F_p sketch (paper 004, Algorithm 1).

The F_p sketch of Indyk (2006), shown DP "as is" by Wang, Pinelis and Song
(paper 004, Theorem 3), multiplies the frequency vector by a matrix
``P ~ D_{p,1}^{r x m}`` of i.i.d. symmetric p-stable entries. Its whole
privacy rests on ``P`` being **secret** and independent of the data. For a
huge key space ``m`` (IPv4, strings) ``P`` is never materialised: column
``k`` is derived on demand from a 256-bit secret key with a cryptographic
pseudo-random function (PRF), so every shard holding the key derives the
same column.

PRF: the ChaCha20 block function (RFC 8439, section 2.3), vectorised over
numpy ``uint32`` lanes: key = the 32-byte secret, block counter = the block
index inside a column, nonce = (low 32 bits of the item key, high 32 bits of
the item key, domain tag). Each pair of output words gives one uniform double
with 53 random bits in the open interval (0, 1).

p-stable sampler: Chambers-Mallows-Stuck (1976), exact for symmetric laws
(characteristic function ``exp(-|t|^p)``)::

    theta ~ U(-pi/2, pi/2),  W ~ Exp(1)
    p = 1 : X = tan(theta)
    p < 1 : X = sin(p theta) / cos(theta)^(1/p) * (cos((1 - p) theta) / W)^((1 - p) / p)

Examples
--------
>>> import numpy as np
>>> key = bytes(range(32))
>>> cols = stable_columns(key, np.array([7, 7, 8], dtype=np.uint64), p=0.5, rows=4)
>>> cols.shape
(4, 3)
>>> bool(np.array_equal(cols[:, 0], cols[:, 1]))   # same item, same column
True
>>> bool(np.array_equal(cols[:, 0], cols[:, 2]))
False
"""

from __future__ import annotations

import numpy as np

from sketches.errors import SpecError

__all__ = [
    "DATA_TAG",
    "PAD_TAG",
    "chacha20_blocks",
    "stable_columns",
    "stable_from_uniforms",
    "uniforms",
]

#: Nonce domain tag of data columns.
DATA_TAG = 0
#: Nonce domain tag of the public-mass padding column (independent of every data column).
PAD_TAG = 1

_SIGMA = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)
_QR = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
       (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def _rotl(x: np.ndarray, n: int) -> np.ndarray:
    return (x << np.uint32(n)) | (x >> np.uint32(32 - n))


def chacha20_blocks(key: bytes, counters: np.ndarray, nonces: np.ndarray) -> np.ndarray:
    """ChaCha20 block function (RFC 8439 sec. 2.3), one block per lane.

    Parameters
    ----------
    key : bytes
        32-byte secret key.
    counters : numpy.ndarray
        ``uint32[n]`` block counters.
    nonces : numpy.ndarray
        ``uint32[n, 3]`` nonces (little-endian words).

    Returns
    -------
    numpy.ndarray
        ``uint32[n, 16]`` keystream words of each block.

    Examples
    --------
    RFC 8439 section 2.3.2 test vector (first and last output words):

    >>> k = bytes(range(32))
    >>> nonce = np.frombuffer(bytes.fromhex("000000090000004a00000000"), "<u4")
    >>> out = chacha20_blocks(k, np.array([1], np.uint32), nonce[None, :])
    >>> [hex(int(out[0, 0])), hex(int(out[0, 15]))]
    ['0xe4e7f110', '0x4e3c50a2']
    """
    if len(key) != 32:
        raise SpecError("secret key: must be 32 bytes; draw it with noise.random_bytes(32)")
    kw = np.frombuffer(key, dtype="<u4").astype(np.uint32)
    n = int(np.asarray(counters).shape[0])
    init = [np.full(n, c, dtype=np.uint32) for c in _SIGMA]
    init += [np.full(n, w, dtype=np.uint32) for w in kw]
    init.append(np.asarray(counters, dtype=np.uint32))
    nz = np.asarray(nonces, dtype=np.uint32).reshape(n, 3)
    init += [nz[:, 0].copy(), nz[:, 1].copy(), nz[:, 2].copy()]
    x = [a.copy() for a in init]
    for _ in range(10):
        for a, b, c, d in _QR:
            x[a] += x[b]
            x[d] = _rotl(x[d] ^ x[a], 16)
            x[c] += x[d]
            x[b] = _rotl(x[b] ^ x[c], 12)
            x[a] += x[b]
            x[d] = _rotl(x[d] ^ x[a], 8)
            x[c] += x[d]
            x[b] = _rotl(x[b] ^ x[c], 7)
    return np.stack([x[i] + init[i] for i in range(16)], axis=1)


def uniforms(key: bytes, item_keys: np.ndarray, count: int, tag: int = DATA_TAG) -> np.ndarray:
    """``count`` secret uniforms in (0, 1) per item key, ``float64[n, count]``.

    Each uniform uses two PRF words (53 random bits) and is centred in its
    cell, so it is never exactly 0 or 1.

    Examples
    --------
    >>> u = uniforms(bytes(32), np.arange(3, dtype=np.uint64), 5)
    >>> u.shape, bool(((u > 0) & (u < 1)).all())
    ((3, 5), True)
    """
    keys = np.asarray(item_keys, dtype=np.uint64)
    n = keys.shape[0]
    blocks = -(-2 * count // 16)
    lanes_keys = np.repeat(keys, blocks)
    ctr = np.tile(np.arange(blocks, dtype=np.uint32), n)
    nonces = np.empty((n * blocks, 3), dtype=np.uint32)
    nonces[:, 0] = (lanes_keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    nonces[:, 1] = (lanes_keys >> np.uint64(32)).astype(np.uint32)
    nonces[:, 2] = np.uint32(tag)
    words = chacha20_blocks(key, ctr, nonces).reshape(n, blocks * 16)[:, : 2 * count]
    hi = (words[:, 0::2] >> np.uint32(5)).astype(np.float64)   # 27 bits
    lo = (words[:, 1::2] >> np.uint32(6)).astype(np.float64)   # 26 bits
    return (hi * 67108864.0 + lo + 0.5) / 9007199254740992.0


def stable_from_uniforms(u_theta: np.ndarray, u_w: np.ndarray, p: float) -> np.ndarray:
    """Chambers-Mallows-Stuck transform of uniforms to symmetric p-stable values.

    Examples
    --------
    >>> x = stable_from_uniforms(np.array([0.75]), np.array([0.5]), 1.0)  # tan(pi/4)
    >>> round(float(x[0]), 12)
    1.0
    """
    theta = np.pi * (np.asarray(u_theta, dtype=np.float64) - 0.5)
    if p == 1.0:
        return np.tan(theta)
    w = -np.log1p(-np.asarray(u_w, dtype=np.float64))
    # log domain: |X| spans hundreds of orders of magnitude for small p
    log_mag = (np.log(np.abs(np.sin(p * theta)))
               - np.log(np.cos(theta)) / p
               + (1.0 - p) / p * (np.log(np.cos((1.0 - p) * theta)) - np.log(w)))
    return np.sign(theta) * np.exp(log_mag)


def stable_columns(key: bytes, item_keys: np.ndarray, p: float, rows: int,
                   tag: int = DATA_TAG) -> np.ndarray:
    """Columns ``P[:, k]`` of the secret projection for each item key, ``float64[rows, n]``.

    Parameters
    ----------
    key : bytes
        The 32-byte secret (never part of a release).
    item_keys : numpy.ndarray
        ``uint64[n]`` item keys (``HashSpec.item_keys``).
    p : float
        Stability index in [0.1, 1].
    rows : int
        Sketch length ``r``.
    tag : int
        Domain tag (``DATA_TAG`` or ``PAD_TAG``), separating independent column families.
    """
    if not 0.1 <= p <= 1.0:
        raise SpecError(f"p: {p} is outside [0.1, 1]; the F_p sketch is DP only for p <= 1 "
                        "and float64 sampling is reliable for p >= 0.1")
    u = uniforms(key, item_keys, 2 * rows, tag)
    return stable_from_uniforms(u[:, :rows], u[:, rows:], p).T
