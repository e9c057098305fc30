"""Issue 23: the demo runs in bounded memory on the embedded broker.

Tansu's in-memory storage keeps every record (it accepts ``retention.ms`` but
never applies it, and DeleteRecords is not implemented: docs/OPERATIONS.md
"Demo memory"), so the demo producer bounds what it writes: zstd-compressed
batches and a byte cap, after which it stops by itself with one WARNING; and the
demo's worker keeps its checkpoints in memory instead of on that broker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.kafka import ROOT, create_topic, read_all
from tests.support.processes import wait_for
from worker.kafka.demo_producer import demo_producer_options, run_producer
from worker.kafka.embedded import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker


def test_demo_producer_stops_at_its_input_cap_with_compressed_batches(
        broker: EmbeddedBroker, unique: str, caplog) -> None:
    cap_mib = 1

    async def main() -> tuple[int, int]:
        await create_topic(broker.bootstrap, unique, 4)
        # events=None: forever, unless the cap stops it (the deadline fails the test)
        sent = await asyncio.wait_for(run_producer(
            broker.bootstrap, unique, events=None, rate=None, chunk_events=2000,
            **demo_producer_options(cap_mib)), 90)
        msgs = await read_all(broker.bootstrap, unique, lambda m: len(m) >= sent, 60)
        return sent, len(msgs)

    with caplog.at_level(logging.WARNING, logger="worker.kafka.demo_producer"):
        sent, readable = asyncio.run(main())
    assert sent == readable  # json: one record per event, all readable (zstd)
    # about 28 bytes per compressed event (135 uncompressed): past the cap by < a chunk
    assert 2**20 / 60 < sent < 2**20 / 60 + 20_000 + 2**20 / 10, sent
    stop = [r.getMessage() for r in caplog.records if "stopped after" in r.getMessage()]
    assert len(stop) == 1 and f"stopped after {sent} events" in stop[0]
    assert "DPSTREAM_DEMO_INPUT_MB" in stop[0]


def _metric(port: int, name: str) -> float:
    """Sum of ``name`` over its labels on the demo's /metrics (0 while unreadable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))


async def _end_offset(bootstrap: str, topic: str) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        return (await c.end_offsets([tp]))[tp]
    finally:
        await c.stop()


@pytest.mark.parametrize("runner", ["--faust", "--no-faust"])
def test_demo_keeps_its_checkpoints_in_memory_not_on_the_broker(tmp_path: Path,
                                                                runner: str) -> None:
    """The demo's broker never compacts, so checkpoints on it grew it ~0.25 MB/s for
    ever; the demo keeps them in the worker (it dies with the broker anyway)."""
    metrics = free_port()
    out = tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if k != "DPSTREAM_BROKER"}
    env.update(PYTHONPATH=str(ROOT), DPSTREAM_DEMO_INPUT_MB="1",
               DPSTREAM_STATE_DIR=str(tmp_path / "state"))
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli.main", "demo", runner, "--rate", "5000",
             "--metrics-port", str(metrics), "--dashboard-port", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def broker() -> str | None:
            m = re.search(rb"dpstream demo: broker (\S+);", out.read_bytes())
            return m.group(1).decode() if m else None

        assert wait_for(lambda: broker() is not None or proc.poll() is not None, 60)
        assert proc.poll() is None, out.read_text()
        # a release is published only after its checkpoint (checkpoint first, then publish)
        assert wait_for(lambda: _metric(metrics, "dpstream_releases_published_total") > 0
                        or proc.poll() is not None, 45, 0.5), out.read_text()[-3000:]
        assert _metric(metrics, "dpstream_checkpoint_written_bytes_total") > 0
        assert asyncio.run(_end_offset(str(broker()), "dpstream-checkpoints")) == 0
        assert "checkpoints are kept in memory" in out.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
