"""LazyHH (paper 002, Algorithm 6): batch == per-event reference, thresholds, release, state.

The reference below is a straightforward per-event transcription of
Algorithm 6: one ``LazyCMS.update_batch`` call per event, a dict of
candidates, one ``LazyCMS.query`` per candidate at every output time (so it
also cross-checks LazyHH's cached cell gather against Algorithm 4), and the
top-``k~`` trim with the documented tie-break (larger estimate, then smaller
key). Thresholds come from ``LazyHH.params`` (the formulas are tested
separately against the paper's statements).
"""

from __future__ import annotations

import copy
import doctest
import itertools
import json
import math

import numpy as np
import pytest

import sketches.continual.lazy_hh.sketch
import sketches.continual.lazy_hh.spec
import sketches.continual.lazy_hh.state
import sketches.core.candidates
from sketches.continual.lazy import LazyCMS
from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.base import lookup
from sketches.core.noise import FastNoise, ZeroNoise
from sketches.counters.gauss_bm import ContinualCounters
from sketches.errors import HorizonExceededError, PrivacyError, SerializationError, SpecError
from sketches.privacy import Clock, alg6_gamma, delta_tilde, lazyhh_gamma


class ConstantNoise:
    """Deterministic stand-in NoiseSource: every draw is the same non-zero value.

    Independent of how draws are grouped into calls, so batch and per-event
    runs see identical noise even when they open rounds in different calls.
    """

    kind = "zero"

    def gaussian(self, sigma: float, size: int | tuple[int, ...]) -> np.ndarray:
        return np.full(size, 1.75)

    def discrete_gaussian(self, sigma: float, size: int | tuple[int, ...]) -> np.ndarray:
        return np.full(size, 3, dtype=np.int64)

    def random_bytes(self, n: int) -> bytes:
        return bytes(range(n))


# --------------------------------------------------------------------------- reference
class _KeyedHash:
    """A HashSpec whose ``item_keys`` is LazyHH's (keyed PRF for str items)."""

    def __init__(self, inner: object, keyer: object) -> None:
        self._inner, self.item_keys = inner, keyer

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


class ReferenceHH:
    """Per-event Algorithm 6 (arrival clock) and its tick-clock variant (test oracle)."""

    def __init__(self, hh: LazyHH, noise: object) -> None:
        self.spec, self.th = hh.spec, hh.params.thresholds
        self.sk = LazyCMS(hh.sketch_spec, noise)  # type: ignore[arg-type]
        # LazyHH keys str items by its secret keyed PRF (issue 8), not the public chain
        self.sk.hash = _KeyedHash(self.sk.hash, hh._item_keys)  # type: ignore[assignment]
        cal = hh.params.count
        self.counter = None if cal is None else ContinualCounters(
            1, hh.spec.horizon, cal.sigma, cal.integer_noise, noise)  # type: ignore[arg-type]
        self.count_error = hh.params.count_error
        self.cands: dict[int, object] = {}
        self.hh: list[tuple[object, float]] = []
        self.threshold: float | None = None
        self.t = 0
        self.boundary = 0
        self.pending = [0] * hh.spec.output_every

    def _key(self, x: object) -> int:
        return int(self.sk.hash.item_keys(np.array([x]))[0])

    def _output(self) -> None:
        if self.counter is None:
            t_hat = t_up = float(self.t)
        else:
            t_hat = float(self.counter.query()[0])
            t_up = t_hat + self.count_error + self.spec.unit_cap
        tau = self.th.threshold(max(t_hat, 0.0), t_up)
        est = {k: self.sk.query(np.array([x]))[0] for k, x in self.cands.items()}
        hot = sorted((k for k in est if est[k] > tau), key=lambda k: (-est[k], k))
        self.hh = [(self.cands[k], est[k]) for k in hot]
        self.threshold = tau
        keep = sorted(est, key=lambda k: (-est[k], k))[: self.spec.k_tilde]
        self.cands = {k: self.cands[k] for k in keep}

    def arrival(self, x: object) -> None:
        self.sk.update_batch(np.array([x]))
        self.cands[self._key(x)] = x
        self.t += 1
        if self.t % self.spec.k_tilde == 0:
            self._output()

    def _close(self, b: int) -> None:
        self.sk.advance_to(b)
        if self.counter is not None:
            self.counter.advance(np.array(self.pending)[:, None])
        self.pending = [0] * self.spec.output_every
        self.boundary = b
        self._output()

    def tick_event(self, x: object, tick: int) -> None:
        while tick >= self.boundary + self.spec.output_every:
            self._close(self.boundary + self.spec.output_every)
        self.sk.update_batch(np.array([x]), np.array([tick]))
        self.cands[self._key(x)] = x
        self.t += 1
        self.pending[tick - self.boundary] += 1

    def advance_to(self, tick: int) -> None:
        while self.boundary + self.spec.output_every <= tick:
            self._close(self.boundary + self.spec.output_every)


