"""Scale in workers: 1, 2 and 3 worker processes in one consumer group, 12 partitions.

For each worker count k, on one embedded broker:

1. create a fresh 12-partition topic and let the demo producer write N JSON
   events (one per message, 48 routers so that every partition gets traffic);
2. start k worker processes (``worker.runtime.worker`` in this script's ``--child``
   mode, one consumer group) and wait until the group has settled: every
   partition assigned, every worker holding some, the same assignment for 2 s;
3. release them at once (a "go" file: each worker holds its first fetched
   batch until then, so no work is done before every worker is in place) and
   time until the workers together have applied all N events.

Reported per k: events/s in total (N / (last batch of any worker - go)), and
per worker its events, events/s over its own busy time, CPU seconds
(``resource.getrusage``: user + system) and CPU utilisation while busy, plus the
load average before and after. The machine has 2 cores shared with the broker
(and other jobs): beyond 2 workers the curve must flatten.

Writes ``results/bench_workers.md``.

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
TOPOLOGY = """\
name: {name}
production: false
input:
  topic: {name}-in
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
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def child(bootstrap: str, topology: str, group: str, stats: Path, go: Path) -> None:
    """One worker: report assignment and progress to ``stats`` (JSON) every 0.2 s."""
    from worker.config.settings import Settings
    from worker.runtime.worker import create_worker

    name = Path(topology).stem
    settings = Settings.from_env({
        "DPSTREAM_BROKER": bootstrap, "DPSTREAM_GROUP_ID": group,
        "DPSTREAM_CHECKPOINT_TOPIC": f"{name}-ck", "DPSTREAM_METRICS_PORT": "0",
        "DPSTREAM_LOG_LEVEL": "WARNING"})
    worker = create_worker(settings, [topology])
    st: dict[str, Any] = {"events": 0, "first": None, "last": None, "cpu0": None, "cpu": None,
                          "assigned": []}
    await worker.start()
    original = worker.engine.process_batch

    async def timed(topic: str, partition: int, records: Any) -> int:
        while not go.exists():  # hold the first batch until every worker is in the group
            await asyncio.sleep(0.05)
        if st["first"] is None:
            st["first"], st["cpu0"] = time.time(), _cpu()
        applied = await original(topic, partition, records)
        st["events"] += applied
        st["last"], st["cpu"] = time.time(), _cpu()
        return applied

    worker.engine.process_batch = timed  # type: ignore[method-assign]
    try:
        while True:
            assert worker.consumer is not None
            st["assigned"] = sorted(tp.partition for tp in worker.consumer.assignment())
            tmp = stats.with_suffix(".tmp")
            tmp.write_text(json.dumps(st))
            tmp.replace(stats)
            if worker.failed is not None:
                raise worker.failed
            await asyncio.sleep(0.2)
    finally:
        await worker.stop()


def _proc_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc
    except (OSError, ValueError):
        return None


async def _produce(bootstrap: str, topic: str, n: int) -> float:
    from benchmarks.bench_e2e import create_topic
    from worker.kafka.demo_producer import run_producer

    await create_topic(bootstrap, topic, PARTITIONS)
    t0 = time.perf_counter()
    await run_producer(bootstrap, topic, events=n, rate=None, encoding="json", seed=1,
                       routers=48)
    return time.perf_counter() - t0


