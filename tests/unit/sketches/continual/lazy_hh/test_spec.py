"""LazyHH spec (``sketches/continual/lazy_hh/spec.py``): the delta terms of the guarantee
are bounds on what an epoch can actually do, checked against counts made independently
of the formulas (issue 24: a survivor undercounted the sampler's delta)."""

from __future__ import annotations

import math

import pytest

from sketches.continual.lazy_hh.spec import (
    SAMPLER_TV_PER_DRAW,
    LazyHHSpec,
    derive_params,
    guarantee,
    sampler_delta,
)


def _tree_nodes(rounds: int) -> int:
    """Node values one binary-tree counter can draw over ``rounds`` rounds: every dyadic
    node ``[j 2^l + 1, (j + 1) 2^l]`` inside the epoch, at every level (an upper bound on
    the draws of any of the project's tree counters, eager or lazy)."""
    return sum(rounds >> level for level in range(rounds.bit_length()))


@pytest.mark.parametrize(("relation", "horizon"), [
    *(("add_remove", h) for h in (1, 2, 7, 64, 100)),
    # replace runs on the arrival clock, whose horizon counts events (a few k~ at least)
    *(("replace", h) for h in (7, 64, 100))])
def test_sampler_delta_covers_every_node_of_every_counter(relation: str, horizon: int) -> None:
    """The table sampler is within TV ``2^-104`` of ``N_Z`` per draw, so delta must grow by
    ``(1 + e^eps) 2^-104`` per value the epoch may draw: every node of each of the
    ``d k~`` sketch counters and of the length counter (add/remove). The bound must cover
    that count (small ``k~`` so the length counter's share is visible), and the
    release's budget must state it (its share of the total is below float resolution)."""
    # replace runs on the arrival clock (the tick clock refuses it for LazyHH, issue 19)
    kw: dict = ({"clock": "tick", "event_horizon": 50} if relation == "add_remove"
                else {"clock": "arrival"})
    spec = LazyHHSpec(k=1, k_tilde=2, horizon=horizon, eps=0.7, delta=1e-4,
                      relation=relation, **kw)  # type: ignore[arg-type]
    params = derive_params(spec, None, None)
    counters = params.depth * spec.k_tilde + (1 if relation == "add_remove" else 0)
    # (the arrival clock's counters have horizon / k~ rounds; the bound charges every
    # event's round, which covers them)
    rounds = horizon if relation == "add_remove" else -(-horizon // spec.k_tilde)
    need = (1 + math.exp(spec.eps)) * counters * _tree_nodes(rounds) * SAMPLER_TV_PER_DRAW
    got = sampler_delta(spec, params)
    assert got >= need * (1 - 1e-12)
    if relation == "add_remove":  # tight: within 2x of the node count
        assert got <= 2.0 * need + (1 + math.exp(spec.eps)) * 4 * horizon * SAMPLER_TV_PER_DRAW
    g = guarantee(spec, params, sketch_sigma=1.0)
    assert g["budget"]["sampler"]["delta"] == got


def test_float_calibrators_have_no_sampler_term() -> None:
    """Only the discrete calibrator uses the table sampler."""
    spec = LazyHHSpec(k=1, k_tilde=2, horizon=8, eps=0.7, delta=1e-4, clock="tick",  # type: ignore[arg-type]
                      event_horizon=50, calibrator="analytic")  # type: ignore[arg-type]
    assert sampler_delta(spec, derive_params(spec, None, None)) == 0.0


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_guarantee_states_the_budget_and_adds_every_delta_term(relation: str) -> None:
    """The guarantee every LazyHH release states: ``delta = delta~ (+ e^eps_s delta_l + beta
    under add/remove) + key collisions + sampler``, each term also stated in ``budget``
    under its own name. Parameters chosen so every term is visible in the float sum (a
    tiny delta, a long horizon: the sampler's share is above 1e-6)."""
    from sketches.continual.lazy_hh.spec import item_key_collision_delta
    from sketches.privacy import delta_tilde

    kw: dict = ({"clock": "tick", "event_horizon": 1000} if relation == "add_remove"
                else {"clock": "arrival"})  # the tick clock refuses replace (issue 19)
    spec = LazyHHSpec(k=1, k_tilde=4, horizon=10**9, eps=1.0, delta=1e-15,
                      relation=relation, **kw)  # type: ignore[arg-type]
    d = derive_params(spec, None, None).depth
    params = derive_params(spec, spec.sketch_calibration(d), d)
    g = guarantee(spec, params, sketch_sigma=2.5)
    (eps_s, delta_s), (eps_l, delta_l) = spec.sketch_budget, spec.count_budget
    dt = delta_tilde(eps_s, delta_s)
    coll, samp = item_key_collision_delta(spec), sampler_delta(spec, params)
    assert samp / dt > 1e-6 and coll > 0
    assert g["budget"]["sampler"]["delta"] == samp
    assert g["budget"]["item_key_collisions"]["delta"] == coll
    assert g["budget"]["item_key_collisions"]["distinct_items_bound"] == (
        1000 if relation == "add_remove" else 10**9)
    assert g["budget"]["sketch"] == {"eps": eps_s, "delta": delta_s, "delta_tilde": dt,
                                     "beta": spec.beta_value, "calibrator": "discrete",
                                     "sigma": 2.5}
    assert (g["eps"], g["relation"], g["unit_cap"], g["delta_parameter"]) == (
        eps_s + eps_l, relation, 1, 1e-15)
    assert g["delta"] == g["delta_tilde"]
    if relation == "replace":
        assert g["budget"]["length"] is None and g["event_bound"] is None
        assert g["delta"] == dt + (coll + samp)
    else:
        assert params.count is not None
        assert g["budget"]["length"] == {"eps": eps_l, "delta": delta_l,
                                         "beta": spec.beta_value, "sigma": params.count.sigma,
                                         "error_bound": params.count_error}
        assert g["delta"] == dt + math.exp(eps_s) * delta_l + spec.beta_value + (coll + samp)
        assert g["event_bound"]["covered"] is True and g["event_bound"]["event_horizon"] == 1000
        assert g["event_bound"]["statement"].startswith("events past event_horizon in a")
    assert g["budget"]["sampler"]["tv_per_draw"] == 2.0**-104
    assert g["budget"]["sampler"]["statement"].startswith("table sampler's total-variation")
    assert g["budget"]["item_key_collisions"]["statement"].startswith("P[any two of the")
    assert g["reference"].startswith("paper 002 Theorem 3")


def test_a_factorized_sketch_states_its_counter_and_noise_caveat() -> None:
    """A BLT sketch draws float Gaussians (rounded): its budget names the counter and says
    so; a tree sketch's budget has neither field."""
    kw = dict(k=1, k_tilde=4, horizon=64, eps=1.0, delta=1e-6, clock="tick", event_horizon=99)
    blt = LazyHHSpec(counter="blt", **kw)  # type: ignore[arg-type]
    sketch = guarantee(blt, derive_params(blt, None, None), sketch_sigma=1.0)["budget"]["sketch"]
    assert sketch["counter"] == "blt"
    assert sketch["noise_caveat"].startswith("Gaussian z from a float64 sampler, rounded")
    tree = LazyHHSpec(**kw)  # type: ignore[arg-type]
    sketch = guarantee(tree, derive_params(tree, None, None), sketch_sigma=1.0)["budget"]["sketch"]
    assert "counter" not in sketch and "noise_caveat" not in sketch


def test_delta_terms_of_a_factorized_sketch_and_of_user_level_units() -> None:
    """A factorized sketch draws no table samples: only the length counter's tree (``2 H``
    nodes) counts. Key collisions are over ``N + 2c`` distinct items (a unit adds and
    pushes out up to ``c``), capped at probability 1."""
    kw = dict(k=1, k_tilde=4, horizon=64, eps=1.0, delta=1e-6, clock="tick", event_horizon=99)
    blt = LazyHHSpec(counter="blt", **kw)  # type: ignore[arg-type]
    assert sampler_delta(blt, derive_params(blt, None, None)) == \
        (1.0 + math.exp(1.0)) * (2 * 64) * SAMPLER_TV_PER_DRAW
    from sketches.continual.lazy_hh.spec import item_key_collision_delta, item_output_pairs

    users = LazyHHSpec(unit_cap=3, **kw)  # type: ignore[arg-type]
    assert item_key_collision_delta(users) == (99 + 6) ** 2 / 2.0**129
    huge = LazyHHSpec(**{**kw, "event_horizon": 2**70})  # type: ignore[arg-type]
    assert item_key_collision_delta(huge) == 1.0
    one = LazyHHSpec(**{**kw, "horizon": 1})  # type: ignore[arg-type]
    assert item_output_pairs(one) == 99  # one output time


@pytest.mark.parametrize("bad", [0, 2.5, True, -1])
def test_counts_in_the_spec_must_be_positive_ints(bad: object) -> None:
    """``k``, ``horizon``, ``unit_cap`` ... are counts: a float, a bool or < 1 is refused."""
    from sketches.errors import SpecError

    with pytest.raises(SpecError, match=r"^unit_cap: must be an integer >= 1"):
        LazyHHSpec(k=1, k_tilde=4, horizon=8, eps=1.0, delta=1e-6, clock="tick",  # type: ignore[arg-type]
                   event_horizon=99, unit_cap=bad)  # type: ignore[arg-type]


def test_depth_only_params_carry_no_noise_terms() -> None:
    """The first ``derive_params`` call (no calibration yet) fixes only the depth: gamma 0,
    the lag-free thresholds of gamma 0, no length counter, no count error."""
    from sketches.continual.lazy_hh.spec import HHParams
    from sketches.privacy import lazyhh_thresholds

    spec = LazyHHSpec(k=2, k_tilde=8, horizon=16, eps=1.0, delta=1e-6, clock="tick",  # type: ignore[arg-type]
                      event_horizon=99)
    p = derive_params(spec, None, None)
    assert p == HHParams(p.depth, 0.0, lazyhh_thresholds(0.0, k=2, k_tilde=8), None, 0.0)


def test_output_times_follow_output_every_and_set_the_union_bound() -> None:
    """Tick clock: one output every ``output_every`` ticks, ``|I| = horizon // output_every``
    output times, and the union bound of Lemma 6 runs over ``|I| * event_horizon`` pairs."""
    from sketches.continual.lazy_hh.spec import item_output_pairs

    spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=1.0, delta=1e-6, clock="tick",  # type: ignore[arg-type]
                      event_horizon=99, output_every=8)
    assert spec.outputs == 8 and item_output_pairs(spec) == 8 * 99
    assert spec.sketch_rounds() == 64