def _assert_same(hh: LazyHH, ref: ReferenceHH) -> None:
    items, est = hh.heavy_hitters()
    assert [(x, v) for x, v in zip(items.tolist(), est.tolist(), strict=True)] == [
        (x, float(v) if isinstance(v, float) else v) for x, v in ref.hh]
    assert hh.release()["threshold"] == ref.threshold
    assert hh._st.cands is not None
    assert sorted(hh._st.cands.keys.tolist()) == sorted(ref.cands)


def _skewed_stream(n: int, seed: int, universe: int = 300) -> np.ndarray:
    """Two very heavy items (7 and 11), a Zipf-like middle and a uniform tail."""
    rng = np.random.default_rng(seed)
    body = rng.zipf(1.3, n) % universe + 100
    pick = rng.random(n)
    return np.where(pick < 0.6, 7, np.where(pick < 0.8, 11, body)).astype(np.int64)


def _split(n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, n), size=12, replace=False))
    return [0, *cuts.tolist(), n]


ARRIVAL = {"relation": "replace", "clock": "arrival", "hash_seed": 11}


@pytest.mark.parametrize(("noise_kind", "calibrator", "chunk", "kt"), [
    ("zero", "analytic", 1 << 15, 16), ("constant", "discrete", 37, 16),
    ("constant", "analytic", 100, 16), ("zero", "analytic", 100, 12)])
def test_arrival_batch_equals_per_event_reference(
    noise_kind: str, calibrator: str, chunk: int, kt: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random, non-aligned batch (and internal chunk) boundaries give exactly the
    per-event Alg. 6 run (k~ = 12: the non-power-of-two column arithmetic)."""
    monkeypatch.setattr(sketches.continual.lazy_hh.sketch, "_CHUNK", chunk)
    n = 1600
    spec = LazyHHSpec(k=2, k_tilde=kt, horizon=n, eps=40.0, delta=1e-3,
                      calibrator=calibrator, **ARRIVAL)  # type: ignore[arg-type]

    def noise() -> object:
        return {"zero": ZeroNoise(), "constant": ConstantNoise()}[noise_kind]

    hh, stream = LazyHH(spec, noise()), _skewed_stream(n, seed=1)  # type: ignore[arg-type]
    ref = ReferenceHH(hh, noise())
    cuts = _split(n, seed=2)
    for a, b in itertools.pairwise(cuts):
        hh.update_batch(stream[a:b])
        for x in stream[a:b].tolist():
            ref.arrival(x)
        _assert_same(hh, ref)
    assert hh.release()["outputs"] == n // kt
    assert len(ref.hh) >= 1  # the comparison covered a non-empty heavy-hitter set


@pytest.mark.parametrize(("calibrator", "chunk"), [("analytic", 100), ("discrete", 1 << 15)])
def test_fast_noise_run_is_independent_of_batch_split(
    calibrator: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random noise: the sketch draws node noise lazily, at the reads of an output
    (sketches.counters.gauss_bm_lazy), so a seeded run can no longer be compared value for
    value with the eager per-event LazyCMS (the node-level equivalence is tested in
    test_gauss_bm_lazy); it must still be a deterministic function of the stream,
    whatever the batch and chunk split."""
    n = 1600
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=n, eps=40.0, delta=1e-3,
                      calibrator=calibrator, **ARRIVAL)  # type: ignore[arg-type]
    stream = _skewed_stream(n, seed=1)
    one = LazyHH(spec, FastNoise(seed=5))
    for x in stream.tolist():
        one.update_batch(np.array([x]))
    monkeypatch.setattr(sketches.continual.lazy_hh.sketch, "_CHUNK", chunk)
    hh = LazyHH(spec, FastNoise(seed=5))
    for a, b in itertools.pairwise(_split(n, seed=2)):
        hh.update_batch(stream[a:b])
    assert hh.to_bytes() == one.to_bytes() and hh.release() == one.release()
    drawn = hh._st.counters._node_noise[hh._st.counters._drawn]  # real, varied noise values
    assert hh.heavy_hitters()[1].size >= 1 and np.unique(drawn).size > 20


