"""The dashboard's pure model (worker.dashboard.state) and its helpers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from sketches.core.hashing import HashSpec
from sketches.errors import SpecError
from worker.dashboard.metrics_probe import MetricsProbe
from worker.dashboard.state import DashboardState, dumps, error_interval
from worker.release.envelope import is_private, privacy_note

SPEC = HashSpec(seed=5, depth=3, width=64)


def sketch(seq: int, counts: dict[str, float], **extra: Any) -> bytes:
    m = np.zeros((SPEC.depth, SPEC.width))
    if counts:
        b = SPEC.buckets(SPEC.item_keys(list(counts)))
        for j, item in enumerate(counts):
            m[np.arange(SPEC.depth), b[:, j]] += counts[item]
    env = {"schema_version": 1, "topology": "dst", "shard": "r1", "epoch": 2, "seq": seq,
           "eps": 1.0, "delta": 1e-6, "relation": "add_remove", "unit": "event",
           "rounds": seq + 1, "horizon": 10, "published_at": 1000 * (seq + 1),
           "item_type": "str", "error_bound": {"beta": 0.05, "noise": 3.0},
           "payload": {"kind": "sketch", "estimator": "min", "hash": SPEC.to_public(),
                       "matrix": m.tolist()}, **extra}
    return json.dumps(env).encode()


def hh(seq: int, items: list[tuple[str, float]], shard: str = "r1", **extra: Any) -> bytes:
    env = {"schema_version": 1, "topology": "hh", "shard": shard, "epoch": 1, "seq": seq,
           "eps": 1.0, "delta": 1e-6, "published_at": seq * 10,
           "payload": {"kind": "heavy_hitters", "threshold": 5.0 + seq,
                       "items": [{"item": i, "estimate": e} for i, e in items],
                       "error_bound": {"lower": -1.0, "upper": 2.0, "coverage": 9.0}},
           **extra}
    return json.dumps(env).encode()


def test_query_answers_from_latest_matrix_with_series_and_bound() -> None:
    st = DashboardState(history=3)
    for seq, c in enumerate([5, 9, 14, 20]):
        st.add(sketch(seq, {"10.0.0.0/24": c, "10.1.0.0/24": 1}))
    st.add(sketch(1, {"10.0.0.0/24": 99}))  # older, late: ignored
    ans = st.query_series("dst", "r1", "10.0.0.0/24")
    assert ans["estimate"] == 20.0 and (ans["low"], ans["high"]) == (17.0, 23.0)
    # history keeps the last 3 releases, oldest first
    assert ans["series"] == [[2000, 9.0], [3000, 14.0], [4000, 20.0]]
    with pytest.raises(KeyError):
        st.query_series("dst", "r9", "x")
    st.add(hh(0, [("a", 3.0)]))
    with pytest.raises(SpecError, match="sketch"):
        st.query_series("hh", "r1", "a")


def test_heavy_hitters_view_error_bars_threshold_and_series() -> None:
    st = DashboardState(history=10, top=2)
    st.add(hh(0, [("a", 6.0)]))
    st.add(hh(1, [("a", 8.0), ("b", 7.0), ("c", 6.5)]))
    st.add(b"not json")
    view = st.view()
    assert view["rejected"] == 1 and view["seen"] == 3
    card = view["topologies"][0]["shards"][0]
    h = card["heavy_hitters"]
    assert [r["item"] for r in h["items"]] == ["a", "b", "c"]
    # Lemma 6: lower <= est - f <= upper  =>  f in [est - upper, est - lower]
    assert (h["items"][0]["low"], h["items"][0]["high"]) == (6.0, 9.0)
    assert h["threshold"] == 6.0 and h["coverage"] == 9.0
    assert h["series"] == {"a": [[0, 6.0], [10, 8.0]], "b": [[0, None], [10, 7.0]]}
    assert h["threshold_series"] == [[0, 5.0], [10, 6.0]]
    json.loads(dumps(view))  # JSON-ready


def test_not_private_releases_are_flagged_per_shard_and_topology() -> None:
    st = DashboardState()
    st.add(hh(0, [], shard="r1"))
    st.add(hh(0, [], shard="r2", private=False, noise_kind="zero"))
    topo = st.view()["topologies"][0]
    assert topo["not_private"] is True
    flags = {c["shard"]: (c["private"], c["noise_kind"]) for c in topo["shards"]}
    assert flags == {"r1": (True, None), "r2": (False, "zero")}
    assert topo["releases"] == 2


@pytest.mark.parametrize(("env", "private"), [
    ({}, True), ({"private": True, "noise_kind": "secure"}, True),
    ({"private": False}, False), ({"noise_kind": "fast"}, False),
    ({"noise": "zero"}, False), ({"noise": {"kind": "fast"}}, False),
    ({"private": True, "noise_kind": "zero"}, False),  # either signal is enough
])
def test_is_private(env: dict[str, Any], private: bool) -> None:
    assert is_private(env) is private
    assert (privacy_note(env) == "") is private


def test_error_interval_kinds() -> None:
    assert error_interval(5.0, {"noise_abs_max": 2}) == (3.0, 7.0)
    assert error_interval(5.0, {"statement": "text only"}) == (None, None)
    assert error_interval(5.0, {"noise": float("nan")}) == (None, None)


def test_metrics_probe_rate_and_counter_reset() -> None:
    p = MetricsProbe()
    text = ('dpstream_events_in_total{{topology="a"}} {v}\n'
            'dpstream_consumer_lag_messages{{topology="a",partition="0"}} 3\n'
            'dpstream_consumer_lag_messages{{topology="a",partition="1"}} 4\n')
    p.update(text.format(v=100), now=1.0)
    out = p.update(text.format(v=300), now=3.0)
    assert out["a"] == {"events_total": 300.0, "events_per_s": 100.0, "lag_messages": 7.0}
    # a restarted worker starts from 0: no negative rate
    assert p.update(text.format(v=10), now=4.0)["a"]["events_per_s"] is None


def test_windowed_quantiles_release_becomes_the_last_window_table() -> None:
    """A windowed payload that is neither a sketch nor heavy hitters (dyadic_quantiles'
    shape, sketches/windowed/linear/dyadic_quantiles.py) is shown as its last window's table."""
    payload = {"kind": "quantiles", "bits": 32, "n_estimate": 1234.0,
               "quantiles": [{"phi": 0.5, "value": 80}, {"phi": 0.99, "value": 1500}],
               "error_bound": {"beta": 0.05, "rank_noise_abs_max": 40.0}}
    env = {"schema_version": 1, "topology": "q", "shard": "all", "epoch": 7, "seq": 0,
           "final": True, "mechanism": "dyadic_quantiles", "eps": 1.0, "delta": 1e-6,
           "payload": payload}
    st = DashboardState()
    st.add(json.dumps(env).encode())
    card = st.view()["topologies"][0]["shards"][0]
    assert card["final"] is True and card["kind"] == "quantiles"
    table = card["table"]
    assert table["name"] == "quantiles" and table["columns"] == ["phi", "value"]
    assert table["rows"] == [[0.5, 80], [0.99, 1500]]
    assert ["n_estimate", 1234.0] in table["fields"]
    assert table["error_bound"] == [["beta", 0.05], ["rank_noise_abs_max", 40.0]]


