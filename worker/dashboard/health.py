"""The operator's side of the dashboard's model: workers, metrics history, staleness (pure).

:class:`Operations` is owned by :class:`worker.dashboard.state.DashboardState`
(``state.ops``). It is fed by the server with timestamps (wall-clock
milliseconds) and never reads a clock itself, so every judgement below is a
function of the times it is given:

- **workers**: every metrics source (a worker's ``/metrics`` URL, or one
  ``instance`` of a Prometheus server) has a status: ``ok``, ``down`` after
  ``worker_failures`` failed scrapes in a row (how long: since its last good
  scrape), or ``waiting`` before the first scrape; a worker whose
  ``dpstream_broker_connected`` gauge is 0 reports the broker lost;
- **history**: one point per polling round, aggregated over the workers that
  answered (throughput, lag, dead letters per reason as a rate), in a ring
  buffer of ``history`` points (oldest dropped first);
- **broker**: the release follower's last error (set by the server from the
  follower's hook), with the time it started.

Examples
--------
>>> ops = Operations(history=3)
>>> ops.record(1000, {"w": Scrape(topologies={"t": {"events_per_s": 5.0, "lag_messages": 2.0}})})
>>> ops.record(3000, {"w": Scrape(error="ConnectionRefusedError")})
>>> ops.record(5000, {"w": Scrape(error="ConnectionRefusedError")})
>>> [(w["name"], w["status"], w["down_for_s"]) for w in ops.workers_view(5000)]
[('w', 'down', 4.0)]
>>> duration(105)
'1 min 45 s'
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sketches.errors import SpecError


def duration(seconds: float) -> str:
    """``seconds`` as an operator reads it.

    >>> duration(7.4), duration(60), duration(3 * 3600 + 125)
    ('7 s', '1 min 0 s', '3 h 2 min')
    """
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@dataclass
class Scrape:
    """One polling round's answer of one worker: per-topology view
    (:meth:`worker.dashboard.metrics_probe.MetricsProbe.update`) and worker-wide gauges,
    or the error that prevented it."""

    topologies: Mapping[str, Mapping[str, Any]] | None = None
    worker: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    source: str | None = None


@dataclass
class _Worker:
    name: str
    source: str | None = None
    last_ok: int | None = None
    first_seen: int | None = None
    failures: int = 0
    error: str | None = None
    error_since: int | None = None
    topologies: dict[str, dict[str, Any]] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    broker_lost_since: int | None = None
    dead_totals: dict[tuple[str, str], float] = field(default_factory=dict)


@dataclass
class _Point:
    at: int
    per_topology: dict[str, dict[str, Any]]


class Operations:
    """Workers' status, a bounded metrics history and the broker's status.

    Parameters
    ----------
    history
        Polling rounds kept (1800: an hour at the default 2 s).
    worker_failures
        Failed scrapes in a row after which a worker counts as stopped.
    max_points
        Points per series sent to the page (evenly thinned, the latest kept).
    """

    def __init__(self, history: int = 1800, worker_failures: int = 2,
                 max_points: int = 240) -> None:
        if history < 1 or worker_failures < 1 or max_points < 2:
            raise SpecError("dashboard: metrics history and worker_failures must be >= 1, "
                            "max_points >= 2")
        self.worker_failures, self.max_points = worker_failures, max_points
        self.history: deque[_Point] = deque(maxlen=history)
        self._workers: dict[str, _Worker] = {}
        self.broker_error: str | None = None
        self.broker_error_since: int | None = None
        self.broker_last_ok: int | None = None

    # ------------------------------------------------------------- input
    def expect(self, name: str, source: str | None = None) -> None:
        """Declare a worker before its first scrape (shown as ``waiting``)."""
        self._workers.setdefault(name, _Worker(name, source))

    def record(self, now: int, scrapes: Mapping[str, Scrape]) -> None:
        """One polling round at ``now`` (ms): every worker's answer or error."""
        agg: dict[str, dict[str, Any]] = {}
        for name, sc in sorted(scrapes.items()):
            w = self._workers.setdefault(name, _Worker(name, sc.source))
            w.source = sc.source or w.source
            if w.first_seen is None:
                w.first_seen = now
            if sc.error is not None or sc.topologies is None:
                w.failures += 1
                if w.error_since is None:
                    w.error_since = now
                w.error = sc.error or "no answer"
                continue
            prev_ok = w.last_ok
            w.failures, w.error, w.error_since, w.last_ok = 0, None, None, now
            w.topologies = {t: dict(v) for t, v in sc.topologies.items()}
            w.gauges = dict(sc.worker)
            if w.gauges.get("broker_connected") == 0.0:
                if w.broker_lost_since is None:
                    w.broker_lost_since = now
            else:
                w.broker_lost_since = None
            for topo, view in w.topologies.items():
                row = agg.setdefault(topo, {"events_per_s": None, "messages_per_s": None,
                                            "lag_messages": None, "dead_letters": {}})
                for key in ("events_per_s", "messages_per_s", "lag_messages"):
                    v = view.get(key)
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        row[key] = (row[key] or 0.0) + float(v)
                for reason, total in (view.get("dead_letters") or {}).items():
                    last = w.dead_totals.get((topo, reason))
                    w.dead_totals[(topo, reason)] = float(total)
                    dt = (now - prev_ok) / 1000 if prev_ok is not None else 0.0
                    rate = ((float(total) - last) / dt
                            if last is not None and dt > 0 and total >= last else None)
                    if rate is not None or reason not in row["dead_letters"]:
                        row["dead_letters"][reason] = ((row["dead_letters"].get(reason) or 0.0)
                                                       + rate if rate is not None else None)
        self.history.append(_Point(now, agg))

    def set_broker(self, error: str | None, now: int) -> None:
        """The release follower reached the broker (``error`` None) or not."""
        if error is None:
            self.broker_error, self.broker_error_since, self.broker_last_ok = None, None, now
            return
        if self.broker_error_since is None:
            self.broker_error_since = now
        self.broker_error = error

    # ------------------------------------------------------------- views
    def workers_view(self, now: int | None) -> list[dict[str, Any]]:
        """Per worker: status, how long it is down, its error, broker and readiness gauges."""
        out = []
        for w in sorted(self._workers.values(), key=lambda w: w.name):
            if w.last_ok is None and w.failures < self.worker_failures:
                status = "waiting"
            elif w.failures >= self.worker_failures:
                status = "down"
            else:
                status = "ok"
            since = w.last_ok if w.last_ok is not None else w.error_since
            down = (now - since) / 1000 if status == "down" and now and since else None
            out.append({"name": w.name, "source": w.source, "status": status,
                        "last_ok": w.last_ok, "down_since": since if status == "down" else None,
                        "down_for_s": down, "error": w.error,
                        "broker_connected": w.gauges.get("broker_connected"),
                        "broker_lost_since": w.broker_lost_since,
                        "ready": w.gauges.get("ready"), "topologies": sorted(w.topologies)})
        return out

    def metrics_view(self) -> dict[str, dict[str, Any]]:
        """Per topology, the last answer of every worker that is not down, summed."""
        out: dict[str, dict[str, Any]] = {}
        for w in self._workers.values():
            if w.failures >= self.worker_failures:
                continue
            for topo, view in w.topologies.items():
                row = out.setdefault(topo, {"workers": 0})
                row["workers"] += 1
                for key, v in view.items():
                    if key == "dead_letters":
                        d = row.setdefault("dead_letters", {})
                        for reason, n in v.items():
                            d[reason] = d.get(reason, 0.0) + n
                    elif key in ("release_period_s", "last_release_s"):
                        row[key] = v if row.get(key) is None else max(row[key], v)
                    elif isinstance(v, (int, float)) and not isinstance(v, bool):
                        row[key] = (row.get(key) or 0.0) + v
                    else:
                        row.setdefault(key, v)
        return dict(sorted(out.items()))

    def history_view(self) -> dict[str, dict[str, Any]]:
        """Per topology: ``throughput`` (events/s), ``messages`` (messages/s), ``lag``
        and ``dead_letters`` (per reason that occurred, records/s) as ``[[t_ms, value],
        ...]``."""
        points = list(self.history)
        if len(points) > self.max_points:
            last = len(points) - 1
            points = [points[round(i * last / (self.max_points - 1))]
                      for i in range(self.max_points)]
        topos = sorted({t for p in points for t in p.per_topology})
        out: dict[str, dict[str, Any]] = {}
        for topo in topos:
            rows = [(p.at, p.per_topology.get(topo)) for p in points]
            # only the reasons that happened (a worker exports every reason at 0)
            reasons = sorted({r for _, row in rows if row
                              for r, v in row["dead_letters"].items() if v})
            out[topo] = {
                "throughput": [[t, row["events_per_s"] if row else None] for t, row in rows],
                "messages": [[t, row["messages_per_s"] if row else None] for t, row in rows],
                "lag": [[t, row["lag_messages"] if row else None] for t, row in rows],
                "dead_letters": {r: [[t, row["dead_letters"].get(r) if row else None]
                                     for t, row in rows] for r in reasons}}
        return out

    def alerts(self, now: int | None, broker: str) -> list[dict[str, Any]]:
        """Stopped workers, workers without a broker, and the follower's broker error."""
        found: list[dict[str, Any]] = []
        if now is None:
            return found
        if self.broker_error is not None and self.broker_error_since is not None:
            for_s = (now - self.broker_error_since) / 1000
            found.append({"kind": "broker", "subject": broker, "since": self.broker_error_since,
                          "for_s": for_s,
                          "text": f"Broker {broker} unreachable from the dashboard: "
                                  f"{self.broker_error}"})
        for w in self.workers_view(now):
            if w["status"] == "down":
                found.append({"kind": "worker", "subject": w["name"], "since": w["down_since"],
                              "for_s": w["down_for_s"],
                              "text": f"Worker {w['name']} stopped answering"
                                      + (" (never answered)" if w["last_ok"] is None else "")
                                      + f": {w['error']}"})
            elif w["broker_lost_since"] is not None:
                found.append({"kind": "broker", "subject": w["name"],
                              "since": w["broker_lost_since"],
                              "for_s": (now - w["broker_lost_since"]) / 1000,
                              "text": f"Worker {w['name']} has lost the broker "
                                      "(dpstream_broker_connected 0)"})
        return found