def test_arrival_rounds_round_up_and_beta_must_be_below_the_sketch_delta() -> None:
    """Arrival clock: a round per ``k~`` events, the last one partial (rounded up: 10
    events at ``k~ = 4`` are 3 rounds). ``beta`` is strictly below the sketch's delta
    (Lemma 11): equal is refused."""
    from sketches.errors import SpecError

    arrival = LazyHHSpec(k=1, k_tilde=4, horizon=10, eps=1.0, delta=1e-6,  # type: ignore[arg-type]
                         relation="replace", clock="arrival")  # type: ignore[arg-type]
    assert arrival.sketch_rounds() == 3
    with pytest.raises(SpecError, match=r"^beta: must be in \(0, "):
        LazyHHSpec(k=1, k_tilde=4, horizon=10, eps=1.0, delta=1e-6, beta=1e-6,  # type: ignore[arg-type]
                   relation="replace", clock="arrival")  # type: ignore[arg-type]


@pytest.mark.parametrize("counter", ["tree", "blt"])
def test_full_params_of_a_single_output_epoch_follow_lemma6(counter: str) -> None:
    """One output per epoch (``output_every = horizon``): gamma and the length counter's
    error are union bounds over exactly 1 output time (not 2); the length counter uses the
    spec's calibrator and its own error bound; under replace there is no length counter
    and no count error."""
    from sketches.privacy import counter_error_bound, lazyhh_gamma

    kw = dict(k=1, k_tilde=4, horizon=8, eps=1.0, delta=1e-6, clock="tick", event_horizon=99,
              output_every=8, calibrator="analytic", counter=counter)
    spec = LazyHHSpec(**kw)  # type: ignore[arg-type]
    assert spec.outputs == 1
    d = derive_params(spec, None, None).depth
    cal = spec.sketch_calibration(d)
    p = derive_params(spec, cal, d)
    beta = spec.beta_value
    if counter == "tree":
        assert p.gamma == lazyhh_gamma(cal.sigma, levels=cal.levels, depth=d, k_tilde=4,
                                       outputs=1, beta=beta)
    else:
        assert p.gamma == cal.error_bound(n=d * 4, steps=1, beta=beta / 2)
    assert p.count is not None and p.count.calibrator.value == "analytic"
    assert p.count_error == counter_error_bound(p.count.sigma, levels=p.count.levels, n=1,
                                                steps=1, beta=beta)
    # replace: the arrival clock (the tick clock refuses it for LazyHH, issue 19), one
    # output of k~ events
    rep = LazyHHSpec(k=1, k_tilde=4, horizon=4, eps=1.0, delta=1e-6, relation="replace",  # type: ignore[arg-type]
                     clock="arrival", calibrator="analytic", counter=counter)  # type: ignore[arg-type]
    dr = derive_params(rep, None, None).depth
    pr = derive_params(rep, rep.sketch_calibration(dr), dr)
    assert pr.count is None and pr.count_error == 0.0


