"""Building a topology's mechanism for ``dpstream plan``: the :class:`Probe`.

The plan computes no privacy or error maths of its own: it builds the topology's
mechanism from its spec exactly as the worker does (registry ``build_spec`` +
``build``, through :func:`worker.release.envelope.probe`), with
:class:`~sketches.core.noise.ZeroNoise` (nothing is released: the instance only
answers questions), and asks it, through the capabilities its registry entry
declares (:class:`sketches.core.base.Capabilities`), what it will release.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sketches.core.base import Capabilities, NoiseSummary, lookup
from worker.config.topology import Topology

PLAN_SHARD = "<plan>"
"""The shard name of every probe (no release is ever published)."""


@dataclasses.dataclass(frozen=True)
class Probe:
    """A topology's mechanism built as the worker builds it (zero noise, never released)."""

    topology: Topology
    spec: Any
    mechanism: Any
    payload: dict[str, Any]
    envelope: dict[str, Any]

    @property
    def capabilities(self) -> Capabilities:
        """What the mechanism declares it offers (its registry entry; never probed)."""
        return lookup(self.topology.mechanism).capabilities

    @property
    def noise(self) -> NoiseSummary:
        """The mechanism's own summary of its noise (empty if it declares none)."""
        summary = self.capabilities.noise
        return NoiseSummary() if summary is None else summary(self.mechanism)


def probe(topo: Topology) -> Probe:
    """Validate ``topo``'s mechanism, build it with zero noise, and wrap its empty release.

    The envelope comes from :func:`worker.release.envelope.envelope`, the function every
    published release goes through, with the topology's own epoch parameters.
    """
    from worker.release.envelope import probe as build

    return Probe(topo, *build(topo, PLAN_SHARD))

