"""LazyCMS / LazyCS / LazyHH over the lattice BLT counter (``counter: blt_int``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketches import LazyCMS, LazyCS, LazyHH
from sketches.continual.lazy_hh.spec import LazyHHSpec, derive_params, sampler_delta
from sketches.continual.lazy_spec import LazySketchSpec
from sketches.core.noise import make_noise
from sketches.core.noise_compose import COMPOSE32_MIN
from sketches.counters.lattice import lattice_sampler_tv
from sketches.errors import IncompatibleSpecError, PrivacyError, SpecError


def _spec(counter: str, **kw) -> LazySketchSpec:
    base = {"depth": 3, "width": 16, "horizon": 200, "eps": 1.0, "delta": 1e-6,
            "counter": counter}
    base.update(kw)
    return LazySketchSpec(**base)


def _stream(seed: int = 0, n: int = 3000):
    rng = np.random.default_rng(seed)
    return rng.zipf(1.5, n) % 97, np.sort(rng.integers(0, 180, n))


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
def test_noise_off_equals_the_tree_at_every_tick(cls) -> None:
    zero = make_noise("zero", allow_insecure=True)
    items, ticks = _stream()
    tree, lat = cls(_spec("tree"), zero), cls(_spec("blt_int"), zero)
    for lo in range(0, items.size, 577):
        tree.update_batch(items[lo:lo + 577], ticks[lo:lo + 577])
        lat.update_batch(items[lo:lo + 577], ticks[lo:lo + 577])
        assert np.array_equal(tree.noisy_matrix(), lat.noisy_matrix())
    for k in (181, 190, 200):
        tree.advance_to(k)
        lat.advance_to(k)
        assert np.array_equal(tree.noisy_matrix(), lat.noisy_matrix())


def test_refusals_name_the_fix() -> None:
    zero = make_noise("zero", allow_insecure=True)
    with pytest.raises(SpecError, match="columns_per_tick unset"):
        LazyCMS(_spec("blt_int", columns_per_tick=4), zero)
    with pytest.raises(SpecError, match="columns_per_tick unset"):
        LazyCMS(_spec("blt_int", clock="arrival", relation="replace"), zero)
    with pytest.raises(SpecError, match="discrete"):
        _spec("blt_int", calibrator="analytic")


def test_round_trip_release_and_restore_with_another_counter_refused() -> None:
    spec = _spec("blt_int")
    a = LazyCS(spec, make_noise("fast", seed=4, allow_insecure=True))
    items, ticks = _stream(1)
    a.update_batch(items[:1000], ticks[:1000])
    b = LazyCS.from_bytes(a.to_bytes(), make_noise("fast", seed=9, allow_insecure=True), spec)
    assert b.to_bytes() == a.to_bytes()
    rel = a.release()
    assert rel["error_bound"]["counter"] == "blt_int" and not rel["float_noise"]
    eb = rel["error_bound"]
    assert eb["sigma_counts"] == pytest.approx(eb["sigma_lattice"] / eb["lattice_scale"])
    assert isinstance(rel["matrix"][0][0], int)
    assert _spec("blt_int").to_dict()["counter"] == "blt_int"
    for other in ("tree", "blt"):
        with pytest.raises(IncompatibleSpecError):
            LazyCS.from_bytes(a.to_bytes(), make_noise("zero", allow_insecure=True),
                              _spec(other))


def test_error_bound_a_third_of_the_tree_at_equal_privacy() -> None:
    kw = {"depth": 4, "width": 256, "horizon": 3600, "eps": 1.0, "delta": 1e-6}
    tree, lat = LazySketchSpec(**kw), LazySketchSpec(**kw, counter="blt_int")
    from sketches.privacy.gaussian_mechanism import discrete_gaussian_delta

    cal = lat.calibration()
    assert discrete_gaussian_delta(1.0, cal.sigma, cal.sensitivity) <= 1e-6
    r = tree.error_bound_epoch(0.05) / lat.error_bound_epoch(0.05)
    assert 3.0 < r < 3.4
    assert lat.memory_bytes() < tree.memory_bytes()


# ------------------------------------------------------------------ LazyHH
def _hh(counter: str, noise, **kw):
    args = {"k": 5, "k_tilde": 20, "horizon": 200, "eps": 1.0, "delta": 1e-4,
            "event_horizon": 10**5, "output_every": 10, "hash_seed": 1, "counter": counter}
    args.update(kw)
    return LazyHH(LazyHHSpec(**args), noise)


def test_lazyhh_gamma_sampler_term_and_round_trip() -> None:
    tree = _hh("tree", make_noise("zero", allow_insecure=True))
    lat = _hh("blt_int", make_noise("fast", seed=3, allow_insecure=True))
    cal, p = lat.calibration, lat.params
    assert cal.counter == "blt_int" and cal.lattice.max_count == 10**5  # event_horizon
    assert p.gamma == pytest.approx(cal.error_bound(
        n=p.depth * 20, steps=lat.spec.outputs, beta=lat.spec.beta_value / 2))
    assert tree.params.gamma / p.gamma > 2.0
    d = derive_params(lat.spec, None, None).depth
    t = lattice_sampler_tv(cal.sigma)  # composed tables: 2 * 2^-104 + the smoothing term
    assert cal.sigma < COMPOSE32_MIN or t > 2 * 2.0**-104
    expected = (1 + np.e) * (d * 20 * 200 + 2 * 200) * max(t, 2.0**-104)
    assert sampler_delta(lat.spec, lat.params) == pytest.approx(expected, abs=0)
    assert sampler_delta(lat.spec, lat.params, cal.sigma) == pytest.approx(expected, abs=0)
    items, ticks = _stream(2, 20000)
    lat.update_batch(items, ticks)
    blob = lat.to_bytes()
    again = LazyHH.from_bytes(blob, make_noise("fast", seed=3, allow_insecure=True))
    assert again.to_bytes() == blob
    g = lat.privacy()
    assert g["budget"]["sketch"]["counter"] == "blt_int"
    assert g["budget"]["sketch"]["lattice_scale"] == cal.lattice.scale
    assert "noise_caveat" not in g["budget"]["sketch"]


def test_lazyhh_noise_off_estimates_equal_the_tree() -> None:
    zero = make_noise("zero", allow_insecure=True)
    items, ticks = _stream(5, 20000)
    a, b = _hh("tree", zero), _hh("blt_int", zero)
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


def test_lazyhh_catch_up_equals_sequential() -> None:
    """A quiet shard's vectorised catch-up and the tick-by-tick path agree (zero noise)."""
    zero = make_noise("zero", allow_insecure=True)
    a, b = _hh("blt_int", zero), _hh("blt_int", zero)
    b._fast_catch_up = False
    for sk in (a, b):
        sk.advance_to(150)
        sk.update_batch(np.array([7, 7, 8]), np.array([150, 151, 160]))
        sk.advance_to(200)
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.parametrize("kw", [{"event_horizon": 10**5, "output_every": 10},
                                {"relation": "replace", "clock": "arrival"}])