@pytest.mark.parametrize(("relation", "every"), [("add_remove", 3), ("add_remove", 1)])
def test_tick_batch_equals_per_event_reference(relation: str, every: int) -> None:
    """Tick clock, DP length counter (add/remove) and empty ticks, any batch split."""
    n, horizon = 1500, 64
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=horizon, eps=40.0, delta=1e-3,
                      relation=relation, clock="tick", event_horizon=4 * n,  # type: ignore[arg-type]
                      output_every=every, hash_seed=3)
    hh = LazyHH(spec, ConstantNoise())  # type: ignore[arg-type]
    ref = ReferenceHH(hh, ConstantNoise())
    stream = _skewed_stream(n, seed=4)
    ticks = np.sort(np.random.default_rng(5).integers(0, 50, n))  # ticks 50..63 stay empty
    cuts = _split(n, seed=6)
    for a, b in itertools.pairwise(cuts):
        hh.update_batch(stream[a:b], ticks[a:b])
        for x, tk in zip(stream[a:b].tolist(), ticks[a:b].tolist(), strict=True):
            ref.tick_event(x, tk)
        _assert_same(hh, ref)
    hh.advance_to(horizon)
    ref.advance_to(horizon)
    _assert_same(hh, ref)
    assert hh.release()["outputs"] == horizon // every
    assert len(ref.hh) >= 1


def test_str_items_batch_equals_reference_and_release_strings() -> None:
    n = 800
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=n, eps=40.0, delta=1e-3,
                      calibrator="analytic", **ARRIVAL)  # type: ignore[arg-type]
    stream = np.array([f"10.0.{x % 256}.{x // 256}" for x in _skewed_stream(n, 8)], dtype=object)
    hh = LazyHH(spec, ZeroNoise())
    ref = ReferenceHH(hh, ZeroNoise())
    hh.update_batch(stream[:333])
    hh.update_batch(stream[333:])
    for x in stream.tolist():
        ref.arrival(x)
    _assert_same(hh, ref)
    items = hh.release()["items"]
    assert items and all(isinstance(e["item"], str) for e in items)
    assert items[0]["item"] == "10.0.7.0"


# --------------------------------------------------------------------------- guarantees
def _exact_counts(stream: np.ndarray) -> dict[int, int]:
    keys, counts = np.unique(stream, return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True))


