"""Issue 23: ``dpstream demo`` runs its producer with compression and the input cap
``DPSTREAM_DEMO_INPUT_MB`` (the embedded broker keeps every record in memory)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from sketches.errors import SpecError
from worker.cli.run import _demo_extras
from worker.config.settings import Settings


def test_the_demo_passes_compression_and_the_cap(monkeypatch) -> None:
    import worker.kafka.demo_producer as dp

    seen: dict[str, Any] = {}

    async def fake(bootstrap: str, topic: str, **kw: Any) -> int:
        seen.update(kw, topic=topic)
        return 0

    monkeypatch.setattr(dp, "run_producer", fake)
    settings = Settings.from_env({"DPSTREAM_BROKER": "b:1", "DPSTREAM_DEMO_INPUT_MB": "64"})
    worker = SimpleNamespace(topologies=[SimpleNamespace(
        input=SimpleNamespace(topic="netflow", encoding="json"))])
    produce = _demo_extras(settings, 100.0)[0]
    asyncio.run(produce(worker))
    assert seen["topic"] == "netflow" and seen["max_bytes"] == 64 * 2**20
    assert seen["client_options"]["compression_type"] in ("zstd", "gzip")


def test_the_cap_setting() -> None:
    assert Settings.from_env({}).demo_input_mb == 512
    assert Settings.from_env({"DPSTREAM_DEMO_INPUT_MB": "0"}).demo_input_mb == 0
    with pytest.raises(SpecError, match="DPSTREAM_DEMO_INPUT_MB"):
        Settings.from_env({"DPSTREAM_DEMO_INPUT_MB": "-1"})
