"""Tests of sketches.windowed.triehh.triehh (TrieHH with counts, paper 001, windowed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sketches.core.noise import make_noise
from sketches.errors import PrivacyError, SpecError
from sketches.windowed.triehh.triehh import (
    TrieHH,
    TrieHHSpec,
    exact_calibration,
    exact_level_delta,
    level_privacy,
    range_count,
    rank_quantiles,
    theta_for_delta,
)

ZERO = make_noise("zero", allow_insecure=True)  # uniform() == 0: every event sampled


def fast(seed: int = 0):
    return make_noise("fast", seed, allow_insecure=True)


def exact_trie(stream: np.ndarray, levels: int, bits: int, theta: int) -> list[dict[int, int]]:
    """Reference: level l keeps prefixes with count >= theta whose parent was kept."""
    out: list[dict[int, int]] = []
    for level in range(levels):
        pref = stream >> (bits * (levels - level - 1))
        vals, cnt = np.unique(pref, return_counts=True)
        kept = {int(v): int(c) for v, c in zip(vals, cnt, strict=True) if c >= theta}
        if level:
            kept = {v: c for v, c in kept.items() if (v >> bits) in out[-1]}
        out.append(kept)
    return out


def released_levels(rel: dict) -> list[dict[int, int]]:
    return [dict(zip(n["prefix"], n["count"], strict=True)) for n in rel["trie"]["nodes"]]


def test_zero_noise_all_mode_is_exact_thresholded_trie() -> None:
    """Sampling everything and no noise: exactly the prefixes with count >= theta."""
    rng = np.random.default_rng(0)
    stream = (rng.zipf(1.3, 20000) % 256).astype(np.int64)
    spec = TrieHHSpec(levels=4, bits=2, eps=1.0, delta=1e-6, mode="all")
    t = TrieHH(spec, ZERO)
    t.update_batch(stream[:7000])
    t.update_batch(stream[7000:])
    rel = t.release()
    ref = exact_trie(stream, 4, 2, spec.theta)
    assert released_levels(rel) == ref
    assert {d["item"] for d in rel["items"]} == set(ref[-1])
    vals, cnt = np.unique(stream, return_counts=True)
    assert set(ref[-1]) == {int(v) for v, c in zip(vals, cnt, strict=True) if c >= spec.theta}


def test_zero_noise_subwindow_mode_uses_each_event_once() -> None:
    """Sub-window l votes only at level l, pruned by level l-1's thresholded output."""
    rng = np.random.default_rng(1)
    L, bits, W = 3, 3, 30
    spec = TrieHHSpec(levels=L, bits=bits, eps=1.0, delta=1e-6, window_ticks=W)
    stream = (rng.zipf(1.2, 9000) % 512).astype(np.int64)
    ticks = np.sort(rng.integers(0, W, stream.size))
    t = TrieHH(spec, ZERO)
    for part in np.array_split(np.arange(stream.size), 5):
        t.update_batch(stream[part], ticks=ticks[part])
    rel = t.release()
    lvl = ticks * L // W
    ref: list[dict[int, int]] = []
    for level in range(L):
        pref = stream[lvl == level] >> (bits * (L - level - 1))
        vals, cnt = np.unique(pref, return_counts=True)
        kept = {int(v): int(c) for v, c in zip(vals, cnt, strict=True)}
        if level:
            kept = {v: sum(1 for p in pref if p == v) for v in kept if (v >> bits) in ref[-1]}
        ref.append({v: c for v, c in kept.items() if c >= spec.theta})
    assert released_levels(rel) == ref
    assert rel["eps"] == pytest.approx(1.0) and rel["delta"] <= 1e-6


@pytest.mark.parametrize("p_theta", [(0.012, 15), (0.05, 6), (0.02, 10)])
def test_level_privacy_holds_exactly(p_theta: tuple[float, int]) -> None:
    """(eps_l, delta_l) of level_privacy bounds the exact hockey-stick divergence.

    The differing cell has k+1 copies (D) or k (D'); the output is X if X >=
    theta else "suppressed". For k = 0..2 theta/p we compute, in both
    directions, sum over outputs of [P(o) - e^eps_l Q(o)]_+ and check <= delta_l
    (outputs above the 1e-18 upper quantile are added as a conservative tail).
    Deterministic (no randomness); fails if eps_l used the note's loose
    linearisation wrongly or delta_l were too small.
    """
    p, theta = p_theta
    eps_l, delta_l = level_privacy(p, theta)
    e = math.exp(eps_l)
    ks = np.arange(0, int(2 * theta / p))[:, None]
    x = np.arange(0, int(stats.binom.isf(1e-18, ks[-1, 0] + 1, p)) + 2)[None, :]
    d1, d0 = stats.binom.pmf(x, ks + 1, p), stats.binom.pmf(x, ks, p)
    rel = (x >= theta)[0]
    worst = 0.0
    for a, b in ((d1, d0), (d0, d1)):
        div = np.clip(a[:, rel] - e * b[:, rel], 0, None).sum(axis=1) + 1e-18
        div += np.clip(a[:, ~rel].sum(axis=1) - e * b[:, ~rel].sum(axis=1), 0, None)
        worst = max(worst, float(div.max()))
    assert worst <= delta_l
    # The runtime exact accountant (log-factorial pmf + Chernoff tail) agrees with scipy.
    assert exact_level_delta(eps_l, p, theta) == pytest.approx(worst - 1e-18, rel=1e-6, abs=1e-17)


