"""Human-readable text of ``dpstream plan``'s JSON-able plans (:func:`render`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


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
