"""Throughput and lag of a worker, from its own Prometheus endpoint.

Metrics are operator-only (exact, private information: docs/OPERATIONS.md),
so the dashboard shows only aggregates per topology: events ingested per
second (the rate of ``dpstream_events_in_total`` between two scrapes) and
consumer lag in messages (``dpstream_consumer_lag_messages`` summed over
partitions). The dashboard binds to 127.0.0.1 by default for the same reason.

>>> p = MetricsProbe()
>>> p.update('dpstream_events_in_total{topology="t"} 100\\n', now=10.0)
{'t': {'events_total': 100.0, 'events_per_s': None, 'lag_messages': None}}
>>> p.update('dpstream_events_in_total{topology="t"} 400\\n'
...          'dpstream_consumer_lag_messages{topology="t",partition="0"} 7\\n', now=12.0)
{'t': {'events_total': 400.0, 'events_per_s': 150.0, 'lag_messages': 7.0}}
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families


class MetricsProbe:
    """Turns successive scrapes into per-topology throughput and lag."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}
        self.error: str | None = None

    def update(self, text: str, now: float) -> dict[str, dict[str, Any]]:
        """Parse one scrape taken at ``now`` (seconds); return the per-topology view."""
        events: dict[str, float] = {}
        lag: dict[str, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                topo = s.labels.get("topology")
                if topo is None:
                    continue
                if s.name == "dpstream_events_in_total":
                    events[topo] = events.get(topo, 0.0) + s.value
                elif s.name == "dpstream_consumer_lag_messages":
                    lag[topo] = lag.get(topo, 0.0) + s.value
        out: dict[str, dict[str, Any]] = {}
        for topo in sorted(set(events) | set(lag)):
            total = events.get(topo)
            rate = None
            prev = self._last.get(topo)
            if total is not None:
                if prev is not None and now > prev[0] and total >= prev[1]:
                    rate = (total - prev[1]) / (now - prev[0])
                self._last[topo] = (now, total)
            out[topo] = {"events_total": total, "events_per_s": rate,
                         "lag_messages": lag.get(topo)}
        return out