@pytest.mark.parametrize(("event_horizon", "half"), [(1, 1), (3, 2), (4, 2)])
def test_depth_is_ceil_log2_of_2n_over_beta_with_n_rounded_up(event_horizon: int,
                                                               half: int) -> None:
    """``d = ceil(log2(4 ceil(N/2) / beta))``: N (item, output) pairs, halved rounding up
    (an odd N = 1 must not give a one-row-shallower sketch)."""
    spec = LazyHHSpec(k=1, k_tilde=4, horizon=1, eps=1.0, delta=1e-6, clock="tick",  # type: ignore[arg-type]
                      event_horizon=event_horizon)
    assert derive_params(spec, None, None).depth == math.ceil(
        math.log2(4 * half / spec.beta_value))


def test_derive_params_uses_an_explicit_depth_and_defaults_to_the_spec_depth() -> None:
    """``derive_params`` is public with ``depth: int | None``: None means the depth the spec
    derives (also with a calibration), an explicit depth is used as given (and changes
    gamma). Mutant ``int(depth and d)`` raised TypeError on None and replaced an explicit
    depth by the spec's."""
    spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3, event_horizon=10**8)
    d = derive_params(spec, None, None).depth
    cal = spec.sketch_calibration(d)
    p = derive_params(spec, cal, d)
    q = derive_params(spec, cal, None)          # no depth given: the spec's depth
    assert (q.depth, q.gamma) == (p.depth, p.gamma) and p.depth == d
    other = derive_params(spec, cal, d + 2)     # an explicit depth is used as given
    assert other.depth == d + 2 and other.gamma != p.gamma