def test_never_reports_below_threshold_and_bounds_hold() -> None:
    """Seeded random noise: every reported estimate exceeds the threshold, and the
    released Lemma 6 interval contains estimate - f for every reported item.
    False-failure rate of the interval check: <= beta = 5e-4 per run (Lemma 6);
    the threshold check cannot fail unless the code is wrong."""
    n = 1 << 14
    spec = LazyHHSpec(k=4, k_tilde=64, horizon=n, eps=0.9, delta=1e-3, calibrator="paper",  # type: ignore[arg-type]
                      **ARRIVAL)  # type: ignore[arg-type]
    hh = LazyHH(spec, FastNoise(seed=9))
    stream = _skewed_stream(n, seed=10)
    hh.update_batch(stream)
    rel = hh.release()
    assert rel["items"], "stream too light for the test to mean anything"
    f = _exact_counts(stream)  # n is a multiple of k~: the last output is at t = n
    items, est = hh.heavy_hitters()  # unrounded (the release rounds float estimates)
    assert [e["item"] for e in rel["items"]] == items.tolist()
    assert [e["estimate"] for e in rel["items"]] == np.rint(est).astype(int).tolist()
    for x, v in zip(items.tolist(), est.tolist(), strict=True):
        assert v > rel["threshold"]
        assert rel["error_bound"]["lower"] <= v - f[x] <= rel["error_bound"]["upper"]


@pytest.mark.parametrize("clock", ["arrival", "tick"])
def test_zero_noise_reports_everything_above_coverage(clock: str) -> None:
    """Theorem 4 coverage with zero noise: f > tau + lambda1 at an output => reported."""
    n = 1 << 15
    kw = ARRIVAL if clock == "arrival" else {
        "relation": "add_remove", "clock": "tick", "event_horizon": n, "hash_seed": 11}
    spec = LazyHHSpec(k=8, k_tilde=64, horizon=n if clock == "arrival" else 32, eps=30.0,
                      delta=1e-3, calibrator="analytic", **kw)  # type: ignore[arg-type]
    rng = np.random.default_rng(12)
    shares = np.array([0.2, 0.17, 0.15, 0.05, 0.03])  # then a uniform tail over 5000 items
    stream = np.concatenate([np.repeat(np.arange(5), (shares * n).astype(int)),
                             rng.integers(100, 5100, n - int((shares * n).astype(int).sum()))])
    stream = rng.permutation(stream).astype(np.int64)
    hh = LazyHH(spec, ZeroNoise())
    if clock == "arrival":
        hh.update_batch(stream)
    else:
        hh.update_batch(stream, np.sort(rng.integers(0, 32, n)))
        hh.advance_to(32)
    rel = hh.release()
    cover = rel["error_bound"]["coverage"]
    heavy = {x for x, c in _exact_counts(stream).items() if c > cover}
    reported = {e["item"] for e in rel["items"]}
    assert len(heavy) >= 2
    assert heavy <= reported
    assert rel["threshold"] > n / spec.k  # tau >= tau1 = t/k (t_hat = t with zero noise)


# --------------------------------------------------------------------------- parameters
def test_parameters_follow_lemma6_and_theorem3() -> None:
    t, kt, beta = 22_995_712, 512, 5e-4
    spec = LazyHHSpec(k=128, k_tilde=kt, horizon=t, eps=0.5, delta=1e-3, beta=beta,
                      calibrator="paper", **ARRIVAL)  # type: ignore[arg-type]
    hh = LazyHH(spec, ZeroNoise())
    d = hh.sketch_spec.depth
    assert d == math.ceil(math.log2(4 * t / beta)) == 38  # log2, not ln (Markov halving)
    cal = hh.calibration
    assert LazyCMS(hh.sketch_spec, ZeroNoise()).calibration == cal  # same as a LazyCMS
    exact = lazyhh_gamma(cal.sigma, levels=cal.levels, depth=d, k_tilde=kt, outputs=t // kt,
                         beta=beta)
    assert hh.params.gamma == max(exact, alg6_gamma(0.5, 1e-3, horizon=t, k_tilde=kt, beta=beta))
    th = hh.params.thresholds
    assert (th.lag, th.lambda1) == (kt, hh.params.gamma + kt)
    assert th.tau2(1e6) == pytest.approx(5e6 / kt + 3 * hh.params.gamma + kt)
    priv = hh.privacy()
    keys = (t + 2) ** 2 / 2**129  # any item-key collision among the N + 2c items (10.4)
    assert priv["delta_tilde"] == pytest.approx(2e-3 * (1.5 + math.exp(0.5) + 1e-3) + keys)


