"""LazyHH thresholds as a function of the stream length (``dpstream plan``, issue 13 item 4):
the planned threshold is the one the sketch's outputs use, and detection times solve it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sketches import LazyHH, LazyHHSpec, ZeroNoise
from sketches.continual.lazy_hh.detection import (
    detection_events,
    length_slack,
    min_detectable_share,
    output_bounds,
)


def _tick_spec(**kw: object) -> LazyHHSpec:
    base: dict[str, object] = dict(k=4, k_tilde=32, horizon=200, eps=1.0, delta=1e-6,
                                   event_horizon=10**6)
    base.update(kw)
    return LazyHHSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("unit_cap", [1, 5])
def test_planned_threshold_is_the_outputs_threshold_under_zero_noise(unit_cap: int) -> None:
    """Feed n events tick by tick (zero noise: the DP length is exact) and compare every
    output's threshold and error interval with output_bounds(spec, params, n)."""
    spec = _tick_spec(unit_cap=unit_cap)
    hh = LazyHH(spec, ZeroNoise())
    n = 0
    for tick in range(20):
        items = np.array([f"i{j % 7}" for j in range(tick * 13)], dtype=object)
        hh.update_batch(items, ticks=np.full(items.size, tick, dtype=np.int64))
        hh.advance_to(tick + 1)
        n += items.size
        rel = hh.release()
        planned = output_bounds(spec, hh.params, n)
        assert rel["threshold"] == pytest.approx(planned["threshold"], rel=1e-12)
        assert rel["error_bound"]["coverage"] == pytest.approx(planned["coverage"], rel=1e-12)
        assert rel["error_bound"]["upper"] == pytest.approx(planned["upper"], rel=1e-12)
        assert rel["error_bound"]["lower"] == planned["lower"]
        assert rel["error_bound"]["failure_probability"] == planned["failure_probability"]


def test_replace_arrival_clock_closed_form() -> None:
    """replace: t_up = n (slack 0), lag k~ on the arrival clock: lambda1 = gamma + k~;
    threshold = max(n/k, 5n/k~ + lambda1 + 2 gamma) + 1."""
    spec = LazyHHSpec(k=4, k_tilde=32, horizon=4096, eps=0.5, delta=1e-3, relation="replace",
                      clock="arrival")
    params = LazyHH(spec, ZeroNoise()).params
    assert length_slack(spec, params) == 0.0
    g, kt = params.gamma, 32
    lam1 = g + kt
    for s in (0.3, 0.5, 0.9):
        n = max(1 / (s - 1 / 4), (lam1 + 2 * g + 1) / (s - 5 / kt))
        got = detection_events(spec, params, s)
        if n > spec.horizon:
            assert got is None  # past the epoch's events: never
        else:
            assert got == pytest.approx(n, rel=1e-6)
    assert min_detectable_share(spec, params) == pytest.approx(0.25, rel=1e-9)


def test_event_horizon_and_small_shares_mean_never() -> None:
    spec = _tick_spec(event_horizon=1000)
    params = LazyHH(spec, ZeroNoise()).params
    assert detection_events(spec, params, 0.2) is None  # < 5/k~ + 1/k limits
    assert detection_events(spec, params, 0.9) is None  # needs more events than the bound
    big = _tick_spec(event_horizon=10**9)
    n = detection_events(big, LazyHH(big, ZeroNoise()).params, 0.9)
    assert n is not None and n > 1000 and math.isfinite(n)
    with pytest.raises(ValueError, match="share"):
        detection_events(spec, params, 0.0)


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_output_bounds_use_the_upper_length_and_state_every_field(relation: str) -> None:
    """``output_bounds`` (what ``dpstream plan`` shows for an output): the threshold is
    ``max(tau1(n), tau2(t_up)) + c`` with ``t_up = n + slack`` (the private length's upper
    bound), coverage adds ``lambda1``, and the failure probability is ``beta`` (replace) or
    ``2 beta`` (add/remove: the length counter can fail too)."""
    from sketches.continual.lazy_hh.detection import length_slack, output_bounds
    from sketches.continual.lazy_hh.spec import LazyHHSpec, derive_params

    # replace runs on the arrival clock (the tick clock refuses it for LazyHH, issue 19)
    kw: dict = ({"clock": "tick", "event_horizon": 10**4} if relation == "add_remove"
                else {"clock": "arrival", "horizon": 10**4})
    spec = LazyHHSpec(**{"k": 1, "k_tilde": 8, "horizon": 100, "eps": 1.0, "delta": 1e-6,
                         "relation": relation, **kw})  # type: ignore[arg-type]
    d = derive_params(spec, None, None).depth
    p = derive_params(spec, spec.sketch_calibration(d), d)
    th, n = p.thresholds, 5000.0
    up = n + length_slack(spec, p)
    b = output_bounds(spec, p, n)
    assert b == {"events": n, "threshold": th.threshold(n, up),
                 "coverage": th.threshold(n, up) + th.lambda1, "lower": -th.lambda1,
                 "upper": th.lambda2(up), "tau1": th.tau1(n), "tau2": th.tau2(up),
                 "gamma": p.gamma,
                 "failure_probability": spec.beta_value * (1 if relation == "replace" else 2)}
    if relation == "add_remove":
        assert up > n


