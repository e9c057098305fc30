"""Scale in workers: 1, 2 and 3 worker processes in one consumer group, 12 partitions.

One embedded broker; the demo producer writes N network-monitoring events (one JSON
message each, 24 routers keyed to 12 partitions). For each group size k the parent
starts k worker processes (``worker.app``, a LazyCMS topology like
``benchmarks/bench_e2e.py``, fresh group and checkpoint topic), waits until the group
has formed (the k members hold all 12 partitions between them), then lets them go.
Each child holds its first batch until the go signal, so the rebalance of the group's
formation is not timed, and then reports the events it applied, its first and last
batch (wall clock), and its CPU seconds (``resource.getrusage``) over that window; it
stops after 2 s without events. Total events/s = events applied by all members /
(last batch of any member - first batch of any member). The load average is sampled
before each case and at its end.

On a 2-core machine shared with the embedded broker (a separate process that also needs
a core to serve the fetches), the curve flattens after 1-2 workers: the table shows it.

Usage::

    .venv/bin/python benchmarks/bench_workers.py [--n 300000] [--workers 1 2 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTITIONS = 12
ROUTERS = 24
IDLE_S = 2.0

TOPOLOGY = """\
name: {name}
production: false
input:
  topic: {topic}
  partitions: {partitions}
  encoding: json
  fields: {{shard: router, item: src_ip}}
mechanism:
  name: lazy_cms
  params: {{depth: 4, width: 1024, hash_seed: 7}}
privacy:
  eps: 1.0
  delta: 1.0e-6
  tick_ms: 100
  epoch_ticks: 36000
noise:
  kind: zero
  allow_insecure_noise: true
release:
  every_ticks: 5
  topic: {name}-out
dead_letter:
  topic: {name}-dlq
