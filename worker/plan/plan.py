"""``dpstream plan``: what a topology's releases will say, before anything runs.

For each topology: the mechanism, the guarantee a release will state, the
noise sigma, the error bound of a released count or estimate at the release's
``beta`` (at the first release and at the epoch's end), LazyHH's detection
threshold and the time until an item with a given share of the traffic
appears, the memory per shard, and what changing one knob would do.

The plan is thin on purpose: it computes no privacy or error maths of its own.
It builds the topology's mechanism from its spec exactly as the worker does
(registry ``build_spec`` + ``build``), with :class:`~sketches.core.noise.ZeroNoise`
(nothing is released: the instance only answers questions), and reads

- the **guarantee** from :func:`worker.release.envelope.envelope` of the mechanism's own
  empty release: the code every published release goes through, so a plan and
  the releases can never state different ``(eps, delta, relation, unit)``;
- **sigma** from the mechanism's public calibration (``calibration.sigma``,
  a payload's ``sigma``, LazyHH's budget block);
- **error bounds** from the release's ``error_bound`` block and, for a
  sketch's point queries, from :func:`sketches.privacy.lazy_cms_error_bound` /
  :func:`~sketches.privacy.lazy_cs_error_bound` (paper 002 Lemma 5, with the
  hashing term); LazyHH's from :mod:`sketches.continual.lazy_hh.detection`;
- **memory** from the spec's ``memory_bytes()`` where the spec has one (a
  model of the epoch's peak), else the fresh mechanism's ``memory_bytes()``.

The "what if" section is a list of knob variations (:func:`variations`): eps
x2 and /2, width x2 (``width``, ``k_tilde`` or ``k``, whichever the spec has),
epoch length x2 and /2 and, when the spec has a ``counter`` field, each other
counter it accepts; each is a modified topology planned the same way.

Examples
--------
>>> from worker.config.topology import parse_topology
>>> topo = parse_topology('''
... name: views
... input: {topic: pageviews, partitions: 1, fields: {shard: site, item: page}}
... mechanism: {name: lazy_cms, params: {depth: 4, width: 1024}}
... privacy: {eps: 1.0, delta: 1.0e-6, epoch_ticks: 3600}
... release: {every_ticks: 60, topic: views-out}
... dead_letter: {topic: views-dlq}''', "views.yaml")
>>> p = plan_topology(topo, rate=1.0)
>>> p["guarantee"]["eps"], p["guarantee"]["relation"], p["guarantee"]["unit"], p["private"]
(1.0, 'add_remove', 'event', True)
>>> p["verdict"]["status"]     # 3,600 events an hour: no page stands out of the noise
'noise_dominates'
>>> [v["label"] for v in p["what_if"]][:3]
['eps x2', 'eps /2', 'width x2']
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import typing
from collections.abc import Callable, Sequence
from typing import Any

from sketches.core.base import Capabilities, NoiseSummary, lookup, spec_fields
from sketches.errors import DPStreamError
from worker.config.topology import Topology
from worker.release.status import is_private, privacy_note

DEFAULT_SHARES = (0.01, 0.05, 0.10)
"""Traffic shares of the example items (``--share``)."""

WIDTH_KNOBS = ("width", "k_tilde", "k")
"""The spec field ``width x2`` doubles: the first one the spec has."""

PLAN_SHARD = "<plan>"

PROBE_MEMORY_LIMIT = 256 << 20
"""A what-if or fix search never builds a variation whose state would exceed this (bytes,
estimated from the topology's own state times the size factor)."""


# ---------------------------------------------------------------------- probing
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
    """Bytes per shard: the spec's model if it has ``memory_bytes()``, else the fresh state's."""
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


# ---------------------------------------------------------------------- what if
def _replace_privacy(topo: Topology, **kw: Any) -> Topology:
    return dataclasses.replace(topo, privacy=dataclasses.replace(topo.privacy, **kw))


def _replace_param(topo: Topology, name: str, value: Any) -> Topology:
    return _replace_params(topo, {name: value})


def _replace_params(topo: Topology, values: dict[str, Any]) -> Topology:
    return dataclasses.replace(topo, mechanism_params={**topo.mechanism_params, **values})


def _scale_params(topo: Topology, values: dict[str, int], factor: int) -> Topology:
    return _replace_params(topo, {k: x * factor for k, x in values.items()})


def _scale_params_by(topo: Topology, factor: int, values: dict[str, int]) -> Topology:
    return _scale_params(topo, values, factor)


def _say_scaled(factor: int, values: dict[str, int]) -> str:
    return ", ".join(f"{k} {x} -> {x * factor}" for k, x in values.items()) + f" (x{factor})"


def _int_fields(spec: Any, names: Sequence[str]) -> list[str]:
    have = spec_fields(spec)
    return [n for n in names if n in have and isinstance(have[n], int)
            and not isinstance(have[n], bool)]


def _size_knobs(spec: Any) -> list[tuple[str, ...]]:
    """Size fields the fix search scales: the width knob, and LazyHH's ``k`` with ``k_tilde``."""
    out: list[tuple[str, ...]] = [tuple(_int_fields(spec, WIDTH_KNOBS)[:1])]
    if len(_int_fields(spec, ("k", "k_tilde"))) == 2:
        out.append(("k", "k_tilde"))
    return [k for k in out if k]


def _scale_epoch(topo: Topology, factor: float) -> Topology:
    pr = topo.privacy
    if pr.clock != "tick":
        return _replace_privacy(topo, epoch_events=max(1, round(pr.epoch_events * factor)))
    ticks = max(1, round(pr.epoch_ticks * factor))
    if topo.release.every_ticks == pr.epoch_ticks:  # windowed: one release per epoch
        topo = dataclasses.replace(topo, release=dataclasses.replace(topo.release,
                                                                     every_ticks=ticks))
    return _replace_privacy(topo, epoch_ticks=ticks)


def counter_choices(spec: Any) -> list[Any]:
    """The values a spec's ``counter`` field accepts (an Enum's members or a Literal's)."""
    fields_ = spec_fields(spec)
    if "counter" not in fields_:
        return []
    value = fields_["counter"]
    if isinstance(value, enum.Enum):
        return [m.value for m in type(value)]
    try:
        hint = typing.get_type_hints(type(spec)).get("counter")
    except (NameError, TypeError):
        hint = None
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return []


Variation = tuple[str, Callable[[Topology], Topology]]


def variations(topo: Topology, spec: Any) -> list[Variation]:
    """Knob variations of ``topo``: eps, width, epoch length and, if any, the counter."""
    pr = topo.privacy
    out: list[Variation] = [
        ("eps x2", lambda t: _replace_privacy(t, eps=pr.eps * 2)),
        ("eps /2", lambda t: _replace_privacy(t, eps=pr.eps / 2)),
    ]
    for knob in _int_fields(spec, WIDTH_KNOBS)[:1]:
        out.append((f"{knob} x2", functools.partial(_scale_params, values={
            knob: spec_fields(spec)[knob]}, factor=2)))
    out.append(("epoch x2", lambda t: _scale_epoch(t, 2)))
    out.append(("epoch /2", lambda t: _scale_epoch(t, 0.5)))
    if pr.unit_field and pr.unit_cap > 1:
        out.append(("unit_cap /2", lambda t: _replace_privacy(t, unit_cap=max(1,
                                                                          pr.unit_cap // 2))))
    current = spec_fields(spec).get("counter")
    current = current.value if isinstance(current, enum.Enum) else current
    for alt in counter_choices(spec):
        if alt != current:
            out.append((f"counter {alt}", functools.partial(_replace_param, name="counter",
                                                             value=alt)))
    return out


def _summary(p: Probe, rate: float | None, shares: Sequence[float],
             shards: int | None = None) -> dict[str, Any]:
    t = timing(p.topology, rate, shards)
    b = bounds(p, t, shares)
    head = (b.get("headline") or {}).get("value")
    if head is not None and "total" in (b.get("epoch_end") or {}):
        head = b["epoch_end"]["total"]  # Misra-Gries: noise plus the undercount n/(k+1)
    s = {"sigma": sigmas(p).get("sketch"), "headline": head,
         "memory_per_shard_bytes": memory(p)["per_shard_bytes"], "epoch_s": t["epoch_s"],
         "epoch_events": t["epoch_events"]}
    if "detection" in b:
        s["detection_s"] = [d["seconds"] for d in b["detection"]]
        s["detection_events"] = [d["events"] for d in b["detection"]]
        s["min_detectable_share"] = b["min_detectable_share"]
    return s


def what_if(topo: Topology, base: Probe, rate: float | None, shares: Sequence[float],
            shards: int | None = None) -> list[dict[str, Any]]:
    """Each knob variation planned like the topology; ``error`` if the variation is invalid."""
    ref = _summary(base, rate, shares, shards)
    rows = []
    base_mem = ref["memory_per_shard_bytes"]
    for label, change in variations(topo, base.spec):
        row: dict[str, Any] = {"label": label}
        if label.endswith(" x2") and base_mem * 2 > PROBE_MEMORY_LIMIT and not label.startswith(
                ("eps", "epoch")):
            row["error"] = (f"not planned: the state would exceed {PROBE_MEMORY_LIMIT >> 20} MiB "
                            "per shard")
            rows.append(row)
            continue
        try:
            varied = probe(change(topo))
            row.update(_summary(varied, rate, shares, shards))
            row["private"] = is_private(varied.envelope)
        except (DPStreamError, TypeError, ValueError) as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        if ref["headline"] and row.get("headline") is not None:
            row["headline_ratio"] = row["headline"] / ref["headline"]
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- verdict
def _fix_search(topo: Topology, shares: Sequence[float], rate: float, shards: int | None,
                ok: Callable[[dict[str, Any]], bool]) -> list[str]:
    """Smallest power-of-two change of eps, epoch length or width that satisfies ``ok``."""
    tips = []
    pr = topo.privacy
    base = probe(topo)
    knobs: list[tuple[str, Callable[[Topology, int], Topology], Callable[[int], str]]] = [
        ("privacy.eps", lambda t, f: _replace_privacy(t, eps=pr.eps * f),
         lambda f: f"{pr.eps:g} -> {pr.eps * f:g} (x{f})"),
        ("privacy.epoch_ticks" if pr.clock == "tick" else "privacy.epoch_events",
         lambda t, f: _scale_epoch(t, f),
         lambda f: (f"{pr.epoch_ticks} -> {pr.epoch_ticks * f} (x{f})" if pr.clock == "tick"
                    else f"{pr.epoch_events} -> {pr.epoch_events * f} (x{f})")),
    ]
    for fields_ in _size_knobs(base.spec):
        values = {k: spec_fields(base.spec)[k] for k in fields_}
        knobs.append(("mechanism.params:",
                      functools.partial(_scale_params_by, values=values),
                      functools.partial(_say_scaled, values=values)))
    if pr.unit_field and pr.unit_cap > 1:
        knobs.append(("privacy.unit_cap", lambda t, f: _replace_privacy(
            t, unit_cap=max(1, pr.unit_cap // f)),
            lambda f: f"{pr.unit_cap} -> {max(1, pr.unit_cap // f)}"))
    base_mem = memory(base)["per_shard_bytes"]
    for path, change, say in knobs:
        for j in range(1, 7):
            f = 2 ** j
            if path.startswith("mechanism.params") and base_mem * f > PROBE_MEMORY_LIMIT:
                break  # never allocate a huge probe: the state grows with the size knobs
            if path == "privacy.unit_cap" and pr.unit_cap // f < 1:
                break
            try:
                s = _summary(probe(change(topo, f)), rate, shares, shards)
            except (DPStreamError, TypeError, ValueError):
                break
            if ok(s):
                tips.append(f"{path} {say(f)}")
                break
    return tips


def verdict(p: Probe, b: dict[str, Any], t: dict[str, Any], shares: Sequence[float],
            private: bool) -> dict[str, Any]:
    """Is the noise small against what the topology will count? And which knob fixes it."""
    lines: list[str] = []
    status = "ok"
    if not private:
        why = p.envelope.get("not_private_reason") or f"{p.topology.noise.kind} noise"
        lines.append(f"NOT PRIVATE: {why}; these releases carry no DP guarantee (the bounds "
                     "below are what secure integer noise would give)")
        status = "not_private"
    rate = t["rate"]
    top = max(shares)
    if b.get("kind") == "heavy_hitters_continual":
        min_share = b["min_detectable_share"]
        det = {d["share"]: d for d in b["detection"]}
        if top <= min_share:
            lines.append(f"NEVER REPORTED: items with {top:.0%} of a shard's traffic or less never "
                         f"appear; LazyHH reports only items above {min_share:.1%} of it (the "
                         "threshold grows with the stream: t/k and 5 t/k_tilde)")
            status = "never_reported" if status == "ok" else status
        elif rate is None:
            n = det[top]["events"]
            lines.append(f"an item with {top:.0%} of the traffic appears after "
                         f"{_num(n)} events of the epoch; pass --rate for times")
        else:
            epoch_s = t["epoch_s"] or math.inf
            sec = det[top]["seconds"]
            if sec is None or sec > epoch_s:
                lines.append(f"TOO SLOW: an item with {top:.0%} of the traffic would need "
                             f"{_dur(sec)} to appear, the epoch lasts {_dur(epoch_s)}")
                status = "noise_dominates" if status == "ok" else status
            else:
                lines.append(f"ok: an item with {top:.0%} of the traffic appears after about "
                             f"{_dur(sec)} of each {_dur(epoch_s)} epoch (plus the release "
                             f"period, {_dur(t['release_s'])})")
        if status in ("noise_dominates", "never_reported") and rate:
            epoch_s = t["epoch_s"] or math.inf

            def ok_hh(s: dict[str, Any]) -> bool:
                secs = s.get("detection_s") or []
                return bool(secs) and secs[-1] is not None and secs[-1] <= (s["epoch_s"]
                                                                           or math.inf)

            tips = _fix_search(p.topology, shares, t["total_rate"], t["shards"], ok_hh)
            lines.append("fix: " + ("; or ".join(tips) if tips else
                                    "no single knob within x64 does it; lower k or raise "
                                    "k_tilde and eps together"))
        return {"status": status, "lines": lines}
    head = (b.get("headline") or {}).get("value")
    end = b.get("epoch_end") or {}
    if head is not None and "total" in end:  # noise plus the sketch's own undercount
        head = end["total"]
    if head is not None and b.get("kind") == "quantiles" and t["epoch_events"]:
        lines.append(f"rank error +/-{_num(head)} of {_num(t['epoch_events'])} events per "
                     f"epoch ({head / t['epoch_events']:.2%} of the ranks)")
        return {"status": status, "lines": lines}
    if head is None:
        lines.append("no count-type error bound to compare (see the stated bound)")
        return {"status": status, "lines": lines}
    if rate is None or t["epoch_events"] is None:
        need = head / top
        lines.append(f"a count must exceed about {_num(head)} to stand out of the noise: an "
                     f"item with {top:.0%} of a shard's traffic needs {_num(need)} events per "
                     "epoch; pass --rate to check")
        return {"status": status, "lines": lines}
    expected = top * t["epoch_events"]
    if expected <= head:
        lines.append(f"NOISE DOMINATES: an item with {top:.0%} of the traffic counts about "
                     f"{_num(expected)} by the epoch's end, but the error bound is "
                     f"+/-{_num(head)} (x{head / max(expected, 1e-9):.1f} the count)")
        status = "noise_dominates" if status == "ok" else status

        def ok_count(s: dict[str, Any]) -> bool:
            return s["headline"] is not None and s["epoch_events"] is not None and (
                s["headline"] < top * s["epoch_events"])

        tips = _fix_search(p.topology, shares, t["total_rate"], t["shards"], ok_count)
        lines.append("fix: " + ("; or ".join(tips) if tips else
                                "no single knob within x64 does it; aggregate more traffic "
                                "per shard or raise eps and the epoch together"))
    else:
        small = min(shares)
        lines.append(f"ok: an item with {top:.0%} of the traffic counts about {_num(expected)} "
                     f"by the epoch's end against an error bound of {_num(head)}"
                     + (f"; items below {head / t['epoch_events']:.2%} of the traffic stay "
                        "within the noise" if small * t["epoch_events"] <= head else ""))
    return {"status": status, "lines": lines}


# ---------------------------------------------------------------------- plan
def plan_topology(topo: Topology, *, rate: float | None = None,
                  shares: Sequence[float] = DEFAULT_SHARES, shards: int | None = None,
                  with_what_if: bool = True) -> dict[str, Any]:
    """The plan of one topology as a JSON-able dict (see module docstring)."""

    shares = tuple(sorted(shares))
    p = probe(topo)
    t = timing(topo, rate, shards)
    b = bounds(p, t, shares)
    g = guarantee(p)
    private = is_private(p.envelope)
    out = {
        "topology": topo.name, "source": topo.source, "mechanism": topo.mechanism,
        "private": private, "privacy_note": privacy_note(p.envelope),
        "guarantee": g, "sigma": sigmas(p), "counter": counter(p), "timing": t,
        "shares": list(shares),
        "bounds": b, "memory": memory(p),
        "event_horizon": event_horizon(p),
        "verdict": verdict(p, b, t, shares, private),
    }
    if with_what_if:
        out["what_if"] = what_if(topo, p, rate, shares, shards)
    return out


def plan(topologies: Sequence[Topology], *, rate: float | None = None,
         shares: Sequence[float] = DEFAULT_SHARES,
         shards: int | None = None) -> list[dict[str, Any]]:
    """Plans of every topology, in order (``rate``: events/s of the whole input topic)."""
    return [plan_topology(t, rate=rate, shares=shares, shards=shards) for t in topologies]


# ---------------------------------------------------------------------- text
def _num(x: float | None) -> str:
    if x is None:
        return "never"
    if x == 0 or 0.01 <= abs(x) < 1e9:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.3g}"
    return f"{x:.3g}"


def _dur(s: float | None) -> str:
    if s is None or math.isinf(s):
        return "never"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}"


def render(plans: Sequence[dict[str, Any]]) -> str:
    """Human-readable text of :func:`plan`'s output."""
    return "\n\n".join(_render_one(p) for p in plans) + "\n"


def _message_group(inp: dict[str, Any]) -> str:
    """A many-event encoding's calibration (docs/PRIVACY.md §2), or nothing."""
    m = inp.get("max_events_per_message")
    if m is None:
        return ""
    return (f", noise calibrated for a message of up to {m} events "
            f"(calibration cap {inp.get('calibration_cap')})")


def _render_one(p: dict[str, Any]) -> str:
    g, t, b, m = p["guarantee"], p["timing"], p["bounds"], p["memory"]
    out = [f"== {p['topology']} ({p['source']}): mechanism {p['mechanism']}"]
    if not p["private"]:
        out.append(f"   {p['privacy_note']}: releases say \"private\": false")
    delta = g.get("delta")
    out.append(f"   guarantee (as releases state it): eps {g.get('eps'):g}, delta "
               f"{delta:.3g}{' (delta~ of LazyHH)' if 'delta_tilde' in g else ''}, "
               f"relation {g.get('relation')}, unit {g.get('unit')} (cap {g.get('unit_cap')})"
               + ("" if g.get("covers_shard_presence") else
                  ", shard presence NOT covered (open shard set)")
               + _message_group(g.get("input") or {}))
    sig = p["sigma"]
    out.append("   noise sigma: " + (", ".join(f"{k} {v:,.1f}" for k, v in sig.items())
                                     if sig else "none (see the stated error bound)"))
    c = p.get("counter")
    if c:
        out.append(f"   counter: {c['counter']} ({c['note']}"
                   + (f", lattice scale s = {c['scale']}" if c.get("scale") else "") + ")"
                   + ("" if c.get("error") is None else
                      f"; every released cell within +/-{_num(c['error'])} of its count"))
    rate = t["rate"]
    when = (f"release every {_dur(t['release_s'])}, epoch "
            f"{_dur(t['epoch_s']) if t['epoch_s'] else '-'}")
    if rate:
        spread = (f" ({_num(t['total_rate'])}/s over {t['shards']} shards)"
                  if t["shards"] > 1 else "")
        if p["memory"]["shards"] is None and t["shards"] == 1:
            spread = " (open shard set: --shards N spreads --rate over N shards)"
        when += (f"; at {_num(rate)} events/s per shard{spread}: "
                 f"{_num(t['first_release_events'])} "
                 f"events by the first release, {_num(t['epoch_events'])} by the epoch's end")
    out.append(f"   timing: {when}")
    if p.get("event_horizon") and t["epoch_events"] and t["epoch_events"] > p["event_horizon"]:
        out.append(f"   WARNING: {_num(t['epoch_events'])} events per epoch exceed "
                   f"event_horizon {_num(p['event_horizon'])}: later events are dropped")
    beta = b.get("beta")
    out.append("   error bounds (w.p. >= 1 - beta, beta = "
               f"{'not stated' if beta is None else f'{beta:.3g}'}):")
    kind = b.get("kind")
    if kind == "heavy_hitters_continual":
        s0 = b["at_start"]
        out.append(f"     gamma (noise of any estimate) {_num(s0['gamma'])}; estimate - count in "
                   f"[{_num(s0['lower'])}, +{_num(s0['upper'])}] at the epoch's start")
        for name in ("first_release", "epoch_end"):
            x = b.get(name)
            if x:
                out.append(f"     {name.replace('_', ' ')} ({_num(x['events'])} events): "
                           f"threshold {_num(x['threshold'])}, every count above "
                           f"{_num(x['coverage'])} reported; estimate - count in "
                           f"[{_num(x['lower'])}, +{_num(x['upper'])}]")
        out.append(f"     detection threshold with no traffic: {_num(s0['threshold'])} events "
                   f"(guaranteed above {_num(s0['coverage'])}); an item needs more than "
                   f"{b['min_detectable_share']:.1%} of the traffic to appear at all")
        for d in b["detection"]:
            when_s = (f" = {_dur(d['seconds'])} (guaranteed by {_dur(d['seconds_guaranteed'])})"
                      if rate else "")
            if d["events"] is None:
                out.append(f"     item with {d['share']:.0%} of the traffic: never appears "
                           f"(needs more than {b['min_detectable_share']:.1%})")
                continue
            out.append(f"     item with {d['share']:.0%} of the traffic appears after "
                       f"{_num(d['events'])} events{when_s}")
    elif kind == "sketch":
        out.append(f"     noise per cell: +/-{_num(b['cell_noise'])} (every release of the "
                   "epoch)")
        for name in ("first_release", "epoch_end"):
            x = b.get(name)
            if x:
                lo, hi = x["point_query"]
                out.append(f"     point query at the {name.replace('_', ' ')} "
                           f"({_num(x['events'])} events): estimate - count in "
                           f"[{_num(lo)}, +{_num(hi)}] (noise + hashing {x['collision_term']})")
        eb = b["stated"]
        if "lag" in eb:
            out.append(f"     lazy lag: {eb['lag']} {eb.get('lag_unit')} of the item's events")
    else:
        eb = b["stated"]
        shown = {k: v for k, v in eb.items() if k not in ("beta",)}
        for k, v in shown.items():
            out.append(f"     {k}: {_num(v) if isinstance(v, int | float) else v}")
        for name in ("first_release", "epoch_end"):
            x = b.get(name)
            if name == "first_release" and x == b.get("epoch_end"):
                continue  # windowed: the one release is the epoch's end
            if x and "sketch_error" in x:
                out.append(f"     at the {name.replace('_', ' ')} ({_num(x['events'])} events): "
                           f"Misra-Gries undercount up to {_num(x['sketch_error'])}, "
                           f"{_num(x['total'])} with the noise")
    out.append(f"   memory: {_bytes(m['per_shard_bytes'])} per shard ({m['source']})"
               + (f", {_bytes(m['total_bytes'])} for {m['shards']} shards" if m["shards"] else
                  ", open shard set (one such state per active shard)"))
    for line in p["verdict"]["lines"]:
        out.append(f"   verdict: {line}")
    rows = p.get("what_if") or []
    if rows:
        hh = kind == "heavy_hitters_continual"
        out.append("   what if" + (f" (time until a {p['shares'][-1]:.0%} item appears)"
                                   if hh and rate else "") + ":")
        for r in rows:
            if "error" in r:
                out.append(f"     {r['label']:<14} invalid: {r['error']}")
                continue
            ratio = r.get("headline_ratio")
            word = "reported surely above" if hh else "bound"
            cells = [] if r.get("headline") is None else [
                f"{word} {_num(r['headline'])}" + (f" (x{ratio:.2f})" if ratio else "")]
            if r.get("sigma") is not None:
                cells.append(f"sigma {r['sigma']:,.1f}")
            if hh:
                cells.append(f"min share {r['min_detectable_share']:.1%}")
                if rate:
                    cells.append(f"appears after {_dur(r['detection_s'][-1])}")
            cells.append(f"memory {_bytes(r['memory_per_shard_bytes'])}")
            if r.get("private") is False:
                cells.append("NOT PRIVATE (its releases say private: false)")
            out.append(f"     {r['label']:<14} " + ", ".join(cells))
    return "\n".join(out)
