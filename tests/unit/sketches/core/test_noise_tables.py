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
