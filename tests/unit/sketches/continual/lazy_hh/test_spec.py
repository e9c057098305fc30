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