def test_add_remove_budget_split_and_reported_guarantee() -> None:
    spec = LazyHHSpec(k=4, k_tilde=32, horizon=100, eps=1.0, delta=1e-4, clock="tick",  # type: ignore[arg-type]
                      event_horizon=10**6, count_fraction=0.2, hash_seed=1)
    hh = LazyHH(spec, ZeroNoise())
    rel = hh.release()
    b = rel["budget"]
    assert b["sketch"]["eps"] + b["length"]["eps"] == pytest.approx(1.0)
    assert b["length"]["eps"] == pytest.approx(0.2)
    keys = (10**6 + 2) ** 2 / 2**129  # any item-key collision among N + 2c items (10.4)
    expect = delta_tilde(0.8, 0.8e-4) + math.exp(0.8) * 0.2e-4 + spec.beta_value + keys
    assert rel["delta_tilde"] == pytest.approx(expect)
    assert (rel["eps"], rel["length_public"], rel["items"]) == (1.0, False, [])
    assert hh.params.thresholds.lag == 0  # tick clock: all columns pushed per tick


def test_spec_validation_names_the_field() -> None:
    base = {"k": 4, "k_tilde": 16, "horizon": 1000, "eps": 0.5, "delta": 1e-3}
    with pytest.raises(SpecError, match="k_tilde"):
        LazyHHSpec(**{**base, "k_tilde": 4}, **ARRIVAL)  # type: ignore[arg-type]
    with pytest.raises(PrivacyError, match="clock"):
        LazyHHSpec(**base, clock="arrival")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="event_horizon"):
        LazyHHSpec(**base, clock="tick")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="beta"):
        LazyHHSpec(**base, beta=2e-3, **ARRIVAL)  # type: ignore[arg-type]


def test_runtime_refusals() -> None:
    spec = LazyHHSpec(k=2, k_tilde=8, horizon=64, eps=0.5, delta=1e-3, **ARRIVAL)  # type: ignore[arg-type]
    hh = LazyHH(spec, ZeroNoise())
    with pytest.raises(HorizonExceededError):
        hh.update_batch(np.zeros(65, dtype=np.int64))
    hh.update_batch(np.arange(10))
    with pytest.raises(SpecError, match="items"):
        hh.update_batch(np.array(["a"], dtype=object))
    with pytest.raises(SpecError, match="ticks"):
        hh.update_batch(np.arange(3), np.arange(3))
    with pytest.raises(SpecError, match="weights"):
        hh.update_batch(np.arange(3), weights=np.ones(3))


# --------------------------------------------------------------------------- release/state
def test_release_payload_is_public_json_with_typed_items() -> None:
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=1024, eps=40.0, delta=1e-3,
                      calibrator="analytic", **ARRIVAL)  # type: ignore[arg-type]
    hh = LazyHH(spec, ZeroNoise())
    hh.update_batch(np.array([b"\x00ab"] * 700 + [b"x%d" % i for i in range(324)], dtype=object))
    rel = json.loads(json.dumps(hh.release()))
    assert rel["kind"] == "heavy_hitters"
    assert rel["items"] == [{"item": "AGFi", "estimate": rel["items"][0]["estimate"],
                             "item_encoding": "base64"}]
    for key in ("threshold", "error_bound", "delta_tilde", "eps", "delta", "budget", "t_estimate"):
        assert rel[key] is not None
    assert set(rel["error_bound"]) >= {"lower", "upper", "coverage", "gamma"}
    assert rel["t_estimate"] == 1024 and rel["length_public"] is True