"""


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def child(bootstrap: str, topology: str, group: str, status: Path, go: Path) -> None:
    """One worker process: report assignment, wait for ``go``, time ingestion."""
    from worker.app import create_worker
    from worker.settings import Settings

    settings = Settings.from_env({
        "DPSTREAM_BROKER": bootstrap, "DPSTREAM_GROUP_ID": group,
        "DPSTREAM_CHECKPOINT_TOPIC": f"{group}-ck", "DPSTREAM_METRICS_PORT": "0",
        "DPSTREAM_LOG_LEVEL": "WARNING"})
    worker = create_worker(settings, [topology])
    await worker.start()
    st: dict[str, Any] = {"events": 0, "msgs": 0, "first": None, "last": None, "cpu0": None}
    original = worker.engine.process_batch

    async def timed(topic: str, partition: int, records: Any) -> int:
        while not go.exists():  # hold the first batch until the whole group has formed
            await asyncio.sleep(0.02)
        if st["first"] is None:
            st["first"], st["cpu0"] = time.time(), _cpu()
        applied = await original(topic, partition, records)
        st["events"] += applied
        st["msgs"] += len(records)
        st["last"], st["cpu1"] = time.time(), _cpu()
        return applied

    worker.engine.process_batch = timed  # type: ignore[method-assign]
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            assigned = len(worker.consumer.assignment()) if worker.consumer else 0
            status.write_text(str(assigned))
            if st["last"] is not None and time.time() - st["last"] > IDLE_S:
                break
            await asyncio.sleep(0.1)
    finally:
        await worker.stop()
    cpu = (st["cpu1"] - st["cpu0"]) if st["first"] is not None else 0.0
    print("RESULT " + json.dumps({"events": st["events"], "msgs": st["msgs"],
                                  "first": st["first"], "last": st["last"], "cpu_s": cpu,
                                  "partitions": int(status.read_text())}), flush=True)


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Declare ``topic`` with explicit partitions before producing."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


def proc_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of process ``pid`` from /proc (0.0 if unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run_case(bootstrap: str, topic: str, k: int, tmp: Path, n: int,
             broker_pid: int | None = None) -> dict[str, Any]:
    """Run ``k`` workers in one group over the whole topic; aggregate their results."""
    name = f"bw{k}"
    topo = tmp / f"{name}.yaml"
    topo.write_text(TOPOLOGY.format(name=name, topic=topic, partitions=PARTITIONS))
    go = tmp / f"{name}.go"
    load_before = os.getloadavg()
    procs, statuses = [], []
    for i in range(k):
        status = tmp / f"{name}.{i}.status"
        status.write_text("0")
        statuses.append(status)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--child", "--bootstrap", bootstrap, "--topology",
             str(topo), "--group", f"{name}-g", "--status", str(status), "--go", str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline, stable_since = time.time() + 120, None
    while time.time() < deadline:  # the group has formed: k members hold all partitions
        counts = [int(s.read_text() or 0) for s in statuses]
        if sum(counts) == PARTITIONS and all(counts):
            stable_since = stable_since or time.time()
            if time.time() - stable_since > 1.0:
                break
        else:
            stable_since = None
        time.sleep(0.1)
    broker_cpu0, go_at = proc_cpu(broker_pid), time.time()
    go.write_text("go")
    results: list[dict[str, Any]] = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
        results.append(json.loads(line[7:]) if line else {"error": err[-1500:]})
    load_after = os.getloadavg()
    broker_cpu = proc_cpu(broker_pid) - broker_cpu0  # includes its idle tail (IDLE_S)
    broker_window = time.time() - go_at
    ok = [r for r in results if "error" not in r and r["first"] is not None]
    if len(ok) != k:
        return {"workers": k, "error": results, "load_before": load_before}
    span = max(r["last"] for r in ok) - min(r["first"] for r in ok)
    events = sum(r["events"] for r in ok)
    return {"workers": k, "events": events, "span_s": span, "eps": events / span,
            "per_worker": [{"eps": r["events"] / span, "events": r["events"],
                            "partitions": r["partitions"],
                            "cpu_s": r["cpu_s"], "cpu_pct": 100 * r["cpu_s"] / span}
                           for r in ok],
            "events_per_cpu_s": events / max(sum(r["cpu_s"] for r in ok), 1e-9),
            "broker_cpu_pct": 100 * broker_cpu / broker_window,
            "load_before": load_before, "load_after": load_after, "n": n}


def fmt_load(load: tuple[float, float, float]) -> str:
    """The three load averages."""
    return " ".join(f"{x:.2f}" for x in load)


def write_report(path: Path, rows: list[dict[str, Any]], n: int) -> str:
    """Markdown results (also returned for printing)."""
    base = next((r["eps"] for r in rows if r.get("workers") == 1 and "eps" in r), None)
    out = ["# Scale in workers (`benchmarks/bench_workers.py`)", "",
           f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this machine "
           f"({os.cpu_count()} cores, shared with other jobs and with the embedded broker). "
           f"{n:,} demo events, one JSON message each, on a {PARTITIONS}-partition topic "
           f"({ROUTERS} routers); LazyCMS d=4 w=1024, tick 100 ms; workers in one consumer "
           "group, timed from the first batch after the group formed to the last batch.", "",
           "| workers | events/s total | speed-up vs 1 | events/s per worker | partitions per "
           "worker | CPU per worker (% of one core) | events per worker CPU-second | broker CPU (% "
           "of one core) | load avg before | load avg after |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['workers']} | error: {str(r['error'])[:300]} | | | | | | | | |")
            continue
        pw = r["per_worker"]
        speed = f"{r['eps'] / base:.2f}" if base else "n/a"
        out.append(f"| {r['workers']} | {r['eps']:,.0f} | {speed} | "
                   + " / ".join(f"{w['eps']:,.0f}" for w in pw) + " | "
                   + " / ".join(str(w["partitions"]) for w in pw) + " | "
                   + " / ".join(f"{w['cpu_pct']:.0f}" for w in pw) + " | "
                   + f"{r['events_per_cpu_s']:,.0f} | {r['broker_cpu_pct']:.0f} | "
                   + f"{fmt_load(r['load_before'])} | {fmt_load(r['load_after'])} |")
    out += ["", "Events count every record applied (the group forms before the timed "
            "window, so nothing is applied twice). CPU is user+system time of each worker "
            "process over the timed window; *events per worker CPU-second* = all events / "
            "the workers' summed CPU, what one worker sustains on a core of its own; broker "
            "CPU is the embedded broker's share over the window plus the members' 2 s idle "
            "tail. With 2 cores shared by the broker (which "
            "serves every fetch) and the workers, more than ~2 busy processes cannot run "
            "at once: the total flattens and per-worker CPU falls as workers are added. "
            "On a machine with a core per worker plus the broker elsewhere, the total "
            "scales with workers up to the partition count (see docs/OPERATIONS.md, "
            "Sizing).", ""]
    text = "\n".join(out)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    """As parent: broker, produce, run each group size, write results/bench_workers.md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300_000, help="JSON events (one per message)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_workers.md"))
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--bootstrap")
    ap.add_argument("--topology")
    ap.add_argument("--group")
    ap.add_argument("--status")
    ap.add_argument("--go")
    args = ap.parse_args(argv)
    if args.child:
        asyncio.run(child(args.bootstrap, args.topology, args.group, Path(args.status),
                          Path(args.go)))
        return
    from worker.broker import EmbeddedBroker
    from worker.demo_producer import run_producer

    rows = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        topic = "bw-in"
        asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
        t0 = time.perf_counter()
        asyncio.run(run_producer(broker.bootstrap, topic, events=args.n, rate=None,
                                 encoding="json", seed=1, routers=ROUTERS))
        print(f"produced {args.n:,} in {time.perf_counter() - t0:.1f}s", flush=True)
        for k in args.workers:
            rows.append(run_case(broker.bootstrap, topic, k, Path(tmp), args.n, broker.pid))
            print(rows[-1], flush=True)
    print(write_report(Path(args.out), rows, args.n))


if __name__ == "__main__":
    main()
