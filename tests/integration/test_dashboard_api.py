"""The dashboard server's follower and JSON API against the embedded broker (no browser)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import ClientSession

from tests.support.envelopes import enc, hh_env, publish, sketch_env
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