def test_metrics_probe_explains_a_zero_event_rate() -> None:
    """Messages still flowing while no event is ingested (the epoch's public event
    bound reached: the over-bound events are dropped) must be visible on the page,
    with the releases the worker published and its release-timer errors."""
    p = MetricsProbe()
    text = ('dpstream_events_in_total{{topology="h"}} 2000000\n'
            'dpstream_messages_in_total{{topology="h"}} {m}\n'
            'dpstream_events_over_horizon_total{{topology="h"}} {o}\n'
            'dpstream_releases_published_total{{topology="h",shard="r0"}} {r}\n'
            'dpstream_releases_published_total{{topology="h",shard="r1"}} {r}\n'
            'dpstream_timer_errors_total{{topology="h"}} 0\n')
    p.update(text.format(m=2_000_000, o=0, r=5), now=1.0)
    out = p.update(text.format(m=2_040_000, o=40_000, r=7), now=3.0)["h"]
    assert out["events_per_s"] == 0.0 and out["messages_per_s"] == 20_000.0
    assert out["over_horizon_total"] == 40_000.0
    assert out["releases_total"] == 14.0 and out["timer_errors_total"] == 0.0


def test_releases_published_this_epoch_come_from_the_envelopes() -> None:
    """A dashboard started late (replay window) has read few releases, but each
    release's seq says how many its shard published this epoch (seq 0 is the first)."""
    st = DashboardState()
    for shard, seq in (("r1", 41), ("r2", 9)):
        env = {"schema_version": 1, "topology": "hh", "shard": shard, "epoch": 3, "seq": seq,
               "eps": 1.0, "delta": 1e-6,
               "payload": {"kind": "heavy_hitters", "threshold": 5.0, "items": []}}
        st.add(json.dumps(env).encode())
    topo = st.view()["topologies"][0]
    assert topo["releases"] == 2 and topo["published_this_epoch"] == 52
    assert [c["published_this_epoch"] for c in topo["shards"]] == [42, 10]


def test_an_hour_of_heavy_hitters_but_a_bounded_number_of_matrices() -> None:
    """Defaults: 720 releases per shard (an hour of netmon's 5 s releases) for the
    heavy-hitter series, but only ``sketch_history`` released matrices (each is
    depth x width floats); the series sent to the page is thinned to ``max_points``,
    always ending at the latest release."""
    st = DashboardState()
    assert st.history == 720 and st.sketch_history == 120
    st = DashboardState(history=50, sketch_history=4, max_points=10)
    for seq in range(60):
        st.add(hh(seq, [("a", float(seq))]))
        st.add(sketch(seq, {"10.0.0.0/24": seq}))
    card = next(t for t in st.view()["topologies"] if t["topology"] == "hh")["shards"][0]
    series = card["heavy_hitters"]["series"]["a"]
    assert len(series) <= 10 and series[-1] == [590, 59.0] and series[0] == [100, 10.0]
    assert len(card["heavy_hitters"]["threshold_series"]) == len(series)
    ans = st.query_series("dst", "r1", "10.0.0.0/24")
    assert [v for _, v in ans["series"]] == [56.0, 57.0, 58.0, 59.0]


def test_public_mode_refuses_a_metrics_url(capsys) -> None:
    """Issue 19 item 8: a page for release readers never reads the metrics endpoint."""
    from worker.cli.dashboard import main

    assert main(["--public", "--metrics-url", "http://127.0.0.1:1/metrics",
                 "--topic", "t"]) == 2
    assert "--public" in capsys.readouterr().err


def test_public_dashboard_hides_record_counts() -> None:
    """A public page pointed at a non-release topic must not show how many records it
    read or rejected (exact private counts there)."""
    from worker.dashboard.server import Dashboard

    with pytest.raises(SpecError, match="public page"):
        Dashboard("127.0.0.1:1", ["t"], metrics_url="http://127.0.0.1:1/m", public=True)
    dash = Dashboard("127.0.0.1:1", ["t"], public=True)
    dash.state.add(b"not a release")

    async def body() -> dict:
        resp = await dash.api_state(None)  # type: ignore[arg-type]
        return json.loads(resp.text)

    view = asyncio.run(body())["view"]
    assert view["seen"] is None and view["rejected"] is None