def test_theta_for_delta_and_chernoff_cases() -> None:
    """theta meets Lemma 1; the additive-case bound is below the multiplicative one."""
    for delta in (1e-3, 1e-6, 1e-9):
        th = theta_for_delta(delta)
        assert math.exp(-((th - 1) ** 2) / (th + 1)) <= delta
        assert math.exp(-((th - 2) ** 2) / th) > delta or th == 2
    for th in range(2, 60):
        assert math.exp(-th * math.log(th) + th - 1) <= math.exp(-((th - 1) ** 2) / (th + 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 63), min_size=1, max_size=80), st.data())
def test_neighbouring_streams_change_one_cell_per_level(stream: list[int], data) -> None:
    """Unthresholded level histograms of neighbours differ in exactly one cell by 1 per level.

    This is the sensitivity Lemma 2/3 assume (mode 'all'; in 'subwindow' the
    event touches only its own level).
    """
    i = data.draw(st.integers(0, len(stream) - 1))
    spec = TrieHHSpec(levels=3, bits=2, eps=1.0, delta=1e-3, mode="all")
    a, b = TrieHH(spec, ZERO), TrieHH(spec, ZERO)
    a.update_batch(np.array(stream, dtype=np.int64))
    b.update_batch(np.array(stream[:i] + stream[i + 1:], dtype=np.int64))
    for (ka, ca), (kb, cb) in zip(a._acc, b._acc, strict=True):
        da = dict(zip(ka.tolist(), ca.tolist(), strict=True))
        db = dict(zip(kb.tolist(), cb.tolist(), strict=True))
        diff = {x: da.get(x, 0) - db.get(x, 0) for x in set(da) | set(db)}
        assert sorted(v for v in diff.values() if v) == [1]


def test_sampled_counts_are_binomial() -> None:
    """X ~ Bin(f, p) for an item of frequency f: 300 seeded windows.

    Mean within 4 sd of the mean (false-failure 6e-5) and variance within 25%
    (sd of the variance estimate ~ 8%: false-failure < 1e-3).
    """
    spec = TrieHHSpec(levels=1, bits=8, eps=1.0, delta=1e-6, mode="all")
    p, f = spec.sampling_rate, 5000
    xs = []
    for seed in range(300):
        t = TrieHH(spec, fast(seed))
        t.update_batch(np.full(f, 7, dtype=np.int64))
        items = t.release()["items"]
        xs.append(items[0]["sampled_count"] if items else 0)
    xs_a = np.array(xs, dtype=float)
    sd = math.sqrt(f * p * (1 - p))
    assert abs(xs_a.mean() - f * p) < 4 * sd / math.sqrt(300)
    assert xs_a.var() == pytest.approx(sd**2, rel=0.25)


def test_ranges_and_quantiles_exact_when_nothing_pruned() -> None:
    """Dense data, zero noise: every node clears theta, so ranks are exact (scaled by 1/p)."""
    stream = np.repeat(np.arange(64), 40).astype(np.int64)
    spec = TrieHHSpec(levels=3, bits=2, eps=1.0, delta=1e-3, mode="all")
    t = TrieHH(spec, ZERO)
    t.update_batch(stream)
    rel = t.release()
    p = spec.sampling_rate
    for lo, hi in [(0, 64), (5, 37), (17, 18), (0, 1)]:
        assert range_count(rel, lo, hi) * p == pytest.approx(40 * (hi - lo))
    assert rank_quantiles(rel, [0.25, 0.5, 1.0]) == [15, 31, 63]


def test_str_items_single_release_and_roundtrip() -> None:
    spec = TrieHHSpec(levels=4, bits=8, eps=2.0, delta=1e-4, mode="all", item_kind="str")
    t = TrieHH(spec, ZERO)
    t.update_batch(np.array(["abcd"] * 50 + ["abce"] * 30 + ["xy"] * 40 + ["zzzz"]))
    u = TrieHH.from_bytes(t.to_bytes(), ZERO)
    rel = u.release()
    assert {d["item"]: d["sampled_count"] for d in rel["items"]} == {
        "abcd": 50, "abce": 30, "xy": 40}
    with pytest.raises(PrivacyError):
        u.release()
    with pytest.raises(PrivacyError):
        u.update_batch(np.array(["a"]))


