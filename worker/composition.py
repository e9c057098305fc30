r"""Topologies that read one input topic compose: the privacy budget per topic and unit.

Every topology reading the same input topic with the same privacy unit releases a
function of the same events, so one event's (or one unit's) privacy loss is the
sum over those topologies (sequential composition, docs/PRIVACY.md §4.1). This
module computes that total from the guarantee each topology's releases state
(the envelope's ``eps`` and ``delta``; LazyHH's ``delta`` is its ``delta~``), checks
it against the topic's declared budget (``input.budget: {eps, delta}``), and
attaches it to every topology so each release states it (``topic_total`` in the
envelope). ``dpstream validate`` and ``dpstream plan`` print it; the worker refuses
to start a ``production: true`` topology whose topic total exceeds the budget (a
production topology without ``input.budget`` gets its own ``(eps, delta)`` as the
budget: alone on its topic it passes, sharing the topic it must declare one).

A topology whose releases are not private (``fast``/``zero`` noise, float noise, an
uncovered message unit) makes the total of its topic and unit not private: exact
or unaccounted releases of the same events void any bound.

Topics read under different units are totalled separately ("per input topic and
unit"); docs/PRIVACY.md §4.1 says why an event-level total does not bound a unit.

Examples
--------
>>> from worker.topology import parse_topology
>>> def topo(name, eps, budget=""):
...     return parse_topology(f'''
... name: {name}
... input: {{topic: flows, partitions: 1, fields: {{shard: r, item: i}}{budget}}}
... mechanism: {{name: lazy_cms, params: {{depth: 2, width: 16}}}}
... privacy: {{eps: {eps}, delta: 1.0e-6, epoch_ticks: 10}}
... release: {{every_ticks: 5, topic: {name}-out}}
... dead_letter: {{topic: {name}-dlq}}''', f"{name}.yaml")
>>> totals = topic_totals([topo("a", 1.0), topo("b", 0.5)])
>>> t = totals[("flows", "event")]
>>> t.eps, t.delta, [s.topology for s in t.shares], t.private
(1.5, 2e-06, ['a', 'b'], True)
>>> print(describe(t).replace(": ", ":\n  ").replace("; ", ";\n  "))
topic 'flows' (unit event):
  total eps 1.5, delta 2e-06 over 2 topologies:
  a eps 1 delta 1e-06, b eps 0.5 delta 1e-06;
  no budget declared (input.budget)
>>> composed = compose([topo("a", 1.0, ", budget: {eps: 1.2}"), topo("b", 0.5)])
Traceback (most recent call last):
...
sketches.errors.SpecError: a.yaml: input.budget: the topologies reading topic 'flows' ...
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from sketches.errors import SpecError
from worker.topology import Topology


@dataclasses.dataclass(frozen=True)
class Share:
    """One topology's part of a topic's budget: the guarantee its releases state."""

    topology: str
    source: str
    eps: float
    delta: float
    private: bool
    production: bool


@dataclasses.dataclass(frozen=True)
class TopicTotal:
    """The sequential composition of every topology reading ``topic`` under ``unit``."""

    topic: str
    unit: str
    shares: tuple[Share, ...]
    budget: tuple[float, float | None] | None
    """The declared ``input.budget`` (eps, delta or None), the smallest if several."""

    @property
    def private(self) -> bool:
        return all(s.private for s in self.shares)

    @property
    def eps(self) -> float:
        return math.fsum(s.eps for s in self.shares) if self.private else math.inf

    @property
    def delta(self) -> float:
        return math.fsum(s.delta for s in self.shares) if self.private else 1.0

    def over_budget(self) -> bool:
        if self.budget is None:
            return False
        eps, delta = self.budget
        # a relative slack for the float sum of decimal eps values (0.1 + 0.2 > 0.3)
        return self.eps > eps * (1 + 1e-12) or (delta is not None and
                                               self.delta > delta * (1 + 1e-12))

    def to_json(self) -> dict[str, Any]:
        """The ``topic_total`` block of a release envelope."""
        return {
            "topic": self.topic, "unit": self.unit, "private": self.private,
            "eps": self.eps if self.private else None,
            "delta": self.delta if self.private else None,
            "composition": "sequential",
            "topologies": [s.topology for s in self.shares],
            "budget": None if self.budget is None else
            {"eps": self.budget[0], "delta": self.budget[1]},
        }


def stated_guarantee(topo: Topology) -> tuple[float, float, bool]:
    """``(eps, delta, private)`` as ``topo``'s releases state them.

    Built as the worker builds the mechanism (zero noise, nothing released), then
    passed through :func:`worker.publish.envelope`, the function every published
    release goes through: LazyHH states its ``delta~``, not the topology's delta.
    """
    from sketches import ZeroNoise, lookup
    from worker.publish import envelope
    from worker.topology import validate_mechanism_params

    validate_mechanism_params(topo)
    entry = lookup(topo.mechanism)
    mech = entry.build(entry.build_spec(topo.spec_params()), ZeroNoise())
    env = envelope(topo, "<composition>", epoch=0, seq=0, rounds=0, final=False,
                   payload=mech.release(), published_at_ms=0)
    return float(env["eps"]), float(env["delta"]), bool(env["private"])


def topic_totals(topologies: Sequence[Topology]) -> dict[tuple[str, str], TopicTotal]:
    """The total per ``(input topic, unit)`` over ``topologies`` (in their order)."""
    groups: dict[tuple[str, str], list[Topology]] = {}
    for t in topologies:
        groups.setdefault((t.input.topic, t.privacy.unit_field or "event"), []).append(t)
    out = {}
    for key, topos in groups.items():
        shares = []
        for t in topos:
            eps, delta, private = stated_guarantee(t)
            shares.append(Share(t.name, t.source, eps, delta, private, t.production))
        budgets = [t.input.budget for t in topos if t.input.budget is not None]
        budget = None
        if budgets:
            deltas = [d for _, d in budgets if d is not None]
            budget = (min(e for e, _ in budgets), min(deltas) if deltas else None)
        out[key] = TopicTotal(key[0], key[1], tuple(shares), budget)
    return out


def describe(total: TopicTotal) -> str:
    """One line: the total, every topology's share, and the budget verdict."""
    parts = ", ".join(f"{s.topology} " + (f"eps {s.eps:g} delta {s.delta:.3g}" if s.private
                                          else "NOT PRIVATE") for s in total.shares)
    head = (f"topic {total.topic!r} (unit {total.unit}): total "
            + (f"eps {total.eps:g}, delta {total.delta:.3g}" if total.private
               else "NOT PRIVATE (a topology on it releases without a guarantee)")
            + f" over {len(total.shares)} topolog{'y' if len(total.shares) == 1 else 'ies'}: "
            + parts)
    if total.budget is None:
        return head + "; no budget declared (input.budget)"
    eps, delta = total.budget
    limit = f"eps {eps:g}" + ("" if delta is None else f", delta {delta:.3g}")
    return head + f"; budget {limit}: " + ("OVER BUDGET" if total.over_budget() else "ok")


