"""Investigation: why is a plain Faust agent slow, and what ingests fast?

Starts the embedded broker, produces N small JSON messages to a topic with
explicit partitions, then measures consumers of the same topic, each in a
fresh subprocess (so no state leaks between variants):

- ``raw``: aiokafka ``getmany`` loop, counting records;
- ``faust``: a plain Faust agent that only counts (``async for``);
- ``faust-take``: the same agent with ``stream.take(N, within)``;
- ``faust-*``: Faust consumer settings variants (see ``VARIANTS``).

The worker's own consumer (``worker.runtime.worker.Worker``, batched ``getmany``) is
measured end to end against the ``raw`` baseline by ``benchmarks/bench_e2e.py``.

Throughput is measured from the first record received to the N-th one, so it
excludes group join (which Tansu makes slow) and app start-up; the start-up
time is printed separately.

Usage::

    .venv/bin/python benchmarks/bench_ingest_faust.py                # all variants
    .venv/bin/python benchmarks/bench_ingest_faust.py raw faust      # some variants
    .venv/bin/python benchmarks/bench_ingest_faust.py --n 50000 --profile faust

``--profile`` runs the consumer under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOPIC = "bench.events"
PARTITIONS = 4

# Faust app settings per variant (on top of the plain agent).
VARIANTS: dict[str, dict[str, Any]] = {
    "faust": {},
    "faust-take": {"_take": 10_000},
    "faust-poll": {"broker_max_poll_records": 10_000, "_take": 10_000},
    "faust-fetch": {
        "consumer_max_fetch_size": 64 * 1024 * 1024,
        "broker_max_poll_records": 10_000,
        "_take": 10_000,
    },
    "faust-buffer": {"stream_buffer_maxsize": 100_000, "_take": 10_000},
    "faust-nowait": {"stream_wait_empty": False, "_take": 10_000},
    "faust-commit": {
        "broker_commit_every": 100_000,
        "broker_commit_interval": 60.0,
        "_take": 10_000,
    },
    "faust-noack": {"_noack": True, "_take": 10_000},
    "faust-conc4": {"_concurrency": 4, "_take": 10_000},
    "faust-nosensor": {"_nosensor": True, "_take": 10_000},
    "faust-all": {
        "broker_max_poll_records": 10_000,
        "consumer_max_fetch_size": 64 * 1024 * 1024,
        "stream_buffer_maxsize": 100_000,
        "stream_wait_empty": False,
        "broker_commit_every": 100_000,
        "_noack": True,
        "_nosensor": True,
        "_take": 10_000,
    },
}


def message(i: int) -> bytes:
    """A small JSON network event (about 100 bytes)."""
    return json.dumps(
        {
            "router": f"r{i % 8}",
            "src": f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",
            "dst": f"192.168.{(i >> 8) & 255}.{i & 255}",
            "bytes": 64 + i % 1400,
            "packets": 1 + i % 7,
        },
        separators=(",", ":"),
    ).encode()


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with explicit partitions (Tansu auto-creates 4 otherwise)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    """Produce ``n`` messages with aiokafka batches; return seconds taken."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        enable_idempotence=False,
        linger_ms=5,
        max_batch_size=1024 * 1024,
        max_request_size=8 * 1024 * 1024,
    )
    await producer.start()
    t0 = time.perf_counter()
    try:
        futures = []
        part = 0
        batch = producer.create_batch()
        for i in range(n):
            key = f"r{i % 8}".encode()
            value = message(i)
            if batch.append(key=key, value=value, timestamp=None) is None:
                batch.close()
                futures.append(await producer.send_batch(batch, topic, partition=part))
                part = (part + 1) % partitions
                batch = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    raise RuntimeError("message larger than max_batch_size")
        batch.close()
        futures.append(await producer.send_batch(batch, topic, partition=part))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- consumers


def report(variant: str, n: int, t_start: float, t_first: float, t_last: float,
           first_len: int = 0) -> None:
    """Print one JSON line: the parent collects it.

    The clock starts when the first delivery arrives, so the records of that
    first delivery (``first_len``) are not counted in the rate.
    """
    out = {
        "variant": variant,
        "n": n,
        "startup_s": round(t_first - t_start, 3),
        "consume_s": round(t_last - t_first, 3),
        "msg_per_s": round((n - first_len) / max(t_last - t_first, 1e-9)),
    }
    print("RESULT " + json.dumps(out), flush=True)
    if _PROFILER is not None:
        _PROFILER.disable()
        _PROFILER.dump_stats(os.environ["BENCH_PROFILE"])


_PROFILER: cProfile.Profile | None = None