def test_subwindow_needs_ticks_and_valid_spec() -> None:
    spec = TrieHHSpec(levels=2, bits=4, eps=1.0, delta=1e-6, window_ticks=10)
    with pytest.raises(SpecError, match="ticks"):
        TrieHH(spec, ZERO).update_batch(np.array([1, 2]))
    with pytest.raises(SpecError, match="window_ticks"):
        TrieHHSpec(levels=4, bits=4, eps=1.0, delta=1e-6, window_ticks=2)
    t = TrieHH(spec, ZERO)
    t.update_batch(np.array([1]), ticks=np.array([7]))
    with pytest.raises(SpecError, match="non-decreasing"):
        t.update_batch(np.array([1]), ticks=np.array([2]))


def test_unit_cap_group_privacy_reported() -> None:
    """unit_cap m: per-event budget eps/m, delta/(m e^eps); the payload reports the unit's."""
    spec = TrieHHSpec(levels=2, bits=4, eps=1.0, delta=1e-6, mode="all", unit_cap=3)
    event = TrieHHSpec(levels=2, bits=4, eps=1 / 3, delta=1e-6 / (3 * math.e), mode="all")
    assert (spec.theta, spec.sampling_rate) == (event.theta, event.sampling_rate)
    t = TrieHH(spec, ZERO)
    t.update_batch(np.array([3] * 100, dtype=np.int64))
    rel = t.release()
    assert rel["eps"] <= 1.0 + 1e-12 and rel["delta"] <= 1e-6


def test_exact_accountant_calibration() -> None:
    """accountant='exact': verified delta <= target, detection limit theta/p far below the note's.

    Also a scipy cross-check of the chosen (theta, p) at eps = 1 (forward
    direction; the reverse costs nothing since eps >= -ln(1-p)).
    """
    theta, p = exact_calibration(1.0, 1e-6)
    assert p <= 1 - math.exp(-1.0)
    ks = np.arange(0, 400)[:, None]
    x = np.arange(0, 402)[None, :]
    d1, d0 = stats.binom.pmf(x, ks + 1, p), stats.binom.pmf(x, ks, p)
    rel = (x >= theta)[0]
    worst = float(np.clip(d1[:, rel] - math.e * d0[:, rel], 0, None).sum(axis=1).max())
    assert worst <= 1e-6
    note = TrieHHSpec(levels=2, bits=4, eps=1.0, delta=1e-6, window_ticks=10)
    exact = TrieHHSpec(levels=2, bits=4, eps=1.0, delta=1e-6, window_ticks=10,
                       accountant="exact")
    assert exact.theta / exact.sampling_rate < 0.2 * note.theta / note.sampling_rate
    t = TrieHH(exact, ZERO)
    t.update_batch(np.array([17] * 30, dtype=np.int64), ticks=np.zeros(30, np.int64))
    t.update_batch(np.array([17] * 30, dtype=np.int64), ticks=np.full(30, 9))
    rel_ = t.release()
    assert rel_["eps"] == pytest.approx(1.0) and rel_["delta"] <= 1e-6
    assert [d["item"] for d in rel_["items"]] == [17]


def test_accountant_module_reexported() -> None:
    """The accountant moved to sketches.windowed.triehh.accounting;
    sketches.windowed.triehh.triehh re-exports
    the same functions, and the note's theta meets its delta exactly at the boundary."""
    import sketches.windowed.triehh.accounting as acc
    import sketches.windowed.triehh.triehh as triehh

    for name in ("level_privacy", "theta_for_delta", "exact_level_delta",
                 "exact_calibration"):
        assert getattr(triehh, name) is getattr(acc, name)
    theta = acc.theta_for_delta(1e-6)
    assert acc.level_privacy(0.01, theta)[1] <= 1e-6 < acc.level_privacy(0.01, theta - 1)[1]


def test_sampling_rate_is_exact_on_the_53_bit_uniform_grid() -> None:
    """Issue 8 item 9: P[u < p] for u on the 2^-53 grid equals p only for p on that grid."""
    import math

    from sketches.windowed.triehh.triehh import TrieHHSpec

    for acc in ("note", "exact"):
        for eps in (0.3, 1.0, 2.7):
            spec = TrieHHSpec(levels=4, bits=8, eps=eps, delta=1e-6, accountant=acc,
                              window_ticks=4)
            p = spec.sampling_rate
            assert p * 2.0**53 == math.floor(p * 2.0**53)  # on the grid: P[u < p] = p exactly
            e = spec.level_budget()[0]
            if acc == "note":
                assert -math.log1p(-spec.theta * p) <= e * (1 + 1e-12)  # stated eps holds