# --- the sampler term and the statements a release carries (issue 24, session 5) -----------

_ONE_TABLE_STATEMENT = (
    "table sampler's total-variation distance to the exact discrete Gaussian, (1 + e^eps) x "
    "draws x 2^-104 (docs/PRIVACY.md 9); 0 for the float calibrators (their guarantee is for "
    "ideal noise)")
_COMPOSED_STATEMENT = (
    "table sampler's total-variation distance to the exact discrete Gaussian, (1 + e^eps) x "
    "draws x tv_per_draw (2 x 2^-104 + the smoothing term: two composed tables, "
    "docs/PRIVACY.md 9.1); 0 for the float calibrators (their guarantee is for ideal noise)")
_LATTICE_NOISE = ("exact discrete Gaussian on the lattice (scale s); sigma is sigma_L, in "
                  "lattice units; certified (docs/PRIVACY.md 13.1, Lattice BLT)")


def _tick_spec(**kw: object) -> LazyHHSpec:
    args: dict = dict(k=1, k_tilde=4, horizon=64, eps=1.0, delta=1e-6, clock="tick",
                      event_horizon=99)
    args.update(kw)
    return LazyHHSpec(**args)


@pytest.mark.parametrize(("calibrator", "sigma", "statement"), [
    ("discrete", 50.0, _ONE_TABLE_STATEMENT),    # one table: t = 2^-104
    ("discrete", 1e7, _COMPOSED_STATEMENT),      # two composed tables: t > 2 x 2^-104
    ("analytic", 1e7, _ONE_TABLE_STATEMENT),     # float noise: no sampler term at all
])
def test_the_sampler_statement_is_the_one_for_its_per_draw_tv(calibrator: str, sigma: float,
                                                               statement: str) -> None:
    """The statement is the guarantee users read: it names the per-draw TV the delta was
    priced with, word for word (a one-table figure on a composed sampler, or the other way
    round, misstates the guarantee)."""
    spec = _tick_spec(calibrator=calibrator)
    g = guarantee(spec, derive_params(spec, None, None), sketch_sigma=sigma)
    assert g["budget"]["sampler"]["statement"] == statement


