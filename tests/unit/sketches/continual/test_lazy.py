"""LazyCMS / LazyCS: vectorised batch == per-event reference of Algorithm 5.

The reference below is a deliberately naive, per-event transcription of
Algorithm 5 (paper 002) with explicit GaussBM trees: every node is an interval
of rounds with an exact sum, and queries decompose ``[1, r]`` into dyadic
nodes. Noise follows the documented canonical rule of sketches.counters.gauss_bm (one
draw of ``n`` values per level completed in a call, at the end of the call,
ascending level). It is independent of the vectorised code path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import FastNoise, NoiseSource, ZeroNoise
from sketches.errors import HorizonExceededError, PrivacyError, SpecError
from sketches.privacy import Calibrator, Clock, Relation


class ReferenceLazy:
    """Per-event Algorithm 5 with explicit binary trees (test oracle)."""

    def __init__(self, sketch: LazyCMS | LazyCS, noise: NoiseSource) -> None:
        spec = sketch.spec
        self.d, self.w, self.cpt = spec.depth, spec.width, spec.cpt
        self.spr = spec.steps_per_round
        self.hash = sketch.hash
        self.signed = sketch.signed
        self.sigma = sketch.calibration.sigma
        self.integer = sketch.calibration.integer_noise
        self.noise = noise
        self.P = np.zeros((self.d, self.w), dtype=np.int64)
        self.inc: dict[int, np.ndarray] = {}  # round -> (d, w) increments
        self.pushes = np.zeros(self.w, dtype=np.int64)  # rounds received per column
        self.node_noise: dict[tuple[int, int], np.ndarray] = {}
        self.step = 0
        self.rounds_opened = 0
        self.arrival = spec.clock.value == "arrival"

    def _add_event(self, item: object) -> None:
        key = self.hash.item_keys(np.array([item]))
        b = self.hash.buckets(key)[:, 0]
        s = self.hash.signs(key)[:, 0]
        for i in range(self.d):
            self.P[i, b[i]] += int(s[i]) if self.signed else 1

    def _close_step(self, opened: list[int]) -> None:
        first = (self.step * self.cpt) % self.w
        r = (self.step * self.cpt) // self.w + 1
        if first == 0:
            opened.append(r)
            self.inc[r] = np.zeros((self.d, self.w), dtype=np.int64)
        for j in range(first, first + self.cpt):
            self.inc[r][:, j] += self.P[:, j]
            self.P[:, j] = 0
            self.pushes[j] += 1
        self.step += 1

    def _draw(self, opened: list[int]) -> None:
        last_per_level: dict[int, int] = {}
        for r in opened:
            last_per_level[(r & -r).bit_length() - 1] = r
        for level in sorted(last_per_level):
            r = last_per_level[level]
            n = self.d * self.w
            if self.integer:
                vals = self.noise.discrete_gaussian(self.sigma, n)
            else:
                vals = self.noise.gaussian(self.sigma, n)
            self.node_noise[(level, (r >> level) - 1)] = np.asarray(vals).reshape(self.d, self.w)

    def update(self, items: np.ndarray, ticks: np.ndarray | None = None) -> None:
        opened: list[int] = []
        if self.arrival:
            for x in items:
                self._add_event(x)
                self._close_step(opened)
        else:
            assert ticks is not None
            if len(items):
                last = int(ticks[-1])
                for x, tk in zip(items, ticks, strict=True):
                    while self.step < int(tk):
                        self._close_step(opened)
                    self._add_event(x)
                assert self.step == last
        self._draw(opened)

    def advance_to(self, tick: int) -> None:
        opened: list[int] = []
        while self.step < tick:
            self._close_step(opened)
        self._draw(opened)

    def matrix(self) -> np.ndarray:
        out = np.zeros((self.d, self.w), dtype=np.float64)
        for j in range(self.w):
            r = int(self.pushes[j])
            total = 0.0 * out[:, j]
            start = 0
            for level in reversed(range(r.bit_length())):
                if (r >> level) & 1:
                    rounds = range(start + 1, start + (1 << level) + 1)
                    exact = sum(self.inc[q][:, j] for q in rounds)
                    idx = (start >> level)
                    total = total + exact + self.node_noise[(level, idx)][:, j]
                    start += 1 << level
            out[:, j] = total
        return out


def _spec(clock: str, relation: str, cpt: int | None = None, width: int = 8,
          horizon: int = 4000, calibrator: str = "discrete") -> LazySketchSpec:
    return LazySketchSpec(depth=3, width=width, horizon=horizon, eps=1.0, delta=1e-6,
                          relation=Relation(relation), clock=Clock(clock),
                          columns_per_tick=cpt, calibrator=Calibrator(calibrator), hash_seed=11)


CASES = [
    ("arrival", "replace", None),
    ("tick", "add_remove", 2),
    ("tick", "add_remove", 8),
    ("tick", "replace", 1),
]


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
@pytest.mark.parametrize(("clock", "relation", "cpt"), CASES)
@pytest.mark.parametrize("noise_kind", ["zero", "fast"])
def test_batch_equals_sequential_reference(cls, clock, relation, cpt, noise_kind):
    """Vectorised update == per-event Algorithm 5, state and queries, any batching.

    Batches of random sizes (not aligned with rounds), ticks with gaps (empty
    ticks) and advance_to calls; deterministic: zero noise and FastNoise(5).
    """
    rng = np.random.default_rng(3)
    spec = _spec(clock, relation, cpt)
    make = (lambda: ZeroNoise()) if noise_kind == "zero" else (lambda: FastNoise(5))
    sk = cls(spec, make())
    ref = ReferenceLazy(sk, make())
    tick = 0
    for _ in range(25):
        n = int(rng.integers(0, 40))
        items = rng.integers(0, 30, n)
        if clock == "arrival":
            sk.update_batch(items)
            ref.update(items)
        else:
            ticks = np.sort(tick + rng.integers(0, 9, n)).astype(np.int64)
            sk.update_batch(items, ticks=ticks)
            ref.update(items, ticks)
            if n:
                tick = int(ticks[-1])
            if rng.random() < 0.3:
                tick += int(rng.integers(0, 12))
                sk.advance_to(tick)
                ref.advance_to(tick)
        np.testing.assert_array_equal(sk._P, ref.P)
        np.testing.assert_allclose(sk.noisy_matrix(), ref.matrix(), rtol=0, atol=1e-9)
    assert sk.rounds > 3
    q = np.arange(30)
    np.testing.assert_allclose(sk.query(q), sk.query(q))  # queries draw no noise


def test_batch_sizes_do_not_change_zero_noise_state():
    """One big batch == many small batches (zero noise), CS arrival clock."""
    spec = _spec("arrival", "replace")
    items = np.random.default_rng(1).integers(0, 50, 997)
    a, b = LazyCS(spec, ZeroNoise()), LazyCS(spec, ZeroNoise())
    a.update_batch(items)
    for chunk in np.array_split(items, 13):
        b.update_batch(chunk)
    np.testing.assert_array_equal(a.noisy_matrix(), b.noisy_matrix())
    np.testing.assert_array_equal(a._P, b._P)


def _exact(spec: LazySketchSpec, items: np.ndarray, signed: bool) -> np.ndarray:
    h = spec.hash_spec
    keys = h.item_keys(items)
    b, s = h.buckets_and_signs(keys)
    m = np.zeros((spec.depth, spec.width), dtype=np.int64)
    for i in range(spec.depth):
        np.add.at(m[i], b[i], s[i] if signed else 1)
    return m


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
def test_zero_noise_lag_bounds_and_round_boundary(cls):
    """Zero noise: lag within [-w, 0] (CMS) / [-w, w] (CS) at every step; at a
    round boundary every column holds the exact count up to its own push."""
    spec = _spec("arrival", "replace", width=16)
    rng = np.random.default_rng(7)
    items = rng.zipf(1.5, 1600) % 40
    sk = cls(spec, ZeroNoise())
    w = spec.width
    for t in range(0, 1600, 37):
        sk.update_batch(items[t : t + 37])
        seen = items[: min(t + 37, 1600)]
        q = np.arange(40)
        true = np.bincount(seen, minlength=40)[q]
        exact_sketch = _exact(spec, seen, cls is LazyCS)
        full = (np.min(exact_sketch[np.arange(spec.depth)[:, None],
                                    spec.hash_spec.buckets(spec.hash_spec.item_keys(q))], axis=0)
                if cls is LazyCMS else None)
        est = sk.query(q)
        if cls is LazyCMS:
            diff = est - full
            assert np.all(diff <= 0) and np.all(diff >= -w)
            assert np.all(est >= true - w)
        else:
            m = sk.noisy_matrix()
            assert np.all(np.abs(m - exact_sketch) <= w)
    # round boundary: every column j holds exactly the events up to its push step
    n_round = (len(items) // w) * w
    sk2 = cls(spec, ZeroNoise())
    sk2.update_batch(items[:n_round])
    m = sk2.noisy_matrix()
    for j in range(w):
        upto = items[: n_round - w + j + 1]
        np.testing.assert_array_equal(m[:, j], _exact(spec, upto, cls is LazyCS)[:, j])


def test_tick_boundary_exact_when_all_columns_pushed():
    spec = _spec("tick", "add_remove", cpt=None, width=16)
    items = np.random.default_rng(2).integers(0, 100, 500)
    ticks = np.repeat(np.arange(10), 50)
    sk = LazyCMS(spec, ZeroNoise())
    sk.update_batch(items, ticks=ticks)
    sk.advance_to(10)
    np.testing.assert_array_equal(sk.noisy_matrix(), _exact(spec, items, False))


def test_horizon_exceeded_raises_and_leaves_state():
    spec = _spec("arrival", "replace", horizon=100)
    sk = LazyCMS(spec, ZeroNoise())
    sk.update_batch(np.arange(90))
    before = sk.to_bytes()
    with pytest.raises(HorizonExceededError, match="horizon"):
        sk.update_batch(np.arange(11))
    assert sk.to_bytes() == before
    sk.update_batch(np.arange(10))
    tick = LazyCMS(_spec("tick", "add_remove", cpt=4, horizon=50), ZeroNoise())
    with pytest.raises(HorizonExceededError):
        tick.update_batch(np.array([1]), ticks=np.array([50]))
    with pytest.raises(HorizonExceededError):
        tick.advance_to(51)
    tick.advance_to(50)
    assert tick.rounds == tick.spec.rounds


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"depth": 0}, "depth"),
        ({"width": -1}, "width"),
        ({"horizon": 0}, "horizon"),
        ({"eps": 0.0}, "eps"),
        ({"delta": 1.5}, "delta"),
        ({"columns_per_tick": 3}, "columns_per_tick"),
        ({"relation": "neighbours"}, "relation"),
        ({"unit_cap": 0}, "unit_cap"),
        ({"clock": "arrival", "relation": "replace", "columns_per_tick": 2},
         "columns_per_tick"),
    ],
)
def test_bad_specs_raise_spec_error_naming_field(kwargs, field):
    base: dict[str, object] = {"depth": 2, "width": 8, "horizon": 100, "eps": 1.0,
                               "delta": 1e-6}
    base.update(kwargs)
    with pytest.raises(SpecError, match=rf"^{field}:"):
        LazySketchSpec(**base)  # type: ignore[arg-type]


def test_arrival_clock_refused_under_add_remove():
    with pytest.raises(PrivacyError, match="clock"):
        LazySketchSpec(depth=2, width=8, horizon=100, eps=1.0, delta=1e-6,
                       relation=Relation.ADD_REMOVE, clock=Clock.ARRIVAL)


def test_bad_ticks_raise():
    sk = LazyCMS(_spec("tick", "add_remove", cpt=4), ZeroNoise())
    with pytest.raises(SpecError, match=r"^ticks:"):
        sk.update_batch(np.arange(3))
    with pytest.raises(SpecError, match=r"^ticks:"):
        sk.update_batch(np.arange(3), ticks=np.array([2, 1, 3]))
    sk.update_batch(np.arange(3), ticks=np.array([5, 5, 6]))
    with pytest.raises(SpecError, match=r"^ticks:"):
        sk.update_batch(np.arange(1), ticks=np.array([5]))
    with pytest.raises(SpecError, match=r"^weights:"):
        sk.update_batch(np.arange(1), ticks=np.array([6]), weights=np.ones(1))


def test_release_payload_is_public_and_queryable():
    from sketches.core.release import query_release

    sk = LazyCS(_spec("tick", "add_remove", cpt=4), FastNoise(1))
    items = np.random.default_rng(0).integers(0, 10, 300)
    sk.update_batch(items, ticks=np.repeat(np.arange(30), 10))
    rel = sk.release()
    assert rel["kind"] == "sketch" and rel["estimator"] == "median"
    assert rel["lag_bound"] == 2 and rel["lag_unit"] == "ticks"
    assert rel["error_bound"]["beta"] == 0.05 and rel["error_bound"]["noise"] > 0
    np.testing.assert_allclose(query_release(rel, np.arange(10)), sk.query(np.arange(10)))
    assert set(rel) >= {"hash", "matrix", "rounds", "error_bound", "lag_bound"}


def test_lemma5_bound_holds_in_most_seeded_trials():
    """Lemma 5 (LazyCMS, exact-sigma noise term from release()['error_bound']):
    -noise - w <= f_hat - f <= (e/w) t + noise at every checked time, for all
    items, w.p. >= 1 - beta (depth = ceil(ln(2T/beta)) as the lemma requires).
    20 seeded trials with beta = 0.05: violations ~ Bin(20, <= 0.05); allowing 4
    gives a false-failure rate <= P[Bin(20, 0.05) >= 5] ~ 0.003."""
    horizon, width, beta = 2048, 32, 0.05
    from sketches.privacy import lemma5_depth

    depth = lemma5_depth(horizon, beta)
    spec = LazySketchSpec(depth=depth, width=width, horizon=horizon, eps=1.0, delta=1e-6,
                          relation=Relation.REPLACE, clock=Clock.ARRIVAL)
    items = np.random.default_rng(0).zipf(1.2, horizon) % 300
    q = np.arange(300)
    violations = 0
    for seed in range(20):
        sk = LazyCMS(spec, FastNoise(100 + seed))
        eb = sk.release(beta=beta)["error_bound"]
        assert eb["collision_depth_ok"]
        bad = False
        for t in range(256, horizon + 1, 256):
            sk.update_batch(items[t - 256 : t])
            err = sk.query(q) - np.bincount(items[:t], minlength=300)
            bad |= bool(np.any(err < -eb["noise"] - width)
                        or np.any(err > eb["eta"] * t + eb["noise"]))
        violations += bad
    assert violations <= 4


def test_memory_close_to_minimum_and_registry():
    """memory_bytes <= 1.2 x (d*w counters + one node per level per counter)."""
    from sketches.core.base import lookup

    spec = LazySketchSpec(depth=4, width=1024, horizon=2**20, eps=1.0, delta=1e-6)
    sk = LazyCMS(spec, ZeroNoise())
    levels = sk._counters.levels
    minimum = 8 * spec.depth * spec.width * (1 + levels)
    assert minimum <= sk.memory_bytes() <= 1.2 * minimum
    entry = lookup("lazy_cs")
    built = entry.build(entry.build_spec({"depth": 2, "width": 8, "horizon": 10, "eps": 1.0,
                                          "delta": 1e-6, "columns_per_tick": 4}), ZeroNoise())
    assert isinstance(built, LazyCS) and entry.continual
    with pytest.raises(SpecError, match=r"^colums_per_tick:"):
        entry.build_spec({"depth": 2, "width": 8, "horizon": 10, "eps": 1.0, "delta": 1e-6,
                          "colums_per_tick": 4})


class FailingNoise(FastNoise):
    """FastNoise whose ``fail_at``-th noise draw (1-based) raises (test double)."""

    def __init__(self, fail_at: int, seed: int = 0) -> None:
        super().__init__(seed)
        self.calls, self.fail_at = 0, fail_at

    def _tick(self) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("noise source failed")

    def gaussian(self, sigma: float, size: Any) -> np.ndarray:
        self._tick()
        return super().gaussian(sigma, size)

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        self._tick()
        return super().discrete_gaussian(sigma, size)


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
@pytest.mark.parametrize(("clock", "relation", "cpt"), CASES)
@pytest.mark.parametrize("calibrator", ["discrete", "analytic"])
@pytest.mark.parametrize("via", ["update_batch", "advance_to"])
def test_failed_noise_draw_is_atomic(cls, clock, relation, cpt, calibrator, via):
    """A noise draw failing inside update_batch/advance_to (the 2nd draw of the
    call) leaves P, the counters and the clock exactly as before the call: the
    release afterwards is byte-identical to the one before (noisy, never the
    exact counts), and the sketch continues when the source works again."""
    spec = _spec(clock, relation, cpt, calibrator=calibrator)
    tick = clock == "tick"
    rng = np.random.default_rng(3)
    noise = FailingNoise(fail_at=0)
    sk = cls(spec, noise)
    first = rng.integers(0, 50, 40)
    sk.update_batch(first, ticks=np.arange(40) // 10 if tick else None)
    state, rel = sk.to_bytes(), sk.release()
    noise.fail_at = noise.calls + 2
    items = rng.integers(0, 50, 400)
    ticks = 4 + np.arange(400) // 10 if tick else None
    with pytest.raises(RuntimeError):
        if via == "advance_to" and tick:
            sk.advance_to(200)
        else:
            sk.update_batch(items, ticks=ticks)
    assert sk.to_bytes() == state
    assert sk.release() == rel
    sk.update_batch(items, ticks=ticks)
    assert sk.steps_closed == (43 if tick else 440)


@pytest.mark.parametrize(("calibrator", "flag"),
                         [("discrete", False), ("analytic", True), ("paper", True)])
def test_release_states_float_noise(calibrator, flag):
    spec = LazySketchSpec(depth=2, width=8, horizon=100, eps=0.5, delta=1e-6,
                          columns_per_tick=2, calibrator=Calibrator(calibrator))
    sk = LazyCMS(spec, FastNoise(0))
    sk.update_batch(np.arange(5), ticks=np.zeros(5, np.int64))
    assert sk.release()["float_noise"] is flag


def test_query_release_recomputes_v2_hash_and_refuses_other_versions():
    from sketches.core.release import query_release

    sk = LazyCMS(_spec("tick", "add_remove", 8), FastNoise(2))
    items = np.array(["10.0.0.1", "10.0.0.2", "x"] * 20, dtype=object)
    sk.update_batch(items, ticks=np.zeros(60, np.int64))
    sk.advance_to(1)
    rel = sk.release()
    np.testing.assert_array_equal(query_release(rel, ["10.0.0.1", "x", "zz"]),
                                  sk.query(np.array(["10.0.0.1", "x", "zz"])))
    old = {**rel, "hash": {**rel["hash"], "algorithm": "dpstream-fmix64-v1", "version": 1}}
    with pytest.raises(SpecError, match=r"hash\.algorithm"):
        query_release(old, ["x"])


def test_tick_batches_are_checked_and_normalised_like_the_schedule_needs():
    """Survivors of the first mutation run of lazy_schedule.py (issue 20c): a decrease after
    the first pair is refused; the horizon error names the tick and the horizon; ticks given
    as floats or as an (n, 1) column are the int64 vector they stand for."""
    sk = LazyCMS(_spec("tick", "add_remove", cpt=4, horizon=50), ZeroNoise())
    with pytest.raises(SpecError, match=r"^ticks: must be non-decreasing"):
        sk.update_batch(np.arange(3), ticks=np.array([0, 2, 1]))
    with pytest.raises(HorizonExceededError, match=r"^horizon: tick 50 is past the horizon of 50"):
        sk.update_batch(np.arange(1), ticks=np.array([50]))
    items = np.array([3, 4, 4, 7])
    ref = LazyCMS(_spec("tick", "add_remove", cpt=4, horizon=50), ZeroNoise())
    ref.update_batch(items, ticks=np.array([0, 1, 1, 3]))
    as_float = LazyCMS(_spec("tick", "add_remove", cpt=4, horizon=50), ZeroNoise())
    as_float.update_batch(items, ticks=np.array([0.0, 1.0, 1.0, 3.0]))
    column = LazyCMS(_spec("tick", "add_remove", cpt=4, horizon=50), ZeroNoise())
    column.update_batch(items, ticks=np.array([[0], [1], [1], [3]]))
    assert as_float.to_bytes() == ref.to_bytes() == column.to_bytes()
    assert ref.steps_closed == 3
