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


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
@pytest.mark.parametrize("horizon", [1, 2, 7, 64, 100])
def test_sampler_delta_covers_every_node_of_every_counter(relation: str, horizon: int) -> None:
    """The table sampler is within TV ``2^-104`` of ``N_Z`` per draw, so delta must grow by
    ``(1 + e^eps) 2^-104`` per value the epoch may draw: every node of each of the
    ``d k~`` sketch counters and of the length counter (add/remove). The bound must cover
    that count (small ``k~`` so the length counter's share is visible), and the
    release's budget must state it (its share of the total is below float resolution)."""
    spec = LazyHHSpec(k=1, k_tilde=2, horizon=horizon, eps=0.7, delta=1e-4,
                      relation=relation, clock="tick", event_horizon=50)  # type: ignore[arg-type]
    params = derive_params(spec, None, None)
    counters = params.depth * spec.k_tilde + (1 if relation == "add_remove" else 0)
    need = (1 + math.exp(spec.eps)) * counters * _tree_nodes(horizon) * SAMPLER_TV_PER_DRAW
    got = sampler_delta(spec, params)
    assert got >= need * (1 - 1e-12)
    assert got <= 2.0 * need + (1 + math.exp(spec.eps)) * 4 * horizon * SAMPLER_TV_PER_DRAW
    g = guarantee(spec, params, sketch_sigma=1.0)
    assert g["budget"]["sampler"]["delta"] == got


def test_float_calibrators_have_no_sampler_term() -> None:
    """Only the discrete calibrator uses the table sampler."""
    spec = LazyHHSpec(k=1, k_tilde=2, horizon=8, eps=0.7, delta=1e-4, clock="tick",  # type: ignore[arg-type]
                      event_horizon=50, calibrator="analytic")  # type: ignore[arg-type]
    assert sampler_delta(spec, derive_params(spec, None, None)) == 0.0
