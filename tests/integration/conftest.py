"""Fixtures for tests against the real embedded broker (no mocks).

- ``broker``: one embedded Tansu broker per test session (``worker.kafka.embedded``).
- ``unique``: a fresh name prefix per test, so topics and groups never collide.
- ``make_topology``: writes a topology YAML for the test's topics.
- ``worker_proc``: starts ``python -m worker.cli.main run`` subprocesses (PID-tracked,
  killed at teardown) against the session broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from worker.kafka.embedded import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "tests.integration.exact_mechanism"


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def unique() -> str:
    return "t" + uuid.uuid4().hex[:10]


TOPOLOGY = """\
name: {name}
production: false
input:
  topic: {name}-in
  partitions: {partitions}
  encoding: {encoding}
  max_message_bytes: {max_message_bytes}
  fields: {{shard: router, item: src{unit_field}}}
{shards}mechanism:
  name: {mechanism}
  params: {params}
privacy:
  eps: 1.0
  delta: 1.0e-6
  tick_ms: {tick_ms}
  epoch_ticks: {epoch_ticks}
{unit_cap}noise:
  kind: zero
  allow_insecure_noise: true
release:
  every_ticks: {every_ticks}
  topic: {name}-out
dead_letter:
  topic: {name}-dlq
"""


@pytest.fixture
def make_topology(tmp_path: Path, unique: str) -> Callable[..., Path]:
    def make(*, partitions: int = 2, encoding: str = "json", tick_ms: int = 200,
             epoch_ticks: int = 100_000, every_ticks: int = 2, allowed: list[str] | None = None,
             unit_cap: int | None = None, mechanism: str = "test_exact_counts",
             params: dict[str, Any] | None = None,
             max_message_bytes: int = 1_048_576) -> Path:
        text = TOPOLOGY.format(
            name=unique, partitions=partitions, encoding=encoding, tick_ms=tick_ms,
            epoch_ticks=epoch_ticks, every_ticks=every_ticks, mechanism=mechanism,
            params=json.dumps(params or {}), max_message_bytes=max_message_bytes,
            shards=f"shards: {{allowed: {json.dumps(allowed)}}}\n" if allowed else "",
            unit_field=", unit: user" if unit_cap else "",
            unit_cap=f"  unit_cap: {unit_cap}\n" if unit_cap else "")
        path = tmp_path / f"{unique}.yaml"
        path.write_text(text)
        return path

    return make


class WorkerProcs:
    """Worker subprocesses started by one test; all are killed at teardown."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap, self.log_dir = bootstrap, log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, topology: Path, *, group: str, assignment: str = "group",
              crash_points: str = "", extra_env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.update({
            "DPSTREAM_BROKER": self.bootstrap, "DPSTREAM_GROUP_ID": group,
            "DPSTREAM_ASSIGNMENT": assignment, "DPSTREAM_METRICS_PORT": "0",
            "DPSTREAM_PLUGINS": PLUGIN, "DPSTREAM_CRASH_POINTS": crash_points,
            "DPSTREAM_CHECKPOINT_TOPIC": f"{group}-checkpoints",
            "DPSTREAM_LOG_LEVEL": "INFO", "PYTHONPATH": str(ROOT),
        })
        env.update(extra_env or {})
        log = open(self.log_dir / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "run", "--topology",
                                 str(topology), *args], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def kill9(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def terminate(self, proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        return proc.wait(timeout=timeout)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-4000:]
                         for p in sorted(self.log_dir.glob("worker-*.log")))

    def full_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")
                         for p in sorted(self.log_dir.glob("worker-*.log")))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def workers(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[WorkerProcs]:
    procs = WorkerProcs(broker.bootstrap, tmp_path)
    yield procs
    procs.close()


# ---- helpers -------------------------------------------------------------
async def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]],
                  partition_by_key: bool = True) -> None:
    """Produce ``(key, value)`` records with the default partitioner (key = shard)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=k, value=v) for k, v in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Declare ``name`` with an explicit partition count (auto-creation would give 4)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def read_all(bootstrap: str, topic: str, until: Callable[[list[Any]], bool],
                   timeout: float, give_up: Callable[[], bool] = lambda: False) -> list[Any]:
    """Read ``topic`` from the beginning until ``until(records)`` holds (poll with deadline).

    ``give_up()`` true (e.g. the worker process died) ends the wait early.
    """
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest")
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for msgs in batches.values():
                out.extend(msgs)
            if until(out) or give_up():
                return out
    finally:
        await consumer.stop()
    return out


def latest_by_shard(msgs: list[Any]) -> dict[str, dict[str, Any]]:
    """Latest release per shard by (epoch, seq)."""
    best: dict[str, dict[str, Any]] = {}
    for m in msgs:
        doc = json.loads(m.value)
        cur = best.get(doc["shard"])
        if cur is None or (doc["epoch"], doc["seq"]) > (cur["epoch"], cur["seq"]):
            best[doc["shard"]] = doc
    return best


def conflicting_ids(msgs: list[Any]) -> list[tuple[Any, ...]]:
    """(topology, shard, epoch, seq) published with two different payloads."""
    seen: dict[tuple[Any, ...], bytes] = {}
    bad = []
    for m in msgs:
        doc = json.loads(m.value)
        rid = (doc["topology"], doc["shard"], doc["epoch"], doc["seq"])
        if rid in seen and seen[rid] != m.value:
            bad.append(rid)
        seen.setdefault(rid, m.value)
    return bad
