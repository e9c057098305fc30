"""The operator's page model (issue 23 item 5): staleness from times, bounded metrics
history, the shard overview, several workers, the collision term of the error bar."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from sketches.core.hashing import HashSpec
from worker.dashboard.health import Operations, Scrape, duration
from worker.dashboard.metrics_probe import MetricsProbe, prometheus_samples
from worker.dashboard.state import DashboardState, collision_term

SPEC = HashSpec(seed=5, depth=3, width=64)
T0 = 1_800_000_000_000  # wall-clock ms


def hh(shard: str, seq: int, at: int, items: list[tuple[str, float]] | None = None,
       **extra: Any) -> bytes:
    env = {"schema_version": 1, "topology": "hh", "shard": shard, "epoch": 1, "seq": seq,
           "eps": 1.0, "delta": 1e-6, "published_at": at, "clock": "tick", "rounds": seq,
           "payload": {"kind": "heavy_hitters", "threshold": 5.0,
                       "items": [{"item": i, "estimate": e} for i, e in items or []],
                       "error_bound": {"lower": -1.0, "upper": 2.0}}, **extra}
    return json.dumps(env).encode()


def sketch_env(counts: dict[str, float], bound: dict[str, Any], estimator: str = "min",
               ) -> bytes:
    m = np.zeros((SPEC.depth, SPEC.width))
    b = SPEC.buckets(SPEC.item_keys(list(counts)))
    for j, item in enumerate(counts):
        m[np.arange(SPEC.depth), b[:, j]] += counts[item]
    env = {"schema_version": 1, "topology": "dst", "shard": "r1", "epoch": 1, "seq": 0,
           "eps": 1.0, "delta": 1e-6, "published_at": T0, "item_type": "str",
           "error_bound": bound,
           "payload": {"kind": "sketch", "estimator": estimator, "hash": SPEC.to_public(),
                       "matrix": m.tolist(), "error_bound": bound}}
    return json.dumps(env).encode()


def test_releases_go_stale_after_three_release_intervals() -> None:
    """Today the last releases are shown as current forever: the view must say the
    releases stopped, and since when, once 3 intervals (from the topology's schedule)
    passed without one."""
    st = DashboardState()
    st.release_periods["hh"] = 2.0  # tick_ms 500 x every_ticks 4
    for seq in range(3):
        st.add(hh("r1", seq, T0 + 2000 * seq), now_ms=T0 + 2000 * seq)
    last = T0 + 4000
    fresh = st.view(now_ms=last + 5_900)
    topo = fresh["topologies"][0]
    assert topo["schedule"]["stale_after_s"] == 6.0
    assert topo["schedule"]["period_source"] == "topology file"
    assert not topo["schedule"]["stale"] and fresh["health"]["alerts"] == []
    late = st.view(now_ms=last + 105_000)
    assert late["health"]["stale"] is True
    (alert,) = late["health"]["alerts"]
    assert alert["kind"] == "releases" and alert["subject"] == "hh"
    assert alert["for_s"] == 105.0 and alert["since"] == last
    assert alert["for"] == "1 min 45 s" and "expected every 2 s" in alert["text"]


def test_the_release_interval_is_inferred_from_the_releases_when_not_configured() -> None:
    st = DashboardState(stale_floor_s=0)
    for seq in range(4):
        st.add(hh("r1", seq, T0 + 5000 * seq))
    sched = st.view(now_ms=T0 + 15_000)["topologies"][0]["schedule"]
    assert (sched["release_period_s"], sched["period_source"]) == (5.0, "releases read")
    assert sched["stale_after_s"] == 15.0
    assert st.view(now_ms=T0 + 15_000 + 15_001)["topologies"][0]["schedule"]["stale"]
    # one release only: the default applies
    one = DashboardState(default_stale_s=60)
    one.add(hh("r1", 0, T0))
    assert one.view(now_ms=T0 + 59_000)["health"]["alerts"] == []
    assert one.view(now_ms=T0 + 61_000)["health"]["alerts"][0]["kind"] == "releases"


def test_the_broker_and_stopped_workers_are_alerts_with_their_duration() -> None:
    st = DashboardState()
    st.ops.set_broker(None, T0)
    st.ops.set_broker("KafkaConnectionError: connection refused", T0 + 1000)
    st.ops.set_broker("KafkaConnectionError: connection refused", T0 + 3000)
    st.ops.record(T0, {"10.0.0.5:9108": Scrape(topologies={"hh": {"events_per_s": 1.0}},
                                               worker={"broker_connected": 1.0})})
    st.ops.record(T0 + 2000, {"10.0.0.5:9108": Scrape(error="ClientConnectorError")})
    assert [w["status"] for w in st.view(now_ms=T0 + 2000)["workers"]] == ["ok"]  # one miss
    st.ops.record(T0 + 4000, {"10.0.0.5:9108": Scrape(error="ClientConnectorError")})
    view = st.view(now_ms=T0 + 46_000, broker="b:9092")
    kinds = {a["kind"]: a for a in view["health"]["alerts"]}
    assert kinds["broker"]["for_s"] == 45.0 and "b:9092" in kinds["broker"]["text"]
    assert kinds["worker"]["for_s"] == 46.0 and "ClientConnectorError" in kinds["worker"]["text"]
    assert view["workers"][0]["status"] == "down"
    assert view["metrics"] == {}  # a stopped worker's last numbers are not shown as current
    st.ops.set_broker(None, T0 + 50_000)
    assert "broker" not in {a["kind"] for a in st.view(now_ms=T0 + 50_000)["health"]["alerts"]}


def test_a_worker_that_lost_the_broker_is_an_alert() -> None:
    ops = Operations()
    ops.record(T0, {"w": Scrape(topologies={}, worker={"broker_connected": 0.0})})
    (alert,) = ops.alerts(T0 + 30_000, "b:1")
    assert alert["kind"] == "broker" and alert["for_s"] == 30.0 and "w" in alert["text"]


def test_metrics_history_is_a_bounded_ring_with_dead_letter_rates_per_reason() -> None:
    ops = Operations(history=5)
    for k in range(12):
        views = {"t": {"events_per_s": float(k), "lag_messages": 10.0 * k,
                       "dead_letters": {"decode": 4.0 * k, "too_long": 0.0}}}
        ops.record(T0 + 2000 * k, {"w1": Scrape(topologies=views),
                                   "w2": Scrape(topologies=views)})
    assert len(ops.history) == 5
    h = ops.history_view()["t"]
    assert [t for t, _ in h["throughput"]] == [T0 + 2000 * k for k in range(7, 12)]
    assert [v for _, v in h["throughput"]] == [14.0, 16.0, 18.0, 20.0, 22.0]  # 2 workers
    assert h["lag"][-1][1] == 220.0
    assert h["dead_letters"]["decode"][-1][1] == 4.0  # 2 workers x 4 per 2 s
    assert "too_long" not in h["dead_letters"]  # exported at 0, never happened
    thin = Operations(history=100, max_points=4)
    for k in range(50):
        thin.record(T0 + k, {"w": Scrape(topologies={"t": {"events_per_s": 1.0}})})
    series = thin.history_view()["t"]["throughput"]
    assert len(series) == 4 and series[-1][0] == T0 + 49


def test_several_workers_are_summed_with_a_status_each() -> None:
    st = DashboardState()
    st.ops.expect("w3:9108", "http://w3:9108/metrics")
    st.ops.record(T0, {
        "w1:9108": Scrape(topologies={"hh": {"events_per_s": 100.0, "lag_messages": 5.0,
                                             "dead_letters": {"decode": 2.0}}}),
        "w2:9108": Scrape(topologies={"hh": {"events_per_s": 50.0, "lag_messages": 1.0,
                                             "dead_letters": {"decode": 1.0}}})})
    view = st.view(now_ms=T0)
    m = view["metrics"]["hh"]
    assert m["events_per_s"] == 150.0 and m["lag_messages"] == 6.0 and m["workers"] == 2
    assert m["dead_letters"] == {"decode": 3.0}
    assert {w["name"]: w["status"] for w in view["workers"]} == {
        "w1:9108": "ok", "w2:9108": "ok", "w3:9108": "waiting"}


def test_overview_lists_the_top_items_of_every_shard_and_the_quiet_ones() -> None:
    st = DashboardState(top=2)
    st.release_periods["hh"] = 1.0
    now = T0 + 60_000
    st.add(hh("r1", 5, now - 1000, [("a", 9.0), ("b", 8.0), ("c", 7.0)]))
    st.add(hh("r2", 5, now - 500, [("z", 30.0)]))
    st.add(hh("r3", 2, now - 40_000, [("q", 6.0)]))  # stopped 40 s ago
    topo = st.view(now_ms=now)["topologies"][0]
    rows = {r["shard"]: r for r in topo["overview"]}
    assert [i["item"] for i in rows["r1"]["top"]] == ["a", "b"]
    assert rows["r2"]["top"][0] == {"item": "z", "estimate": 30.0, "low": 28.0, "high": 31.0}
    assert rows["r3"]["quiet"] == "no release for 40 s" and topo["quiet"] == ["r3"]
    assert not topo["schedule"]["stale"]  # the topology as a whole still releases


def test_an_arrival_clock_shard_whose_rounds_stand_still_is_quiet() -> None:
    st = DashboardState()
    st.release_periods["hh"] = 1.0
    for k in range(10):  # rounds (events, arrival clock) stuck at 7 for 9 s
        env = json.loads(hh("r1", k, T0 + 1000 * k))
        env.update(clock="arrival", rounds=7)
        st.add(json.dumps(env).encode())
    row = st.view(now_ms=T0 + 9500)["topologies"][0]["overview"][0]
    assert row["quiet"] == "no events for 10 s"


def test_sketch_query_error_bar_includes_the_stated_collision_term() -> None:
    """Lemma 5: Count-Min's estimate overestimates by up to eta * t (t: L1 mass); the
    page showed only the noise term."""
    bound = {"beta": 0.05, "noise": 3.0, "eta": 0.1, "collision_term": "eta * t",
             "collision_depth_ok": True}
    st = DashboardState()
    st.add(sketch_env({"a": 40.0, "b": 60.0}, bound))
    ans = st.query_series("dst", "r1", "a")
    est = ans["estimate"]
    assert ans["collision"]["mass"] == 100.0 and ans["collision"]["value"] == 10.0
    assert ans["collision"]["one_sided"] is True
    assert (ans["low"], ans["high"]) == (est - 3.0 - 10.0, est + 3.0)
    assert (ans["noise_low"], ans["noise_high"]) == (est - 3.0, est + 3.0)
    # Count-Sketch: eta * sqrt(F2), both ways
    cs = collision_term({"eta": 0.5, "collision_term": "eta * sqrt(F2)"},
                        {"estimator": "median", "matrix": [[3.0, 4.0], [0.0, 5.0]]})
    assert cs is not None and cs["value"] == 2.5 and cs["one_sided"] is False
    # windowed DP sketches: L1 mass / width, in expectation
    w = collision_term({"noise_abs_max": 1.0, "collision_per_row": "L1 mass / width in "
                        "expectation"}, {"estimator": "min", "matrix": [[8.0, 0.0]] * 3})
    assert w is not None and w["value"] == 4.0 and w["holds"] == "in expectation"


def test_metrics_probe_reads_dead_letters_schedule_and_broker_gauge() -> None:
    p = MetricsProbe()
    out = p.update('dpstream_dead_letters_total{topology="t",reason="decode"} 3\n'
                   'dpstream_dead_letters_total{topology="t",reason="too_long"} 1\n'
                   'dpstream_release_period_seconds{topology="t"} 5\n'
                   'dpstream_broker_connected 0\n', now=1.0)
    assert out["t"]["dead_letters"] == {"decode": 3.0, "too_long": 1.0}
    assert out["t"]["release_period_s"] == 5.0 and p.worker == {"broker_connected": 0.0}
    st = DashboardState()
    st.add(hh("r1", 0, T0))
    st.ops.record(T0, {"w": Scrape(topologies={"hh": out["t"]}, worker=p.worker)})
    sched = st.view(now_ms=T0)["topologies"][0]["schedule"]
    assert (sched["release_period_s"], sched["period_source"]) == (5.0, "worker metrics")


def test_prometheus_answer_is_split_per_instance() -> None:
    ans = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "dpstream_events_in_total", "instance": f"w{i}:9108",
                    "job": "dpstream", "topology": "t"}, "value": [0, str(10 * i)]}
        for i in (1, 2)]}}
    per = prometheus_samples(ans)
    assert sorted(per) == ["w1:9108", "w2:9108"]
    assert MetricsProbe().update_samples(per["w2:9108"], 1.0)["t"]["events_total"] == 20.0
    with pytest.raises(ValueError, match="error"):
        prometheus_samples({"status": "error", "error": "bad query"})


def test_duration() -> None:
    assert [duration(s) for s in (0.4, 59, 105, 7200)] == ["0 s", "59 s", "1 min 45 s",
                                                           "2 h 0 min"]


def test_cli_takes_several_workers_prometheus_and_the_stale_interval(capsys) -> None:
    from worker.cli.dashboard import build_parser, main

    args = build_parser().parse_args(["--topic", "t", "--metrics", "http://w1:9108/metrics",
                                      "--metrics-url", "http://w2:9108/metrics",
                                      "--stale-after", "5", "--prometheus", "http://p:9090"])
    assert args.metrics == ["http://w1:9108/metrics", "http://w2:9108/metrics"]
    assert args.stale_after == 5.0 and args.prometheus == "http://p:9090"
    assert main(["--public", "--prometheus", "http://p:9090", "--topic", "t"]) == 2
    assert "--public" in capsys.readouterr().err


def test_several_metrics_urls_become_expected_workers() -> None:
    from worker.dashboard.server import Dashboard

    dash = Dashboard("127.0.0.1:1", ["t"], metrics_urls=["http://a:1/metrics",
                                                        "http://b:2/metrics"],
                     release_periods={"t": 2.5})
    assert [w["name"] for w in dash.state.ops.workers_view(None)] == ["a:1", "b:2"]
    assert dash.state.release_periods == {"t": 2.5}
