"""Integer noise tables (``sketches/core/noise_tables.py``): the 128-bit inverse-CDF lookup
at the exact boundaries (issue 24: a tie on the high word, resolved with the low word, is
reached with probability ~2^-60 per draw, so no random test ever exercised it)."""

from __future__ import annotations

import math
from decimal import MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

import numpy as np
import pytest

from sketches.core.noise_tables import (
    IntegerTable,
    _is_sorted,
    discrete_gaussian_table,
    discrete_laplace_table,
    validate_discrete_laplace_scale,
    validate_table_sigma,
)
from sketches.errors import SpecError


def test_a_uniform_equal_to_a_cdf_entry_maps_above_it_on_both_words() -> None:
    """``sample`` returns ``offset + #{x : F(x) <= u}`` with ``u = (u_hi, u_lo)`` and
    ``F(x) = (hi, lo)`` compared as 128-bit numbers. Table: F(-1) = (5, 10), F(0) = (5, 20),
    F(1) = (9, 0). A ``u`` equal to an entry counts it (``<=``), on the low word (a tie of
    high words) as on the high word."""
    table = IntegerTable(offset=-1, hi=np.array([5, 5, 9], dtype=np.uint64),
                         lo=np.array([10, 20, 0], dtype=np.uint64), tv_bound=0.0)

    def sample(u_hi: int, u_lo: int) -> int:
        return int(table.sample(np.array([u_hi], dtype=np.uint64),
                                lambda n: np.full(n, u_lo, dtype=np.uint64))[0])

    assert sample(4, 0) == -1          # below every entry
    assert sample(5, 9) == -1          # tie on hi, below F(-1) on lo
    assert sample(5, 10) == 0          # exactly F(-1): counted
    assert sample(5, 19) == 0
    assert sample(5, 20) == 1          # exactly F(0): counted
    assert sample(9, 0) == 2           # exactly F(1) (high word 9, low 0)
    assert sample(2**64 - 1, 0) == 2   # above every entry


def test_the_guided_kernel_equals_numpys_search_at_every_boundary(monkeypatch) -> None:
    """The compiled guided search (batches of >= ``_KERNEL_SEARCH_MIN`` draws) returns the same
    samples as numpy's ``searchsorted`` for high words at every kind of boundary: equal to a
    table word (a tie: the low word decides), one above or below it, at a guide bucket's
    first word and one below it, 0 and 2**64 - 1; and the same low words are consumed."""
    from sketches.core import noise_tables
    from sketches.core.noise_tables import discrete_gaussian_table

    table = discrete_gaussian_table(3000.0)
    rng = np.random.default_rng(5)
    picks = table.hi[rng.integers(0, table.hi.size, 3000)]
    shift = np.uint64(table.guide_shift)
    buckets = rng.integers(0, table.guide.size - 1, 3000).astype(np.uint64) << shift
    u = np.concatenate([picks, picks + np.uint64(1), picks - np.uint64(1), buckets,
                        buckets - np.uint64(1), np.array([0, 2**64 - 1], dtype=np.uint64),
                        rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2)])
    lows = rng.integers(0, 2**63, u.size, dtype=np.uint64) * np.uint64(2)
    used: list[int] = []

    def draw(n: int) -> np.ndarray:
        out = lows[len(used): len(used) + n]
        used.extend(range(n))
        return out

    got = table.sample(u, draw)
    n_used = len(used)
    used.clear()
    monkeypatch.setattr(noise_tables, "_KERNEL_SEARCH_MIN", 1 << 62)  # numpy's search
    assert np.array_equal(got, table.sample(u, draw))
    assert len(used) == n_used >= 3000  # every pick tied and drew one low word


class Words:
    """A prescribed sequence of uint64 words (then a seeded generator), recording reads."""

    def __init__(self, first: np.ndarray, seed: int) -> None:
        self.first = [int(v) for v in first]
        self.rng = np.random.default_rng(seed)
        self.read: list[int] = []

    def __call__(self, n: int) -> np.ndarray:
        out = []
        for _ in range(n):
            v = self.first.pop(0) if self.first else int(self.rng.integers(0, 2**63)) * 2 + 1
            out.append(v)
        self.read.extend(out)
        return np.array(out, dtype=np.uint64)


