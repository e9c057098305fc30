"""When does LazyHH report an item? Thresholds as a function of the stream length.

Planning questions (``dpstream plan``) about a LazyHH epoch before any event
arrives: what are the output threshold and the error interval once ``n``
events have arrived, and how many events must arrive before an item carrying a
fixed share of the traffic passes the threshold. Everything is read from the
epoch's own :class:`~sketches.continual.lazy_hh.spec.HHParams` (the thresholds
of Alg. 6 with the calibrated ``gamma``) and its spec, so a plan can never use
other thresholds than the releases.

Assumptions (stated in every answer): the DP length estimate equals the true
length ``n`` (under ``add_remove`` the suppression threshold uses the upper
bound ``t_up = n + E + c``, ``E`` the length counter's error bound), and an
item's estimate equals its count. ``threshold`` is where a reported item's
*estimate* must be; ``coverage = threshold + lambda1`` is the count above which
the item is reported with probability ``>= 1 - failure`` (Lemma 6, Theorem 4).
The threshold is a maximum of functions linear in ``n`` (``t/k`` and the
suppression term ``tau2``), so ``share * n - threshold(n)`` is concave and the
smallest ``n`` passing it is found by bisection on the thresholds' own methods.

Examples
--------
>>> from sketches.continual.lazy_hh.sketch import LazyHH
>>> from sketches.core.noise import ZeroNoise
>>> spec = LazyHHSpec(k=10, k_tilde=64, horizon=3600, eps=1.0, delta=1e-6,
...                   event_horizon=10**7)
>>> params = LazyHH(spec, ZeroNoise()).params
>>> n = detection_events(spec, params, 0.20)
>>> b = output_bounds(spec, params, n)
>>> abs(0.20 * n - b["threshold"]) < 1e-6 * n    # the item's count reaches the threshold
True
>>> detection_events(spec, params, 0.10) is None  # not above max(1/k, 5/k~): never reported
True
>>> round(min_detectable_share(spec, params), 4)   # max(1/k, 5/k~)
0.1
"""

from __future__ import annotations

from typing import Any

from sketches.continual.lazy_hh.spec import HHParams, LazyHHSpec
from sketches.privacy import Relation

__all__ = ["detection_events", "length_slack", "min_detectable_share", "output_bounds"]

_FAR = 1e18  # events: "never" when an item still misses the threshold here


def length_slack(spec: LazyHHSpec, params: HHParams) -> float:
    """``t_up - n``: the length counter's error bound plus ``c`` (add/remove), else 0."""
    if spec.relation is Relation.REPLACE:
        return 0.0
    return float(params.count_error) + spec.unit_cap


def output_bounds(spec: LazyHHSpec, params: HHParams, events: float) -> dict[str, Any]:
    """Threshold, coverage and error interval of an output after ``events`` events.

    Keys: ``threshold`` (a reported item's estimate exceeds it), ``coverage``
    (every item with a larger count is reported, w.p. ``>= 1 - failure``),
    ``lower``/``upper`` (``lower <= estimate - f <= upper`` for reported items),
    ``tau1``/``tau2``, ``gamma``, ``failure_probability`` (as in the release).
    """
    th = params.thresholds
    n = max(float(events), 0.0)
    up = n + length_slack(spec, params)
    thr = th.threshold(n, up)
    return {
        "events": n, "threshold": thr, "coverage": thr + th.lambda1,
        "lower": -th.lambda1, "upper": th.lambda2(up), "tau1": th.tau1(n), "tau2": th.tau2(up),
        "gamma": params.gamma,
        "failure_probability": spec.beta_value * (1 if params.count is None else 2),
    }


def _gap(spec: LazyHHSpec, params: HHParams, share: float, n: float, key: str) -> float:
    return share * n - float(output_bounds(spec, params, n)[key])


def detection_events(spec: LazyHHSpec, params: HHParams, share: float, *,
                     guaranteed: bool = False) -> float | None:
    """Events of an epoch after which an item with ``share`` of them passes the threshold.

    ``guaranteed``: pass ``coverage`` instead (reported w.p. ``>= 1 - failure``).
    None when it never does: ``share`` is at most the threshold's growth per event
    (:func:`min_detectable_share`), or the tick clock's ``event_horizon`` (events
    past it are dropped) comes first.
    """
    if not 0 < share <= 1:
        raise ValueError(f"share: must be in (0, 1], got {share!r}")
    key = "coverage" if guaranteed else "threshold"
    cap = float(spec.event_horizon) if spec.event_horizon else float(spec.horizon)
    if spec.clock.value == "arrival":
        cap = float(spec.horizon)
    if _gap(spec, params, share, cap, key) <= 0:
        return None
    lo, hi = 0.0, cap
    for _ in range(200):
        mid = (lo + hi) / 2
        if _gap(spec, params, share, mid, key) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= max(1e-9 * hi, 1e-6):
            break
    return hi


def min_detectable_share(spec: LazyHHSpec, params: HHParams) -> float:
    """The share of traffic an item needs to be reported in a long enough epoch.

    The threshold's growth per event as ``n`` grows (``max(1/k, 5/k~)`` for
    Alg. 6), read from the thresholds; a smaller share is never reported.
    """
    a = float(output_bounds(spec, params, _FAR)["threshold"])
    b = float(output_bounds(spec, params, 2 * _FAR)["threshold"])
    return (b - a) / _FAR
