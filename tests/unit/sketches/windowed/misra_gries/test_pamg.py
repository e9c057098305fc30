"""Tests of sketches.windowed.misra_gries.pamg: merged MG (paper 000 §7), PAMG + GSHM (§8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketches.core.noise import make_noise
from sketches.errors import PrivacyError, SpecError
from sketches.privacy.calibration import analytic_gaussian_delta
from sketches.windowed.misra_gries.misra_gries import PMG, MGState, PMGSpec
from sketches.windowed.misra_gries.pamg import (
    PAMG,
    PAMGSpec,
    _merge_arrays,
    agarwal_merge,
    gshm_calibrate,
    gshm_delta,
    merge_mg,
)

ZERO = make_noise("zero", allow_insecure=True)


def fast(seed: int = 0):
    return make_noise("fast", seed, allow_insecure=True)


def std_mg(stream: list[int], k: int) -> dict[int, int]:
    """Standard MG counters (zeros dropped) via Algorithm 1."""
    mg = MGState(k)
    mg.update(np.array(stream, dtype=np.int64).view(np.uint64))
    keys, counts = mg.real_items()
    return {int(x): int(c) for x, c in zip(keys, counts, strict=True) if c > 0}


def monotone_pm1(a: dict, b: dict, k: int) -> bool:
    """c <= c' <= c + 1 pointwise (or the reverse), at most k keys differ."""
    keys = set(a) | set(b)
    d = [a.get(x, 0) - b.get(x, 0) for x in keys]
    nz = sum(v != 0 for v in d)
    return nz <= k and (all(v in (0, 1) for v in d) or all(v in (0, -1) for v in d))


def reference_pamg(sets: list[list[int]], k: int) -> dict[int, int]:
    """Algorithm 4 as printed in paper 000 §8."""
    c: dict[int, int] = {}
    for xs in sets:
        for x in xs:
            c[x] = c.get(x, 0) + 1
        if len(c) > k:
            for x in list(c):
                c[x] -= 1
                if c[x] == 0:
                    del c[x]
    return c


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 20), st.integers(1, 9), max_size=10),
       st.dictionaries(st.integers(0, 20), st.integers(1, 9), max_size=10), st.integers(1, 6))
def test_vectorised_merge_equals_reference(a: dict, b: dict, k: int) -> None:
    keys, counts = _merge_arrays(np.array(list(a), np.uint64), np.array(list(a.values()), np.int64),
                                 np.array(list(b), np.uint64), np.array(list(b.values()), np.int64),
                                 k)
    assert dict(zip(keys.tolist(), counts.tolist(), strict=True)) == agarwal_merge(a, b, k)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=40), min_size=1, max_size=4),
       st.integers(1, 5), st.data())
def test_merged_neighbours_differ_by_one_monotone(streams, k, data) -> None:
    """§7 Corollary 2: the sensitivity the merged release (l1 <= k, l0 <= k) assumes."""
    j = data.draw(st.integers(0, len(streams) - 1))
    if not streams[j]:
        return
    i = data.draw(st.integers(0, len(streams[j]) - 1))
    other = [list(s) for s in streams]
    del other[j][i]
    ma: dict[int, int] = {}
    mb: dict[int, int] = {}
    for s, t in zip(streams, other, strict=True):
        ma, mb = agarwal_merge(ma, std_mg(s, k), k), agarwal_merge(mb, std_mg(t, k), k)
    assert monotone_pm1(ma, mb, k)


sets_strategy = st.lists(st.lists(st.integers(0, 12), max_size=4, unique=True), max_size=40)