@pytest.mark.parametrize("bits", [16, 32])
def test_lazy_draws_are_the_inverse_cdf_of_the_bits_read(bits: int) -> None:
    """``draw_lazy``'s sample ``i`` is ``sample``'s function of the 128-bit ``u`` assembled
    from the bits it read: the top ``bits`` from a part of a word, on an open draw the low
    ``64 - bits`` bits of a fresh word, on a tie the low 64 bits. Prefixes are forced equal
    to table words' (open draws), with the rest below, equal and above them (ties)."""
    from sketches.core.noise_tables import discrete_gaussian_table

    table = discrete_gaussian_table(2000.0)
    assert 64 - table.guide_shift <= 16  # 16-bit reads apply
    rng = np.random.default_rng(8)
    n, per, rest = 4000, 64 // bits, 64 - bits
    parts = rng.integers(0, 2**bits, n, dtype=np.uint64)
    forced = rng.choice(n, 600, replace=False)
    parts[forced] = table.hi[rng.integers(0, table.hi.size, 600)] >> np.uint64(rest)
    words = np.zeros(n // per, dtype=np.uint64)
    for k in range(per):  # little-endian view: part k of a word is bits [k*bits, ...)
        words |= parts[k::per] << np.uint64(k * bits)
    src = Words(words, 9)
    got = table.draw_lazy(src, n, bits)
    read = src.read[n // per:]  # after the prefixes: the open draws' words, then ties'
    tops = {int(h) >> rest for h in table.hi.tolist()}
    opened = [i for i in range(n) if int(parts[i]) in tops]
    assert len(opened) >= 600
    full = np.array([(int(parts[i]) << rest) | (read[k] & ((1 << rest) - 1))
                     for k, i in enumerate(opened)], dtype=np.uint64)
    ties = read[len(opened):]
    expect = table.sample(full, lambda m: np.array(ties[:m], dtype=np.uint64))
    assert np.array_equal(got[opened], expect)
    closed = np.setdiff1d(np.arange(n), opened)
    ref = table.sample(parts[closed] << np.uint64(rest), lambda m: np.zeros(m, np.uint64))
    assert np.array_equal(got[closed], ref)  # any low bits: the same sample


@pytest.mark.parametrize("sigma", [0.7, 3.0, 150.0, 2500.0, 20_000.0])
def test_draw32_has_the_exact_law(sigma: float) -> None:
    """Seeded: 400k ``draw32`` samples against the table's exact probabilities (the 128-bit
    CDF differences): chi-square over bins of expected mass >= 1/50 (the tails pooled), and
    the variance against the exact one. Each check has false-failure rate below 1e-6 (the
    chi-square's 1e-6 quantile; 5 standard errors of the variance, whose sample has finite
    kurtosis 3); the seed is fixed, so the test is deterministic."""
    from scipy import stats

    from sketches.core.noise import FastNoise
    from sketches.core.noise_tables import discrete_gaussian_table

    table = discrete_gaussian_table(sigma)
    n = 400_000
    x = table.draw32(FastNoise(int(sigma * 1000) + 1)._u64, n)
    cdf = (table.hi.astype(np.float64) + table.lo.astype(np.float64) * 2.0**-64) * 2.0**-64
    p = np.diff(np.concatenate([[0.0], cdf, [1.0]]))  # P[offset + j], j = 0 .. 2K
    values = np.arange(table.offset, -table.offset + 1)
    # bins of cumulative mass 1/50 (edges at CDF quantiles)
    edges = np.searchsorted(np.cumsum(p), np.arange(1, 50) / 50.0)
    edges = np.unique(edges)
    bins = np.concatenate([[0], edges + 1, [p.size]])
    bins = np.unique(bins)
    expected = np.add.reduceat(p, bins[:-1]) * n
    observed = np.add.reduceat(np.bincount(x - table.offset, minlength=p.size), bins[:-1])
    keep = expected > 0
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    assert chi2 < stats.chi2.isf(1e-6, int(keep.sum()) - 1)
    var = float(np.sum(p * values.astype(np.float64) ** 2))
    assert abs(float(np.mean(x.astype(np.float64) ** 2)) - var) <= 5 * var * math.sqrt(2 / n)

# --- the table's words and its TV bound, against an independent high-precision computation


def _reference_words(k: int, weight) -> list[int]:  # type: ignore[no-untyped-def]
    """``floor(F(x) * 2**128)`` for ``x = -K .. K-1`` at 100 digits, each weight computed
    directly (not by the module's recurrence). Right of 0 as ``2**128 - ceil((1 - F(x)) *
    2**128)`` (no cancellation; ``F`` is irrational, never a multiple of 2**-128). The
    module works at 60 digits: a word can differ only if ``F * 2**128`` lies within about
    1e-20 of an integer (probability ~1e-20 per word)."""
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = 100, MIN_EMIN
        w = {x: weight(Decimal(abs(x))) for x in range(-k, k + 1)}
        z = sum(w.values(), Decimal(0))
        one = Decimal(2) ** 128
        words = []
        for x in range(-k, k):
            if x < 0:
                left = sum((w[i] for i in range(-k, x + 1)), Decimal(0)) / z
                words.append(int((left * one).to_integral_value(rounding=ROUND_FLOOR)))
            else:
                right = sum((w[i] for i in range(x + 1, k + 1)), Decimal(0)) / z
                up = int((right * one).to_integral_value(rounding=ROUND_CEILING))
                words.append(int(one) - up)
        return words


def _words(table) -> list[int]:  # type: ignore[no-untyped-def]
    return [(int(h) << 64) | int(lo) for h, lo in zip(table.hi, table.lo, strict=True)]


@pytest.mark.parametrize("sigma", [1.0, 2.5, 1e-3])
def test_gaussian_table_words_are_floor_of_the_cdf_times_2_128(sigma: float) -> None:
    """Every stored 128-bit word (high and low word) is ``floor(F(x) * 2**128)`` of the
    discrete Gaussian ``P[x] ∝ exp(-x^2 / (2 sigma^2))`` truncated to ``[-K, K]`` (floor, not
    rounding; every bit of the low word). sigma 1e-3: ``F(0) = 1 - e^-500000``, the largest
    word below ``2**128`` (``2**128 - 1``)."""
    t = discrete_gaussian_table(sigma)
    k = -t.offset
    assert k == math.ceil(sigma * math.sqrt(2 * 130 * math.log(2))) + 1
    s2 = Decimal(repr(sigma)) ** 2
    ref = _reference_words(k, lambda x: (-(x * x) / (2 * s2)).exp())
    assert _words(t) == ref
    if sigma == 1e-3:
        assert ref[k:] == [2**128 - 1] * k


@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_laplace_table_words_are_floor_of_the_cdf_times_2_128(scale: float) -> None:
    """Same for the discrete Laplace ``P[x] ∝ exp(-|x| / scale)``."""
    t = discrete_laplace_table(scale)
    k = -t.offset
    b = Decimal(repr(scale))
    assert _words(t) == _reference_words(k, lambda x: (-x / b).exp())


@pytest.mark.parametrize("scale", [1.0, 0.3, 7.0])
def test_laplace_tv_bound_is_the_documented_bound(scale: float) -> None:
    """``tv_bound = (2K+1) 2**-127 + tail / Z`` (module docstring): the rounding of the
    ``2K+1`` probabilities plus the truncated mass, ``tail = 2 e^{-(K+1)/b} / (1 - e^{-1/b})``
    relative to the table's normaliser ``Z = sum_{|x| <= K} e^{-|x|/b}``. For the discrete
    Laplace the tail term is large enough (1e-7 to 1e-4 of the bound) that the formula is checked
    term by term; the bound covers the exact truncated mass and stays below 2**-104."""
    t = discrete_laplace_table(scale)
    k = -t.offset
    with localcontext() as ctx:
        ctx.prec = 60
        b = Decimal(repr(scale))
        z = 1 + 2 * sum(((-Decimal(x) / b).exp() for x in range(1, k + 1)), Decimal(0))
        tail = 2 * (-(Decimal(k) + 1) / b).exp() / (1 - (-1 / b).exp())
        tail_rel = float(tail / z)
    rounding = (2 * k + 1) * 2.0**-127
    assert tail_rel > 1e-9 * rounding  # the tail term is visible at float precision
    assert t.tv_bound == pytest.approx(rounding + tail_rel, rel=1e-12, abs=0)
    assert t.tv_bound < 2.0**-104


@pytest.mark.parametrize("sigma", [1.0, 30.0])
def test_gaussian_tv_bound_is_the_documented_bound(sigma: float) -> None:
    """Gaussian tables: ``tv_bound = (2K+1) 2**-127 + tail / Z`` with the geometric tail
    bound ``tail = 2 w(K+1) / (1 - e^{-(K+1)/sigma^2})`` and ``Z = sum_{|x| <= K} w(x)``; the
    tail term is below float precision at sigma 1, a few 1e-6 of the bound at sigma 30."""
    t = discrete_gaussian_table(sigma)
    k = -t.offset
    with localcontext() as ctx:
        ctx.prec, ctx.Emin = 60, MIN_EMIN
        s2 = Decimal(repr(sigma)) ** 2
        z = 1 + 2 * sum(((-Decimal(x * x) / (2 * s2)).exp() for x in range(1, k + 1)),
                        Decimal(0))
        w_next = (-((Decimal(k) + 1) ** 2) / (2 * s2)).exp()
        tail_rel = float(2 * w_next / (1 - (-(Decimal(k) + 1) / s2).exp()) / z)
    assert t.tv_bound == pytest.approx((2 * k + 1) * 2.0**-127 + tail_rel, rel=1e-12, abs=0)
    assert t.tv_bound < 2.0**-104


def test_is_sorted_compares_128_bit_words() -> None:
    """``_is_sorted`` (the build's guard) orders ``(hi, lo)`` as 128-bit numbers: a low word
    may drop where the high word rises, never within a run of equal high words, and a high
    word never drops."""
    def ok(hi: list[int], lo: list[int]) -> bool:
        return _is_sorted(np.array(hi, dtype=np.uint64), np.array(lo, dtype=np.uint64))

    assert ok([1, 1, 2], [3, 5, 0])            # lo drops only where hi rises
    assert ok([0, 0, 0], [0, 0, 0])            # ties are sorted
    assert ok([0, 5, 9], [7, 1, 0])
    assert not ok([1, 1], [5, 3])              # lo drops inside an equal-hi run
    assert not ok([0, 1, 1], [0, 5, 3])        # ... after a rise
    assert not ok([1, 1, 1], [0, 5, 3])        # ... not only below the first word
    assert not ok([0, 5, 3], [0, 0, 0])        # hi drops (not only below the first word)
    assert not ok([2, 1], [0, 9])


def test_range_errors_name_the_parameter() -> None:
    """The table range checks name the parameter the caller passed (``sigma`` / ``scale``)."""
    with pytest.raises(SpecError, match=r"^scale: "):
        validate_discrete_laplace_scale(1e-9)
    with pytest.raises(SpecError, match=r"^scale: "):
        validate_discrete_laplace_scale(1e9)
    with pytest.raises(SpecError, match=r"^sigma: "):
        validate_table_sigma(1e-9)
    with pytest.raises(SpecError, match=r"^sigma: "):
        validate_table_sigma(1e9)


def test_validate_with_build_builds_the_table_of_that_sigma() -> None:
    """``build=True`` builds (and caches) the table of the sigma/scale checked, so a later
    sampler finds it ready."""
    discrete_gaussian_table.cache_clear()
    discrete_laplace_table.cache_clear()
    assert validate_table_sigma(2.75, build=True) == 2.75
    assert validate_discrete_laplace_scale(0.75, build=True) == 0.75
    assert discrete_gaussian_table.cache_info().currsize == 1
    assert discrete_laplace_table.cache_info().currsize == 1
    hits = discrete_gaussian_table.cache_info().hits
    k = math.ceil(2.75 * math.sqrt(260 * math.log(2))) + 1
    assert -discrete_gaussian_table(2.75).offset == k
    assert discrete_gaussian_table.cache_info().hits == hits + 1