def test_lazyhh_spec_planning_methods_match_the_sketch(kw) -> None:
    spec = LazyHHSpec(k=5, k_tilde=20, horizon=200, eps=1.0, delta=1e-4, hash_seed=1,
                      counter="blt_int", **kw)
    hh = LazyHH(spec, make_noise("zero", allow_insecure=True))
    assert spec.sketch_calibration() == hh.calibration
    assert spec.error_bound_epoch(hh.spec.beta_value / 2) == pytest.approx(hh.params.gamma)
    assert 0.5 < spec.memory_bytes() / hh.memory_bytes() < 2.0


# ------------------------------------------------------------------ the default (issue 20)
PROD = {"depth": 4, "width": 256, "horizon": 3600, "eps": 1.0, "delta": 1e-6,
        "relation": "add_remove", "clock": "tick", "unit_cap": 1}


@pytest.mark.parametrize("name", ["lazy_cms", "lazy_cs"])
def test_the_default_rule_picks_blt_int_where_it_wins(name: str, monkeypatch) -> None:
    from sketches import lookup
    from sketches.core.serialization import spec_from_params
    from sketches.counters import family

    build = lookup(name).build_spec
    assert build(PROD).counter == "blt_int"  # DEFAULT_TO_LATTICE is on (issue 20c)
    assert build({**PROD, "round_ticks": 60}).counter == "blt_int"  # aligned rounds
    monkeypatch.setattr(family, "DEFAULT_TO_LATTICE", False)
    assert build(PROD).counter == "tree"
    monkeypatch.setattr(family, "DEFAULT_TO_LATTICE", True)
    assert build({**PROD, "counter": "tree"}).counter == "tree"  # a pinned counter stays
    assert build({**PROD, "columns_per_tick": 64}).counter == "tree"  # staggered: not eligible
    # an epoch's draws (the catch-up of a late shard) within DEFAULT_LATTICE_MAX_DRAWS: at
    # w = 1024 a round every tick is 14.7M draws (the tree), 60 aligned rounds 245,760
    wide = {**PROD, "width": 1024}
    assert 4 * 1024 * 3600 > family.DEFAULT_LATTICE_MAX_DRAWS >= 4 * 256 * 3600
    assert build(wide).counter == "tree"
    assert build({**wide, "round_ticks": 60}).counter == "blt_int"
    monkeypatch.setattr(family, "DEFAULT_LATTICE_MAX_DRAWS", 4 * 256 * 3600 - 1)
    assert build(PROD).counter == "tree"
    monkeypatch.setattr(family, "DEFAULT_LATTICE_MAX_DRAWS", 4 * 256 * 3600)
    assert build(PROD).counter == "blt_int"
    assert build({**PROD, "calibrator": "analytic"}).counter == "tree"
    assert build({**PROD, "relation": "replace", "clock": "arrival"}).counter == "tree"
    # a stored spec (checkpoint) without the field is the tree: the dataclass default
    assert spec_from_params(LazySketchSpec, PROD).counter == "tree"


