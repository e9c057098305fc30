"""``dpstream plan``'s verdict: is the noise small against what the topology will count?

And, when it is not, which single knob fixes it (:func:`worker.plan.whatif.fix_search`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from worker.plan.build import Probe
from worker.plan.render import _dur, _num
from worker.plan.whatif import fix_search


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

            tips = fix_search(p.topology, shares, t["total_rate"], t["shards"], ok_hh)
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

        tips = fix_search(p.topology, shares, t["total_rate"], t["shards"], ok_count)
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