@pytest.mark.parametrize("clock", ["arrival", "tick"])
def test_state_round_trip_continues_exactly(clock: str) -> None:
    n = 2000
    kw = ARRIVAL if clock == "arrival" else {
        "relation": "add_remove", "clock": "tick", "event_horizon": n}
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=n if clock == "arrival" else 40, eps=40.0,
                      delta=1e-3, calibrator="discrete", output_every=1 if clock == "arrival"  # type: ignore[arg-type]
                      else 2, **kw)  # type: ignore[arg-type]
    stream = _skewed_stream(n, 13)
    ticks = None if clock == "arrival" else np.sort(np.random.default_rng(3).integers(0, 40, n))

    def feed(h: LazyHH, a: int, b: int) -> None:
        h.update_batch(stream[a:b], None if ticks is None else ticks[a:b])

    noise = FastNoise(seed=21)
    hh = LazyHH(spec, noise)
    feed(hh, 0, 777)
    restored = LazyHH.from_bytes(hh.to_bytes(), copy.deepcopy(noise))
    assert restored.to_bytes() == hh.to_bytes()
    for h in (hh, restored):
        feed(h, 777, n)
    assert restored.release() == hh.release() and restored.release()["items"]
    assert lookup("lazy_hh").from_bytes(hh.to_bytes(), noise).to_bytes() == hh.to_bytes()
    with pytest.raises(SerializationError):
        LazyHH.from_bytes(hh.to_bytes()[:-3], noise)


def test_registry_builds_from_worker_params() -> None:
    params = {"k": 8, "k_tilde": 32, "event_horizon": 10**6, "eps": 1.0, "delta": 1e-6,
              "relation": "add_remove", "clock": "tick", "horizon": 3600, "unit_cap": 1}
    for name in ("lazy_hh", "LazyHH"):
        entry = lookup(name)
        spec = entry.build_spec(params)
        assert isinstance(entry.build(spec, ZeroNoise()), LazyHH) and entry.continual
    with pytest.raises(SpecError, match="kk"):
        lookup("lazy_hh").build_spec({**params, "kk": 1})


@pytest.mark.parametrize("module", [sketches.continual.lazy_hh.sketch,
                                    sketches.continual.lazy_hh.spec,
                                    sketches.continual.lazy_hh.state,
                                    sketches.core.candidates])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


