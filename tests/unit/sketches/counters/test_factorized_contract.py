"""FactorizedCounters' contract beyond the noise law (issue 24, mutation survivors of
``sketches/counters/factorized.py``): argument checks, ``push`` without a new round,
``advance_empty``'s checks and dtypes, the ``behind`` answer, the real-valued release,
``restore``'s checks and copies, the error bound's formula and the PSD square root."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketches.counters.factorization import SQRT_MAX_VALUES, factorization
from sketches.counters.factorized import (
    FactorizedCounters,
    _psd_sqrt,
    factorized_error_bound,
)
from sketches.errors import (
    HorizonExceededError,
    IncompatibleSpecError,
    SerializationError,
    SpecError,
)
from sketches.privacy import counter_error_bound

KINDS = ("blt", "sqrt")


class Pattern:
    """Deterministic noise; an ``m``-value draw is ``m`` one-value draws (never 0)."""

    kind = "fast"

    def __init__(self) -> None:
        self.i = 0
        self.calls = 0

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.calls += 1
        idx = np.arange(self.i, self.i + int(size), dtype=np.int64)
        self.i += int(size)
        return ((idx * 7919) % 2001 - 1000) * 0.37 + 0.1


class NoDraw(Pattern):
    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        raise AssertionError("sigma 0: the noise source must not be called")


class FirstRoundsOnly(Pattern):
    """Pattern noise for the first ``m`` values drawn, zeros afterwards."""

    def __init__(self, m: int) -> None:
        super().__init__()
        self.m = m

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        z = super().gaussian(sigma, size)
        idx = np.arange(self.i - int(size), self.i)
        return np.where(idx < self.m, z, 0.0)


# ------------------------------------------------------------------ construction
@pytest.mark.parametrize("kind", KINDS)
def test_one_counter_and_any_finite_sigma_from_zero_are_accepted(kind: str) -> None:
    for sigma in (0.0, 0.5, 1.0, 7.25):
        c = FactorizedCounters(1, 8, sigma, True, Pattern(), kind=kind)
        assert c.n == 1 and c.sigma == sigma
    for bad_sigma in (-1.0, float("nan"), float("inf"), -float("inf")):
        with pytest.raises(SpecError, match="sigma"):
            FactorizedCounters(2, 8, bad_sigma, True, Pattern(), kind=kind)
    with pytest.raises(SpecError, match="n"):
        FactorizedCounters(0, 8, 1.0, True, Pattern(), kind=kind)


def test_the_square_root_accepts_exactly_the_value_limit() -> None:
    """rounds x counters = SQRT_MAX_VALUES is allowed, one counter more is refused."""
    horizon = 1024
    n = SQRT_MAX_VALUES // horizon
    assert n * horizon == SQRT_MAX_VALUES
    FactorizedCounters(n, horizon, 1.0, True, Pattern(), kind="sqrt")
    with pytest.raises(SpecError, match="blt"):
        FactorizedCounters(n + 1, horizon, 1.0, True, Pattern(), kind="sqrt")


@pytest.mark.parametrize("kind", KINDS)
def test_sigma_zero_releases_exact_counts_without_drawing(kind: str) -> None:
    """sigma 0 (noise off): exact prefix sums, float or integer, at every round, through
    every path (one round, several, a catch-up), and the noise source is never called."""
    for integer in (True, False):
        c = FactorizedCounters(2, 16, 0.0, integer, NoDraw(), kind=kind)
        c.push(np.array([1, 2]), 1)
        c.push(np.array([3, 0]), 2)
        c.push(np.array([1, 1]), 4)
        assert c.query().tolist() == [5, 3]
        assert c.query(behind=np.array([True, False])).tolist() == [5, 3]
        got = c.advance_empty(np.array([9, 12]))
        assert got.tolist() == [[5, 3], [5, 3]]
        assert c.noise_now().tolist() == [0, 0]


# ------------------------------------------------------------------ push
@pytest.mark.parametrize("kind", KINDS)
def test_push_without_a_new_round_adds_to_the_current_prefix(kind: str) -> None:
    """``push(total, 0)``: before any round only zeros are allowed (there is no round to
    count them in); afterwards the total joins the current round's prefix, no noise drawn."""
    src = Pattern()
    c = FactorizedCounters(3, 16, 1.0, True, src, kind=kind)
    c.push(np.zeros(3, dtype=np.int64), 0)  # allowed: nothing to count
    assert c.rounds == 0 and src.calls == 0
    for bad in ([1, 0, 0], [0, 0, 2]):
        with pytest.raises(SpecError, match="round"):
            c.push(np.array(bad), 0)
    c.push(np.array([1, 2, 3]), 1)
    before, calls = c.query(), src.calls
    c.push(np.array([4, 0, 5]), 0)
    c.push(np.array([1, 1, 1]), 0)
    assert c.rounds == 1 and src.calls == calls
    assert (c.query() - before).tolist() == [5, 1, 6]
    assert c._prefix.dtype == np.int64 and c._prefix.tolist() == [6, 3, 9]


