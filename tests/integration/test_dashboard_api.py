"""The dashboard server's follower and JSON API against the embedded broker (no browser)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from tests.support.browser import CHROMIUM
from tests.support.browser import chromium as _chromium
from tests.support.envelopes import enc, hh_env, publish, sketch_env
from tests.support.kafka import ROOT
from worker.dashboard.server import Dashboard
from worker.kafka.embedded import EmbeddedBroker

pytestmark = pytest.mark.broker


async def _wait_seen(dash: Dashboard, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while dash.state.seen < n:
        assert time.monotonic() < deadline, (dash.state.seen, dash.follower_error)
        await asyncio.sleep(0.1)


def test_replay_window_and_api(broker: EmbeddedBroker, unique: str) -> None:
    values = [enc(sketch_env("r1", s, {"10.0.0.0/24": s})) for s in range(30)]
    values.append(enc(hh_env("r2", 0, [("10.0.0.7", 12.0)])))
    asyncio.run(publish(broker.bootstrap, unique, values, partitions=1))

    async def main() -> None:
        # replay 5: only the last 5 records of the partition are read at start
        dash = Dashboard(broker.bootstrap, [unique], replay=5)
        port = await dash.serve("127.0.0.1", 0)
        try:
            await _wait_seen(dash, 5)
            await asyncio.sleep(0.5)
            assert dash.state.seen == 5
            base = f"http://127.0.0.1:{port}"
            async with ClientSession() as http:
                async with http.get(f"{base}/") as r:
                    assert r.status == 200 and "dpstream dashboard" in await r.text()
                async with http.get(f"{base}/api/state") as r:
                    state = json.loads(await r.text())
                topos = {t["topology"]: t for t in state["view"]["topologies"]}
                assert topos["dst"]["shards"][0]["seq"] == 29
                assert topos["hh"]["shards"][0]["heavy_hitters"]["items"][0]["item"] == "10.0.0.7"
                q = f"{base}/api/query?topology=dst&shard=r1&item=10.0.0.0/24"
                async with http.get(q) as r:
                    ans = json.loads(await r.text())
                assert ans["estimate"] == 29.0
                assert [v for _, v in ans["series"]] == [26.0, 27.0, 28.0, 29.0]
                async with http.get(f"{base}/api/query?topology=dst&shard=r9&item=x") as r:
                    assert r.status == 404 and "r9" in (await r.json())["error"]
                async with http.get(f"{base}/api/query?topology=hh&shard=r2&item=x") as r:
                    assert r.status == 400 and "sketch" in (await r.json())["error"]
                async with http.get(f"{base}/api/query?topology=dst") as r:
                    assert r.status == 400 and "shard" in (await r.json())["error"]
        finally:
            await dash.stop()
        # replay 0: everything
        full = Dashboard(broker.bootstrap, [unique], replay=0)
        await full.start_background()
        try:
            await _wait_seen(full, len(values))
        finally:
            await full.stop()

    asyncio.run(main())


def test_waits_for_a_topic_that_does_not_exist_yet(broker: EmbeddedBroker, unique: str) -> None:
    async def main() -> None:
        dash = Dashboard(broker.bootstrap, [unique])
        await dash.start_background()
        try:
            deadline = time.monotonic() + 20
            while not dash.follower_error:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            assert unique in dash.follower_error
            await publish(broker.bootstrap, unique, [enc(sketch_env("r1", 0, {"a": 1}))], 1)
            await _wait_seen(dash, 1)
            assert dash.follower_error is None
        finally:
            await dash.stop()

    asyncio.run(main())


def test_a_topic_created_after_another_was_assigned_is_found(broker: EmbeddedBroker,
                                                             unique: str) -> None:
    """The browser test's one failure (issue #11): the dashboard started while the
    worker had not yet declared its release topics, but another followed topic
    existed. Once the follower had assigned that one, aiokafka's metadata requests
    named only the assigned topics (``assign()`` sets the client's topic list), so
    topics created later never appeared: "waiting for topic(s)" forever."""
    first, later = f"{unique}-a", f"{unique}-b"

    async def main() -> None:
        await publish(broker.bootstrap, first, [enc(hh_env("r1", 0, [("x", 9.0)]))], 1)
        dash = Dashboard(broker.bootstrap, [first, later])
        await dash.start_background()
        try:
            await _wait_seen(dash, 1)  # the first topic is assigned and read
            assert dash.follower_error is not None and later in dash.follower_error
            await publish(broker.bootstrap, later, [enc(sketch_env("r1", 0, {"a": 1}))], 1)
            await _wait_seen(dash, 2)
            assert dash.follower_error is None
        finally:
            await dash.stop()

    asyncio.run(main())


def test_follower_reports_an_unreachable_broker_and_keeps_trying() -> None:
    """A follower error is shown on the page (``follower_error``) and retried, not a
    silently dead task (the page would go on showing "waiting" or stale data)."""
    from worker.kafka.embedded import free_port

    async def main() -> None:
        dash = Dashboard(f"127.0.0.1:{free_port()}", ["nowhere"],
                         client_options={"request_timeout_ms": 1000})
        await dash.start_background()
        try:
            for _ in range(2):  # reported, then reported again: the follower retries
                deadline = time.monotonic() + 30
                while "release follower" not in (dash.follower_error or ""):
                    assert time.monotonic() < deadline, dash.follower_error
                    await asyncio.sleep(0.1)
                assert "retrying" in (dash.follower_error or "")
                dash.follower_error = None
        finally:
            await dash.stop()

    asyncio.run(main())


async def _poll_state(base: str, ok: Any, what: str, timeout: float = 40.0) -> dict[str, Any]:
    """GET api/state until ``ok(state)``; fail with the last state on the deadline."""
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    async with ClientSession() as http:
        while time.monotonic() < deadline:
            async with http.get(f"{base}/api/state") as r:
                state = json.loads(await r.text())
            if ok(state):
                return state
            await asyncio.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:g} s; health {state.get('health')}, "
                f"workers {state.get('workers')}")


def _metrics_text(topology: str, events: int) -> str:
    return (f'dpstream_events_in_total{{topology="{topology}"}} {events}\n'
            f'dpstream_consumer_lag_messages{{topology="{topology}",partition="0"}} 3\n'
            f'dpstream_dead_letters_total{{topology="{topology}",reason="decode"}} '
            f'{events // 100}\n'
            'dpstream_broker_connected 1\n')


def test_stale_banner_when_a_worker_and_then_the_broker_stop(unique: str) -> None:
    """Issue 23: 1 min 45 s after the broker died the page showed the last releases as
    current, with no error. Two workers' metrics endpoints (real HTTP) and a broker of
    the test's own: the API must report a stopped worker (the other one still summed),
    then the broker and the releases stopped, each with how long."""
    from aiohttp import web

    from worker.kafka.embedded import free_port

    async def main() -> None:
        counts = {"w1": 0, "w2": 0}
        servers: dict[str, web.AppRunner] = {}
        urls = {}
        for name in counts:
            async def handler(request: web.Request, name: str = name) -> web.Response:
                counts[name] += 1000
                return web.Response(text=_metrics_text("hh", counts[name]))
            app = web.Application()
            app.add_routes([web.get("/metrics", handler)])
            runner = servers[name] = web.AppRunner(app)
            await runner.setup()
            port = free_port()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            urls[name] = f"http://127.0.0.1:{port}/metrics"
        own = EmbeddedBroker()
        own.start()
        stop_publishing = asyncio.Event()

        async def releases() -> None:
            seq = 0
            while not stop_publishing.is_set():
                env = hh_env("r1", seq, [("10.0.0.7", 12.0)])
                env["published_at"] = int(time.time() * 1000)
                await publish(own.bootstrap, unique, [enc(env)], partitions=1)
                seq += 1
                await asyncio.sleep(0.5)

        publisher = asyncio.create_task(releases())
        dash = Dashboard(own.bootstrap, [unique], metrics_urls=list(urls.values()),
                         metrics_every_s=0.5, release_periods={"hh": 1.0},
                         client_options={"request_timeout_ms": 2000})
        port = await dash.serve("127.0.0.1", 0)
        base = f"http://127.0.0.1:{port}"
        try:
            live = await _poll_state(base, lambda s: s["view"]["topologies"] and all(
                w["status"] == "ok" for w in s["workers"]) and len(s["workers"]) == 2
                and s["history"].get("hh", {}).get("throughput", [[0, None]])[-1][1],
                "both workers and the releases live")
            assert live["health"]["alerts"] == [] and live["health"]["stale"] is False
            assert live["metrics"]["hh"]["workers"] == 2
            assert live["metrics"]["hh"]["lag_messages"] == 6.0
            assert "decode" in live["history"]["hh"]["dead_letters"]
            # worker 2 stops
            await servers.pop("w2").cleanup()
            down = await _poll_state(base, lambda s: any(
                a["kind"] == "worker" for a in s["health"]["alerts"]), "worker 2 reported")
            status = {w["name"]: w["status"] for w in down["workers"]}
            w2 = urls["w2"].split("/")[2]
            assert status[w2] == "down" and status[urls["w1"].split("/")[2]] == "ok"
            assert down["metrics"]["hh"]["workers"] == 1
            # the broker stops (and with it the releases)
            stop_publishing.set()
            await publisher
            own.stop()
            gone = await _poll_state(base, lambda s: {"broker", "releases"} <= {
                a["kind"] for a in s["health"]["alerts"]}, "broker and releases reported")
            kinds = {a["kind"]: a for a in gone["health"]["alerts"]}
            assert own.bootstrap in kinds["broker"]["text"] and kinds["broker"]["for_s"] >= 0
            assert kinds["releases"]["for_s"] > 5 and "stopped" in kinds["releases"]["text"]
            assert gone["health"]["stale"] is True
            if CHROMIUM is not None:  # and the page says it (headless Chromium, polled)
                deadline = time.monotonic() + 60
                dom = ""
                while f"Broker {own.bootstrap} unreachable" not in dom:
                    assert time.monotonic() < deadline, dom[-3000:]
                    dom = (await asyncio.to_thread(
                        _chromium, "--virtual-time-budget=3000", "--dump-dom",
                        f"{base}/")).stdout.decode()
                assert 'id="stale-banner"' in dom and "Releases of hh stopped" in dom
                shot = (ROOT / "results" / "dashboard_broker_down.png"
                        if os.environ.get("DPSTREAM_UPDATE_SCREENSHOT")
                        else Path(tempfile.mkdtemp()) / "broker_down.png")
                await asyncio.to_thread(_chromium, "--virtual-time-budget=3000",
                                        "--window-size=1280,1100", f"--screenshot={shot}",
                                        f"{base}/")
                assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        finally:
            stop_publishing.set()
            publisher.cancel()
            await dash.stop()
            for runner in servers.values():
                await runner.cleanup()
            own.stop()

    asyncio.run(main())


def test_prometheus_as_the_source_one_worker_per_instance() -> None:
    """``--prometheus URL``: one instant query per round, split per ``instance``; an
    instance whose series disappear (its target is down) becomes a stopped worker."""
    from aiohttp import ClientSession as Http
    from aiohttp import web

    from worker.kafka.embedded import free_port

    instances = ["w1:9108", "w2:9108"]
    queries: list[str] = []

    async def query(request: web.Request) -> web.Response:
        queries.append(request.query["query"])
        return web.json_response({"status": "success", "data": {
            "resultType": "vector", "result": [
                {"metric": {"__name__": "dpstream_events_in_total", "job": "dpstream",
                            "instance": i, "topology": "hh"}, "value": [0, "100"]}
                for i in instances]}})

    async def main() -> None:
        app = web.Application()
        app.add_routes([web.get("/api/v1/query", query)])
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        dash = Dashboard("127.0.0.1:1", ["t"], prometheus_url=f"http://127.0.0.1:{port}/",
                         prometheus_job="dpstream")
        try:
            async with Http() as http:
                now = int(time.time() * 1000)
                dash.state.ops.record(now, await dash.scrape_round(http))
                view = dash.state.view(now_ms=now)
                assert [w["name"] for w in view["workers"]] == instances
                assert view["metrics"]["hh"]["events_total"] == 200.0
                assert queries[0] == '{__name__=~"dpstream_.*",job="dpstream"}'
                instances.pop()
                for k in (1, 2):
                    dash.state.ops.record(now + 2000 * k, await dash.scrape_round(http))
                view = dash.state.view(now_ms=now + 4000)
                status = {w["name"]: w["status"] for w in view["workers"]}
                assert status == {"w1:9108": "ok", "w2:9108": "down"}
                assert "Prometheus" in view["health"]["alerts"][0]["text"]
        finally:
            await runner.cleanup()

    asyncio.run(main())
