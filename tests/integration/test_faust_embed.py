"""dpstream inside a Faust user's app (examples/faust_app.py), against the embedded broker.

The example app runs as `faust worker` in a subprocess with two zero-noise
LazyCMS topologies over the same events: one consumed by dpstream directly
(batch path), one fed by the app's own Faust agent through
`worker.runtime.faust_host.Feed.send_columnar` (agent path). Zero noise makes every
released count exact, so both paths must report exactly the produced counts.
The app's web server must serve dpstream's metrics and dashboard, and SIGTERM
must stop the whole process cleanly (final checkpoint logged).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.support.kafka import create_topic, produce
from worker.kafka.demo_producer import NetmonGenerator, json_messages
from worker.kafka.embedded import EmbeddedBroker, free_port

pytestmark = [pytest.mark.broker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]

TOPOLOGY = """\
name: {name}
production: false
input: {{topic: {topic}, partitions: 2, encoding: {encoding},
         fields: {{shard: router, item: dst_prefix}}}}
mechanism: {{name: lazy_cms, params: {{depth: 4, width: 1024, hash_seed: 11}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 200,
          epoch_ticks: 100000000}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 2, topic: {name}-out}}
dead_letter: {{topic: {name}-dlq}}
"""


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return bytes(resp.read())


def test_example_faust_app_runs_both_paths(broker: EmbeddedBroker, unique: str,
                                           tmp_path: Path) -> None:
    topo = tmp_path / "topologies"
    topo.mkdir()
    (topo / "batch.yaml").write_text(TOPOLOGY.format(name=f"{unique}-batch",
                                                     topic=f"{unique}-flows", encoding="json"))
    (topo / "agent.yaml").write_text(TOPOLOGY.format(name=f"{unique}-agent",
                                                     topic=f"{unique}-agent-in",
                                                     encoding="columnar"))
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-flows", 2))
    web = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAMPLE_BROKER=broker.bootstrap,
               EXAMPLE_WEB_PORT=str(web), EXAMPLE_SOURCE_TOPIC=f"{unique}-flows",
               EXAMPLE_TOPOLOGIES=str(topo), EXAMPLE_FEED_TOPOLOGY=f"{unique}-agent",
               EXAMPLE_APP_ID=f"{unique}-app", EXAMPLE_DATADIR=str(tmp_path / "faust-data"),
               DPSTREAM_GROUP_ID=f"{unique}-g",
               DPSTREAM_CHECKPOINT_TOPIC=f"{unique}-ck")
    env.pop("DPSTREAM_BROKER", None)  # the app's broker setting must be used
    log_path = tmp_path / "app.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "examples/faust_app.py", "worker", "-l", "info"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def logs() -> str:
        return log_path.read_text(errors="replace")[-5000:]

    base = f"http://127.0.0.1:{web}/dpstream"
    try:
        deadline = time.monotonic() + 90
        while True:  # the app's web server serves dpstream's metrics once it runs
            assert proc.poll() is None and time.monotonic() < deadline, logs()
            try:
                _get(f"{base}/metrics")
                break
            except OSError:
                time.sleep(0.3)
        ev = NetmonGenerator(routers=3, seed=5).chunk(3000)
        asyncio.run(produce(broker.bootstrap, f"{unique}-flows", json_messages(ev)))
        exact: dict[str, Counter[str]] = {}
        for r, p in zip(ev["router"].tolist(), ev["dst_prefix"].tolist(), strict=True):
            exact.setdefault(r, Counter())[p] += 1

        def topologies() -> list[str]:
            state = json.loads(_get(f"{base}/api/state"))
            return [t["topology"] for t in state["view"]["topologies"]]

        want = {f"{unique}-batch", f"{unique}-agent"}
        probe = {r: c.most_common(3) for r, c in exact.items()}
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, logs()
            done = True
            for name in want:
                for r, top in probe.items():
                    for item, count in top:
                        try:
                            ans = json.loads(_get(f"{base}/api/query?topology={name}"
                                                  f"&shard={r}&item={item}"))
                        except OSError:
                            done = False
                            break
                        if ans.get("estimate") != float(count):
                            done = False
            if done:
                break
            assert time.monotonic() < deadline, (topologies(), logs())
            time.sleep(1.0)
        metrics = _get(f"{base}/metrics").decode()
        for name in want:
            assert f'dpstream_events_in_total{{topology="{name}"}} 3000.0' in metrics, metrics
        assert b"<title>dpstream dashboard</title>" in _get(f"{base}/")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, logs()
        assert "worker stopped (owned partitions checkpointed)" in logs()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