# ------------------------------------------------------------------ several rounds at once
@pytest.mark.parametrize(("kind", "k"), [("blt", 2), ("sqrt", 2), ("sqrt", 5)])
def test_opening_rounds_together_equals_one_by_one_now_and_behind(kind: str, k: int) -> None:
    """Opening ``k`` rounds in one call releases what ``k`` one-round calls release, for the
    current round and for the ``behind`` counters (answered at round ``rounds - 1``). The
    deterministic source makes the draws equal (sqrt: the same ``z``; BLT with k = 2: two
    explicit steps; k >= 3 jumps with other draws: the next test)."""
    a = FactorizedCounters(3, 32, 1.5, True, Pattern(), kind=kind)
    b = FactorizedCounters(3, 32, 1.5, True, Pattern(), kind=kind)
    for c in (a, b):
        c.push(np.array([2, 0, 1]), 3)
    a.push(np.array([1, 1, 1]), k)
    b.push(np.array([1, 1, 1]), 1)
    for _ in range(k - 1):
        b.push(np.zeros(3, dtype=np.int64), 1)
    behind = np.array([True, False, True])
    assert a.query().tolist() == b.query().tolist()
    assert a.query(behind=behind).tolist() == b.query(behind=behind).tolist()
    assert not np.array_equal(a._prev, a._now)