def check_budgets(totals: dict[tuple[str, str], TopicTotal],
                  topologies: Sequence[Topology]) -> None:
    """Refuse any topology whose topic total exceeds the topic's declared budget, and a
    production topology whose topic total exceeds its own guarantee when no budget is
    declared (so a second topology on its topic must be accounted for explicitly)."""
    by_name = {t.name: t for t in topologies}
    for total in totals.values():
        for share in total.shares:
            if not share.production and total.budget is None:
                continue
            topo = by_name[share.topology]
            budget = total.budget or (share.eps, share.delta)
            over = (not total.private or total.eps > budget[0] * (1 + 1e-12)
                    or (budget[1] is not None and total.delta > budget[1] * (1 + 1e-12)))
            if not over:
                continue
            stated = (f"eps {total.eps:g}, delta {total.delta:.3g}" if total.private
                      else "no guarantee (a topology on it is NOT PRIVATE)")
            limit = f"eps {budget[0]:g}" + ("" if budget[1] is None
                                            else f", delta {budget[1]:.3g}")
            what = "the declared budget" if total.budget else "its own guarantee (no budget)"
            shares = "; ".join(
                f"{s.topology} ({s.source}): " + (f"eps {s.eps:g}, delta {s.delta:.3g}"
                                                  if s.private else "NOT PRIVATE")
                for s in total.shares)
            raise SpecError(
                f"{topo.source}: input.budget: the topologies reading topic {total.topic!r} "
                f"(unit {total.unit}) spend {stated} in total, over {what} {limit} "
                f"(sequential composition: one event is released by each of them): {shares}; "
                "lower the topologies' eps so they sum to the budget, or declare "
                "`input.budget: {eps: E, delta: D}` (the same in each) covering the total, or "
                "move a topology to another input topic")


def compose(topologies: Sequence[Topology]) -> list[Topology]:
    """``topologies`` checked against their topics' budgets, each carrying its total.

    Raises :class:`~sketches.errors.SpecError` for a production topology over its
    topic's budget (:func:`check_budgets`); every returned topology has
    ``topic_total`` set, which its releases state.
    """
    totals = topic_totals(topologies)
    check_budgets(totals, topologies)
    return [dataclasses.replace(
        t, topic_total=totals[(t.input.topic, t.privacy.unit_field or "event")].to_json())
        for t in topologies]
