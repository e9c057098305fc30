"""dpstream inside a Faust app: the agent path next to the batch path (issue 11).

Each variant is a Faust app (a subprocess running ``faust worker``) that
calls :func:`worker.runtime.faust_host.add_dpstream` with one zero-noise LazyCMS
topology, on the embedded broker:

- ``batch-json`` / ``batch-columnar``: dpstream consumes the source topic
  itself (batched ``getmany``; no agent);
- ``agent-json-take``: a Faust agent reads the JSON source with
  ``stream.take(5000, within=0.2)`` and sends one columnar message per router
  and batch with ``Feed.send_columnar_many``;
- ``agent-json-per-event``: a Faust agent sends each event with
  ``Feed.send`` (waits for the broker's ack per event: the low-rate path);
- ``agent-columnar``: a Faust agent reads a columnar source (5,000 events per
  message) and forwards each message with ``Feed.send_columnar``.

Events/s = events ingested by the topology (``dpstream_events_in_total`` on
the app's ``/dpstream/metrics``, polled every 0.1 s) from the first poll that
sees events to the one that sees all of them. Start-up and group joins are
excluded. Writes nothing; prints a Markdown table.

Usage: ``.venv/bin/python benchmarks/bench_faust_embed.py [--n 100000] [--m 1000000]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.kafka.demo_producer import (  # noqa: E402
    NetmonGenerator,
    columnar_messages,
    json_messages,
    send_batched,
)
from worker.kafka.embedded import EmbeddedBroker, free_port  # noqa: E402

TOPOLOGY = """\
name: bench-{variant}
production: false
input: {{topic: bench-{variant}-in, partitions: 4, encoding: {encoding},
         fields: {{shard: router, item: dst_prefix}}}}
mechanism: {{name: lazy_cms, params: {{depth: 4, width: 1024, hash_seed: 1}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 200,
          epoch_ticks: 100000000}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: bench-{variant}-out}}
dead_letter: {{topic: bench-{variant}-dlq}}
"""

APP = """\
import json, os
from collections import defaultdict
import faust
from worker.runtime.faust_host import add_dpstream

app = faust.App("bench-{variant}", broker="kafka://{broker}", store="memory://",
                web_host="127.0.0.1", web_port={web}, broker_session_timeout=6.0,
                broker_heartbeat_interval=1.0, consumer_auto_offset_reset="earliest",
                datadir="{datadir}")
dp = add_dpstream(app, ["{topology}"], dashboard=False)
MODE = "{mode}"
if MODE != "batch":
    source = app.topic("{source}", value_serializer="raw")

    @app.agent(source)
    async def feed_agent(stream):
        feed = dp.feed("bench-{variant}")
        if MODE == "per-event":
            async for raw in stream:
                await feed.send(json.loads(raw)["router"], raw)
        elif MODE == "take":
            async for values in stream.take(5000, within=0.2):
                by = defaultdict(list)
                for raw in values:
                    d = json.loads(raw)
                    by[d["router"]].append(d["dst_prefix"])
                await feed.send_columnar_many(by)
        else:
            async for raw in stream:
                d = json.loads(raw)
                await feed.send_columnar(d["shard"], d["item"])

if __name__ == "__main__":
    app.main()
"""

VARIANTS = {  # variant: (mode, topology encoding, source encoding)
    "batch-json": ("batch", "json", "json"),
    "agent-json-take": ("take", "columnar", "json"),
    "agent-json-per-event": ("per-event", "json", "json"),
    "batch-columnar": ("batch", "columnar", "columnar"),
    "agent-columnar": ("columnar", "columnar", "columnar"),
}


async def _produce(bootstrap: str, topic: str, msgs: list[tuple[bytes, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 4, 1)])
    finally:
        await admin.close()
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                         max_batch_size=1 << 20, max_request_size=8 << 20, linger_ms=10)
    await p.start()
    try:
        for i in range(0, len(msgs), 5000):
            await asyncio.gather(*await send_batched(p, topic, msgs[i:i + 5000]))
    finally:
        await p.stop()


def _events(url: str, name: str) -> float:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return -1.0
    needle = f'dpstream_events_in_total{{topology="bench-{name}"}} '
    for line in text.splitlines():
        if line.startswith(needle):
            return float(line[len(needle):])
    return 0.0


def run(variant: str, broker: str, source: str, n: int, tmp: Path) -> float:
    mode, enc, _ = VARIANTS[variant]
    topo = tmp / f"{variant}.yaml"
    name = variant
    if mode == "batch":  # the topology consumes the source topic itself
        topo.write_text(TOPOLOGY.format(variant=variant, encoding=enc).replace(
            f"bench-{variant}-in", source))
    else:
        topo.write_text(TOPOLOGY.format(variant=variant, encoding=enc))
    web = free_port()
    script = tmp / f"app_{variant.replace('-', '_')}.py"
    script.write_text(APP.format(variant=variant, broker=broker, web=web, topology=topo,
                                 datadir=tmp / f"{variant}-data",
                                 mode=mode, source=source))
    env = dict(os.environ, PYTHONPATH=str(ROOT), DPSTREAM_GROUP_ID=f"bench-{variant}-g",
               DPSTREAM_CHECKPOINT_TOPIC=f"bench-{variant}-ck")
    env.pop("DPSTREAM_BROKER", None)
    log = open(tmp / f"{variant}.log", "wb")
    proc = subprocess.Popen([sys.executable, str(script), "worker", "-l", "warn"], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{web}/dpstream/metrics"
    try:
        deadline = time.monotonic() + 600
        first: tuple[float, float] | None = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError((tmp / f"{variant}.log").read_text()[-3000:])
            e, t = _events(url, name), time.monotonic()
            if e > 0 and first is None:
                first = (t, e)
            if first is not None and e >= n:
                return (n - first[1]) / max(t - first[0], 1e-9)
            time.sleep(0.1)
        raise TimeoutError(f"{variant}: not all {n} events in 600 s")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000, help="JSON events")
    ap.add_argument("--m", type=int, default=1_000_000, help="columnar events")
    ap.add_argument("--per-event-n", type=int, default=5_000)
    ap.add_argument("variants", nargs="*", default=list(VARIANTS))
    args = ap.parse_args()
    gen = NetmonGenerator(routers=8, seed=0)
    rows = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        b = broker.bootstrap
        json_ev = gen.chunk(args.n)
        asyncio.run(_produce(b, "bench-src-json", json_messages(json_ev)))
        asyncio.run(_produce(b, "bench-src-json-small",
                             json_messages(gen.chunk(args.per_event_n))))
        col = []
        for _ in range(args.m // 5000):
            col.extend(columnar_messages(gen.chunk(5000), "dst_prefix"))
        asyncio.run(_produce(b, "bench-src-columnar", col))
        for v in args.variants:
            src_enc = VARIANTS[v][2]
            if src_enc == "columnar":
                source, n = "bench-src-columnar", args.m
            elif v == "agent-json-per-event":
                source, n = "bench-src-json-small", args.per_event_n
            else:
                source, n = "bench-src-json", args.n
            rate = run(v, b, source, n, tmp)
            rows.append((v, n, rate))
            print(f"{v}: {rate:,.0f} events/s ({n} events)", flush=True)
    print("\n| path | events | events/s ingested |\n|---|---|---|")
    for v, n, rate in rows:
        print(f"| {v} | {n:,} | {rate:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
