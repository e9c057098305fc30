"""Fixtures for tests against the real embedded broker (no mocks).

- ``broker``: one embedded Tansu broker per test session (``worker.kafka.embedded``).
- ``unique``: a fresh name prefix per test, so topics and groups never collide.
- ``make_topology``: writes a topology YAML for the test's topics.
- ``worker_proc``: starts ``python -m worker.cli.main run`` subprocesses (PID-tracked,
  killed at teardown) against the session broker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.workers import TOPOLOGY, WorkerProcs
from worker.kafka.embedded import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def unique() -> str:
    return "t" + uuid.uuid4().hex[:10]




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




@pytest.fixture
def workers(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[WorkerProcs]:
    procs = WorkerProcs(broker.bootstrap, tmp_path)
    yield procs
    procs.close()










