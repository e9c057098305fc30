"""``dpstream plan``: what a topology's releases will say, before anything runs.

For each topology: the mechanism, the guarantee a release will state, the
noise sigma, the error bound of a released count or estimate at the release's
``beta`` (at the first release and at the epoch's end), a heavy-hitter
mechanism's detection threshold and the time until an item with a given share
of the traffic appears, the memory per shard, and what changing one knob would do.

The plan is thin on purpose: it computes no privacy or error maths of its own.
It builds the topology's mechanism exactly as the worker does and asks it,
through the capabilities its registry entry declares
(:class:`sketches.core.base.Capabilities`); no mechanism is known here by name.
This module assembles one plan (:func:`plan_topology`) from its parts:

- :mod:`worker.plan.build`: the :class:`Probe` (the mechanism built with zero noise,
  its empty release and envelope);
- :mod:`worker.plan.analysis`: guarantee, sigma, counter, timing, error bounds, memory;
- :mod:`worker.plan.whatif`: the knob variations and the fix search;
- :mod:`worker.plan.verdict`: is the noise small against the counts, and the fix;
- :mod:`worker.plan.render`: the text ``dpstream plan`` prints.

Examples
--------
>>> from worker.config.topology import parse_topology
>>> topo = parse_topology('''
... name: views
... input: {topic: pageviews, partitions: 1, fields: {shard: site, item: page}}
... mechanism: {name: lazy_cms, params: {depth: 4, width: 1024}}
... privacy: {eps: 1.0, delta: 1.0e-6, epoch_ticks: 3600}
... release: {every_ticks: 60, topic: views-out}
... dead_letter: {topic: views-dlq}''', "views.yaml")
>>> p = plan_topology(topo, rate=0.1)
>>> p["guarantee"]["eps"], p["guarantee"]["relation"], p["guarantee"]["unit"], p["private"]
(1.0, 'add_remove', 'event', True)
>>> p["verdict"]["status"]     # 360 events an hour: no page stands out of the noise
'noise_dominates'
>>> [v["label"] for v in p["what_if"]][:3]
['eps x2', 'eps /2', 'width x2']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.config.topology import Topology
from worker.plan.analysis import bounds, counter, event_horizon, guarantee, memory, sigmas, timing
from worker.plan.build import Probe, probe
from worker.plan.render import _num, render
from worker.plan.verdict import verdict
from worker.plan.whatif import counter_choices, variations, what_if
from worker.release.envelope import is_private, privacy_note

__all__ = ["DEFAULT_SHARES", "Probe", "_num", "counter_choices", "memory", "plan",
           "plan_topology", "probe", "render", "variations"]

DEFAULT_SHARES = (0.01, 0.05, 0.10)
"""Traffic shares of the example items (``--share``)."""


def plan_topology(topo: Topology, *, rate: float | None = None,
                  shares: Sequence[float] = DEFAULT_SHARES, shards: int | None = None,
                  with_what_if: bool = True) -> dict[str, Any]:
    """The plan of one topology as a JSON-able dict (see module docstring)."""

    shares = tuple(sorted(shares))
    p = probe(topo)
    t = timing(topo, rate, shards)
    b = bounds(p, t, shares)
    g = guarantee(p)
    private = is_private(p.envelope)
    out = {
        "topology": topo.name, "source": topo.source, "mechanism": topo.mechanism,
        "private": private, "privacy_note": privacy_note(p.envelope),
        "guarantee": g, "sigma": sigmas(p), "counter": counter(p), "timing": t,
        "shares": list(shares),
        "bounds": b, "memory": memory(p),
        "event_horizon": event_horizon(p),
        "verdict": verdict(p, b, t, shares, private),
    }
    if with_what_if:
        out["what_if"] = what_if(topo, p, rate, shares, shards)
    return out


def plan(topologies: Sequence[Topology], *, rate: float | None = None,
         shares: Sequence[float] = DEFAULT_SHARES,
         shards: int | None = None) -> list[dict[str, Any]]:
    """Plans of every topology, in order (``rate``: events/s of the whole input topic)."""
    return [plan_topology(t, rate=rate, shares=shares, shards=shards) for t in topologies]