@settings(max_examples=300, deadline=None)
@given(sets_strategy, st.integers(4, 7), st.data())
def test_pamg_fold_and_lemma9_sensitivity(sets, k, data) -> None:
    """Fold == Algorithm 4; removing one unit gives the ±1 monotone structure (Lemma 9)."""
    spec = PAMGSpec(k=k, m=4, eps=1.0, delta=1e-6, sigma=200.0, tau=2000.0)

    def run(ss):
        p = PAMG(spec, ZERO)
        units = np.array([f"u{j}" for j, xs in enumerate(ss) for _ in xs], dtype=object)
        items = np.array([x for xs in ss for x in xs], dtype=np.int64)
        p.update_batch(items, units=units)
        return p.counts()

    full = run(sets)
    assert full == reference_pamg(sets, k)
    if sets:
        j = data.draw(st.integers(0, len(sets) - 1))
        assert monotone_pm1(full, run([*sets[:j], [], *sets[j + 1:]]), k)


def test_pamg_error_bound_and_cap() -> None:
    """Lemma 8: f - N/(k+1) <= c <= f; the cap keeps each unit's first m distinct items."""
    rng = np.random.default_rng(5)
    n = 3000
    units = rng.integers(0, 400, n).astype(str)
    items = (rng.zipf(1.4, n) % 300).astype(np.int64)
    spec = PAMGSpec(k=30, m=3, eps=1.0, delta=1e-6)
    p = PAMG(spec, ZERO)
    p.update_batch(items[:1000], units=units[:1000])
    p.update_batch(items[1000:], units=units[1000:])
    kept: dict[str, list[int]] = {}
    dropped = 0
    for u, x in zip(units.tolist(), items.tolist(), strict=True):
        s = kept.setdefault(u, [])
        if x not in s:
            if len(s) < 3:
                s.append(x)
            else:
                dropped += 1
    f: dict[int, int] = {}
    for s in kept.values():
        for x in s:
            f[x] = f.get(x, 0) + 1
    total = sum(f.values())
    c = p.counts()
    assert all(f[x] - total / 31 <= c.get(x, 0) <= f[x] for x in f)
    assert p.dropped == dropped > 0


def test_gshm_condition_matches_published_numbers() -> None:
    """Digest/paper check: l=100, eps=1, delta=1e-6, Lemma 6 params (54.3, 336.6) -> ~3e-8."""
    assert 1e-8 < gshm_delta(1.0, 54.3, 336.6, 100) < 1e-7
    sigma, tau = gshm_calibrate(1.0, 1e-6, 100)
    assert gshm_delta(1.0, sigma, tau, 100) <= 1e-6
    assert gshm_delta(1.0, sigma, tau * 0.97, 100) > 1e-6  # tau is (near) minimal
    # l = 1: exactly the max of the one-key threshold event and the Gaussian profile.
    s, t = 3.0, 12.0
    assert gshm_delta(0.5, s, t, 1) == pytest.approx(
        max(0.5 * math.erfc((t - 1) / s / math.sqrt(2)), analytic_gaussian_delta(0.5, s, 1.0)))


def test_pamg_release_zero_noise_and_single_release() -> None:
    spec = PAMGSpec(k=4, m=2, eps=1.0, delta=1e-3)
    assert 5 < spec.gshm()[1] < 30
    p = PAMG(spec, ZERO)
    items = np.array([1, 2] * 100 + [3] * 5, dtype=np.int64)
    units = np.array([f"a{i // 2}" for i in range(200)] + [f"b{i}" for i in range(5)])
    p.update_batch(items, units=units)
    rel = p.release()
    assert {d["item"]: d["estimate"] for d in rel["items"]} == {1: 100, 2: 100}
    with pytest.raises(PrivacyError):
        p.release()


def test_pamg_noise_has_calibrated_sd() -> None:
    """GSHM noise is N(0, sigma^2): sd of 2000 seeded draws within 5% (false-failure ~1e-4)."""
    spec = PAMGSpec(k=4, m=1, eps=1.0, delta=1e-3)
    sigma = spec.gshm()[0]
    errs = []
    for seed in range(2000):
        p = PAMG(spec, fast(seed))
        p.update_batch(np.array([7] * 100, dtype=np.int64))
        errs.append(p.release()["items"][0]["estimate"] - 100)
    assert np.std(errs) == pytest.approx(sigma, rel=0.05)


