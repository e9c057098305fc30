"""The dashboard's model: release envelopes in, a JSON-ready view out (pure, no I/O).

Everything shown comes from releases (public, post-processing: no privacy
cost), except throughput, lag, dead letters and the workers' status, which the
server reads from the workers' metrics endpoints (operator-only) into
:attr:`DashboardState.ops` (:class:`worker.dashboard.health.Operations`).

Staleness is judged from the times the server passes in (``now_ms``; the state
reads no clock): a topology's releases are stale when its newest release is
older than ``stale_after`` release intervals (the interval from the topology
file, else the workers' ``dpstream_release_period_seconds``, else the median
gap between the releases read), never less than ``stale_floor_s``; a shard is
quiet when its own latest release is that old, or (arrival clock, where rounds
count events) when its rounds have not moved for that long.

Per ``(topology, shard)`` the state keeps the latest release (highest
``(epoch, seq)``; duplicates after a worker crash are ignored: a
:class:`worker.release.reader.ReleaseIndex` decides, and the state answers the
reader API :class:`worker.release.reader.ReleaseView` through it) and a bounded
history of the last ``history`` releases: for heavy-hitter payloads the
published items and estimates, for sketch payloads the matrices (so a queried
item gets a time series across releases, answered by
:func:`sketches.core.release.query_release` like any reader would).

Examples
--------
>>> st = DashboardState(history=4)
>>> env = {"schema_version": 1, "topology": "hh", "shard": "r1", "epoch": 1, "seq": 0,
...        "eps": 1.0, "delta": 1e-6, "published_at": 1000, "mechanism": "lazy_hh",
...        "payload": {"kind": "heavy_hitters", "threshold": 5.0,
...                    "items": [{"item": "10.0.0.1", "estimate": 9}],
...                    "error_bound": {"lower": -2.0, "upper": 3.0}}}
>>> st.add(json.dumps(env).encode()) is not None
True
>>> view = st.view()
>>> shard = view["topologies"][0]["shards"][0]
>>> shard["heavy_hitters"]["items"][0]
{'item': '10.0.0.1', 'estimate': 9.0, 'low': 6.0, 'high': 11.0}
>>> shard["private"], view["topologies"][0]["privacy"]["eps"]
(True, 1.0)
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketches import query_release
from sketches.errors import SpecError
from worker.dashboard.health import Operations, duration
from worker.release.envelope import Envelope, is_private, noise_kind
from worker.release.reader import ReleaseIndex

PRIVACY_FIELDS = ("eps", "delta", "delta_tilde", "relation", "unit", "unit_cap", "clock",
                  "tick_ms", "horizon", "mechanism", "item_type")
SYMMETRIC_BOUND_KEYS = ("noise", "vs_sketch", "noise_abs_max", "rank_noise_abs_max")


def error_interval(estimate: float, bound: Any) -> tuple[float | None, float | None]:
    """The true-count interval a release's error bound gives around ``estimate``.

    ``{"lower": l, "upper": u}`` (LazyHH, Lemma 6: ``l <= est - f <= u``) gives
    ``[est - u, est - l]``; a symmetric noise bound (``noise``, ``vs_sketch``,
    ``noise_abs_max``, ...) gives ``est +- b``; anything else: unknown.

    >>> error_interval(10.0, {"lower": -2, "upper": 3})
    (7.0, 12.0)
    >>> error_interval(10.0, {"noise": 4.5})
    (5.5, 14.5)
    >>> error_interval(10.0, None)
    (None, None)
    """
    if not isinstance(bound, Mapping):
        return None, None
    lo, up = _float(bound.get("lower")), _float(bound.get("upper"))
    if lo is not None and up is not None:
        return estimate - up, estimate - lo
    for key in SYMMETRIC_BOUND_KEYS:
        b = _float(bound.get(key))
        if b is not None:
            return estimate - b, estimate + b
    return None, None


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _float(x: Any) -> float | None:
    return float(x) if _num(x) else None


@dataclass
class _Point:
    """One release in a shard's history."""

    published_at: int
    epoch: int
    seq: int
    rounds: float | None = None
    hh: dict[str, float] | None = None
    threshold: float | None = None
    sketch: dict[str, Any] | None = None  # payload with the matrix as a numpy array


