"""LazyCMS / LazyCS over the counter family (``counter: tree | blt | sqrt``)."""

from __future__ import annotations

import numpy as np
import pytest

from sketches import LazyCMS, LazyCS
from sketches.continual.lazy_spec import LazySketchSpec
from sketches.core.noise import make_noise
from sketches.errors import IncompatibleSpecError, SpecError


def _spec(counter: str, **kw) -> LazySketchSpec:
    base = {"depth": 3, "width": 16, "horizon": 200, "eps": 1.0, "delta": 1e-6,
            "columns_per_tick": 4, "counter": counter}
    base.update(kw)
    return LazySketchSpec(**base)


def _stream(seed: int = 0, n: int = 3000):
    rng = np.random.default_rng(seed)
    return rng.zipf(1.5, n) % 97, np.sort(rng.integers(0, 180, n))


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
@pytest.mark.parametrize("counter", ["blt", "sqrt"])
def test_noise_off_equals_the_tree(cls, counter) -> None:
    """Zero noise: every released matrix equals the tree sketch's (exact lazy counts),
    whatever the batching."""
    zero = make_noise("zero", allow_insecure=True)
    items, ticks = _stream()
    tree, fact = cls(_spec("tree"), zero), cls(_spec(counter), zero)
    tree.update_batch(items, ticks)
    for lo in range(0, items.size, 577):  # other batch boundaries
        fact.update_batch(items[lo:lo + 577], ticks[lo:lo + 577])
    assert np.array_equal(tree.noisy_matrix(), fact.noisy_matrix())  # mid-round: behind mask
    for k in (181, 190, 200):
        tree.advance_to(k)
        fact.advance_to(k)
        assert np.array_equal(tree.noisy_matrix(), fact.noisy_matrix())


@pytest.mark.parametrize("counter", ["blt", "sqrt"])
def test_round_trip_and_spec_checks(counter) -> None:
    spec = _spec(counter)
    a = LazyCMS(spec, make_noise("fast", seed=4, allow_insecure=True))
    items, ticks = _stream(1)
    a.update_batch(items[:1000], ticks[:1000])
    b = LazyCMS.from_bytes(a.to_bytes(), make_noise("fast", seed=9, allow_insecure=True), spec)
    assert b.to_bytes() == a.to_bytes()
    assert np.array_equal(a.noisy_matrix(), b.noisy_matrix())
    rel = a.release()
    assert rel["error_bound"]["counter"] == counter and not rel["float_noise"]
    assert isinstance(rel["matrix"][0][0], int)
    with pytest.raises(IncompatibleSpecError):
        LazyCMS.from_bytes(a.to_bytes(), make_noise("zero", allow_insecure=True), _spec("tree"))


def test_tree_spec_bytes_unchanged_and_counter_recorded_otherwise() -> None:
    assert "counter" not in _spec("tree").to_dict()
    assert _spec("blt").to_dict()["counter"] == "blt"


def test_refusals_name_the_fix() -> None:
    with pytest.raises(SpecError, match="counter: blt"):
        LazySketchSpec(depth=4, width=4096, horizon=86_400, eps=1.0, delta=1e-6,
                       counter="sqrt")
    with pytest.raises(SpecError, match="paper"):
        _spec("blt", calibrator="paper", eps=0.5)
    with pytest.raises(SpecError, match="tree, blt, sqrt"):
        _spec("wavelet")


def test_blt_error_bound_about_a_third_of_the_tree() -> None:
    kw = {"depth": 4, "width": 1024, "horizon": 3600, "eps": 1.0, "delta": 1e-6}
    tree = LazySketchSpec(**kw)
    blt = LazySketchSpec(**kw, counter="blt")
    assert tree.calibration().rho == pytest.approx(blt.calibration().rho)
    r = tree.error_bound_epoch(0.05) / blt.error_bound_epoch(0.05)
    assert 3.0 < r < 3.4
    assert blt.memory_bytes() < tree.memory_bytes()


