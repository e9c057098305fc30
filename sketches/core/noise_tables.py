"""Exact-arithmetic inverse-CDF tables for integer noise (discrete Gaussian, discrete Laplace).

Why a table
-----------
Integer counters get integer noise so that no floating-point value ever touches
private data (Mironov 2012, "On significance of the least significant bits for
differential privacy": textbook floating-point samplers leak through the set of
representable outputs). This module samples a two-sided integer distribution
``P[X = x] ∝ w(x)`` on ``x in [-K, K]`` by inverse transform on a 128-bit
fixed-point CDF table:

1. ``w(x)`` is computed once per parameter with :mod:`decimal` at 60 significant
   digits by an exact recurrence run from the far end ``x = K`` down to ``0``;
   the tail sums ``S(j) = sum_{i >= j} w(i)`` are accumulated in that order (sums
   of positive terms: no cancellation, never negative, for every supported
   parameter), normalised, and each CDF value ``F(x)`` is stored as the integer
   ``floor(F(x) * 2**128)`` split into a high and a low 64-bit word.
2. A sample draws a uniform 128-bit integer ``u`` (the high word up front; the
   low word only for the rare draws whose high word ties with a table word) and
   returns the number of table entries ``<= u``. Only integer comparisons run
   per sample, so the output set and the sampling path are independent of any
   floating-point rounding.

Statistical distance (documented bound, stored in ``IntegerTable.tv_bound``)
--------------------------------------------------------------------------
Let ``P`` be the exact (untruncated) distribution, ``P_K`` its restriction to
``[-K, K]`` (renormalised) and ``P̂`` the sampled one. Each stored CDF value is
off by less than ``2**-128`` (floor) plus the Decimal error: each weight has
relative error at most ``(K**2 + 4K) * 10**-59`` (``K`` products, each ratio with
``<= 2K`` roundings), each sum adds ``K * 10**-59``, so the error is below
``2**-150`` for ``K <= 2**21``; in all under ``2**-127``. Each ``P̂(x)`` is a
difference of two such values, hence ``TV(P̂, P_K) <= (2K+1) * 2**-127``.
``K`` is chosen so that ``TV(P_K, P) = P[|X| > K] < 2**-130``. So
``TV(P̂, P) <= (2K+1) * 2**-127 + 2**-130 < 2**-104`` for every table this
module builds (``K <= 2**21``). Over ``n`` samples the joint distance is at most
``n`` times that, i.e. negligible next to any ``delta``
(``10**12`` samples still give ``< 2**-60``).

Examples
--------
>>> t = discrete_gaussian_table(3.0)
>>> int(t.offset) < 0 < int(t.hi.size)
True
>>> t.tv_bound < 2.0**-100
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import MIN_EMIN, ROUND_FLOOR, Decimal, Inexact, localcontext
from functools import lru_cache

import numpy as np

from sketches.core.noise_kernel import table_search, table_search_prefix
from sketches.errors import SpecError

#: Largest table half-width K built (memory 32 bytes * K; sigma up to about 1.56e5).
MAX_HALF_WIDTH = 1 << 21
_TAIL_BITS = 130  # tail mass target 2**-130
_PREC = 60  # decimal digits for the table computation
_K_PER_SIGMA = math.sqrt(2 * _TAIL_BITS * math.log(2))  # K = ceil(sigma * this) + 1
_K_PER_SCALE = _TAIL_BITS * math.log(2)  # K = ceil(scale * this) + 1
#: Smallest supported sigma / scale (the smallest weight must not underflow).
MIN_DISCRETE_SCALE = 1e-3
#: Largest sigma whose discrete-Gaussian table has ``K <= MAX_HALF_WIDTH`` (larger sigma:
#: two composed tables, :mod:`sketches.core.noise_compose`).
MAX_TABLE_SIGMA = (MAX_HALF_WIDTH - 2) / _K_PER_SIGMA
#: The documented per-sample TV bound of every table this module builds (module docstring).
TABLE_TV_BOUND = 2.0**-104
#: Largest discrete-Laplace scale whose table has ``K <= MAX_HALF_WIDTH``.
MAX_DISCRETE_LAPLACE_SCALE = (MAX_HALF_WIDTH - 2) / _K_PER_SCALE

U64Source = Callable[[int], np.ndarray]


_KERNEL_SEARCH_MIN = 256
"""Draws from which :meth:`IntegerTable.sample` searches with the compiled guided kernel."""
_GUIDE_BITS_MAX = 20  # guide of at most 2**20 + 1 uint32 (4 MB, for tables of >= 2**20)


@dataclass(frozen=True, eq=False)
class IntegerTable:
    """A sorted 128-bit CDF table of an integer distribution on ``[offset, -offset]``.

    Attributes
    ----------
    offset:
        The smallest support point ``-K``; sample index ``j`` means value ``offset + j``.
    hi, lo:
        uint64 arrays of length ``2K``: high and low words of ``floor(F(x) * 2**128)``
        for ``x = -K .. K-1`` (``F(K) = 1`` is implicit).
    tv_bound:
        Upper bound on the total-variation distance between one sample and the
        exact untruncated distribution (see module docstring).
    guide, guide_shift:
        Search accelerator (derived from ``hi``, no effect on the samples):
        ``guide[b]`` is the first index whose high word has top bits ``>= b``
        (``b = word >> guide_shift``, about one bucket per entry, at most
        ``2**20``); :func:`sketches.core.noise_kernel.table_search` searches
        only inside a draw's bucket.
    """

    offset: int
    hi: np.ndarray
    lo: np.ndarray
    tv_bound: float
    guide: np.ndarray = field(init=False, repr=False)
    guide_shift: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        bits = min(_GUIDE_BITS_MAX, max(1, int(self.hi.size).bit_length()))
        starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
        guide = np.empty((1 << bits) + 1, dtype=np.uint32)
        guide[:-1] = self.hi.searchsorted(starts, side="left")
        guide[-1] = self.hi.size
        object.__setattr__(self, "guide", guide)
        object.__setattr__(self, "guide_shift", 64 - bits)

    def sample(self, u_hi: np.ndarray, draw_u64: U64Source) -> np.ndarray:
        """Map uniform 64-bit high words to samples; ``draw_u64(n)`` supplies low words on ties.

        Parameters
        ----------
        u_hi:
            uint64 array of independent uniform words (the high half of ``u``).
        draw_u64:
            Callable returning ``n`` fresh independent uniform uint64 words. Only
            called for draws whose high word equals a table high word
            (probability about ``2K * 2**-64`` per draw).

        Returns
        -------
        numpy.ndarray
            int64 samples, same shape as ``u_hi``.
        """
        flat = np.ascontiguousarray(u_hi, dtype=np.uint64).reshape(-1)
        if flat.size >= _KERNEL_SEARCH_MIN:
            # the same indices as the search below, in compiled code through the guide:
            # one or two table reads per draw instead of a binary search over the whole
            # table (1M draws at sigma 1.56e5: ~60M/s against 4.6M/s for numpy's search
            # of the sorted words that this replaced)
            idx = np.empty(flat.size, dtype=np.int64)
            tie = np.empty(flat.size, dtype=np.bool_)
            table_search(self.hi, self.guide, self.guide_shift, flat, idx, tie)
        else:
            idx = self.hi.searchsorted(flat, side="right").astype(np.int64, copy=False)
            # entries with hi == u_hi are ambiguous: resolve with the low word
            tie = (idx > 0) & (self.hi[np.maximum(idx - 1, 0)] == flat)
        if tie.any():
            where = np.flatnonzero(tie)
            u_lo = draw_u64(where.size)
            for k, pos in enumerate(where.tolist()):
                h = flat[pos]
                first = int(np.searchsorted(self.hi, h, side="left"))
                last = int(idx[pos])
                # count table entries (h, lo) <= (h, u_lo) inside the tie run
                idx[pos] = first + int(np.count_nonzero(self.lo[first:last] <= u_lo[k]))
        out = idx
        out += self.offset
        return out.reshape(u_hi.shape)

    def draw(self, draw_u64: U64Source, n: int) -> np.ndarray:
        """``n`` int64 samples: ``self.sample(draw_u64(n), draw_u64)``."""
        return self.sample(draw_u64(n), draw_u64)

    def draw32(self, draw_u64: U64Source, n: int) -> np.ndarray:
        """``n`` int64 samples with the same law as :meth:`draw`, reading 32 bits first.

        Each sample is the same inverse-CDF function of a uniform 128-bit ``u`` as
        :meth:`sample`; its bits are read lazily: the top 32 (half a word from
        ``draw_u64``) decide the sample unless a table word shares them (probability
        about ``2K / 2^32``); only then are the next 32 bits drawn (the low half of a
        fresh word) and the full 64-bit word searched, the low 64 bits drawn on a tie as
        in :meth:`sample`. Every bit read is a fresh uniform bit and the decision to read
        more depends only on bits already read, so the samples are i.i.d. with the
        table's law (docs/PRIVACY.md 13.1, "Sampler"). Half the random words of
        :meth:`draw`; used by the lattice counter (``counter: blt_int``), whose draws are
        bound by the OS CSPRNG's throughput.

        Examples
        --------
        >>> from sketches.core.noise import FastNoise
        >>> t = discrete_gaussian_table(2.0)
        >>> x = t.draw32(FastNoise(1)._u64, 100_000)
        >>> bool(abs(x.std() - 2.0) < 0.05), x.dtype.name
        (True, 'int64')
        """
        return self.draw_lazy(draw_u64, n, 32)

    def draw_lazy(self, draw_u64: U64Source, n: int, bits: int = 32) -> np.ndarray:
        """:meth:`draw32` with the first read ``bits`` (16 or 32) wide; 16 needs a table
        of at most ``2^16`` entries (its guide has at most 16 bits), else 32 is used. A
        16-bit read is open (reads the rest of the word) with probability the share of
        16-bit buckets holding a CDF boundary, ``2K / 2^16`` at most (6.3% at sigma 684,
        the LazyHH lattice's composed tables, where the bound says 28%).

        >>> from sketches.core.noise import FastNoise
        >>> x = discrete_gaussian_table(300.0).draw_lazy(FastNoise(1)._u64, 100_000, 16)
        >>> bool(abs(x.std() - 300.0) < 5)
        True
        """
        if bits not in (16, 32):
            raise SpecError(f"bits: 16 or 32, got {bits!r}")
        if bits == 16 and self.guide_shift < 48:
            bits = 32
        dtype = np.uint16 if bits == 16 else np.uint32
        per = 64 // bits
        words = draw_u64((n + per - 1) // per).view(dtype)[:n]
        idx = np.empty(n, dtype=np.int64)
        opened = np.empty(n, dtype=np.bool_)
        if table_search_prefix(self.hi, self.guide, self.guide_shift, words, bits, idx,
                               opened):
            where = np.flatnonzero(opened)
            rest = 64 - bits
            low = draw_u64(where.size) & np.uint64((1 << rest) - 1)
            full = (words[where].astype(np.uint64) << np.uint64(rest)) | low
            idx[where] = self.sample(full, draw_u64) - self.offset
        idx += self.offset
        return idx


def validate_table_sigma(sigma: float, *, build: bool = False) -> float:
    """Check that ``sigma`` fits one discrete-Gaussian table; optionally build it.

    The table range is ``MIN_DISCRETE_SCALE <= sigma <= MAX_TABLE_SIGMA`` (about
    ``1e-3 .. 1.56e5``). Below, the table's smallest weight underflows the
    decimal exponent range (and the noise is ``0`` with probability ``1 -
    2e^{-500000}`` anyway); above, the table would exceed ``MAX_HALF_WIDTH``
    entries. Larger sigma are sampled by composing two tables
    (:mod:`sketches.core.noise_compose`, whose
    :func:`~sketches.core.noise_compose.validate_discrete_sigma` is the check
    sketches call).

    Returns
    -------
    float
        ``sigma`` as a float.

    Raises
    ------
    SpecError
        For a sigma outside the table range (the message names the fix).

    Examples
    --------
    >>> validate_table_sigma(2.5)
    2.5
    >>> try:
    ...     validate_table_sigma(1e6)
    ... except SpecError as err:
    ...     print("raise eps" in str(err))
    True
    """
    s = check_noise_range("sigma", sigma, MAX_TABLE_SIGMA)
    if build:
        discrete_gaussian_table(s)
    return s


def validate_discrete_laplace_scale(scale: float, *, build: bool = False) -> float:
    """Like :func:`validate_table_sigma` for the discrete Laplace ``scale``.

    Examples
    --------
    >>> validate_discrete_laplace_scale(0.5, build=True)
    0.5
    """
    b = check_noise_range("scale", scale, MAX_DISCRETE_LAPLACE_SCALE)
    if build:
        discrete_laplace_table(b)
    return b


def check_noise_range(
    name: str, value: float, largest: float, limit: str = f"table limit K <= {MAX_HALF_WIDTH}"
) -> float:
    """``float(value)`` if ``MIN_DISCRETE_SCALE <= value <= largest``, else a :class:`SpecError`
    naming the fix (``limit`` says where ``largest`` comes from)."""
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise SpecError(f"{name}: must be a finite number > 0, got {value!r}")
    if v < MIN_DISCRETE_SCALE:
        raise SpecError(
            f"{name}: {v:g} is below the smallest supported integer-noise {name} "
            f"{MIN_DISCRETE_SCALE:g}; lower eps (such a tiny {name} adds no noise anyway)"
        )
    if v > largest:
        raise SpecError(
            f"{name}: {v:g} exceeds the largest supported integer-noise {name} {largest:.6g} "
            f"({limit}); lower it: raise eps or delta, lower the "
            "unit cap, the sketch depth or the rounds per epoch"
        )
    return v


def _build_table(k: int, weights: Callable[[], Iterator[Decimal]], tail: Decimal) -> IntegerTable:
    """Build the symmetric CDF table from a re-iterable ``w(K), w(K-1), ..., w(0)``.

    Two passes over the weights, both from the far end (no per-entry Python
    objects are kept, so memory is the two uint64 arrays). The tail sums
    ``S(j) = sum_{j <= i <= K} w(i)`` are *accumulated* from ``j = K`` down:
    a sum of positive terms, so every ``S(j)`` has a small relative error and is
    never negative, however small ``sigma`` is (computing ``S(j)`` by
    subtracting from the half sum cancels catastrophically). The second pass
    writes ``F(-j) = S(j)/Z`` and ``F(j-1) = 1 - S(j)/Z`` (symmetry), with ``Z =
    w(0) + 2 S(1)``. Correctly rounded decimal operations are monotone, so the
    stored words are sorted (checked). ``tail`` bounds ``sum_{|x| > K} w(x)``.
    """
    hi = np.empty(2 * k, dtype=np.uint64)
    lo = np.empty(2 * k, dtype=np.uint64)
    mask = (1 << 64) - 1
    top = (1 << 128) - 1
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = _PREC, MIN_EMIN  # no underflow of tiny weights
        half_sum = Decimal(0)
        it = weights()
        for _, w in zip(range(k), it, strict=False):
            half_sum += w
        total = next(it) + 2 * half_sum  # w(0) + 2 S(1)
        scale = Decimal(2) ** 128 / total
        tail_sum = Decimal(0)
        it = weights()
        for j, w in zip(range(k, 0, -1), it, strict=False):
            tail_sum += w  # S(j)
            left = min(int((tail_sum * scale).to_integral_value(rounding=ROUND_FLOOR)), top)
            right = min(
                int(((total - tail_sum) * scale).to_integral_value(rounding=ROUND_FLOOR)), top
            )
            hi[k - j], lo[k - j] = left >> 64, left & mask
            hi[k + j - 1], lo[k + j - 1] = right >> 64, right & mask
        tail_rel = float(tail / total)
    if not _is_sorted(hi, lo):  # pragma: no cover - impossible by monotone rounding
        raise RuntimeError("integer-noise table is not sorted; please report this sigma/scale")
    tv = (2 * k + 1) * 2.0**-127 + tail_rel
    return IntegerTable(offset=-k, hi=hi, lo=lo, tv_bound=tv)


def _is_sorted(hi: np.ndarray, lo: np.ndarray) -> bool:
    """Whether the 128-bit words ``(hi, lo)`` are non-decreasing."""
    dh = hi[1:] >= hi[:-1]
    up = hi[1:] > hi[:-1]
    return bool(dh.all() and (up | (lo[1:] >= lo[:-1])).all())


@lru_cache(maxsize=32)
def discrete_gaussian_table(sigma: float) -> IntegerTable:
    """Table for the discrete Gaussian ``N_Z(0, sigma^2)``: ``P[x] ∝ exp(-x^2 / (2 sigma^2))``.

    Canonne, Kamath & Steinke (2020), Definition 1. ``K = ceil(sigma * sqrt(2 *
    130 * ln 2)) + 1`` so the (geometric-series bounded) tail mass is below
    ``2**-130``. ``sigma`` means the decimal ``repr(sigma)`` (its square is exact
    in the 60-digit context). Built once per sigma (cached).

    Examples
    --------
    >>> t = discrete_gaussian_table(1.0)
    >>> t.offset
    -15
    """
    sigma = validate_table_sigma(sigma)
    k = math.ceil(sigma * _K_PER_SIGMA) + 1
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = _PREC, MIN_EMIN
        s2 = Decimal(repr(sigma)) ** 2
    return _gaussian_table(s2, k)


@lru_cache(maxsize=32)
def discrete_gaussian_variance_table(variance: str) -> IntegerTable:
    """Like :func:`discrete_gaussian_table` for the exact decimal variance ``sigma^2 = variance``.

    Used where a variance is the exact difference of two others (the fine table of
    :mod:`sketches.core.noise_compose`), which is in general not the square of a
    short decimal. ``variance`` must be exact in 60 digits (checked).

    Examples
    --------
    >>> discrete_gaussian_variance_table("1").offset == discrete_gaussian_table(1.0).offset
    True
    """
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = _PREC, MIN_EMIN
        ctx.traps[Inexact] = True  # the variance is used exactly or not at all
        s2 = +Decimal(variance)
    if not s2 > 0:
        raise SpecError(f"variance: must be > 0, got {variance!r}")
    sigma = validate_table_sigma(math.sqrt(float(s2)))
    # float sqrt may be a few ulps low: the + 1 more than covers it (tail still < 2**-130)
    k = math.ceil(sigma * _K_PER_SIGMA) + 1
    return _gaussian_table(s2, k)


def _gaussian_table(s2: Decimal, k: int) -> IntegerTable:
    """The table of ``P[x] ∝ exp(-x^2 / (2 s2))`` on ``[-k, k]``."""
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = _PREC, MIN_EMIN  # no underflow of tiny weights
        q = (Decimal(-1) / s2).exp()  # exp(-1/sigma^2)
        w_k = (-(Decimal(k) ** 2) / (2 * s2)).exp()  # w(K) = exp(-K^2 / (2 sigma^2))
        r_k = ((2 * Decimal(k) - 1) / (2 * s2)).exp()  # w(K-1)/w(K)
        # tail: sum_{|x|>K} w(x) <= 2 w(K+1) / (1 - exp(-(K+1)/sigma^2))
        w_next = (-((Decimal(k) + 1) ** 2) / (2 * s2)).exp()
        tail = 2 * w_next / (1 - (-(Decimal(k) + 1) / s2).exp())

    def weights() -> Iterator[Decimal]:
        w, r = w_k, r_k
        yield w
        while True:  # w(x-1) = w(x) * exp((2x-1)/(2 sigma^2)); the ratio shrinks by q
            w = w * r
            r = r * q
            yield w

    return _build_table(k, weights, tail)


@lru_cache(maxsize=32)
def discrete_laplace_table(scale: float) -> IntegerTable:
    """Table for the discrete Laplace (two-sided geometric): ``P[x] ∝ exp(-|x| / scale)``.

    Canonne, Kamath & Steinke (2020), Definition 28 (``t = scale``). ``K =
    ceil(130 * ln 2 * scale) + 1``; tail ``2 * w(K+1) / (1 - exp(-1/scale))``.

    Examples
    --------
    >>> discrete_laplace_table(1.0).offset
    -92
    """
    scale = validate_discrete_laplace_scale(scale)
    k = math.ceil(scale * _K_PER_SCALE) + 1
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = _PREC, MIN_EMIN  # no underflow of tiny weights
        b = Decimal(repr(scale))
        up = (Decimal(1) / b).exp()  # w(x-1)/w(x) = exp(1/scale)
        w_k = (-Decimal(k) / b).exp()
        tail = 2 * (-(Decimal(k) + 1) / b).exp() / (1 - 1 / up)

    def weights() -> Iterator[Decimal]:
        w = w_k
        yield w
        while True:
            w = w * up
            yield w

    return _build_table(k, weights, tail)