def test_pamg_spec_refuses_weak_parameters() -> None:
    with pytest.raises(PrivacyError, match="delta"):
        PAMGSpec(k=10, m=2, eps=1.0, delta=1e-6, sigma=1.0, tau=5.0)
    with pytest.raises(SpecError, match="m:"):
        PAMGSpec(k=3, m=5, eps=1.0, delta=1e-6)


def test_pamg_serialization_roundtrip() -> None:
    spec = PAMGSpec(k=3, m=2, eps=1.0, delta=1e-6, item_kind="str")
    p = PAMG(spec, ZERO)
    p.update_batch(np.array(["x", "y", "x", "z"]), units=np.array(["u", "u", "v", "w"]))
    p.update_batch(np.array(["y"]))
    q = PAMG.from_bytes(p.to_bytes(), ZERO)
    assert q.counts() == p.counts() == {"x": 2, "y": 2, "z": 1}


def test_merge_release_zero_noise_and_consumes_shards() -> None:
    spec = PMGSpec(k=4, eps=1.0, delta=1e-6)
    shards = [PMG(spec, ZERO) for _ in range(3)]
    for j, s in enumerate(shards):
        s.update_batch(np.array([1] * 200 + [2] * 150 + [10 + j] * 5, dtype=np.int64))
    merged = merge_mg(shards, ZERO)
    tau = merged.threshold()
    assert tau == pytest.approx(1 + 4 * math.log(4 / ((1 + math.exp(-0.25)) * 1e-6)))
    rel = merged.release()
    assert {d["item"]: d["estimate"] for d in rel["items"]} == {1: 595, 2: 445}  # 5 keys > k
    with pytest.raises(PrivacyError):
        shards[0].release()
    with pytest.raises(PrivacyError):
        merge_mg(shards, ZERO)


def test_merge_pamg_shards_zero_noise() -> None:
    """PAMG shards merged (Corollary 10) and released once with GSHM(l = k)."""
    from sketches.windowed.misra_gries.pamg import merge_pamg

    spec = PAMGSpec(k=4, m=2, eps=1.0, delta=1e-3)
    shards = [PAMG(spec, ZERO) for _ in range(2)]
    for j, sh in enumerate(shards):
        items = np.array([1, 2] * 60 + [9], dtype=np.int64)
        units = np.array([f"s{j}u{i // 2}" for i in range(120)] + ["x"])
        sh.update_batch(items, units=units)
    merged = merge_pamg(shards, ZERO)
    assert merged.threshold() == pytest.approx(spec.gshm()[1])
    assert {d["item"]: d["estimate"] for d in merged.release()["items"]} == {1: 120, 2: 120}
    with pytest.raises(PrivacyError):
        shards[1].release()


def test_gshm_module_reexported_and_release_thresholds() -> None:
    """The GSHM functions moved to sketches.privacy.gshm; sketches.windowed.misra_gries.pamg
    re-exports them.
    With zero noise gshm_release keeps exactly the counts >= tau, rounded."""
    import sketches.privacy.gshm as gshm
    import sketches.windowed.misra_gries.pamg as pamg

    assert pamg.gshm_delta is gshm.gshm_delta
    assert pamg.gshm_calibrate is gshm.gshm_calibrate
    keys, est = gshm.gshm_release(np.array([1, 2, 3], np.uint64), np.array([9, 10, 11]),
                                  1.0, 10.0, ZERO)
    assert keys.tolist() == [2, 3] and est.tolist() == [10.0, 11.0]