def test_the_rule_needs_lower_error_and_acceptable_memory() -> None:
    from sketches.counters.family import lattice_wins

    assert lattice_wins(3.0, 1.0, 100, 150) and not lattice_wins(3.0, 1.0, 100, 151)
    assert not lattice_wins(1.0, 1.0, 100, 50)


HH_PROD = {"k": 64, "k_tilde": 512, "horizon": 3600, "eps": 1.0, "delta": 1e-6,
           "event_horizon": 50_000_000, "output_every": 1, "relation": "add_remove",
           "clock": "tick", "unit_cap": 1}


def test_lazyhh_default_rule(monkeypatch) -> None:
    """Issue 20b: LazyHH's default is on (within 1.5x of the tree's speed, a third of its
    noise, less state): a spec built from topology parameters without `counter` gets
    blt_int; a pinned counter stays; switched off, the tree."""
    from sketches import lookup
    from sketches.counters import family

    build = lookup("lazy_hh").build_spec
    assert family.DEFAULT_TO_LATTICE_HH and family.DEFAULT_TO_LATTICE
    assert build(HH_PROD).counter == "blt_int"
    assert build({**HH_PROD, "counter": "tree"}).counter == "tree"
    monkeypatch.setattr(family, "DEFAULT_TO_LATTICE_HH", False)
    assert build(HH_PROD).counter == "tree"


