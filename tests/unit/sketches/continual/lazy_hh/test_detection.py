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
