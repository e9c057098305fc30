"""What a probed topology states and costs: guarantee, sigma, counter, timing, bounds, memory.

Every number is read from the mechanism or its release, never recomputed here:

- the **guarantee** from :func:`worker.release.envelope.envelope` of the mechanism's own
  empty release: the code every published release goes through, so a plan and
  the releases can never state different ``(eps, delta, relation, unit)``;
- **sigma**, the **counter** and its per-cell error from the mechanism's ``noise``
  capability (:class:`sketches.core.base.NoiseSummary`) and the payload's ``sigma``
  or budget block;
- **error bounds** from the release's ``error_bound`` block and, for a sketch's
  point queries, from its ``point_query`` capability (paper 002 Lemma 5, with the
  hashing term); a heavy-hitter mechanism's detection from its ``heavy_hitters``
  capability (LazyHH: :mod:`sketches.continual.lazy_hh.detection`); a sketch's own
  undercount from ``sketch_error`` (Misra-Gries);
- **memory** from :func:`worker.engine.memory_model.shard_bytes`, the function the
  worker's start-up limit uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from worker.config.topology import Topology
from worker.plan.build import Probe

GUARANTEE_FIELDS = ("eps", "delta", "delta_tilde", "relation", "unit", "unit_cap",
                    "private", "noise", "covers_shard_presence", "input")
"""Envelope fields of the stated guarantee (a release states exactly these)."""


def guarantee(p: Probe) -> dict[str, Any]:
    """The guarantee a release of ``p`` states (envelope fields; ``delta`` is LazyHH's delta~)."""
    return {k: p.envelope.get(k) for k in GUARANTEE_FIELDS if k in p.envelope}


def sigmas(p: Probe) -> dict[str, float]:
    """Gaussian noise scales of the mechanism, by role (empty if it adds none)."""
    out: dict[str, float] = {}
    sigma = p.noise.sigma  # in counts: the lattice counter's sigma_L is on a lattice scaled by s
    if sigma is not None:
        out["sketch"] = float(sigma)
    if isinstance(p.payload.get("sigma"), int | float):
        out["sketch"] = float(p.payload["sigma"])
    length = ((p.payload.get("budget") or {}).get("length") or {})
    if isinstance(length.get("sigma"), int | float):
        out["length_counter"] = float(length["sigma"])
    return out


COUNTER_NOTES = {
    "tree": "binary tree (paper 002), exact discrete Gaussian",
    "blt": "BLT factorization, float64 Gaussian (not certified)",
    "sqrt": "square-root factorization, float64 Gaussian (not certified)",
    "blt_int": "lattice BLT, exact discrete Gaussian (certified, docs/PRIVACY.md 13)",
}


def counter(p: Probe) -> dict[str, Any] | None:
    """The continual counter of a sketch (``counter`` param) and its stated per-cell error.

    ``error``: w.p. ``>= 1 - beta`` every released cell of the epoch is within it of its
    exact count (the release's ``error_bound.noise``; LazyHH: ``gamma``).
    """
    noise = p.noise
    name = noise.counter
    if name is None:
        return None
    eb = p.payload.get("error_bound") or {}
    err = eb.get("noise") if noise.counter_error is None else noise.counter_error
    return {"counter": name, "note": COUNTER_NOTES.get(name, name),
            "error": None if err is None else float(err),
            "scale": noise.lattice_scale}


def event_horizon(p: Probe) -> int | None:
    """The mechanism's public bound on events per epoch (its capability), None if none."""
    horizon = p.capabilities.event_horizon
    return (horizon(p.spec) or None) if horizon is not None else None


def memory(p: Probe) -> dict[str, Any]:
    """Bytes per shard: the mechanism's memory model if it declares one, else the fresh state's."""
    from worker.engine.memory_model import shard_bytes  # the function the start-up limit uses

    per, source = shard_bytes(p.topology, p.spec, p.mechanism)
    shards = p.topology.allowed_shards
    return {"per_shard_bytes": per, "source": source,
            "shards": None if shards is None else len(shards),
            "total_bytes": None if shards is None else per * len(shards)}


# ---------------------------------------------------------------------- timing
def shard_count(topo: Topology, shards: int | None = None) -> int:
    """Shards the input rate spreads over: ``shards``, else the closed set's size, else 1."""
    if shards:
        return int(shards)
    return len(topo.allowed_shards) if topo.allowed_shards else 1


def timing(topo: Topology, total_rate: float | None, shards: int | None = None
           ) -> dict[str, Any]:
    """Seconds per release and per epoch, and the events one shard sees in them.

    ``total_rate``: events/s of the whole input topic, spread evenly over
    :func:`shard_count` shards (``rate`` is then per shard).
    """
    n_shards = shard_count(topo, shards)
    rate = None if total_rate is None else total_rate / n_shards
    pr = topo.privacy
    tick_s = pr.tick_ms / 1000.0
    release_s = topo.release.every_ticks * tick_s
    if pr.clock == "tick":
        epoch_s: float | None = pr.epoch_ticks * tick_s
        epoch_events = None if rate is None else rate * pr.epoch_ticks * tick_s
    else:
        epoch_events = float(pr.epoch_events)
        epoch_s = None if not rate else pr.epoch_events / rate
    return {"total_rate": total_rate, "shards": n_shards, "rate": rate, "tick_s": tick_s,
            "release_s": release_s, "epoch_s": epoch_s,
            "first_release_events": None if rate is None else min(
                rate * release_s, epoch_events if epoch_events is not None else math.inf),
            "epoch_events": epoch_events}


# ---------------------------------------------------------------------- bounds
def bounds(p: Probe, t: dict[str, Any], shares: Sequence[float]) -> dict[str, Any]:
    """Error bounds at the first release and the epoch's end (events from ``t``).

    ``headline``: the one error magnitude the verdict and the what-if section
    compare (a sketch cell's noise bound, LazyHH's coverage, a windowed
    mechanism's stated maximum noise).
    """
    caps = p.capabilities
    eb = p.payload.get("error_bound") or {}
    at = {"first_release": t["first_release_events"], "epoch_end": t["epoch_events"]}
    out: dict[str, Any] = {"stated": eb, "beta": eb.get("beta")}
    if caps.heavy_hitters is not None:
        hh = caps.heavy_hitters(p.mechanism)
        out["kind"] = "heavy_hitters_continual"
        out["at_start"] = hh.output_bounds(0)
        out["beta"] = out["at_start"]["failure_probability"]
        for name, n in at.items():
            out[name] = None if n is None else hh.output_bounds(n)
        out["headline"] = {"label": "count an item needs to be reported surely, with no "
                           "other traffic (coverage at n = 0)",
                           "value": out["at_start"]["coverage"]}
        out["min_detectable_share"] = hh.min_detectable_share()
        det = []
        for s in shares:
            n = hh.detection_events(s)
            ng = hh.detection_events(s, guaranteed=True)
            rate = t["rate"]
            det.append({"share": s, "events": n, "events_guaranteed": ng,
                        "seconds": None if (n is None or not rate) else n / rate,
                        "seconds_guaranteed": None if (ng is None or not rate) else ng / rate})
        out["detection"] = det
        return out
    if p.payload.get("kind") == "sketch" and "noise" in eb:
        noise = float(eb["noise"])
        out["kind"] = "sketch"
        out["cell_noise"] = noise
        out["headline"] = {"label": "noise per cell (every release of the epoch)",
                           "value": noise}
        for name, n in at.items():
            if n is None or "eta" not in eb or caps.point_query is None:
                out[name] = None
                continue
            lo, hi = caps.point_query(p.spec, n, noise)  # Lemma 5; Count Sketch: F2 <= n^2
            out[name] = {"events": n, "point_query": [lo, hi],
                         "collision_term": eb.get("collision_term")}
        return out
    out["kind"] = "quantiles" if p.payload.get("kind") == "quantiles" else "windowed"
    for key in ("noise_abs_max", "rank_noise_abs_max", "vs_sketch", "noise"):
        if isinstance(eb.get(key), int | float):
            out["headline"] = {"label": f"error_bound.{key} (stated by the release)",
                               "value": float(eb[key])}
            break
    if caps.sketch_error is not None:  # Misra-Gries: n/(k+1) undercount
        noise = (out.get("headline") or {}).get("value") or 0.0
        for name, n in at.items():
            if n is not None:
                e = float(caps.sketch_error(p.spec, n))
                out[name] = {"events": n, "sketch_error": e, "total": noise + e}
    return out