def test_a_lattice_sketch_states_its_exact_noise_and_scale() -> None:
    """``counter: blt_int``: the sketch's budget names the counter, the lattice scale and
    that the noise is the exact discrete Gaussian on the lattice (sigma in lattice units),
    word for word; no float-noise caveat."""
    spec = _tick_spec(counter="blt_int")
    params = derive_params(spec, None, None)
    sketch = guarantee(spec, params, sketch_sigma=123.0, lattice_scale=7)["budget"]["sketch"]
    eps_s, delta_s = spec.sketch_budget
    from sketches.privacy import delta_tilde

    assert sketch == {"eps": eps_s, "delta": delta_s, "delta_tilde": delta_tilde(eps_s, delta_s),
                      "beta": spec.beta_value, "calibrator": "discrete", "sigma": 123.0,
                      "counter": "blt_int", "lattice_scale": 7, "noise": _LATTICE_NOISE}


def test_guarantee_prices_the_sampler_at_the_sketch_sigma_it_is_given() -> None:
    """A tree sketch at sigma 1e7 draws from two composed tables: the release's sampler
    delta and ``tv_per_draw`` are those of that sigma (``(1 + e^eps) D t`` with ``D`` the
    tree nodes of every counter, counted here), not the one-table figure an unknown sigma
    gets."""
    from sketches.core.noise_compose import discrete_gaussian_tv

    spec = _tick_spec()
    params = derive_params(spec, None, None)
    t = discrete_gaussian_tv(1e7)
    assert t > 2 * SAMPLER_TV_PER_DRAW
    draws = params.depth * spec.k_tilde * 2 * 64 + 2 * 64
    g = guarantee(spec, params, sketch_sigma=1e7)["budget"]["sampler"]
    assert g["tv_per_draw"] == t
    assert g["delta"] == pytest.approx((1 + math.exp(spec.eps)) * draws * t, rel=1e-12, abs=0)
    assert g["delta"] > 1.9 * sampler_delta(spec, params)  # the unknown-sigma figure


