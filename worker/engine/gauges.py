"""The engine's metrics: per-shard gauges, the topology's static info, release counters.

A shard's gauges (memory, the epoch's stated eps and delta, epoch, progress and
length) are updated when its state is built or restored and at every release,
never per tick (a quiet tick visits no shard). The gauge children are looked
up once per shard and dropped when the shard leaves this worker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from worker.config.topology import Topology
from worker.engine.shard_state import ShardState
from worker.ingest.decode import REASONS
from worker.observe.metrics import Metrics
from worker.release.envelope import split_release_key
from worker.release.epoch_params import epoch_params


class Gauges:
    """Metric updates of the engine, with the per-shard gauge children cached."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._children: dict[tuple[str, str], tuple[Any, ...]] = {}

    def init_topologies(self, topologies: Iterable[Topology]) -> None:
        """Create every topology's series and state its privacy setup (an Info metric)."""
        for t in topologies:
            self.metrics.init_topology(t.name, REASONS)
            self.metrics.privacy_info.labels(topology=t.name).info({
                "mechanism": t.mechanism, "relation": t.privacy.relation,
                "unit": t.privacy.unit_field or "event", "clock": t.privacy.clock,
                "unit_cap": str(t.privacy.unit_cap if t.privacy.unit_field else 1),
                "noise": t.noise.kind})

    def _shard_children(self, topo: Topology, shard: str) -> tuple[Any, ...]:
        """The shard's gauge children, looked up once (``labels()`` costs ~15 us each;
        10,000 shards release together). Dropped with :meth:`forget_shard`."""
        key = (topo.name, shard)
        got = self._children.get(key)
        if got is None:
            m, labels = self.metrics, {"topology": topo.name, "shard": shard}
            got = self._children[key] = tuple(
                g.labels(**labels) for g in (m.memory, m.eps, m.delta, m.epoch,
                                             m.epoch_progress, m.epoch_length))
        return got

    def forget_shard(self, topo: Topology, shard: str) -> None:
        """The shard left this worker: drop its series."""
        self._children.pop((topo.name, shard), None)
        self.metrics.forget_shard(topo.name, shard)

    def shard(self, topo: Topology, st: ShardState) -> None:
        """Set the shard's gauges from its state (and the topology's release period)."""
        memory, eps_g, delta_g, epoch_g, progress_g, length_g = self._shard_children(
            topo, st.shard)
        m = self.metrics
        memory.set(st.mechanism.memory_bytes())
        params = st.params or epoch_params(topo)  # the epoch's (checkpointed) parameters
        eps, delta = params["eps"], params["delta"]
        stated = st.capabilities.guarantee
        if stated is not None:  # LazyHH: the guarantee is (eps, delta_tilde), delta_tilde > delta
            guarantee = stated(st.mechanism)
            eps, delta = guarantee["eps"], guarantee.get("delta_tilde", guarantee["delta"])
        eps_g.set(eps)
        delta_g.set(delta)
        epoch_g.set(st.epoch)
        progress_g.set(st.rounds)
        length_g.set(topo.horizon)
        m.release_period.labels(topology=topo.name).set(
            topo.privacy.tick_ms * topo.release.every_ticks / 1000)

    def published(self, topo: Topology,
                  pending: Sequence[tuple[str, bytes, bytes, float | None, int]],
                  now_ms: int, shards_owned: int) -> None:
        """Count the releases of ``pending`` just published (at ``now_ms``)."""
        m = self.metrics
        for _, key, _, oldest, _ in pending:
            shard = split_release_key(key)[1]
            m.releases.labels(topology=topo.name, shard=shard).inc()
            m.last_release.labels(topology=topo.name).set(now_ms / 1000)
            if oldest is not None:
                m.release_latency.labels(topology=topo.name).observe(
                    max(0.0, (now_ms - oldest) / 1000))
        m.shards_owned.labels(topology=topo.name).set(shards_owned)