@dataclass
class _Shard:
    latest: Envelope
    received: int = 0
    received_at: int | None = None  # the dashboard's clock (ms) when the latest arrived
    history: deque[_Point] = field(default_factory=deque)
    not_private_seen: int = 0
    matrices: deque[_Point] = field(default_factory=deque)  # points still holding a matrix


class DashboardState:
    """Latest release and bounded history per ``(topology, shard)``.

    Parameters
    ----------
    history
        Releases kept per shard for the time series (oldest dropped first);
        720 is an hour of releases every 5 s.
    top
        Heavy hitters whose estimates are drawn as time series.
    sketch_history
        Released matrices kept per shard for a queried item's series (each
        is depth x width floats, so fewer than ``history``).
    max_points
        Points per series sent to the page (evenly thinned, first and latest
        kept).
    stale_after
        Release intervals without a release after which a topology's releases
        count as stopped (and a shard as quiet).
    stale_floor_s
        Never stale sooner than this (a 1 s schedule under load is not "stopped").
    default_stale_s
        Used while the release interval is unknown (one release read, no topology
        file, no worker metrics).
    metrics_history
        Metrics polling rounds kept for the throughput, lag and dead-letter charts.
    """

    def __init__(self, history: int = 720, top: int = 5, sketch_history: int = 120,
                 max_points: int = 240, *, stale_after: float = 3.0,
                 stale_floor_s: float = 5.0, default_stale_s: float = 60.0,
                 metrics_history: int = 1800, worker_failures: int = 2) -> None:
        if min(history, top, sketch_history) < 1 or max_points < 2:
            raise SpecError("DashboardState: history, top and sketch_history must be >= 1, "
                            "max_points >= 2")
        if not (stale_after > 0 and stale_floor_s >= 0 and default_stale_s > 0):
            raise SpecError("DashboardState: stale_after and default_stale_s must be > 0, "
                            "stale_floor_s >= 0")
        self.stale_after, self.stale_floor_s = stale_after, stale_floor_s
        self.default_stale_s = default_stale_s
        self.release_periods: dict[str, float] = {}
        """Release interval (s) per topology from its topology file (tick_ms x every_ticks)."""
        self.ops = Operations(history=metrics_history, worker_failures=worker_failures,
                              max_points=max_points)
        self.history, self.top = history, top
        self.sketch_history, self.max_points = sketch_history, max_points
        self.index = ReleaseIndex()
        """The latest release per shard; the reader API answers from it."""
        self._shards: dict[tuple[str, str], _Shard] = {}
        self.version = 0  # bumped on every accepted release (cheap change detection)

    @property
    def seen(self) -> int:
        """Record values read."""
        return self.index.seen

    @property
    def rejected(self) -> int:
        """Record values that were not a readable release."""
        return self.index.rejected

    # ------------------------------------------------------------- input
    def add(self, raw: bytes, now_ms: int | None = None) -> Envelope | None:
        """Index one record value (received at ``now_ms``); return the envelope if it
        became its shard's latest."""
        env = self.index.add_envelope(raw)
        return None if env is None else self._keep(env, now_ms)

    def add_envelope(self, env: Envelope, now_ms: int | None = None) -> Envelope | None:
        """As :meth:`add` for a parsed envelope."""
        return None if self.index.offer(env) is None else self._keep(env, now_ms)

    def _keep(self, env: Envelope, now_ms: int | None = None) -> Envelope:
        """Record a release that became its shard's latest in the shard's history."""
        key = (env["topology"], env["shard"])
        sh = self._shards.get(key)
        if sh is None:
            sh = self._shards[key] = _Shard(latest=env, history=deque(maxlen=self.history))
        sh.latest = env
        sh.received += 1
        sh.received_at = now_ms
        if not is_private(env):
            sh.not_private_seen += 1
        pt = self._point(env)
        sh.history.append(pt)
        if pt.sketch is not None:
            sh.matrices.append(pt)
            if len(sh.matrices) > self.sketch_history:
                sh.matrices.popleft().sketch = None
        self.version += 1
        return env

    @staticmethod
    def _point(env: Envelope) -> _Point:
        payload = env["payload"]
        at = _float(env.get("published_at"))
        pt = _Point(published_at=int(at or 0), epoch=env["epoch"], seq=env["seq"],
                    rounds=_float(env.get("rounds")))
        if payload.get("kind") == "heavy_hitters":
            pt.hh = {str(i.get("item")): float(i["estimate"])
                     for i in payload.get("items") or [] if _num(i.get("estimate"))}
            pt.threshold = _float(payload.get("threshold"))
        elif payload.get("kind") == "sketch" and payload.get("matrix") is not None:
            pt.sketch = dict(payload, matrix=np.asarray(payload["matrix"], dtype=np.float64))
        return pt

    # ------------------------------------------------------------- the reader API
    def shards(self, topology: str | None = None) -> list[tuple[str, str]]:
        """Every ``(topology, shard)`` with a release (of ``topology`` if given), sorted."""
        return self.index.shards(topology)

    def latest(self, topology: str | None, shard: str) -> Envelope:
        """The current release of ``topology``/``shard``."""
        return self.index.latest(topology, shard)

    def query(self, topology: str | None, shard: str, items: Any) -> Any:
        """Point estimates from the latest sketch release (one item: float; a sequence:
        array)."""
        return self.index.query(topology, shard, items)

    def heavy_hitters(self, topology: str | None, shard: str) -> list[dict[str, Any]]:
        """The heavy-hitter list of the latest heavy_hitters release."""
        return self.index.heavy_hitters(topology, shard)

    # ------------------------------------------------------------- the page's queries
    def query_series(self, topology: str, shard: str, item: str) -> dict[str, Any]:
        """Point query on the shard's latest sketch release, plus its time series
        (``GET api/query``).

        Raises KeyError (unknown shard) or SpecError (not a sketch release).
        """
        sh = self._shards.get((topology, shard))
        if sh is None:
            raise KeyError(f"no release for {topology}/{shard} yet")
        env = sh.latest
        if env["payload"].get("kind") != "sketch":
            raise SpecError(f"{topology}/{shard} publishes {env['payload'].get('kind')!r} "
                            "releases; point queries need a sketch release")
        q: Any = int(item) if env.get("item_type") == "int" else item
        series = []
        for pt in sh.history:
            if pt.sketch is not None:
                est = float(np.asarray(query_release(pt.sketch, [q]))[0])
                series.append([pt.published_at, est])
        estimate = series[-1][1]
        bound = env.get("error_bound") or env["payload"].get("error_bound")
        lo, hi = error_interval(estimate, bound)
        collision = collision_term(bound, env["payload"])
        noise_lo, noise_hi = lo, hi
        if collision is not None and lo is not None and hi is not None:
            # Count-Min overestimates (the true count is below), Count-Sketch both ways
            lo = lo - collision["value"]
            if not collision["one_sided"]:
                hi = hi + collision["value"]
        return {"topology": topology, "shard": shard, "item": item, "epoch": env["epoch"],
                "seq": env["seq"], "estimate": estimate, "low": lo, "high": hi,
                "noise_low": noise_lo, "noise_high": noise_hi, "collision": collision,
                "error_bound": bound, "series": series, "private": is_private(env)}

    # ------------------------------------------------------------- view
    def view(self, now_ms: int | None = None, broker: str = "") -> dict[str, Any]:
        """JSON-ready view: per topology its privacy picture, shards, schedule and
        overview; with ``now_ms`` (the server's wall clock) also the staleness of
        releases, workers and broker (``health``), the workers' metrics summed per
        topology (``metrics``) and their history (``history``)."""
        topos: dict[str, dict[str, Any]] = {}
        metrics = self.ops.metrics_view()
        alerts: list[dict[str, Any]] = []
        for (topo, _shard), sh in sorted(self._shards.items()):
            env = sh.latest
            t = topos.setdefault(topo, {"topology": topo, "privacy": {
                k: env.get(k) for k in PRIVACY_FIELDS}, "shards": [], "releases": 0,
                "published_this_epoch": 0, "not_private": False})
            t["releases"] += sh.received
            card = self._shard_view(sh)
            t["not_private"] = t["not_private"] or not card["private"]
            t["shards"].append(card)
            t["published_this_epoch"] += card["published_this_epoch"]
        for topo, t in topos.items():
            period, source = self.release_period(topo, metrics.get(topo))
            stale_s = (max(self.stale_floor_s, self.stale_after * period) if period
                       else self.default_stale_s)
            shards = [sh for (tp, _), sh in sorted(self._shards.items()) if tp == topo]
            newest = max((a for sh in shards if (a := _last_at(sh))), default=None)
            age = (now_ms - newest) / 1000 if now_ms is not None and newest else None
            stale = age is not None and age > stale_s
            t["schedule"] = {"release_period_s": period, "period_source": source,
                             "stale_after_s": stale_s, "last_release": newest,
                             "age_s": age, "stale": stale}
            t["overview"] = [self._overview_row(sh, now_ms, stale_s) for sh in shards]
            t["quiet"] = [r["shard"] for r in t["overview"] if r["quiet"]]
            if stale and newest is not None and age is not None:
                expected = (f"expected every {period:g} s, from the {source}" if period
                            else "release interval unknown")
                alerts.append({"kind": "releases", "subject": topo, "since": newest,
                               "for_s": age,
                               "text": f"Releases of {topo} stopped: no release since the "
                                       f"last one ({expected}; stale after "
                                       f"{duration(stale_s)})"})
        alerts = self.ops.alerts(now_ms, broker) + alerts
        for alert in alerts:  # the text stays put (a screen reader hears it once); "for" ticks
            alert["for"] = (duration(alert["for_s"]) if alert.get("for_s") is not None
                            else None)
        return {"version": self.version, "seen": self.seen, "rejected": self.rejected,
                "topologies": list(topos.values()),
                "health": {"now": now_ms, "stale": bool(alerts), "alerts": alerts,
                           "broker_error": self.ops.broker_error,
                           "broker_last_ok": self.ops.broker_last_ok},
                "workers": self.ops.workers_view(now_ms), "metrics": metrics,
                "history": self.ops.history_view()}

    def release_period(self, topology: str, metrics: Mapping[str, Any] | None = None,
                       ) -> tuple[float | None, str | None]:
        """``(seconds, source)`` of ``topology``'s release interval: its topology file,
        else the workers' ``dpstream_release_period_seconds``, else the median gap
        between the releases read (None while unknown)."""
        if topology in self.release_periods:
            return self.release_periods[topology], "topology file"
        m = _float((metrics or {}).get("release_period_s"))
        if m:
            return m, "worker metrics"
        gaps = [(b.published_at - a.published_at) / 1000
                for (tp, _), sh in self._shards.items() if tp == topology
                for a, b in zip(list(sh.history), list(sh.history)[1:], strict=False)
                if b.published_at > a.published_at > 0]
        if gaps:
            return float(np.median(gaps)), "releases read"
        return None, None

    def _overview_row(self, sh: _Shard, now_ms: int | None, stale_s: float) -> dict[str, Any]:
        """One shard in the topology's overview: its top items (or summary), its age,
        and why it is quiet (None: it is not)."""
        env, payload = sh.latest, sh.latest["payload"]
        last = _last_at(sh)
        age = (now_ms - last) / 1000 if now_ms is not None and last else None
        quiet = None
        if age is not None and age > stale_s:
            quiet = f"no release for {duration(age)}"
        elif env.get("clock") == "arrival" and now_ms is not None:
            # arrival clock: rounds count events, so unchanged rounds mean no events
            since = None
            for pt in reversed(sh.history):
                if pt.epoch != env["epoch"] or pt.rounds != _float(env.get("rounds")):
                    break
                since = pt.published_at
            if since and (now_ms - since) / 1000 > stale_s and len(sh.history) > 1:
                quiet = f"no events for {duration((now_ms - since) / 1000)}"
        row: dict[str, Any] = {"shard": env["shard"], "kind": payload.get("kind"),
                               "epoch": env["epoch"], "seq": env["seq"],
                               "published_at": env.get("published_at"), "age_s": age,
                               "quiet": quiet, "private": is_private(env)}
        if payload.get("kind") == "heavy_hitters":
            row["top"] = self._hh_view(sh)["items"][: self.top]
        elif payload.get("kind") == "sketch":
            mass = released_mass(payload.get("matrix"))
            row["summary"] = (f"sketch, released L1 mass ~ {mass:,.0f}" if mass is not None
                              else "sketch")
        else:
            n = _float(payload.get("n_estimate"))
            row["summary"] = f"{payload.get('kind')}" + (f", n ~ {n:,.0f}" if n is not None
                                                          else "")
        return row

    def _shard_view(self, sh: _Shard) -> dict[str, Any]:
        env, payload = sh.latest, sh.latest["payload"]
        kind = payload.get("kind")
        horizon, rounds = _float(env.get("horizon")), _float(env.get("rounds"))
        out: dict[str, Any] = {
            "shard": env["shard"], "kind": kind, "mechanism": env.get("mechanism"),
            "epoch": env["epoch"], "seq": env["seq"], "final": env.get("final"),
            "rounds": env.get("rounds"), "horizon": env.get("horizon"),
            "progress": rounds / horizon if rounds is not None and horizon else None,
            "published_at": env.get("published_at"), "releases": sh.received,
            # seq numbers a shard's releases within its epoch from 0 (docs/RELEASES.md)
            "published_this_epoch": env["seq"] + 1,
            "private": is_private(env), "noise_kind": noise_kind(env),
            "not_private_seen": sh.not_private_seen, "error_bound": env.get("error_bound"),
            "lag_bound": env.get("lag_bound"),
        }
        if kind == "heavy_hitters":
            out["heavy_hitters"] = self._hh_view(sh)
        elif kind == "sketch":
            m = payload.get("matrix") or []
            out["sketch"] = {"depth": len(m), "width": len(m[0]) if m else 0,
                             "estimator": payload.get("estimator"),
                             "item_type": env.get("item_type")}
        else:
            out["table"] = payload_table(payload)
            bound = payload.get("error_bound", env.get("error_bound"))
            out["table"]["error_bound"] = (
                [[k, v] for k, v in bound.items() if isinstance(v, (str, int, float))]
                if isinstance(bound, Mapping) else None)
        return out

    def _hh_view(self, sh: _Shard) -> dict[str, Any]:
        payload = sh.latest["payload"]
        bound = payload.get("error_bound", sh.latest.get("error_bound"))
        items: list[dict[str, Any]] = []
        for it in payload.get("items") or []:
            est = _float(it.get("estimate"))
            if est is None:
                continue
            lo, hi = error_interval(est, bound)
            items.append({"item": str(it.get("item")), "estimate": est, "low": lo, "high": hi})
        items.sort(key=lambda r: -r["estimate"])
        # series: the items that are top-`top` now, across the kept releases
        names = [str(r["item"]) for r in items[: self.top]]
        points = _thin([pt for pt in sh.history if pt.hh is not None], self.max_points)
        series = {n: [[pt.published_at, (pt.hh or {}).get(n)] for pt in points]
                  for n in names}
        thresholds = _float(payload.get("threshold"))
        threshold_series = [[pt.published_at, pt.threshold] for pt in points]
        return {"items": items, "threshold": thresholds, "series": series,
                "threshold_series": threshold_series,
                "coverage": _float((bound or {}).get("coverage"))
                if isinstance(bound, Mapping) else None}


