"""Topologies that read one input topic compose (issue 19 item 3; docs/PRIVACY.md §4.1).

Before: four shipped topologies read `netflow` at eps = 1 each while every envelope said
eps = 1. Now the total per input topic and unit is computed from what each release
states, printed by validate/plan, stated in every envelope, and capped by
`input.budget` (production: by its own guarantee when no budget is declared).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sketches.errors import SpecError
from worker.config.topology import check_topics, load_topologies, parse_topology
from worker.engine.composition import compose, describe, stated_guarantee, topic_totals
from worker.release.envelope import envelope

ROOT = Path(__file__).resolve().parents[4]


def _topo(name: str, eps: float, *, topic: str = "flows", budget: dict | None = None,
          unit: bool = False, production: bool = False, noise: str = "secure",
          mechanism: dict | None = None, release: str | None = None,
          dlq: str | None = None) -> object:
    doc: dict = {
        "name": name, "production": production,
        "input": {"topic": topic, "partitions": 1,
                  "fields": {"shard": "r", "item": "i", **({"unit": "u"} if unit else {})}},
        "shards": {"allowed": ["r1"]},
        "mechanism": mechanism or {"name": "lazy_cms", "params": {"depth": 2, "width": 16}},
        "privacy": {"eps": eps, "delta": 1e-6, "epoch_ticks": 10, "tick_ms": 1000},
        "release": {"every_ticks": 5, "topic": release or f"{name}-out"},
        "dead_letter": {"topic": dlq or f"{name}-dlq"},
        "noise": {"kind": noise, **({"allow_insecure_noise": True} if noise != "secure"
                                    else {})},
    }
    if budget is not None:
        doc["input"]["budget"] = budget
    if production:
        doc["privacy"]["time"] = "event"
    return parse_topology(yaml.safe_dump(doc), f"{name}.yaml")


def test_totals_are_the_sum_of_what_releases_state() -> None:
    totals = topic_totals([_topo("a", 1.0), _topo("b", 0.5), _topo("c", 2.0, topic="other")])
    flows = totals["flows"]
    assert (flows.eps, flows.delta) == (1.5, 2e-6)
    assert [s.topology for s in flows.shares] == ["a", "b"]
    assert totals["other"].eps == 2.0


def test_lazy_hh_share_is_its_delta_tilde() -> None:
    hh = _topo("hh", 1.0, mechanism={"name": "lazy_hh", "params": {
        "k": 4, "k_tilde": 16, "event_horizon": 100_000}})
    eps, delta, private = stated_guarantee(hh)
    assert eps == 1.0 and private and delta > 1e-6  # delta~, not the topology's 1e-6
    total = topic_totals([hh, _topo("a", 1.0)])["flows"]
    assert total.delta == pytest.approx(delta + 1e-6)


def test_every_unit_counts_per_event() -> None:
    """Review of issue 19, finding 2: keyed by (topic, unit) four topologies with four
    unit names each stated eps 1.0 alone under a budget of 1.0. Now one total per topic;
    a user-level share costs one event (2 eps, (1 + e^eps) delta) by group privacy."""
    import math

    topos = [_topo("a", 1.0), _topo("u", 0.5, unit=True)]
    total = topic_totals(topos)["flows"]
    assert total.eps == pytest.approx(1.0 + 2 * 0.5)
    assert total.delta == pytest.approx(1e-6 + (1 + math.exp(0.5)) * 1e-6)
    assert total.by_unit() == {"u": {"eps": 0.5, "delta": 1e-6, "topologies": ["u"]}}
    with pytest.raises(SpecError, match="x2 per event"):
        compose([_topo("a", 1.0, budget={"eps": 1.0}), _topo("u", 0.5, unit=True)])


def test_a_non_private_topology_voids_the_topic_total() -> None:
    total = topic_totals([_topo("a", 1.0), _topo("z", 1.0, noise="zero")])["flows"]
    assert not total.private and total.to_json()["eps"] is None
    assert "NOT PRIVATE" in describe(total)


def test_declared_budget_refuses_any_topology_over_it() -> None:
    topos = [_topo("a", 1.0, budget={"eps": 1.2}), _topo("b", 0.5)]
    with pytest.raises(SpecError) as err:
        compose(topos)
    msg = str(err.value)
    assert msg.startswith("a.yaml: input.budget:") and "eps 1.5, delta 2e-06 per event" in msg
    assert "a (a.yaml): eps 1" in msg and "b (b.yaml): eps 0.5" in msg
    ok = compose([_topo("a", 1.0, budget={"eps": 1.5, "delta": 2e-6}), _topo("b", 0.5)])
    assert ok[0].topic_total["eps"] == 1.5 and ok[1].topic_total["topologies"] == ["a", "b"]


def test_production_without_budget_is_capped_by_its_own_guarantee() -> None:
    alone = compose([_topo("p", 1.0, production=True)])
    assert alone[0].topic_total["eps"] == 1.0
    with pytest.raises(SpecError, match="over its own guarantee"):
        compose([_topo("p", 1.0, production=True), _topo("b", 0.5)])
    with pytest.raises(SpecError, match="NOT PRIVATE"):
        compose([_topo("p", 1.0, production=True, budget={"eps": 5.0}),
                 _topo("z", 0.5, noise="zero")])


def test_envelope_states_the_topic_total() -> None:
    a, _ = compose([_topo("a", 1.0), _topo("b", 0.5)])
    doc = envelope(a, "r1", epoch=0, seq=0, rounds=1, final=False, payload={},
                   published_at_ms=0)
    assert doc["eps"] == 1.0
    assert doc["topic_total"]["eps"] == 1.5 and doc["topic_total"]["topic"] == "flows"
    assert doc["topic_total"]["composition"] == "sequential"


def test_shipped_netflow_topologies_fit_their_declared_budget() -> None:
    topos = load_topologies([str(ROOT / "topologies")])
    composed = compose(topos)
    netflow = {t.name: t.topic_total for t in composed if t.input.topic == "netflow"}
    assert len(netflow) == 4
    total = next(iter(netflow.values()))
    assert total is not None and total["eps"] <= total["budget"]["eps"]
    assert total["delta"] <= total["budget"]["delta"]


@pytest.mark.parametrize(("kw", "field", "other"), [
    (dict(release="b-dlq"), "release.topic", "dead-letter topic of 'b'"),
    (dict(release="b-in"), "release.topic", "input topic of 'b'"),
    (dict(dlq="b-out"), "dead_letter.topic", "release topic of 'b'"),
    (dict(topic="b-dlq"), "input.topic", "dead-letter topic of 'b'"),
])
def test_topics_are_pairwise_disjoint(kw: dict, field: str, other: str) -> None:
    """Issue 19 item 6: a release topic may not be another topology's dead-letter,
    input or the checkpoint topic (it would publish private records)."""
    with pytest.raises(SpecError) as err:
        check_topics([_topo("b", 1.0, topic="b-in"), _topo("a", 1.0, **kw)])
    assert f"a.yaml: {field}:" in str(err.value) and other in str(err.value)
    with pytest.raises(SpecError, match="checkpoint topic"):
        check_topics([_topo("a", 1.0)], checkpoint_topic="a-out")
    check_topics([_topo("a", 1.0, dlq="shared"), _topo("b", 1.0, dlq="shared")])
