"""Any producer's placement: records off their shard's partition are forwarded, counted once.

A confluent-kafka ``Producer`` at default settings (librdkafka's ``consistent_random``
partitioner, CRC32 of the key) keyed by the shard, and one without keys (the shard is a
field of the event), 8,000 events each on a 4-partition topic with 8 shards: every
event is counted exactly once (zero noise, exact counts), also when the worker is killed
with SIGKILL mid-stream, including between "forwards flushed" and "checkpoint written"
(crash point ``after_forward``: the source re-forwards, the receiver skips the copies).
Before the repartition topic these records were dead-lettered as ``wrong_partition``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.kafka import create_topic, latest_by_shard, read_all

pytestmark = [pytest.mark.broker]

SHARDS = [f"s{i}" for i in range(8)]
HINT = "partitioner=murmur2_random"


def _events(rng: random.Random, n: int, exact: dict[str, Counter[str]]) -> list[tuple[str, bytes]]:
    out = []
    for _ in range(n):
        shard = rng.choice(SHARDS)
        src = f"10.2.{rng.randrange(4)}.{int(rng.paretovariate(1.2)) % 30}"
        exact[shard][src] += 1
        out.append((shard, json.dumps({"router": shard, "src": src}).encode()))
    return out


def _produce_confluent(bootstrap: str, topic: str, events: list[tuple[str, bytes]],
                       keyed: bool) -> None:
    """librdkafka at its defaults (partitioner consistent_random): keyed by the shard or
    with no key at all."""
    p = Producer({"bootstrap.servers": bootstrap})
    for shard, value in events:
        while True:
            try:
                if keyed:
                    p.produce(topic, key=shard.encode(), value=value)
                else:
                    p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(30) == 0


def _matches(exact: dict[str, Counter[str]]):
    def check(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(s in latest and latest[s]["payload"]["counts"] == dict(c)
                   for s, c in exact.items() if c)
    return check


def _wait_started(log_path: Path, proc, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_path.exists() and "worker started" in log_path.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def _no_wrong_partition(bootstrap: str, dlq: str) -> list[str]:
    msgs = asyncio.run(read_all(bootstrap, dlq, lambda m: False, 2))
    return [json.loads(m.value)["reason"] for m in msgs]


def test_default_librdkafka_and_unkeyed_producers_counted_once(
        broker, workers, make_topology, unique, tmp_path) -> None:
    """Two workers in one group (the range assignor co-partitions input and repartition
    topic), 8,000 keyed + 8,000 unkeyed events: all counted, none twice."""
    topo = make_topology(partitions=4, tick_ms=100, every_ticks=2)
    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 4))
    rng = random.Random(22)
    exact: dict[str, Counter[str]] = {s: Counter() for s in SHARDS}
    keyed, unkeyed = _events(rng, 8000, exact), _events(rng, 8000, exact)
    procs = [workers.start(topo, group=unique) for _ in range(2)]
    _produce_confluent(broker.bootstrap, topic, keyed, keyed=True)
    _produce_confluent(broker.bootstrap, topic, unkeyed, keyed=False)
    assert sum(sum(c.values()) for c in exact.values()) == 16_000
    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", _matches(exact), 120,
                                give_up=lambda: any(p.poll() is not None for p in procs)))
    assert _matches(exact)(msgs), workers.logs()[-4000:]
    assert "wrong_partition" not in _no_wrong_partition(broker.bootstrap, f"{unique}-dlq")
    logs = workers.full_logs()
    # one line per topic and worker naming the producer setting that avoids the hop
    assert 1 <= logs.count(HINT) <= 2, logs[-3000:]
    for p in procs:
        assert workers.terminate(p) == 0, workers.logs()


@pytest.mark.slow
def test_kill9_mid_stream_counts_each_forwarded_event_once(
        broker, workers, make_topology, unique, tmp_path) -> None:
    """SIGKILL at random moments and at ``after_forward`` (forwards flushed, source offset
    not yet checkpointed): re-forwarded copies are skipped by the receiver."""
    topo = make_topology(partitions=4, tick_ms=100, every_ticks=1)
    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 4))
    rng = random.Random(9)
    exact: dict[str, Counter[str]] = {s: Counter() for s in SHARDS}
    chunks = 8
    after_forward = 0
    for k in range(chunks):
        crash = "after_forward:0.3" if k % 2 else "after_forward:0.1,after_checkpoint:0.1"
        proc = workers.start(topo, group=unique, assignment="static", crash_points=crash,
                             args=("--no-faust",))
        log_path = tmp_path / f"worker-{len(workers.procs) - 1}.log"
        started = _wait_started(log_path, proc)
        _produce_confluent(broker.bootstrap, topic, _events(rng, 1000, exact), keyed=True)
        _produce_confluent(broker.bootstrap, topic, _events(rng, 1000, exact), keyed=False)
        if started:
            deadline = time.monotonic() + rng.uniform(0.2, 1.5)
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)  # the kill moment itself is what is random here
        workers.kill9(proc)
        after_forward += "crash point after_forward" in log_path.read_text(errors="replace")
    assert sum(sum(c.values()) for c in exact.values()) == 16_000
    final = workers.start(topo, group=unique, assignment="static", args=("--no-faust",))
    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", _matches(exact), 120,
                                give_up=lambda: final.poll() is not None))
    assert _matches(exact)(msgs), workers.logs()[-4000:]
    assert "wrong_partition" not in _no_wrong_partition(broker.bootstrap, f"{unique}-dlq")
    assert after_forward > 0, "no kill landed between forward and checkpoint"
    assert workers.terminate(final) == 0, workers.logs()


def test_event_time_forwarded_events_are_not_late(broker, workers, make_topology,
                                                   unique) -> None:
    """Event time: a forwarded event keeps its source timestamp's tick, and the receiving
    partition's watermark waits for the other partitions' marks, so the hop makes no
    event ``late`` (two workers in a group, 4 partitions, keyed + unkeyed)."""
    path = make_topology(partitions=4, tick_ms=200, every_ticks=2, allowed=SHARDS)
    path.write_text(path.read_text().replace(
        "  tick_ms: 200\n", "  tick_ms: 200\n  time: event\n  allowed_lateness_ms: 1500\n"))
    topic = f"{unique}-in"
    asyncio.run(create_topic(broker.bootstrap, topic, 4))
    procs = [workers.start(path, group=unique, args=("--no-faust",)) for _ in range(2)]
    rng = random.Random(5)
    exact: dict[str, Counter[str]] = {s: Counter() for s in SHARDS}
    # produce once the workers own the partitions (closed set: every shard publishes)
    started = asyncio.run(read_all(broker.bootstrap, f"{unique}-out",
                                   lambda m: len({json.loads(x.value)["shard"] for x in m})
                                   >= len(SHARDS), 60,
                                   give_up=lambda: any(p.poll() is not None for p in procs)))
    assert len(started) >= len(SHARDS), workers.logs()
    _produce_confluent(broker.bootstrap, topic, _events(rng, 2000, exact), keyed=True)
    _produce_confluent(broker.bootstrap, topic, _events(rng, 2000, exact), keyed=False)
    msgs = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", _matches(exact), 120,
                                give_up=lambda: any(p.poll() is not None for p in procs)))
    assert _matches(exact)(msgs), workers.logs()[-4000:]
    reasons = _no_wrong_partition(broker.bootstrap, f"{unique}-dlq")
    assert "late" not in reasons and "wrong_partition" not in reasons, Counter(reasons)
    for p in procs:
        assert workers.terminate(p) == 0, workers.logs()