# ------------------------------------------------------------------ LazyHH
def _hh(counter: str, noise):
    from sketches import LazyHH
    from sketches.continual.lazy_hh.spec import LazyHHSpec

    spec = LazyHHSpec(k=5, k_tilde=20, horizon=200, eps=1.0, delta=1e-4, event_horizon=10**5,
                      output_every=10, hash_seed=1, counter=counter)
    return LazyHH(spec, noise)


def test_lazyhh_blt_gamma_is_the_factorized_bound_and_round_trips() -> None:
    from sketches import LazyHH

    tree = _hh("tree", make_noise("zero", allow_insecure=True))
    blt = _hh("blt", make_noise("fast", seed=3, allow_insecure=True))
    cal, p = blt.calibration, blt.params
    assert cal.counter == "blt" and cal.rho == pytest.approx(tree.calibration.rho)
    assert p.gamma == pytest.approx(cal.error_bound(
        n=p.depth * 20, steps=blt.spec.outputs, beta=blt.spec.beta_value / 2))
    assert 2.5 < tree.params.gamma / p.gamma < 4
    items, ticks = _stream(2, 20000)
    blt.update_batch(items, ticks)
    blob = blt.to_bytes()
    again = LazyHH.from_bytes(blob, make_noise("fast", seed=3, allow_insecure=True))
    assert again.to_bytes() == blob
    g = blt.privacy()
    assert g["budget"]["sketch"]["counter"] == "blt"
    assert g["delta"] == pytest.approx(tree.privacy()["delta"], rel=1e-6)


def test_lazyhh_noise_off_blt_estimates_equal_the_tree() -> None:
    zero = make_noise("zero", allow_insecure=True)
    items, ticks = _stream(5, 20000)
    a, b = _hh("tree", zero), _hh("blt", zero)
    for sk in (a, b):
        sk.update_batch(items, ticks)
        sk.advance_to(200)
    ia, ea = a.heavy_hitters()
    ib, eb = b.heavy_hitters()
    common = {int(i): float(e) for i, e in zip(ia, ea, strict=True)}
    assert set(common) <= {int(i) for i in ib}  # lower threshold: a superset
    for i, e in zip(ib, eb, strict=True):
        if int(i) in common:
            assert common[int(i)] == float(e)


def test_lazyhh_sqrt_refused_when_too_big_and_paper_refused() -> None:
    from sketches.continual.lazy_hh.spec import LazyHHSpec

    with pytest.raises(SpecError, match="counter: blt"):
        LazyHHSpec(k=10, k_tilde=256, horizon=3600, eps=1.0, delta=1e-6,
                   event_horizon=50_000_000, counter="sqrt")
    with pytest.raises(SpecError, match="paper"):
        LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3, relation="replace",
                   clock="arrival", calibrator="paper", counter="blt")


@pytest.mark.parametrize("counter", ["tree", "blt"])
def test_lazyhh_spec_planning_methods_match_the_sketch(counter) -> None:
    from sketches import LazyHH
    from sketches.continual.lazy_hh.spec import LazyHHSpec

    for kw in ({"event_horizon": 10**5, "output_every": 10},
               {"relation": "replace", "clock": "arrival"}):
        spec = LazyHHSpec(k=5, k_tilde=20, horizon=200, eps=1.0, delta=1e-4, hash_seed=1,
                          counter=counter, **kw)
        hh = LazyHH(spec, make_noise("zero", allow_insecure=True))
        assert spec.sketch_rounds() == hh.sketch_spec.rounds
        assert spec.sketch_calibration() == hh.calibration
        assert spec.error_bound_epoch(hh.spec.beta_value / 2) == pytest.approx(hh.params.gamma) \
            or (counter == "tree" and kw.get("clock") == "arrival")
        assert spec.error_bound_per_release(0.05) < spec.error_bound_epoch(0.05)
        assert 0.5 < spec.memory_bytes() / hh.memory_bytes() < 2.0
