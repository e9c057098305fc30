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

TOTALS = {"dpstream_events_in_total": "events_total",
          "dpstream_messages_in_total": "messages_total",
          "dpstream_events_over_horizon_total": "over_horizon_total",
          "dpstream_releases_published_total": "releases_total",
          "dpstream_timer_errors_total": "timer_errors_total"}
"""Counters summed per topology (over shards and partitions)."""
RATES = {"events_total": "events_per_s", "messages_total": "messages_per_s"}
"""Totals also shown as a rate between two scrapes."""


class MetricsProbe:
    """Turns successive scrapes into per-topology throughput, lag and counts."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, float]] = {}
        self.error: str | None = None

    def update(self, text: str, now: float) -> dict[str, dict[str, Any]]:
        """Parse one scrape taken at ``now`` (seconds); return the per-topology view.

        Per topology: ``events_total`` and ``events_per_s`` (events ingested
        into a sketch), ``lag_messages``, and when the worker exports them
        ``messages_total``/``messages_per_s`` (input messages read: they go on
        while ``events_per_s`` is 0 because the epoch's public event bound is
        reached), ``over_horizon_total``, ``releases_total`` and
        ``timer_errors_total``.
        """
        totals: dict[str, dict[str, float]] = {}
        lag: dict[str, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                topo = s.labels.get("topology")
                if topo is None:
                    continue
                if s.name in TOTALS:
                    row = totals.setdefault(topo, {})
                    row[TOTALS[s.name]] = row.get(TOTALS[s.name], 0.0) + s.value
                elif s.name == "dpstream_consumer_lag_messages":
                    lag[topo] = lag.get(topo, 0.0) + s.value
        out: dict[str, dict[str, Any]] = {}
        for topo in sorted(set(totals) | set(lag)):
            row = totals.get(topo, {})
            view: dict[str, Any] = {"events_total": row.get("events_total"),
                                    "events_per_s": None, "lag_messages": lag.get(topo)}
            for total, rate_key in RATES.items():
                value = row.get(total)
                if value is None:
                    continue
                prev = self._last.get((topo, total))
                if prev is not None and now > prev[0] and value >= prev[1]:
                    view[rate_key] = (value - prev[1]) / (now - prev[0])
                else:
                    view[rate_key] = None
                self._last[(topo, total)] = (now, value)
            for key in ("messages_total", "over_horizon_total", "releases_total",
                        "timer_errors_total"):
                if key in row:
                    view[key] = row[key]
            out[topo] = view
        return out