def test_sampler_tv_per_draw_at_the_edges_of_sigma() -> None:
    """Per-draw TV: sigma 0 or None (no sketch noise drawn) counts one table, never a
    refusal; a sigma below the sampler's range is refused, not priced as one table; the
    lattice sampler (composed from ``COMPOSE32_MIN``) only when asked for; the length
    counter's sigma is priced the same way, 0 meaning no draw; the larger TV wins."""
    import dataclasses

    from sketches.continual.lazy_hh.spec import sampler_tv_per_draw
    from sketches.core.noise_compose import COMPOSE32_MIN, COMPOSE_THRESHOLD
    from sketches.errors import SpecError

    spec = _tick_spec()
    d = derive_params(spec, None, None).depth
    params = derive_params(spec, spec.sketch_calibration(d), d)
    assert params.count is not None and 1.0 < params.count.sigma < COMPOSE32_MIN
    one, two = 2.0**-104, 2.0**-103  # one table; two composed tables (+ a term < 2^-250)
    for lattice in (False, True):
        assert sampler_tv_per_draw(params, None, lattice=lattice) == one
        assert sampler_tv_per_draw(params, 0.0, lattice=lattice) == one
        assert sampler_tv_per_draw(params, 0.5, lattice=lattice) == one
        with pytest.raises(SpecError, match=r"^sigma: "):
            sampler_tv_per_draw(params, 1e-4, lattice=lattice)
    mid = (COMPOSE32_MIN + COMPOSE_THRESHOLD) / 2  # one table, but composed for the lattice
    assert sampler_tv_per_draw(params, mid) == one
    assert sampler_tv_per_draw(params, mid, lattice=True) == pytest.approx(two, rel=1e-15, abs=0)
    assert sampler_tv_per_draw(params, mid, lattice=True) > two
    no_count = dataclasses.replace(params, count=dataclasses.replace(params.count, sigma=0.0))
    assert sampler_tv_per_draw(no_count, None) == one
    tiny = dataclasses.replace(params, count=dataclasses.replace(params.count, sigma=1e-4))
    with pytest.raises(SpecError, match=r"^sigma: "):
        sampler_tv_per_draw(tiny, None)
    big = dataclasses.replace(params, count=dataclasses.replace(params.count, sigma=1e7))
    assert sampler_tv_per_draw(big, None) == sampler_tv_per_draw(big, 50.0) > two


def test_lattice_sampler_delta_takes_a_given_sigma_and_the_params_depth() -> None:
    """``counter: blt_int``: a given ``sketch_sigma`` is priced as given (one table below
    ``COMPOSE32_MIN``), never replaced by the calibration's; without one, sigma_L is the
    calibration's at the depth whose draws are counted (``params.depth``), here a depth
    where sigma_L crosses ``COMPOSE32_MIN`` while the spec's own depth stays below it."""
    import dataclasses

    from sketches.core.noise_compose import COMPOSE32_MIN
    from sketches.counters.lattice import lattice_sampler_tv

    spec = _tick_spec(eps=2.7, event_horizon=10**6, counter="blt_int")
    params = derive_params(spec, None, None)
    d0, d1 = params.depth, params.depth + 8
    s0, s1 = spec.sketch_calibration(d0).sigma, spec.sketch_calibration(d1).sigma
    assert s0 < COMPOSE32_MIN <= s1  # one table at d0, two composed tables at d1
    factor = 1 + math.exp(spec.eps)

    def expected(depth: int, sigma: float) -> float:
        draws = depth * spec.k_tilde * spec.sketch_rounds() + 2 * spec.horizon
        return factor * draws * lattice_sampler_tv(sigma)

    assert sampler_delta(spec, params) == pytest.approx(expected(d0, s0), rel=1e-12, abs=0)
    deep = dataclasses.replace(params, depth=d1)
    assert sampler_delta(spec, deep) == pytest.approx(expected(d1, s1), rel=1e-12, abs=0)
    assert sampler_delta(spec, deep) > 1.9 * factor * (d1 * 4 * 64 + 128) * SAMPLER_TV_PER_DRAW
    # a given sigma is used as given: 100 is one table, s1 is composed
    assert sampler_delta(spec, deep, 100.0) == pytest.approx(
        factor * (d1 * 4 * 64 + 128) * SAMPLER_TV_PER_DRAW, rel=1e-12, abs=0)
