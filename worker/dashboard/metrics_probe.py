"""Throughput, lag and dead letters of a worker, from its Prometheus endpoint (or Prometheus).

Metrics are operator-only (exact, private information: docs/OPERATIONS.md),
so the dashboard shows only aggregates per topology: events ingested per
second (the rate of ``dpstream_events_in_total`` between two scrapes),
consumer lag in messages (``dpstream_consumer_lag_messages`` summed over
partitions) and dead letters per reason. The dashboard binds to 127.0.0.1 by
default for the same reason.

A worker is read either from its own endpoint (:meth:`MetricsProbe.update`,
exposition text) or from a Prometheus server that scrapes it
(:func:`prometheus_query` builds the instant query, :func:`prometheus_samples`
splits the answer per ``instance``; :meth:`MetricsProbe.update_samples` takes
them), one probe per worker.

>>> p = MetricsProbe()
>>> p.update('dpstream_events_in_total{topology="t"} 100\\n', now=10.0)
{'t': {'events_total': 100.0, 'events_per_s': None, 'lag_messages': None}}
>>> p.update('dpstream_events_in_total{topology="t"} 400\\n'
...          'dpstream_consumer_lag_messages{topology="t",partition="0"} 7\\n', now=12.0)
{'t': {'events_total': 400.0, 'events_per_s': 150.0, 'lag_messages': 7.0}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
DEAD_LETTERS = "dpstream_dead_letters_total"
"""Dead letters per ``(topology, reason)``: kept per reason."""
PER_TOPOLOGY_GAUGES = {"dpstream_release_period_seconds": "release_period_s",
                       "dpstream_last_release_timestamp_seconds": "last_release_s"}
"""Gauges kept per topology (the largest over the worker's series)."""
WORKER_GAUGES = {"dpstream_broker_connected": "broker_connected",
                 "dpstream_worker_ready": "ready"}
"""Gauges of the worker as a whole (no topology label)."""

Sample = tuple[str, Mapping[str, str], float]
"""``(name, labels, value)`` of one series."""


class MetricsProbe:
    """Turns successive scrapes of one worker into per-topology throughput, lag and counts."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, float]] = {}
        self.error: str | None = None
        self.worker: dict[str, float] = {}
        """The worker-wide gauges of the last scrape (``broker_connected``, ``ready``)."""

    def update(self, text: str, now: float) -> dict[str, dict[str, Any]]:
        """Parse one scrape (exposition text) taken at ``now`` (seconds); return the
        per-topology view.

        Per topology: ``events_total`` and ``events_per_s`` (events ingested
        into a sketch), ``lag_messages``, and when the worker exports them
        ``messages_total``/``messages_per_s`` (input messages read: they go on
        while ``events_per_s`` is 0 because the epoch's public event bound is
        reached), ``over_horizon_total``, ``releases_total``,
        ``timer_errors_total``, ``dead_letters`` (total per reason),
        ``release_period_s`` and ``last_release_s``.
        """
        return self.update_samples(((s.name, s.labels, s.value)
                                    for fam in text_string_to_metric_families(text)
                                    for s in fam.samples), now)

    def update_samples(self, samples: Iterable[Sample], now: float) -> dict[str, dict[str, Any]]:
        """As :meth:`update` for samples already parsed (e.g. from Prometheus)."""
        totals: dict[str, dict[str, float]] = {}
        lag: dict[str, float] = {}
        dead: dict[str, dict[str, float]] = {}
        gauges: dict[str, dict[str, float]] = {}
        self.worker = {}
        for name, labels, value in samples:
            topo = labels.get("topology")
            if name in WORKER_GAUGES:
                self.worker[WORKER_GAUGES[name]] = float(value)
            if topo is None or topo == "":
                continue
            if name in TOTALS:
                row = totals.setdefault(topo, {})
                row[TOTALS[name]] = row.get(TOTALS[name], 0.0) + value
            elif name == "dpstream_consumer_lag_messages":
                lag[topo] = lag.get(topo, 0.0) + value
            elif name == DEAD_LETTERS:
                reasons = dead.setdefault(topo, {})
                reason = labels.get("reason", "")
                reasons[reason] = reasons.get(reason, 0.0) + value
            elif name in PER_TOPOLOGY_GAUGES:
                g = gauges.setdefault(topo, {})
                key = PER_TOPOLOGY_GAUGES[name]
                g[key] = max(g.get(key, value), value)
        out: dict[str, dict[str, Any]] = {}
        for topo in sorted(set(totals) | set(lag) | set(dead) | set(gauges)):
            row = totals.get(topo, {})
            view: dict[str, Any] = {"events_total": row.get("events_total"),
                                    "events_per_s": None, "lag_messages": lag.get(topo)}
            for total, rate_key in RATES.items():
                current = row.get(total)
                if current is None:
                    continue
                prev = self._last.get((topo, total))
                if prev is not None and now > prev[0] and current >= prev[1]:
                    view[rate_key] = (current - prev[1]) / (now - prev[0])
                else:
                    view[rate_key] = None
                self._last[(topo, total)] = (now, current)
            for key in ("messages_total", "over_horizon_total", "releases_total",
                        "timer_errors_total"):
                if key in row:
                    view[key] = row[key]
            if topo in dead:
                view["dead_letters"] = dict(sorted(dead[topo].items()))
            view.update(gauges.get(topo, {}))
            out[topo] = view
        return out


def prometheus_query(job: str | None = None) -> str:
    """The PromQL instant query that fetches every dpstream series (of ``job``).

    >>> prometheus_query("dpstream")
    '{__name__=~"dpstream_.*",job="dpstream"}'
    """
    sel = '__name__=~"dpstream_.*"'
    if job:
        sel += ',job="' + job.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + sel + "}"


def prometheus_samples(answer: Mapping[str, Any]) -> dict[str, list[Sample]]:
    """Split a Prometheus ``/api/v1/query`` vector answer per worker (``instance``
    label, or ``job`` when there is none).

    >>> ans = {"status": "success", "data": {"resultType": "vector", "result": [
    ...     {"metric": {"__name__": "dpstream_events_in_total", "instance": "w1:9108",
    ...                 "topology": "t"}, "value": [1.5, "12"]}]}}
    >>> prometheus_samples(ans)
    {'w1:9108': [('dpstream_events_in_total', {'instance': 'w1:9108', 'topology': 't'}, 12.0)]}
    """
    if answer.get("status") != "success":
        raise ValueError(f"Prometheus answered {answer.get('status')!r}: "
                         f"{answer.get('error', 'no error text')}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise ValueError(f"Prometheus answered a {data.get('resultType')!r}, not a vector")
    out: dict[str, list[Sample]] = {}
    for row in data.get("result") or []:
        labels = dict(row.get("metric") or {})
        name = labels.pop("__name__", "")
        worker = labels.get("instance") or labels.get("job") or "?"
        try:
            value = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        out.setdefault(worker, []).append((name, labels, value))
    return dict(sorted(out.items()))
