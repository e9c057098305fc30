"""A tick-logging test mechanism (``test_tick_log``) and an event-time topology using it.

Importing this module registers the mechanism; :data:`LOG` collects ``(item, local tick)``
of every applied event.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register, registered
from tests.integration.exact_mechanism import ExactCounts, _spec
from worker.config.topology import parse_topology

LOG: list[tuple[str, int]] = []

class TickLog(ExactCounts):
    """Exact counts that also log ``(item, local tick)`` of every applied event."""

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        assert ticks is not None and (len(ticks) == 0 or int(ticks.min()) >= self.rounds)
        LOG.extend(zip(items.tolist(), ticks.tolist(), strict=True))
        super().update_batch(items, ticks, weights)


if "test_tick_log" not in registered():
    register(MechanismEntry("test_tick_log", _spec, TickLog, TickLog.from_bytes,
                            continual=True, capabilities=Capabilities(tick_clock=True)))

TICK_MS, LATENESS_MS, EPOCH_TICKS = 100, 300, 10_000
T0_MS = 1_000_000_000 + 20_000  # epoch 1000 (epoch length 1_000_000 ms), 20 s in

TOPO = f"""
name: et
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i}}}}
mechanism: {{name: test_tick_log}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: {TICK_MS}, epoch_ticks: {EPOCH_TICKS},
          time: TIME, allowed_lateness_ms: {LATENESS_MS}}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out}}
dead_letter: {{topic: dlq}}
"""


def topo(time: str = "event") -> Any:
    return parse_topology(TOPO.replace("TIME", time))

