r"""Topologies that read one input topic compose: the privacy budget per topic.

Every topology reading the same input topic releases a function of the same
events, so one event's privacy loss is the sum over those topologies (sequential
composition, docs/PRIVACY.md §4.1), whatever their units: a user-level share
counts ``(2 eps, (1 + e^eps) delta)`` per event (:meth:`Share.per_event`; keyed by
topic alone, so naming units differently cannot split a total). This module
computes that total from the guarantee each topology's releases state (the
envelope's ``eps`` and ``delta``; LazyHH's ``delta`` is its ``delta~``), checks it
against the topic's declared budget (``input.budget: {eps, delta}``), and attaches
it to every topology so each release states it (``topic_total`` in the envelope,
with the per-unit sums of the user-level topologies in ``by_unit``). ``dpstream
validate`` and ``dpstream plan`` print it; any topology over a declared budget is
refused at start-up, and a ``production: true`` topology without ``input.budget``
is capped by its own guarantee (alone on its topic it passes, sharing the topic it
must declare one). The engine keeps a live :class:`Composition`: an epoch finishing
on larger checkpointed parameters, or a topology whose releases stopped being
private, raises the total every later release states.

A topology whose releases are not private (``fast``/``zero`` noise, float noise, an
uncovered message unit) makes the total of its topic not private: exact or
unaccounted releases of the same events void any bound.

The total covers the topologies one worker loads together. A topology renamed, or
another deployment reading the same topic, adds its own releases of the same
events: account for them in ``input.budget`` by hand (docs/PRIVACY.md §4.1).

Examples
--------
>>> from worker.config.topology import parse_topology
>>> def topo(name, eps, budget=""):
...     return parse_topology(f'''
... name: {name}
... input: {{topic: flows, partitions: 1, fields: {{shard: r, item: i}}{budget}}}
... mechanism: {{name: lazy_cms, params: {{depth: 2, width: 16}}}}
... privacy: {{eps: {eps}, delta: 1.0e-6, epoch_ticks: 10}}
... release: {{every_ticks: 5, topic: {name}-out}}
... dead_letter: {{topic: {name}-dlq}}''', f"{name}.yaml")
>>> totals = topic_totals([topo("a", 1.0), topo("b", 0.5)])
>>> t = totals["flows"]
>>> t.eps, t.delta, [s.topology for s in t.shares], t.private
(1.5, 2e-06, ['a', 'b'], True)
>>> print(describe(t).replace(": ", ":\n  ").replace("; ", ";\n  "))
topic 'flows':
  total per event eps 1.5, delta 2e-06 over 2 topologies:
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
from worker.config.topology import Topology


@dataclasses.dataclass(frozen=True)
class Share:
    """One topology's part of a topic's budget: the guarantee its releases state."""

    topology: str
    source: str
    eps: float
    delta: float
    private: bool
    production: bool
    unit: str = "event"
    """``"event"`` or the unit field of a user-level topology."""

    def per_event(self) -> tuple[float, float]:
        """What this share costs one **event**. A user-level guarantee bounds the loss of
        a whole unit; removing one event of a unit is two unit steps away (remove the
        unit, add it back without the event), so by group privacy it costs
        ``(2 eps, (1 + e^eps) delta)`` (its cap may shift which of the unit's events
        count, so the unit calibration alone does not cover one event)."""
        if self.unit == "event":
            return self.eps, self.delta
        return 2 * self.eps, (1 + math.exp(self.eps)) * self.delta


@dataclasses.dataclass(frozen=True)
class TopicTotal:
    """The sequential composition of every topology reading ``topic``, for one event.

    Every topology on the topic counts, whatever its unit (:meth:`Share.per_event`);
    ``by_unit`` adds the user-level topologies of each unit for that unit's loss
    (event-level topologies do not bound a unit's: listed, not summed).
    """

    topic: str
    shares: tuple[Share, ...]
    budget: tuple[float, float | None] | None
    """The declared ``input.budget`` (eps, delta or None), the smallest if several."""

    @property
    def unit(self) -> str:
        return "event"

    @property
    def private(self) -> bool:
        return all(s.private for s in self.shares)

    @property
    def eps(self) -> float:
        return math.fsum(s.per_event()[0] for s in self.shares) if self.private else math.inf

    @property
    def delta(self) -> float:
        return math.fsum(s.per_event()[1] for s in self.shares) if self.private else 1.0

    def by_unit(self) -> dict[str, dict[str, Any]]:
        """``{unit: {eps, delta, topologies}}`` over the user-level topologies of each unit."""
        out: dict[str, dict[str, Any]] = {}
        for s in self.shares:
            if s.unit == "event":
                continue
            cur = out.setdefault(s.unit, {"eps": 0.0, "delta": 0.0, "topologies": []})
            cur["eps"] += s.eps
            cur["delta"] += s.delta
            cur["topologies"].append(s.topology)
        return out

    def over_budget(self) -> bool:
        if self.budget is None:
            return False
        return _over(self, self.budget)

    def to_json(self) -> dict[str, Any]:
        """The ``topic_total`` block of a release envelope."""
        return {
            "topic": self.topic, "unit": "event", "private": self.private,
            "eps": self.eps if self.private else None,
            "delta": self.delta if self.private else None,
            "composition": "sequential",
            "topologies": [s.topology for s in self.shares],
            "by_unit": self.by_unit() if self.private else {},
            "budget": None if self.budget is None else
            {"eps": self.budget[0], "delta": self.budget[1]},
        }


def _over(total: TopicTotal, budget: tuple[float, float | None]) -> bool:
    # a relative slack for the float sum of decimal eps values (0.1 + 0.2 > 0.3)
    eps, delta = budget
    return (not total.private or total.eps > eps * (1 + 1e-12)
            or (delta is not None and total.delta > delta * (1 + 1e-12)))


def stated_guarantee(topo: Topology) -> tuple[float, float, bool]:
    """``(eps, delta, private)`` as ``topo``'s releases state them.

    Built as the worker builds the mechanism (zero noise, nothing released), then
    passed through :func:`worker.release.envelope.envelope`, the function every published
    release goes through: LazyHH states its ``delta~``, not the topology's delta.
    """
    from worker.release.envelope import probe

    env = probe(topo, "<composition>")[3]
    return float(env["eps"]), float(env["delta"]), bool(env["private"])


def share_of(topo: Topology) -> Share:
    """``topo``'s share (:func:`stated_guarantee`)."""
    eps, delta, private = stated_guarantee(topo)
    return Share(topo.name, topo.source, eps, delta, private, topo.production,
                 topo.privacy.unit_field or "event")


def topic_totals(topologies: Sequence[Topology],
                 shares: dict[str, Share] | None = None) -> dict[str, TopicTotal]:
    """The total per input topic over ``topologies`` (in their order); ``shares`` (by
    topology name) replaces the computed ones (the engine's live view)."""
    groups: dict[str, list[Topology]] = {}
    for t in topologies:
        groups.setdefault(t.input.topic, []).append(t)
    out = {}
    for topic, topos in groups.items():
        parts = tuple((shares or {}).get(t.name) or share_of(t) for t in topos)
        budgets = [t.input.budget for t in topos if t.input.budget is not None]
        budget = None
        if budgets:
            deltas = [d for _, d in budgets if d is not None]
            budget = (min(e for e, _ in budgets), min(deltas) if deltas else None)
        out[topic] = TopicTotal(topic, parts, budget)
    return out


def describe(total: TopicTotal) -> str:
    """One line: the total for one event, every topology's share, the budget verdict."""
    def part(s: Share) -> str:
        if not s.private:
            return f"{s.topology} NOT PRIVATE"
        e, d = s.per_event()
        unit = "" if s.unit == "event" else f" (unit {s.unit} eps {s.eps:g}: x2 per event)"
        return f"{s.topology} eps {e:g} delta {d:.3g}{unit}"

    parts = ", ".join(part(s) for s in total.shares)
    head = (f"topic {total.topic!r}: total per event "
            + (f"eps {total.eps:g}, delta {total.delta:.3g}" if total.private
               else "NOT PRIVATE (a topology on it releases without a guarantee)")
            + f" over {len(total.shares)} topolog{'y' if len(total.shares) == 1 else 'ies'}: "
            + parts)
    if total.budget is None:
        return head + "; no budget declared (input.budget)"
    eps, delta = total.budget
    limit = f"eps {eps:g}" + ("" if delta is None else f", delta {delta:.3g}")
    return head + f"; budget {limit}: " + ("OVER BUDGET" if total.over_budget() else "ok")


def check_budgets(totals: dict[str, TopicTotal], topologies: Sequence[Topology]) -> None:
    """Refuse any topology whose topic total (per event, every topology on the topic)
    exceeds the topic's declared budget, and a production topology whose topic total
    exceeds its own guarantee when no budget is declared (so a second topology on its
    topic must be accounted for explicitly)."""
    by_name = {t.name: t for t in topologies}
    for total in totals.values():
        for share in total.shares:
            if not share.production and total.budget is None:
                continue
            budget = total.budget or share.per_event()
            if not _over(total, budget):
                continue
            topo = by_name[share.topology]
            stated = (f"eps {total.eps:g}, delta {total.delta:.3g}" if total.private
                      else "no guarantee (a topology on it is NOT PRIVATE)")
            limit = f"eps {budget[0]:g}" + ("" if budget[1] is None
                                            else f", delta {budget[1]:.3g}")
            what = "the declared budget" if total.budget else "its own guarantee (no budget)"
            raise SpecError(
                f"{topo.source}: input.budget: the topologies reading topic {total.topic!r} "
                f"spend {stated} per event in total, over {what} {limit} (sequential "
                f"composition: one event is released by each of them): {_shares(total)}; "
                "lower the topologies' eps so they sum to the budget, or declare "
                "`input.budget: {eps: E, delta: D}` (the same in each) covering the total, or "
                "move a topology to another input topic")


def _shares(total: TopicTotal) -> str:
    out = []
    for s in total.shares:
        if not s.private:
            out.append(f"{s.topology} ({s.source}): NOT PRIVATE")
            continue
        e, d = s.per_event()
        note = "" if s.unit == "event" else f", unit {s.unit} (eps {s.eps:g}, x2 per event)"
        out.append(f"{s.topology} ({s.source}): eps {e:g}, delta {d:.3g}{note}")
    return "; ".join(out)


class Composition:
    """The live composition of a worker's topologies (the engine's view).

    Starts from what each topology's releases state; :meth:`raise_share` records an
    epoch that finishes on older, larger checkpointed parameters (a topology edited
    mid-epoch) and :meth:`mark_not_private` one whose releases stopped being private,
    so every later release's ``topic_total`` covers them (until the worker restarts:
    an over-statement once the old epoch has ended, never an under-statement).
    """

    def __init__(self, topologies: Sequence[Topology]) -> None:
        self.topologies = list(topologies)
        self.shares = {t.name: share_of(t) for t in self.topologies}
        self._blocks: dict[str, dict[str, Any]] = {}

    def totals(self) -> dict[str, TopicTotal]:
        return topic_totals(self.topologies, self.shares)

    def block(self, topo: Topology) -> dict[str, Any]:
        """The ``topic_total`` block a release of ``topo`` states now."""
        got = self._blocks.get(topo.input.topic)
        if got is None:
            got = self._blocks[topo.input.topic] = self.totals()[topo.input.topic].to_json()
        return got

    def check(self) -> None:
        """:func:`check_budgets` on the live totals (SpecError if over)."""
        check_budgets(self.totals(), self.topologies)

    def raise_share(self, topo: Topology, stated: Share) -> bool:
        """Count ``topo`` at no less than ``stated`` (an epoch finishing on checkpointed
        parameters); True if its share grew."""
        cur = self.shares[topo.name]
        new = dataclasses.replace(cur, eps=max(cur.eps, stated.eps),
                                  delta=max(cur.delta, stated.delta),
                                  private=cur.private and stated.private)
        if new == cur:
            return False
        self.shares[topo.name] = new
        self._blocks.clear()
        return True

    def mark_not_private(self, topo: Topology) -> None:
        if self.shares[topo.name].private:
            self.shares[topo.name] = dataclasses.replace(self.shares[topo.name], private=False)
            self._blocks.clear()


def compose(topologies: Sequence[Topology]) -> list[Topology]:
    """``topologies`` checked against their topics' budgets, each carrying its total.

    Raises :class:`~sketches.errors.SpecError` for a topology over its topic's budget
    (:func:`check_budgets`); every returned topology has ``topic_total`` set (what its
    releases state until the engine's live view changes it).
    """
    totals = topic_totals(topologies)
    check_budgets(totals, topologies)
    return [dataclasses.replace(t, topic_total=totals[t.input.topic].to_json())
            for t in topologies]
