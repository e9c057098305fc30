"""ConfluentReleaseReader, `dpstream tail` and the demo producer's send_batch path,
against the real embedded broker. Releases are written straight to topics
(exact matrices), so every expected answer is exact."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.partitioner import DefaultPartitioner

from tests.support.envelopes import enc, hh_env, publish, sketch_env
from worker.kafka.demo_producer import run_producer
from worker.kafka.embedded import EmbeddedBroker
from worker.kafka.release_reader import FETCH_QUEUE_BACKOFF_MS, ConfluentReleaseReader

pytestmark = pytest.mark.broker
ROOT = Path(__file__).resolve().parents[2]


def at(env: dict, ms: int) -> dict:
    return dict(env, published_at=ms)


def test_latest_query_history(broker: EmbeddedBroker, unique: str) -> None:
    values = [
        enc(at(sketch_env("r1", 0, {"10.0.0.0/24": 5}), 1000)),
        enc(at(sketch_env("r1", 2, {"10.0.0.0/24": 40, "10.9.0.0/24": 7}), 3000)),
        enc(at(sketch_env("r1", 1, {"10.0.0.0/24": 20}), 2000)),   # late, older
        enc(at(sketch_env("r1", 2, {"10.0.0.0/24": 40, "10.9.0.0/24": 7}), 3000)),  # dup
        enc(at(sketch_env("r2", 0, {"10.0.0.0/24": 3}), 1500)),
        enc(at(hh_env("r1", 4, [("10.0.0.1", 50.0)]), 4000)),
        b"\xffgarbage",
        enc(dict(sketch_env("r3", 0, {}), schema_version=9)),
    ]
    asyncio.run(publish(broker.bootstrap, unique, values, partitions=3))
    with ConfluentReleaseReader(broker.bootstrap, unique) as rd:
        assert rd._conf()["fetch.queue.backoff.ms"] == FETCH_QUEUE_BACKOFF_MS
        assert rd.catch_up() == len(values)
        assert rd.shards() == [("dst", "r1"), ("dst", "r2"), ("hh", "r1")]
        assert rd.index.rejected == 2
        assert rd.latest("dst", "r1")["seq"] == 2
        assert rd.query("dst", "r1", "10.0.0.0/24") == 40.0
        assert rd.query("dst", "r1", ["10.0.0.0/24", "10.9.0.0/24"]).tolist() == [40.0, 7.0]
        assert rd.heavy_hitters("hh", "r1") == [{"item": "10.0.0.1", "estimate": 50.0}]
        with pytest.raises(KeyError, match="r9"):
            rd.latest("dst", "r9")
        hist = rd.history()
        ids = [(e["topology"], e["shard"], e["epoch"], e["seq"]) for e in hist]
        assert ids == [("dst", "r1", 1, 0), ("dst", "r1", 1, 1), ("dst", "r1", 1, 2),
                       ("dst", "r2", 1, 0), ("hh", "r1", 1, 4)]      # each release once
        assert [e["seq"] for e in rd.history(since=2000, topology="dst", shard="r1")] == [1, 2]
        assert rd.history(since=10**13) == []


def test_unknown_topic_names_the_fix(broker: EmbeddedBroker, unique: str) -> None:
    rd = ConfluentReleaseReader(broker.bootstrap, f"{unique}-missing")
    with pytest.raises(KeyError, match="--topic"):
        rd._open(True, timeout_s=1.0)


def test_follow_from_now_skips_the_past(broker: EmbeddedBroker, unique: str) -> None:
    """from_beginning=False: only releases published after the reader started.

    New releases are published until one arrives (the reader resolves the end
    offset asynchronously); every release it yields must be a new one."""
    old = [enc(sketch_env("r1", s, {"a": s})) for s in range(3)]
    asyncio.run(publish(broker.bootstrap, unique, old, partitions=1))
    with ConfluentReleaseReader(broker.bootstrap, unique, from_beginning=False) as rd:
        got: list[dict] = []
        seq = 10
        deadline = time.monotonic() + 60
        while not got:
            assert time.monotonic() < deadline, "no new release followed"
            asyncio.run(_append(broker.bootstrap, unique, enc(sketch_env("r1", seq, {"a": 1}))))
            seq += 1
            got = list(rd.follow(timeout_s=0.5, poll_s=0.1))
        assert all(e["seq"] >= 10 for e in got), [e["seq"] for e in got]
        assert rd.latest("dst", "r1")["seq"] >= 10


async def _append(bootstrap: str, topic: str, value: bytes) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await p.start()
    try:
        await (await p.send(topic, value, key=b"dst/r1"))
    finally:
        await p.stop()


def test_tail_follows_from_now_and_marks_non_private(broker: EmbeddedBroker,
                                                     unique: str) -> None:
    old = [enc(sketch_env("r1", 0, {"a": 1})), enc(dict(sketch_env("r1", 1, {"a": 1}),
                                                       private=False, noise_kind="zero"))]
    asyncio.run(publish(broker.bootstrap, unique, old, partitions=1))
    proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "tail", "--broker",
                             broker.bootstrap, "--topic", unique, "--count", "2",
                             "--seconds", "60"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        seq = 10
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            fast = dict(sketch_env("r1", seq, {"a": 1}), private=False, noise_kind="fast")
            asyncio.run(_append(broker.bootstrap, unique, enc(fast)))
            seq += 1
            time.sleep(0.3)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert len(lines) == 2, lines
    for line in lines:  # only new releases, each marked
        assert line.startswith("[NOT PRIVATE (fast noise)] dst/r1 epoch 1 seq "), line
        assert int(line.split(" seq ")[1].split()[0]) >= 10, line


def test_demo_producer_send_batch_partitions_like_send(broker: EmbeddedBroker,
                                                       unique: str) -> None:
    """send_batch must put each router in the partition the default partitioner
    (murmur2 of the key) picks, as worker/ingest/routing.py requires, and lose nothing."""
    from tests.support.kafka import create_topic

    n = 12_000
    asyncio.run(create_topic(broker.bootstrap, unique, 4))
    assert asyncio.run(run_producer(broker.bootstrap, unique, events=n, seed=1,
                                    routers=6)) == n

    async def read() -> list:
        c = AIOKafkaConsumer(unique, bootstrap_servers=broker.bootstrap, group_id=None,
                             auto_offset_reset="earliest")
        await c.start()
        out: list = []
        deadline = time.monotonic() + 60
        try:
            while len(out) < n and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=300)).values():
                    out.extend(msgs)
        finally:
            await c.stop()
        return out

    msgs = asyncio.run(read())
    assert len(msgs) == n
    for m in msgs:
        assert m.partition == DefaultPartitioner()(m.key, [0, 1, 2, 3], [0, 1, 2, 3])
        assert json.loads(m.value)["router"] == m.key.decode()


def test_tail_from_beginning_replays_and_json_keeps_lines_unchanged(broker: EmbeddedBroker,
                                                                   unique: str) -> None:
    old = [enc(sketch_env("r1", 0, {"a": 1})), enc(dict(sketch_env("r1", 1, {"a": 1}),
                                                       private=False, noise_kind="zero"))]
    asyncio.run(publish(broker.bootstrap, unique, old, partitions=1))
    proc = subprocess.run([sys.executable, "-m", "worker.cli.main", "tail", "--broker",
                           broker.bootstrap, "--topic", unique, "--from-beginning", "--json",
                           "--count", "2", "--seconds", "60"], cwd=ROOT, capture_output=True,
                          timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines() == [v.decode() for v in old]  # the bytes, unchanged
    err = proc.stderr.decode()
    assert "NOT PRIVATE (zero noise)" in err and "dst/r1 epoch 1 seq 1" in err, err
    assert "seq 0" not in err, err  # the private release is not marked