async def consume_raw(bootstrap: str, topic: str, n: int) -> None:
    """aiokafka getmany loop (no group: manual assignment of all partitions)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    t_start = time.perf_counter()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    await consumer.start()
    parts = consumer.partitions_for_topic(topic) or set()
    consumer.assign([TopicPartition(topic, p) for p in parts])
    await consumer.seek_to_beginning()
    seen = 0
    t_first = 0.0
    first_len = 0
    while seen < n:
        batches = await consumer.getmany(timeout_ms=1000, max_records=50_000)
        got = sum(len(r) for r in batches.values())
        if got and not t_first:
            t_first, first_len = time.perf_counter(), got
        seen += got
    report("raw", n, t_start, t_first, time.perf_counter(), first_len)
    await consumer.stop()


def consume_faust(bootstrap: str, topic: str, n: int, variant: str) -> None:
    """A plain Faust agent that only counts; ``os._exit`` once all N are seen."""
    import faust

    opts = dict(VARIANTS[variant])
    take = opts.pop("_take", 0)
    noack = opts.pop("_noack", False)
    concurrency = opts.pop("_concurrency", 1)
    nosensor = opts.pop("_nosensor", False)
    app = faust.App(
        f"bench-{variant}-{os.getpid()}",
        broker=f"kafka://{bootstrap}",
        store="memory://",
        web_enabled=False,
        topic_partitions=PARTITIONS,
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        consumer_auto_offset_reset="earliest",
        **opts,
    )
    if nosensor:
        app.sensors._sensors.clear()  # type: ignore[attr-defined]
    src = app.topic(topic, value_type=bytes, value_serializer="raw", partitions=PARTITIONS,
                    acks=not noack)
    t_start = time.perf_counter()
    state: dict[str, Any] = {"seen": 0, "first": 0.0, "first_len": 0}

    def done() -> None:
        report(variant, n, t_start, state["first"], time.perf_counter(), state["first_len"])
        os._exit(0)

    async def count(stream: Any) -> None:
        if noack:
            stream = stream.noack()
        if take:
            async for values in stream.take(take, within=0.2):
                if not state["first"]:
                    state["first"], state["first_len"] = time.perf_counter(), len(values)
                state["seen"] += len(values)
                if state["seen"] >= n:
                    done()
        else:
            async for _value in stream:
                if not state["first"]:
                    state["first"], state["first_len"] = time.perf_counter(), 1
                state["seen"] += 1
                if state["seen"] >= n:
                    done()

    app.agent(src, concurrency=concurrency)(count)
    worker = faust.Worker(app, loglevel="WARNING", quiet=True)
    worker.execute_from_commandline()


def child(args: argparse.Namespace) -> None:
    """Run one consumer variant in this (sub)process."""
    global _PROFILER
    if os.environ.get("BENCH_PROFILE"):
        _PROFILER = cProfile.Profile()
        _PROFILER.enable()
    if args.variant == "raw":
        asyncio.run(consume_raw(args.bootstrap, args.topic, args.n))
    else:
        consume_faust(args.bootstrap, args.topic, args.n, args.variant)


def run_child(bootstrap: str, variant: str, n: int, profile: bool, timeout: float,
              topic: str = TOPIC) -> dict:
    """Run a variant in a subprocess; return its RESULT dict (or a timeout marker)."""
    cmd = [sys.executable, __file__, "--child", variant, "--bootstrap", bootstrap, "--n", str(n),
           "--topic", topic]
    try:
        env = dict(os.environ)
        if profile:
            env["BENCH_PROFILE"] = f"/tmp/bench-ingest-{variant}.prof"
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "error": f"timeout after {timeout:.0f}s"}
    for line in (proc.stdout + proc.stderr).splitlines():
        if "RESULT {" in line:  # Faust redirects stdout into its log
            return dict(json.loads(line[line.index("RESULT {") + len("RESULT "):]))
    return {"variant": variant, "error": proc.stderr[-2000:]}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; as parent start the broker, produce, run each variant."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="*")
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--child")
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic", default=TOPIC)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args(argv)
    if args.child:
        args.variant = args.child
        child(args)
        return
    from worker.kafka.embedded import EmbeddedBroker

    variants = args.variants or ["raw", *VARIANTS]
    with EmbeddedBroker() as broker:
        asyncio.run(create_topic(broker.bootstrap, TOPIC, PARTITIONS))
        secs = asyncio.run(produce(broker.bootstrap, TOPIC, args.n, PARTITIONS))
        print(f"produced {args.n} msgs in {secs:.2f}s ({args.n / secs:,.0f} msg/s)", flush=True)
        for v in variants:
            res = run_child(broker.bootstrap, v, args.n, args.profile, args.timeout)
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