def run_case(bootstrap: str, k: int, n: int, tmp: Path, timeout: float,
             broker_pid: int | None = None) -> dict[str, Any]:
    """Produce ``n`` events, run ``k`` workers in one group, return the measurements."""
    name = f"bw{k}-{os.getpid()}"
    topo = tmp / f"{name}.yaml"
    topo.write_text(TOPOLOGY.format(name=name, partitions=PARTITIONS))
    produce_s = asyncio.run(_produce(bootstrap, f"{name}-in", n))
    go = tmp / f"{name}.go"
    files = [tmp / f"{name}-{i}.json" for i in range(k)]
    procs = [subprocess.Popen([sys.executable, __file__, "--child", bootstrap, str(topo),
                               f"{name}-g", str(f), str(go)], cwd=ROOT) for f in files]
    load_before = os.getloadavg()
    try:
        deadline = time.time() + timeout
        stable_since, last_assign = None, None
        while time.time() < deadline:  # wait for a settled group
            sts = [_read(f) for f in files]
            if any(p.poll() is not None for p in procs):
                return {"workers": k, "error": "a worker exited early"}
            assign = [tuple(s["assigned"]) if s else () for s in sts]
            full = (all(assign) and sorted(p for a in assign for p in a)
                    == list(range(PARTITIONS)))
            if full and assign == last_assign:
                if stable_since is not None and time.time() - stable_since >= 2.0:
                    break
            else:
                stable_since = time.time() if full else None
            last_assign = assign
            time.sleep(0.2)
        else:
            return {"workers": k, "error": "the group did not settle"}
        t_go = time.time()
        broker0 = _proc_cpu(broker_pid)
        go.touch()
        while time.time() < deadline:
            sts = [_read(f) for f in files]
            if all(sts) and sum(s["events"] for s in sts if s) >= n:
                break
            time.sleep(0.1)
        else:
            return {"workers": k, "error": f"incomplete: {sts}"}
        load_after = os.getloadavg()
        broker1 = _proc_cpu(broker_pid)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    per = []
    for s, a in zip(sts, assign, strict=True):
        assert s is not None
        busy = (s["last"] - t_go) if s["last"] else 0.0
        cpu = (s["cpu"] - s["cpu0"]) if s["cpu"] is not None else 0.0
        per.append({"partitions": len(a), "events": s["events"],
                    "eps": s["events"] / busy if busy > 0 else 0.0, "busy_s": busy,
                    "cpu_s": cpu, "cpu_util": cpu / busy if busy > 0 else 0.0})
    wall = max(p["busy_s"] for p in per)
    broker_cpu = None if broker0 is None or broker1 is None else broker1 - broker0
    return {"workers": k, "events": n, "produce_s": produce_s, "wall_s": wall,
            "broker_cpu_s": broker_cpu,
            "eps": n / wall, "per": per, "load_before": load_before, "load_after": load_after}


def write_report(path: Path, rows: list[dict[str, Any]], n: int) -> str:
    """Markdown table (also returned)."""
    base = next((r["eps"] for r in rows if r.get("workers") == 1 and "eps" in r), None)
    out = ["# Scale in workers (`benchmarks/bench_workers.py`)", "",
           f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this machine "
           f"({os.cpu_count()} cores, shared with the embedded Tansu broker and other jobs). "
           f"One consumer group, a {PARTITIONS}-partition topic, {n:,} JSON events (one per "
           "message, 48 routers), LazyCMS d=4 w=1024, tick 100 ms; all workers released "
           "at once after the group settled.", "",
           "| workers | events/s total | speed-up vs 1 | per worker: partitions, events/s, "
           "CPU s, CPU utilisation while busy | broker CPU s | load avg before "
           "| load avg after |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['workers']} | error: {r['error']} | | | | | |")
            continue
        per = "; ".join(f"{p['partitions']} p, {p['eps']:,.0f}/s, {p['cpu_s']:.2f} s, "
                        f"{p['cpu_util']:.0%}" for p in r["per"])
        speed = f"{r['eps'] / base:.2f}x" if base else "n/a"
        lb = " ".join(f"{x:.2f}" for x in r["load_before"])
        la = " ".join(f"{x:.2f}" for x in r["load_after"])
        bc = "n/a" if r["broker_cpu_s"] is None else f"{r['broker_cpu_s']:.2f}"
        out.append(f"| {r['workers']} | {r['eps']:,.0f} | {speed} | {per} | {bc} | {lb} "
                   f"| {la} |")
    out += ["", "CPU utilisation = the worker's user+system CPU seconds / its busy wall time "
            "(100% = one core); broker CPU s = the embedded broker's CPU seconds over the "
            "same interval (from /proc). On 2 cores shared with the broker the total cannot grow "
            "much past 2 workers: the curve flattens (and each extra process adds its own "
            "fetch and event-loop overhead). On a machine with a core per worker plus the "
            "broker's own, throughput adds up per worker until the partition count.", ""]
    text = "\n".join(out)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    """Run 1..3 workers, write results/bench_workers.md."""
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, bootstrap, topo, group, stats, go = sys.argv
        asyncio.run(child(bootstrap, topo, group, Path(stats), Path(go)))
        return
    from worker.kafka.embedded import EmbeddedBroker

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300_000, help="JSON events per case")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_workers.md"))
    args = ap.parse_args(argv)
    rows = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        for k in args.workers:
            rows.append(run_case(broker.bootstrap, k, args.n, Path(tmp), args.timeout,
                                 broker.pid))
            print(rows[-1], flush=True)
    print(write_report(Path(args.out), rows, args.n))


if __name__ == "__main__":
    main()
