"""Fixtures for tests against the real embedded broker (no mocks).

- ``broker``: one embedded Tansu broker per test session (``worker.kafka.embedded``).
- ``unique``: a fresh name prefix per test, so topics and groups never collide.
- ``make_topology``: writes a topology YAML for the test's topics.
- ``worker_proc``: starts ``python -m worker.cli.main run`` subprocesses (PID-tracked,
  killed at teardown) against the session broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka import (
    PLUGIN,
    ROOT,
)
from worker.kafka.embedded import EmbeddedBroker


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