def _last_at(sh: _Shard) -> int | None:
    """When the shard's latest release was published (the worker's clock), else when it
    arrived here."""
    at = _float(sh.latest.get("published_at"))
    return int(at) if at else sh.received_at


def released_mass(matrix: Any) -> float | None:
    """The L1 mass a released sketch matrix states: the median of its row sums (each row
    sums every count once, plus noise), at least 0.

    >>> released_mass([[3.0, 5.0], [4.0, 4.5]])
    8.25
    """
    try:
        m = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if m.ndim != 2 or not m.size:
        return None
    return max(0.0, float(np.median(m.sum(axis=1))))


def collision_term(bound: Any, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hashing (collision) error a sketch release states, evaluated on the release.

    Lemma 5 (LazyCMS/LazyCS, ``eta`` and ``collision_term`` in the bound):
    ``eta * t`` with ``t`` the L1 mass (Count-Min: one-sided, an overestimate)
    or ``eta * sqrt(F2)`` (Count-Sketch: symmetric), holding w.p. ``1 - beta/2``
    when ``collision_depth_ok``. Windowed DP sketches state ``collision_per_row:
    "L1 mass / width in expectation"``: ``t / width``, an expectation only. ``t``
    and ``F2`` are read from the released matrix (median row sum, median row sum
    of squares): public post-processing, slightly inflated by the noise.

    >>> c = collision_term({"eta": 0.5, "collision_term": "eta * t"},
    ...                    {"estimator": "min", "matrix": [[6.0, 4.0], [5.0, 5.0]]})
    >>> c["value"], c["one_sided"], c["mass"]
    (5.0, True, 10.0)
    >>> collision_term({"noise": 3.0}, {"matrix": [[1.0]]}) is None
    True
    """
    if not isinstance(bound, Mapping):
        return None
    matrix = payload.get("matrix")
    mass = released_mass(matrix)
    if mass is None:
        return None
    cms = payload.get("estimator", "min") == "min"
    eta = _float(bound.get("eta"))
    if eta is not None:
        term = str(bound.get("collision_term") or ("eta * t" if cms else "eta * sqrt(F2)"))
        if "F2" in term:
            m = np.asarray(matrix, dtype=np.float64)
            f2 = max(0.0, float(np.median((m * m).sum(axis=1))))
            value, basis = eta * math.sqrt(f2), f"eta {eta:.3g} x sqrt(F2), F2 ~ {f2:,.0f}"
        else:
            value, basis = eta * mass, f"eta {eta:.3g} x L1 mass ~ {mass:,.0f}"
        ok = bound.get("collision_depth_ok")
        holds = (f"w.p. {1 - (_float(bound.get('beta')) or 0) / 2:g}" if ok is not False
                 else "depth below Lemma 5's: not a high-probability bound")
        return {"value": value, "one_sided": "F2" not in term, "mass": mass,
                "basis": basis + f" ({term})", "holds": holds}
    per_row = bound.get("collision_per_row")
    if isinstance(per_row, str) and "width" in per_row:
        m = np.asarray(matrix, dtype=np.float64)
        width = m.shape[1]
        return {"value": mass / width, "one_sided": cms, "mass": mass,
                "basis": f"L1 mass ~ {mass:,.0f} / width {width}", "holds": "in expectation"}
    return None


def _thin(points: list[_Point], n: int) -> list[_Point]:
    """At most ``n`` of ``points``, evenly spaced, the first and the last kept.

    >>> [p.seq for p in _thin([_Point(0, 1, k) for k in range(10)], 4)]
    [0, 3, 6, 9]
    """
    if len(points) <= n:
        return points
    last = len(points) - 1
    return [points[round(i * last / (n - 1))] for i in range(n)]


def payload_table(payload: Mapping[str, Any], max_rows: int = 50) -> dict[str, Any]:
    """A windowed payload as a table: scalar fields, plus the first list of records.

    >>> t = payload_table({"kind": "quantiles", "n": 5, "rows": [{"q": 0.5, "v": 3}]})
    >>> t["fields"], t["columns"], t["rows"], t["name"]
    ([['kind', 'quantiles'], ['n', 5]], ['q', 'v'], [[0.5, 3]], 'rows')
    """
    fields = [[k, v] for k, v in payload.items()
              if isinstance(v, (str, int, float, bool)) or v is None]
    columns: list[str] = []
    rows: list[list[Any]] = []
    name = None
    for k, v in payload.items():
        if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v):
            columns = sorted({c for r in v for c in r if not isinstance(r[c], (list, dict))})
            rows = [[r.get(c) for c in columns] for r in v[:max_rows]]
            name = k
            break
        if isinstance(v, list) and v and all(_num(x) for x in v):
            columns, rows, name = ["index", k], [[i, x] for i, x in enumerate(v[:max_rows])], k
            break
    return {"fields": fields, "columns": columns, "rows": rows, "name": name}


def dumps(view: Mapping[str, Any]) -> str:
    """JSON for the page (NaN/inf become null)."""
    return json.dumps(view, default=_jsonable, allow_nan=False, separators=(",", ":"))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic):
        return obj.tolist()
    raise TypeError(f"dashboard view: {type(obj).__name__} is not JSON-serialisable")