def test_candidate_trim_matches_sorted_top_k_with_ties() -> None:
    """The partition-based trim keeps exactly arg top-k~ under (estimate desc, key asc)."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, keep = int(rng.integers(1, 60)), int(rng.integers(1, 70))
        keys = np.sort(rng.choice(10**6, n, replace=False)).astype(np.uint64)
        est = rng.integers(0, 5, n).astype(float)  # many ties
        c = sketches.core.candidates.CandidateSet(1, integer_items=True)
        c.add(keys, keys.astype(np.int64), np.zeros((1, n), dtype=np.int64))
        c.trim(est, keep)
        order = sketches.core.candidates.top_order(est, keys)[:keep]
        assert c.keys.tolist() == np.sort(keys[order]).tolist()


def test_candidate_membership_with_colliding_slots() -> None:
    """missing() is exact when members share table slots (low key bits), across add/trim."""
    rng = np.random.default_rng(1)
    c = sketches.core.candidates.CandidateSet(1, integer_items=True)
    universe = (rng.integers(0, 40, 300) * 256 + rng.integers(0, 6, 300)).astype(np.uint64)
    members = np.zeros(0, dtype=np.uint64)
    for _ in range(30):
        query = rng.choice(universe, 80)
        assert c.missing(query).tolist() == (~np.isin(query, members)).tolist()
        new = np.unique(query[c.missing(query)])
        c.add(new, new.astype(np.int64), np.zeros((1, new.size), dtype=np.int64))
        c.trim(rng.random(c.size), int(rng.integers(5, 40)))
        members = c.keys.copy()
    assert c._table is None or c._table.size >= 4 * c.size


def test_private_length_upper_bound_covers_true_length() -> None:
    """Add/remove: t_up = t_hat + E + c >= t at every output (what tau2 relies on).
    Seeded; false-failure rate <= beta = 4.5e-4 for the whole run (union bound in E)."""
    spec = LazyHHSpec(k=2, k_tilde=16, horizon=200, eps=0.5, delta=1e-3, clock=Clock.TICK,
                      event_horizon=10**5, hash_seed=1)
    hh = LazyHH(spec, FastNoise(seed=31))
    rng = np.random.default_rng(32)
    t, slack = 0, []
    for tick in range(200):
        n = int(rng.integers(0, 300))
        hh.update_batch(rng.integers(0, 50, n), np.full(n, tick))
        hh.advance_to(tick + 1)  # closes the tick: one output per tick
        t += n
        last = hh._st.last
        assert last["t_up"] >= t
        slack.append(last["t_hat"] - t)
    assert hh.release()["outputs"] == 200
    assert np.std(slack) > 1.0  # the count is really noisy


def test_unit_cap_enters_calibration_thresholds_and_length_bound() -> None:
    """User-level cap c: sensitivity c in the sketch and the length counter, +c in tau and t_up."""
    kw = {"k": 2, "k_tilde": 16, "horizon": 50, "eps": 1.0, "delta": 1e-4, "clock": Clock.TICK,
          "event_horizon": 10**4, "hash_seed": 1}
    one, three = LazyHH(LazyHHSpec(**kw), ZeroNoise()), LazyHH(  # type: ignore[arg-type]
        LazyHHSpec(**kw, unit_cap=3), ZeroNoise())  # type: ignore[arg-type]
    assert three.calibration.sigma == pytest.approx(3 * one.calibration.sigma, rel=1e-6)
    assert three.params.count is not None and one.params.count is not None
    assert three.params.count.sigma == pytest.approx(3 * one.params.count.sigma, rel=1e-6)
    for hh in (one, three):
        hh.update_batch(np.zeros(10, dtype=np.int64), np.zeros(10, dtype=np.int64))
        hh.advance_to(1)
    th1, th3 = one.params.thresholds, three.params.thresholds
    assert three._st.last["t_up"] - 10 == pytest.approx(3 * (one._st.last["t_up"] - 10 - 1) + 3)
    assert th3.threshold(100.0, 200.0) - th3.tau2(200.0) == 3
    assert th1.threshold(100.0, 200.0) - th1.tau2(200.0) == 1


@pytest.mark.parametrize(("count", "published"), [(17, False), (18, True)])
def test_an_estimate_equal_to_an_integral_threshold_is_not_published(
        count: int, published: bool) -> None:
    """Alg. 6 publishes ``est > tau`` (strict; Theorem 3's privacy argument needs an item
    at the threshold to stay out). With ``gamma = lag = 0`` the threshold is
    ``max(t/k, 5 t/k~) + c = 32/2 + 1 = 17``: integral, so an exact estimate can equal it.
    Zero noise and no length slack (``t_hat = t``, ``t_up = t + c``; add/remove, since the
    tick clock refuses replace), tick clock (no lag): ``a`` with 17 of 32 events sits
    exactly at the threshold and must not be published; with 18 it must be. A ``>=``
    comparison publishes it (issue 24 survivor)."""
    import dataclasses

    from sketches.privacy import LazyHHThresholds

    spec = LazyHHSpec(k=2, k_tilde=16, horizon=8, eps=1.0, delta=1e-4,
                      clock="tick", event_horizon=1000, hash_seed=3)  # type: ignore[arg-type]
    hh = LazyHH(spec, ZeroNoise())
    hh.params = dataclasses.replace(hh.params, count_error=0.0, thresholds=LazyHHThresholds(
        gamma=0.0, k=2, k_tilde=16, lag=0.0, unit_cap=1))
    items = np.array(["a"] * count + ["b"] * (32 - count), dtype=object)
    hh.update_batch(items, np.zeros(32, dtype=np.int64))
    hh.advance_to(1)
    rel = hh.release()
    assert rel["threshold"] == 17.0
    got = {str(x): float(e) for x, e in zip(*hh.heavy_hitters(), strict=True)}
    assert ("a" in got) is published
    if published:
        assert got == {"a": 18.0}
