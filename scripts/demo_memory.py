"""Demo broker memory (issue 23, not in CI): RSS of the embedded broker under the demo.

Starts ``dpstream demo`` (default rate, default runner, free metrics and dashboard
ports) from ``--root`` (default: this checkout), samples the resident set size of
its embedded Tansu child (and of the demo process itself: the worker) from
``/proc`` every ``--every`` seconds for ``--seconds``, then reads the input
topic's low and high watermarks (records produced, records still kept) and the
checkpoint topic's record count, and prints one Markdown section with the numbers.

Usage: ``python scripts/demo_memory.py --seconds 600 --label after >> results/demo_memory.md``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _broker_pid(demo: int) -> int | None:
    for child in _children(demo):
        try:
            if "tansu" in Path(f"/proc/{child}/cmdline").read_text():
                return child
        except OSError:
            continue
    return None


def _bootstrap(broker: int) -> str:
    args = Path(f"/proc/{broker}/cmdline").read_text().split("\0")
    return args[args.index("--listener-url") + 1].removeprefix("tcp://")


async def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await c.start()
    try:
        parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or
                                                          await _parts(c, topic))]
        low = await c.beginning_offsets(parts)
        high = await c.end_offsets(parts)
        return sum(low.values()), sum(high.values())
    finally:
        await c.stop()


async def _parts(c: object, topic: str) -> set[int]:
    await c._client.force_metadata_update()  # type: ignore[attr-defined]
    return c.partitions_for_topic(topic) or set()  # type: ignore[attr-defined]


def _metric(port: int, name: str, how: str = "max") -> float:
    """``name`` from the demo's metrics: the max (or sum) over its labels (0 if unreadable)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") or line.startswith(name + " ")]
    return sum(values) if how == "sum" else max(values, default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--every", type=float, default=30)
    ap.add_argument("--label", default="")
    ap.add_argument("--root", default=str(ROOT), help="checkout to run the demo from")
    ap.add_argument("--topic", default="netflow")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    from worker.kafka.embedded import free_port

    env = dict(os.environ, PYTHONPATH=args.root)
    env.pop("DPSTREAM_BROKER", None)
    log = Path(tempfile.mkstemp(prefix="demo-memory-", suffix=".log")[1])
    metrics_port = free_port()
    cmd = [sys.executable, "-m", "worker.cli.main", "demo", "--metrics-port",
           str(metrics_port), "--dashboard-port", str(free_port())]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=args.root, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    samples: list[tuple[float, float, float]] = []
    try:
        deadline = time.monotonic() + 120
        broker = None
        while broker is None and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"demo exited early; see {log}")
            broker = _broker_pid(proc.pid)
            time.sleep(0.2)
        if broker is None:
            raise SystemExit(f"no broker child; see {log}")
        t0 = time.monotonic()
        while True:
            now = time.monotonic() - t0
            rss, wrss = _rss_mb(broker), _rss_mb(proc.pid)
            if rss is None or wrss is None or proc.poll() is not None:
                raise SystemExit(f"demo or broker ended at {now:.0f} s; see {log}")
            samples.append((now, rss, wrss))
            print(f"  t={now:5.0f} s broker RSS {rss:8.1f} MB, worker {wrss:8.1f} MB",
                  file=sys.stderr, flush=True)
            if now >= args.seconds:
                break
            time.sleep(min(args.every, max(0.0, args.seconds - now)))
        low, high = asyncio.run(_watermarks(_bootstrap(broker), args.topic))
        _, ck_records = asyncio.run(_watermarks(_bootstrap(broker), "dpstream-checkpoints"))
        applied = _metric(metrics_port, "dpstream_events_in_total")
        ck_bytes = _metric(metrics_port, "dpstream_checkpoint_written_bytes_total", "sum")
        releases = _metric(metrics_port, "dpstream_releases_published_total", "sum")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    (t_end, rss_end, wrss_end), (_, rss_start, wrss_start) = samples[-1], samples[0]
    mid = [(r, w) for t, r, w in samples if t >= t_end / 2]
    slope = (mid[-1][0] - mid[0][0]) / (t_end / 2) if len(mid) > 1 and t_end else 0.0
    wslope = (mid[-1][1] - mid[0][1]) / (t_end / 2) if len(mid) > 1 and t_end else 0.0
    print(f"\n### {args.label or 'run'} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(f"`dpstream demo` (default rate) for {t_end:.0f} s; broker RSS sampled every "
          f"{args.every:.0f} s.\n")
    print("| t (s) | broker RSS (MB) | worker RSS (MB) |\n|---:|---:|---:|")
    for t, r, w in samples:
        print(f"| {t:.0f} | {r:.1f} | {w:.1f} |")
    print(f"\nRSS {rss_start:.1f} MB -> {rss_end:.1f} MB (max {max(s[1] for s in samples):.1f}); "
          f"growth over the second half {slope:.2f} MB/s. Topic {args.topic!r}: {high} records "
          f"produced ({high / t_end:.0f}/s), {high - low} still kept (low watermark {low}); "
          f"the worker applied {applied:.0f} events per topology (both demo topologies "
          "read the same input). Worker RSS "
          f"{wrss_start:.1f} MB -> {wrss_end:.1f} MB (second half {wslope:.3f} MB/s); "
          f"{releases:.0f} releases published; checkpoints: {ck_bytes / 2**20:.1f} MiB "
          f"written, {ck_records} records on the broker's checkpoint topic.")
    cap = os.environ.get("DPSTREAM_DEMO_INPUT_MB")
    if cap is not None:
        print(f"\nDPSTREAM_DEMO_INPUT_MB={cap}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
