"""7b: bad input goes to the dead-letter topic with a reason; good counts unaffected."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.request
from collections import Counter

import pytest
from aiokafka import AIOKafkaProducer

from tests.support.kafka import create_topic, latest_by_shard, read_all
from worker.ingest.routing import partition_for
from worker.kafka.embedded import free_port

pytestmark = pytest.mark.broker

BAD = {
    "malformed_json": b'{"router": "r0", "src": ',
    "not_utf8": b"\xff\xfe\x00garbage\x81",
    "not_an_object": b"[1, 2, 3]",
    "missing_field": b'{"router": "r0"}',
    "wrong_type": b'{"router": "r0", "src": {"ip": 1}}',
    "oversized": json.dumps({"router": "r0", "src": "x" * 5000}).encode(),
    "unknown_shard": b'{"router": "r99", "src": "10.0.0.1"}',
    "empty": b"",
}


async def _produce(bootstrap: str, topic: str, good, bad_wrong_partition) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        futs = []
        for i, (k, v) in enumerate(good):
            futs.append(await producer.send(topic, key=k, value=v))
            if i % 50 == 0:  # bad records interleaved with good ones
                for raw in BAD.values():
                    futs.append(await producer.send(topic, key=b"r0", value=raw))
        k, v, p = bad_wrong_partition
        futs.append(await producer.send(topic, key=k, value=v, partition=p))
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def test_bad_input_dead_lettered(broker, workers, make_topology, unique) -> None:
    routers = ["r0", "r1", "r2", "r3"]
    topo = make_topology(partitions=2, allowed=routers, max_message_bytes=2000)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 2))
    port = free_port()
    proc = workers.start(topo, group=unique, extra_env={"DPSTREAM_METRICS_PORT": str(port)})
    exact = {r: Counter() for r in routers}
    good = []
    for i in range(400):
        r, src = routers[i % 4], f"10.0.{i % 7}.1"
        exact[r][src] += 1
        good.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
    wrong_p = 1 - partition_for("r0", 2)
    asyncio.run(_produce(broker.bootstrap, f"{unique}-in", good,
                         (b"r0", b'{"router": "r0", "src": "10.9.9.9"}', wrong_p)))
    # the record on the wrong partition is forwarded to r0's partition and counted there
    # (worker/ingest/repartition.py), no longer dead-lettered as wrong_partition
    exact["r0"]["10.9.9.9"] += 1
    n_bad = 8 * len(BAD)

    dlq = asyncio.run(read_all(broker.bootstrap, f"{unique}-dlq", lambda m: len(m) >= n_bad, 60,
                               give_up=lambda: proc.poll() is not None))
    reasons = Counter(json.loads(m.value)["reason"] for m in dlq)
    assert reasons == {r: 8 for r in BAD}, workers.logs()
    doc = json.loads(dlq[0].value)
    assert doc["schema_version"] == 1 and doc["topic"] == f"{unique}-in"
    assert {"partition", "offset", "detail", "value_b64"} <= set(doc)
    raw_by_reason = {json.loads(m.value)["reason"]: json.loads(m.value)["value_b64"]
                     for m in dlq}
    assert base64.b64decode(raw_by_reason["not_utf8"]) == BAD["not_utf8"]

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                   for r, c in exact.items())

    out = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60))
    assert done(out), workers.logs()
    assert proc.poll() is None, "the worker must keep running"
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline:
        text = _scrape(port)
        if f'dpstream_dead_letters_total{{reason="oversized",topology="{unique}"}} 8.0' in text:
            break
        time.sleep(0.1)
    for reason in BAD:
        assert f'dpstream_dead_letters_total{{reason="{reason}",topology="{unique}"}} 8.0' in text
    assert f'dpstream_events_in_total{{topology="{unique}"}} 401.0' in text
    assert f'dpstream_repartition_forwarded_total{{topology="{unique}"}} 1.0' in text
    assert f'dpstream_consumer_lag_messages{{partition="0",topology="{unique}"}}' in text
    assert f'dpstream_release_latency_seconds_count{{topology="{unique}"}}' in text
    assert f'dpstream_privacy_epsilon_per_epoch{{shard="r0",topology="{unique}"}} 1.0' in text
    assert workers.terminate(proc) == 0