def _arrival_power_of_two() -> tuple[LazyHHSpec, object]:
    """replace on the arrival clock with a horizon of 2**14 events: the search's cap is the
    horizon and its first midpoint 2**13, both powers of two, so ``share = threshold(n) / n``
    is exact and ``share * n == threshold(n)`` holds to the last bit at those ``n``."""
    spec = LazyHHSpec(k=4, k_tilde=32, horizon=2**14, eps=1.0, delta=1e-3, relation="replace",
                      clock="arrival")
    return spec, LazyHH(spec, ZeroNoise()).params


def _thr(spec: LazyHHSpec, params: object, n: float) -> float:
    return float(output_bounds(spec, params, n)["threshold"])  # type: ignore[arg-type]


def test_a_share_of_one_is_valid_and_a_share_above_one_is_refused() -> None:
    """``share`` is in (0, 1]: an item carrying all the traffic is a valid question (it is
    reported once ``n > threshold(n)``), a share above 1 is not."""
    spec, params = _arrival_power_of_two()
    n = detection_events(spec, params, 1.0)  # type: ignore[arg-type]
    assert n is not None and n > _thr(spec, params, n) and n - 1e-3 <= _thr(spec, params, n - 1e-3)
    for bad in (1.0 + 1e-9, 1.5, 2.0):
        with pytest.raises(ValueError, match="share"):
            detection_events(spec, params, bad)  # type: ignore[arg-type]


def test_an_item_that_only_reaches_the_threshold_at_the_last_event_is_never_reported() -> None:
    """A reported estimate must *exceed* the threshold (Alg. 6: ``est > tau``). An item whose
    count equals the threshold exactly at the epoch's last event (the cap) never passes it:
    None. Half an event above it at the cap, it passes before the cap."""
    spec, params = _arrival_power_of_two()
    cap = float(spec.horizon)
    tie = _thr(spec, params, cap) / cap
    assert tie * cap == _thr(spec, params, cap) and tie > min_detectable_share(spec, params)
    assert detection_events(spec, params, tie) is None  # type: ignore[arg-type]
    above = (_thr(spec, params, cap) + 0.5) / cap
    n = detection_events(spec, params, above)  # type: ignore[arg-type]
    assert n is not None and n <= cap
    assert above * n > _thr(spec, params, n)  # passes at the answer
    assert above * (n - 1e-3) <= _thr(spec, params, n - 1e-3)  # and not just before it


def test_the_answer_strictly_passes_the_threshold_when_a_midpoint_ties_it() -> None:
    """The search's first midpoint (half the cap) is where the item's count equals the
    threshold exactly: there it is not yet reported, so the answer lies just above it, at a
    point where it strictly passes (``share * n > threshold(n)``), within the search's
    tolerance ``max(1e-9 n, 1e-6)``."""
    spec, params = _arrival_power_of_two()
    mid = spec.horizon / 2
    share = _thr(spec, params, mid) / mid
    assert share * mid == _thr(spec, params, mid)
    assert share * spec.horizon > _thr(spec, params, spec.horizon)  # passes before the cap
    n = detection_events(spec, params, share)  # type: ignore[arg-type]
    assert n is not None
    assert share * n > _thr(spec, params, n)
    assert mid < n <= mid + max(1e-9 * n, 1e-6)


def test_under_add_remove_only_the_suppression_term_uses_the_upper_length() -> None:
    """add/remove: ``t_up = n + slack`` enters the suppression threshold ``tau2`` only; the
    count term ``tau1 = n / k`` uses the length estimate itself (= ``n`` here). With ``k = 1``
    and ``n`` large, ``tau1`` dominates: threshold = ``n / k + c`` exactly, below
    ``t_up / k + c`` by the slack."""
    spec = _tick_spec(k=1, k_tilde=8, unit_cap=3, event_horizon=10**9)
    params = LazyHH(spec, ZeroNoise()).params
    slack = length_slack(spec, params)
    assert slack > 1
    n = 1e8
    b = output_bounds(spec, params, n)
    assert b["tau1"] == n and b["tau2"] < n  # the count term dominates at this length
    assert b["threshold"] == n + 3
    assert b["coverage"] == n + 3 + params.thresholds.lambda1