def test_units_are_matched_exactly_not_by_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    # Review 2 F3: with units hashed under a public seed, two colliding units shared
    # one cap of m (a unit's removal could then change 2m counts). Make every str
    # hash collide: PAMG must still cap each unit on its own.
    import sketches.windowed.misra_gries.mg_state as mg_state

    orig = mg_state.ItemCodec.keys

    def colliding(self: mg_state.ItemCodec, items: object) -> np.ndarray:
        out = orig(self, items)
        return np.zeros_like(out) if self.kind == "str" else out

    monkeypatch.setattr(mg_state.ItemCodec, "keys", colliding)
    spec = PAMGSpec(k=8, m=1, eps=1.0, delta=1e-6, item_kind="int", hash_seed=1)
    p = PAMG(spec, ZERO)
    p.update_batch(np.array([1, 2, 1, 3]), units=np.array(["ua", "ub", "uc", "ua"]))
    assert p.counts() == {1: 2, 2: 1}
    assert p.dropped == 1  # ua's second distinct item (3) is over its cap of 1


def test_state_round_trip_keeps_named_and_anonymous_units() -> None:
    spec = PAMGSpec(k=8, m=2, eps=1.0, delta=1e-6, item_kind="int", hash_seed=1)
    noise = make_noise("zero", allow_insecure=True)
    p = PAMG(spec, noise)
    p.update_batch(np.array([5, 6]), units=np.array(["alice", "bob"]))
    p.update_batch(np.array([7]))
    back = PAMG.from_bytes(p.to_bytes(), noise)
    back.update_batch(np.array([8, 9]), units=np.array(["alice", "alice"]))
    p.update_batch(np.array([8, 9]), units=np.array(["alice", "alice"]))
    assert back.counts() == p.counts()
    assert back.dropped == p.dropped == 1


def test_format_1_state_with_hashed_units_still_restores() -> None:
    from dataclasses import asdict

    from sketches.core.serialization import pack

    spec = PAMGSpec(k=8, m=2, eps=1.0, delta=1e-6, item_kind="int", hash_seed=1)
    mask = (1 << 64) - 1
    # as written by format 1: unit 77 (a hashed name) with items 5, 6; anonymous unit 0
    v1 = pack("pamg", asdict(spec), {"format": 1, "released": False, "dropped": 0, "labels": {}},
              {"units": np.array([77, 0], np.uint64), "anon": np.array([False, True]),
               "lens": np.array([2, 1], np.int64), "items": np.array([5, 6, 7], np.uint64)})
    p = PAMG.from_bytes(v1, ZERO)
    assert p._pending == {77: [5, 6], mask + 1: [7]}
    assert p.counts() == {5: 1, 6: 1, 7: 1}


def test_unreleased_format_1_window_keeps_hashed_units_for_its_cap() -> None:
    # review of this change: a format-1 window keyed units by hash; after the upgrade
    # the same unit must still hit the same set (else it gets 2 caps: sensitivity 2m)
    from dataclasses import asdict

    from sketches.core.hashing import HashSpec
    from sketches.core.serialization import pack

    spec = PAMGSpec(k=8, m=2, eps=1.0, delta=1e-6, item_kind="int", hash_seed=1)
    alice = int(HashSpec(seed=spec.hash_seed ^ 0x5A5A, depth=1, width=1).item_keys(["alice"])[0])
    v1 = pack("pamg", asdict(spec), {"format": 1, "released": False, "dropped": 0, "labels": {}},
              {"units": np.array([alice], np.uint64), "anon": np.array([False]),
               "lens": np.array([2], np.int64), "items": np.array([1, 2], np.uint64)})
    p = PAMG.from_bytes(v1, ZERO)
    p.update_batch(np.array([3, 4]), units=np.array(["alice", "alice"]))
    assert p.dropped == 2 and p.counts() == {1: 1, 2: 1}
    again = PAMG.from_bytes(p.to_bytes(), ZERO)  # the legacy keying survives a checkpoint
    again.update_batch(np.array([5]), units=np.array(["alice"]))
    assert again.dropped == 3 and again.counts() == {1: 1, 2: 1}
