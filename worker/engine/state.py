"""What the engine's concept modules share: the topologies, the owned partitions, the I/O.

:class:`worker.engine.engine.Engine` is a facade over a few modules, one per
concept of the flow (:mod:`~worker.engine.schedule`, :mod:`~worker.engine.ingest`,
:mod:`~worker.engine.commit`, :mod:`~worker.engine.restore`,
:mod:`~worker.engine.timer`, :mod:`~worker.engine.gauges`). They all work on one
:class:`EngineState`: its fields are public and plain, so no module reaches into
another one's internals; what a module keeps for itself (log throttles, caches)
stays on its own object.

Nothing here locks: the facade holds the engine lock around every call into
these modules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from worker.config.topology import Topology
from worker.engine.checkpoint import Fenced
from worker.engine.composition import Composition
from worker.engine.partition import NoiseFactory, PartitionState, Sink, Store
from worker.ingest.decode import DEAD_LETTER_MAX_BYTES
from worker.ingest.routing import ShardBudget
from worker.observe.dead_letters import DeadLetterSummary
from worker.observe.metrics import Metrics

log = logging.getLogger("worker.engine.engine")
"""One logger for the whole engine, named as before the split (log filters and
alert rules select on it)."""

YIELD_EVERY = 64
"""Shards between two yields to the event loop in a release run or a checkpoint."""


@dataclass(eq=False)
class EngineState:
    """The engine's shared state (one per :class:`~worker.engine.engine.Engine`)."""

    topologies: dict[str, Topology]
    by_topic: dict[str, list[Topology]]
    """Input topic -> the topologies reading it."""
    entries: dict[str, Any]
    """Topology name -> its mechanism's registry entry."""
    specs: dict[str, Any]
    """Topology name -> its mechanism's spec (built once)."""
    store: Store
    sink: Sink
    metrics: Metrics
    clock: Callable[[], float]
    composition: Composition
    """Live budget per input topic: what every release's ``topic_total`` states."""
    budgets: dict[str, ShardBudget]
    """Open shard sets: the shards this worker holds, at most ``max_open_shards`` new
    ones per topology (``DPSTREAM_MAX_OPEN_SHARDS``; 0: no limit)."""
    deployment: str = ""
    """This deployment's id, written into every checkpoint; a checkpoint of another
    one is refused on restore unless named in ``takeover_from`` (issue 19)."""
    takeover_from: tuple[str, ...] = ()
    crash_points: dict[str, float] = field(default_factory=dict)
    dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES
    reraise: tuple[type[BaseException], ...] = ()
    """Exceptions the timer leaves to the driver (broker errors: an outage); any other
    exception of one partition's timer work is contained (:mod:`~worker.engine.timer`)."""
    yield_every: int = YIELD_EVERY
    parts: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    """``(topology name, input partition)`` -> the state of an assigned partition."""
    input_not_private: dict[str, str] = field(default_factory=dict)
    """Topology name -> why its input makes releases not private (found at run time)."""
    taken_over: Fenced | None = None
    """Set when another *deployment* fenced a partition of this worker: the driver
    stops the worker (it has been replaced)."""
    noise_for: NoiseFactory = field(default_factory=NoiseFactory)
    dead_letter_log: DeadLetterSummary = field(default_factory=DeadLetterSummary)
    """Dead letters per topology and reason, one WARNING summary per interval
    (:mod:`worker.observe.dead_letters`); flushed by the timer round."""
    repartition: dict[str, str] = field(default_factory=dict)
    """Repartition topic -> the input topic it belongs to (:mod:`worker.ingest.repartition`)."""
    hinted: set[str] = field(default_factory=set)
    """Input topics whose first forwarded record was logged (one line per topic)."""

    def input_of(self, topic: str) -> str | None:
        """The input topic of ``topic`` (itself, or the one it repartitions); None if neither."""
        if topic in self.by_topic:
            return topic
        return self.repartition.get(topic)

    def now_ms(self) -> int:
        """Wall-clock milliseconds (the tick clock's processing time)."""
        return int(self.clock() * 1000)