def test_epochs_beyond_the_lattice_round_limit_keep_the_tree_by_default() -> None:
    """The lattice's exact calibration costs O(rounds k) decimal operations (about 20 s per
    spec at 10M rounds): the default rule does not consider it past
    DEFAULT_LATTICE_MAX_ROUNDS (a 10M-tick LazyHH took 90 s to validate); explicit blt_int
    is still honoured."""
    import time

    from sketches import lookup
    from sketches.counters import family

    build = lookup("lazy_hh").build_spec
    long = {**HH_PROD, "horizon": 10 * family.DEFAULT_LATTICE_MAX_ROUNDS}
    t0 = time.process_time()
    assert build(long).counter == "tree"
    assert time.process_time() - t0 < 5.0  # no lattice calibration was attempted
    assert build({**HH_PROD, "horizon": family.DEFAULT_LATTICE_MAX_ROUNDS // 1000}
                 ).counter == "blt_int"
    lazy = lookup("lazy_cms").build_spec
    assert lazy({"depth": 4, "width": 64, "horizon": 10 * family.DEFAULT_LATTICE_MAX_ROUNDS,
                 "eps": 1.0, "delta": 1e-6, "clock": "tick"}).counter == "tree"


def test_an_old_tree_lazyhh_state_restores_as_the_tree() -> None:
    """A LazyHH state written with the tree before the default flipped (its spec has no
    counter field) restores with the tree and continues identically; only specs built from
    topology parameters get the new default."""
    from sketches import lookup
    from sketches.core.serialization import spec_to_dict

    spec = lookup("lazy_hh").build_spec({**HH_PROD, "k": 4, "k_tilde": 16,
                                          "event_horizon": 100_000, "counter": "tree",
                                          "hash_seed": 3})
    stored = spec_to_dict(spec)
    assert "counter" not in stored  # the tree is the dataclass default: not stored
    a = LazyHH(spec, make_noise("fast", seed=5, allow_insecure=True))
    items, ticks = _stream(2, 5000)
    a.update_batch(items, ticks)
    b = LazyHH.from_bytes(a.to_bytes(), make_noise("fast", seed=5, allow_insecure=True))
    assert b.spec.counter == "tree" and b.to_bytes() == a.to_bytes()
    assert lookup("lazy_hh").build_spec(stored).counter == "blt_int"  # a new spec


def test_lazyhh_sampler_term_uses_the_lattice_samplers_tv() -> None:
    """blt_int draws with discrete_gaussian32 (composed from COMPOSE32_MIN: TV < 2^-102.99
    per draw, above the one table's 2^-104): the reported sampler delta and tv_per_draw use
    lattice_sampler_tv at the sketch's sigma_L, not the one-table figure."""
    from sketches.core.noise_compose import COMPOSE32_MIN
    from sketches.counters.lattice import lattice_sampler_tv

    lat = _hh("blt_int", make_noise("fast", seed=3, allow_insecure=True))
    sigma = lat.calibration.sigma
    assert sigma >= COMPOSE32_MIN
    g = lat.privacy()["budget"]["sampler"]
    assert g["tv_per_draw"] == lattice_sampler_tv(sigma) > 2.0**-104
    d = derive_params(lat.spec, None, None).depth
    assert sampler_delta(lat.spec, lat.params, sigma) == pytest.approx(
        (1 + np.e) * (d * 20 * 200 + 2 * 200) * lattice_sampler_tv(sigma), abs=0)


def test_sampler_delta_without_sigma_uses_the_lattice_tv_at_composed_sigma() -> None:
    """Review 20r finding 4: no ``sketch_sigma`` must not mean one table (2^-104)."""
    spec = LazyHHSpec(k=5, k_tilde=64, horizon=3600, eps=1.0, delta=1e-6,
                      event_horizon=10**8, output_every=10, hash_seed=1, counter="blt_int")
    p = derive_params(spec, None, None)
    sigma = spec.sketch_calibration(p.depth).sigma
    assert sigma >= COMPOSE32_MIN  # two composed tables: t = 2 * 2^-104 + e
    draws = p.depth * 64 * spec.sketch_rounds() + 2 * 3600
    got = sampler_delta(spec, p)
    assert got == pytest.approx((1 + np.e) * draws * lattice_sampler_tv(sigma), abs=0)
    assert got > (1 + np.e) * draws * 2 * 2.0**-104


def test_lazyhh_refuses_a_clamped_lattice(monkeypatch) -> None:
    """Review 20r finding 1: a per-round clamp under-counts, breaking Theorem 3's event B."""
    from sketches.continual.lazy_hh.spec import LazyHHSpec as Spec

    monkeypatch.setattr(Spec, "cell_count_bound", property(lambda self: None))
    spec = Spec(k=5, k_tilde=20, horizon=200, eps=1.0, delta=1e-4, event_horizon=10**5,
                output_every=10, hash_seed=1, counter="blt_int")
    assert spec.sketch_calibration().lattice.round_cap > 0
    with pytest.raises(PrivacyError, match="round_cap"):
        LazyHH(spec, make_noise("fast", seed=3, allow_insecure=True))


@pytest.mark.parametrize("cls", [LazyCMS, LazyCS])
def test_lazy_sketch_blt_int_states_the_sampler_term(cls) -> None:
    """Review 20r finding 3: a blt_int release states delta + (1 + e^eps) d w n t."""
    from sketches import lookup
    from sketches.continual.lazy import add_up
    from worker.release.envelope import probe

    spec = _spec("blt_int")
    sk = cls(spec, make_noise("fast", seed=3, allow_insecure=True))
    t = lattice_sampler_tv(sk.calibration.sigma)
    term = (1 + np.e) * 3 * 16 * spec.rounds * t
    rel = sk.release()
    assert rel["sampler"]["delta"] == pytest.approx(term, abs=0) and term > 0
    assert rel["sampler"]["draws"] == 3 * 16 * spec.rounds
    g = lookup(cls.name).capabilities.guarantee(sk)
    # the term (~1e-27) is below delta's ulp: the stated delta is the sum rounded up
    assert g["eps"] == 1.0 and g["delta"] == math.nextafter(1e-6, 1.0)
    tree = cls(_spec("tree"), make_noise("zero", allow_insecure=True))
    assert "sampler" not in tree.release() and tree.privacy()["delta"] == 1e-6

    from tests.support.checkpoints import epoch_topo as topo

    for counter, added in (("blt_int", True), ("tree", False)):
        params = f"{{depth: 2, width: 16, hash_seed: 1, counter: {counter}}}"
        tp = topo(mech=cls.name, params=params)
        _, _, payload, env = probe(tp)
        base = tp.privacy.delta
        if added:
            assert env["delta"] == add_up(base, payload["sampler"]["delta"]) > base
        else:
            assert env["delta"] == base and "sampler" not in payload