@pytest.mark.parametrize("k", [3, 4, 9])
def test_a_blt_jump_without_new_noise_is_the_recurrence(k: int) -> None:
    """The BLT jump of ``j`` rounds moves the buffers to ``omega^j U`` plus fresh noise:
    with the noise zero after the first rounds, opening ``k >= 3`` rounds at once gives the
    releases of ``k`` one-round calls exactly (to float rounding)."""
    n = 2
    a = FactorizedCounters(n, 64, 1.0, False, FirstRoundsOnly(4 * n), kind="blt")
    b = FactorizedCounters(n, 64, 1.0, False, FirstRoundsOnly(4 * n), kind="blt")
    for c in (a, b):
        c.push(np.array([1, 2]), 4)  # four one-value draws per counter: buffers non-zero
    assert np.any(a._buf != 0)
    a.push(np.zeros(n, dtype=np.int64), k)
    for _ in range(k):
        b.push(np.zeros(n, dtype=np.int64), 1)
    np.testing.assert_allclose(a._buf, b._buf, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.query(), b.query(), rtol=1e-12, atol=1e-12)
    behind = np.array([True, True])
    np.testing.assert_allclose(a.query(behind=behind), b.query(behind=behind), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_behind_at_the_first_round_is_the_prefix_without_noise(kind: str) -> None:
    """After one round, a ``behind`` counter is answered at round 0, whose noise is 0: the
    prefix itself; the others get round 1's noise."""
    c = FactorizedCounters(2, 8, 2.0, True, Pattern(), kind=kind)
    c.push(np.array([3, 4]), 1)
    assert c.rounds == 1 and np.all(c.noise_now() != 0)
    assert c.query(behind=np.array([True, True])).tolist() == [3, 4]
    assert c.query(behind=np.array([False, True])).tolist() == [3 + int(c.noise_now()[0]), 4]
    assert c.query(behind=np.array([False, False])).tolist() == (
        np.array([3, 4]) + c.noise_now()).tolist()


# ------------------------------------------------------------------ advance_empty
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("integer", [True, False])
def test_advance_empty_dtypes_and_empty_ends(kind: str, integer: bool) -> None:
    """One row per end, int64 with integer noise, float64 without; no ends: a ``(0, n)``
    array of that dtype, nothing opened."""
    c = FactorizedCounters(3, 32, 1.0, integer, Pattern(), kind=kind)
    want = np.int64 if integer else np.float64
    empty = c.advance_empty(np.array([], dtype=np.int64))
    assert empty.shape == (0, 3) and empty.dtype == want and c.rounds == 0
    out = c.advance_empty(np.array([2, 5]))
    assert out.shape == (2, 3) and out.dtype == want and c.rounds == 5
    assert c.noise_now().dtype == want


@pytest.mark.parametrize("kind", KINDS)
def test_advance_empty_reads_ends_as_integers_of_any_shape(kind: str) -> None:
    """A scalar end, a 2-D array or float-typed whole numbers are the same ends."""
    outs = []
    for ends in (np.array([4, 7]), [[4.0, 7.0]], np.array([[4], [7]])):
        c = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
        outs.append(c.advance_empty(ends).tolist())
        assert c.rounds == 7 and isinstance(c.rounds, int)
    assert outs[0] == outs[1] == outs[2]
    c = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    assert c.advance_empty(np.int64(3)).shape == (1, 2) and c.rounds == 3


@pytest.mark.parametrize("kind", KINDS)
def test_advance_empty_refuses_bad_ends_and_keeps_the_state(kind: str) -> None:
    """Ends must be strictly increasing, above the current round and within the horizon
    (every end, not only the first two); a refused call changes nothing."""
    c = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    c.push(np.array([1, 1]), 3)
    before = c.to_bytes()
    for bad in ([3], [2], [3, 5], [5, 5], [5, 4], [6, 8, 7], [4, 5, 5]):
        with pytest.raises(SpecError, match="ends"):
            c.advance_empty(np.array(bad))
        assert c.to_bytes() == before
    for far in ([4, 5, 17], [4, 17, 18], [4, 5, 6, 20]):
        with pytest.raises(HorizonExceededError):
            c.advance_empty(np.array(far))
        assert c.to_bytes() == before
    assert c.advance_empty(np.array([4, 16])).shape == (2, 2) and c.rounds == 16


# ------------------------------------------------------------------ release
@pytest.mark.parametrize("kind", KINDS)
def test_real_valued_release_is_prefix_plus_noise(kind: str) -> None:
    """``integer_noise=False``: ``query = prefix + N`` (not minus), ``noise_now = N`` as float;
    with integer noise ``noise_now = round(N)`` as int64."""
    c = FactorizedCounters(2, 8, 1.0, False, Pattern(), kind=kind)
    c.push(np.array([10, 20]), 2)
    n = c.noise_now()
    assert n.dtype == np.float64 and np.all(n != 0)
    assert c.query().tolist() == (np.array([10, 20]) + n).tolist()
    d = FactorizedCounters(2, 8, 1.0, True, Pattern(), kind=kind)
    d.push(np.array([10, 20]), 2)
    assert d.noise_now().dtype == np.int64
    assert d.noise_now().tolist() == np.rint(n).astype(np.int64).tolist()


# ------------------------------------------------------------------ error bound
@pytest.mark.parametrize("integer", [True, False])
def test_factorized_error_bound_formula(integer: bool) -> None:
    """``sigma sqrt(2 v ln(2 steps n / beta))`` plus 1/2 with integer rounding, nothing
    without."""
    sigma, v, n, steps, beta = 3.0, 2.5, 7, 11, 1e-3
    want = sigma * math.sqrt(2 * v * math.log(2 * steps * n / beta)) + (0.5 if integer else 0)
    got = factorized_error_bound(sigma, v, n=n, steps=steps, beta=beta, integer=integer)
    assert got == pytest.approx(want, rel=1e-12)
    assert counter_error_bound(sigma, levels=1, n=n, steps=steps, beta=beta) == pytest.approx(
        sigma * math.sqrt(2 * math.log(2 * steps * n / beta)), rel=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("integer", [True, False])
def test_error_bound_uses_the_row_norm_at_the_round_asked(kind: str, integer: bool) -> None:
    c = FactorizedCounters(4, 64, 2.0, integer, Pattern(), kind=kind)
    f = factorization(kind, 64)
    for at in (1, 5, 64, None):
        v = f.row_norm_sq(at)
        want = 2.0 * math.sqrt(2 * v * math.log(2 * 3 * 4 / 0.01)) + (0.5 if integer else 0)
        assert c.error_bound(beta=0.01, steps=3, at_round=at) == pytest.approx(want, rel=1e-12)
    assert f.row_norm_sq(5) < f.row_norm_sq(64)


# ------------------------------------------------------------------ restore
def _state(kind: str, rounds: int = 3) -> tuple[FactorizedCounters, dict, dict]:
    c = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    if rounds:
        c.push(np.array([1, 2]), rounds)
    return c, dict(c.state_header()), dict(c.state_arrays())


@pytest.mark.parametrize("kind", KINDS)
def test_state_header_fields(kind: str) -> None:
    _, hdr, _ = _state(kind)
    assert hdr == {"rounds": 3, "sigma": 1.0, "integer_noise": True, "horizon": 16,
                   "counter": kind, "counter_version": 1}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rounds", [0, 16])
def test_restore_accepts_the_first_and_the_last_round(kind: str, rounds: int) -> None:
    c, hdr, arr = _state(kind, rounds)
    d = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    d.restore(hdr, arr)
    assert d.rounds == rounds and d.to_bytes() == c.to_bytes()


@pytest.mark.parametrize("kind", KINDS)
def test_restore_refuses_missing_or_bad_header_fields(kind: str) -> None:
    """A missing or unknown version, a missing or out-of-range round count: SerializationError
    naming the field; a missing sigma: the calibration differs (IncompatibleSpecError)."""
    _, hdr, arr = _state(kind)
    cases = [({"counter_version": None}, SerializationError, "counter_version"),
             ({"counter_version": 2}, SerializationError, "counter_version"),
             ({"rounds": None}, SerializationError, "rounds"),
             ({"rounds": 17}, SerializationError, "rounds"),
             ({"rounds": -1}, SerializationError, "rounds"),
             ({"sigma": None}, IncompatibleSpecError, "sigma")]
    for change, exc, field in cases:
        h = {k: v for k, v in hdr.items() if not (k in change and change[k] is None)}
        h.update({k: v for k, v in change.items() if v is not None})
        d = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
        with pytest.raises(exc, match=field):
            d.restore(h, arr)
        assert d.rounds == 0


@pytest.mark.parametrize("kind", KINDS)
def test_restore_refuses_missing_or_misshapen_arrays(kind: str) -> None:
    _, hdr, arr = _state(kind)
    for name in ("prefix", "fact_now", "fact_prev", "fact_buf"):
        for bad in (None, np.zeros(5), np.zeros((1, 2))):
            a = {k: v for k, v in arr.items() if k != name}
            if bad is not None:
                a[name] = bad
            d = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
            with pytest.raises(SerializationError, match=name):
                d.restore(hdr, a)
    a = dict(arr, fact_buf=arr["fact_buf"].astype(np.float32))
    with pytest.raises(SerializationError, match="fact_buf"):
        FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind).restore(hdr, a)


@pytest.mark.parametrize("kind", KINDS)
def test_restore_copies_the_arrays(kind: str) -> None:
    """The restored counter owns its state: counting on after a restore leaves the arrays it
    was restored from (a checkpoint's) unchanged."""
    _, hdr, arr = _state(kind)
    saved = {k: v.copy() for k, v in arr.items()}
    d = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    d.restore(hdr, arr)
    d.push(np.array([5, 5]), 0)
    d.push(np.array([1, 1]), 2)
    for k, v in saved.items():
        assert np.array_equal(arr[k], v), k


# ------------------------------------------------------------------ PSD square root
def test_psd_square_root_reproduces_the_matrix() -> None:
    """``L L^T = g`` for the BLT jump covariances (eigenvalues far below 1 included) and a
    singular PSD matrix (a zero eigenvalue stays 0)."""
    f = factorization("blt", 64)
    om = np.array(f.omega)
    prod = om[:, None] * om[None, :]
    for j in (1, 2, 17):
        g = (1.0 - prod**j) / (1.0 - prod)
        assert np.linalg.eigvalsh(g).min() < 0.5
        L = _psd_sqrt(g)
        np.testing.assert_allclose(L @ L.T, g, rtol=1e-9, atol=1e-12)
    v = np.array([[1.0, 2.0], [2.0, 4.0]])  # rank 1
    L = _psd_sqrt(v)
    np.testing.assert_allclose(L @ L.T, v, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_the_restored_counter_does_not_share_arrays_with_the_checkpoint(kind: str) -> None:
    """Writing into the arrays a counter was restored from (a reused checkpoint buffer)
    does not change the restored counter's releases or state."""
    _, hdr, arr = _state(kind)
    d = FactorizedCounters(2, 16, 1.0, True, Pattern(), kind=kind)
    d.restore(hdr, arr)
    q, q_behind, blob = d.query(), d.query(behind=np.array([True, True])), d.to_bytes()
    for a in arr.values():
        a[...] = 99
    assert d.query().tolist() == q.tolist()
    assert d.query(behind=np.array([True, True])).tolist() == q_behind.tolist()
    assert d.to_bytes() == blob


def _without(blob: bytes, key: str) -> bytes:
    """``blob`` re-packed with ``key`` dropped from its JSON header."""
    import json
    import struct

    pre = struct.Struct("<4sHI")
    magic, version, hlen = pre.unpack_from(blob, 0)
    header = json.loads(blob[pre.size:pre.size + hlen])
    del header[key]
    hjson = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return pre.pack(magic, version, len(hjson)) + hjson + blob[pre.size + hlen:]


@pytest.mark.parametrize("kind", KINDS)
def test_from_bytes_refuses_a_state_without_its_fields(kind: str) -> None:
    c, _, _ = _state(kind)
    blob = c.to_bytes()
    assert FactorizedCounters.from_bytes(blob, Pattern()).to_bytes() == blob
    for key in ("state", "spec"):
        with pytest.raises(SerializationError):
            FactorizedCounters.from_bytes(_without(blob, key), Pattern())


def test_error_bound_defaults_to_one_release_of_every_counter() -> None:
    c = FactorizedCounters(4, 64, 2.0, True, Pattern(), kind="blt")
    assert c.error_bound(beta=0.01) == c.error_bound(beta=0.01, steps=1, counters=4)
    assert c.error_bound(beta=0.01, counters=1) < c.error_bound(beta=0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_query_at_an_empty_list_is_an_empty_release(kind: str) -> None:
    """``query_at([])`` (no cells asked) is an empty integer release, before and after a
    round (independent review of the equivalent marks: asarray([]) without int64 is a float
    array, which numpy refuses as an index)."""
    c = FactorizedCounters(3, 8, 2.0, True, Pattern(), kind=kind)
    for _ in range(2):
        out = c.query_at([])
        assert out.shape == (0,) and out.dtype == c.query().dtype
        c.push(np.array([1, 2, 3]), 1)
    assert c.query_at([2, 0]).tolist() == c.query()[[2, 0]].tolist()
