"""Crash-consistency soak (not in CI): many kill -9 points, exact final check.

Runs the embedded broker, a zero-noise exact-count topology and a worker
subprocess that is killed (SIGKILL) at random moments -- by this script while
it ingests, and by itself inside the release path (crash points) -- then
restarted, ``--kills`` times. At the end a clean worker must publish, for
every shard, exactly the counts of every event produced, and no
``(topology, shard, epoch, seq)`` may carry two payloads.

Usage: ``python scripts/soak_crash.py --kills 100 [--group] [--seed 1]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.kafka import (  # noqa: E402
    conflicting_ids,
    create_topic,
    latest_by_shard,
    produce,
    read_all,
)
from tests.support.workers import TOPOLOGY, WorkerProcs  # noqa: E402
from worker.kafka.embedded import EmbeddedBroker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--events-per-round", type=int, default=2000)
    ap.add_argument("--group", action="store_true", help="consumer-group mode (slower)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    name = f"soak{args.seed}x{int(time.time())}"
    tmp = Path(tempfile.mkdtemp(prefix="dpstream-soak-"))
    topo = tmp / "soak.yaml"
    topo.write_text(TOPOLOGY.format(
        name=name, partitions=3, encoding="json", tick_ms=100, epoch_ticks=10_000_000,
        every_ticks=1, mechanism="test_exact_counts", params="{}", shards="", unit_field="",
        unit_cap="", max_message_bytes=1_048_576))
    routers = [f"r{i}" for i in range(10)]
    exact: dict[str, Counter[str]] = {r: Counter() for r in routers}
    assignment = "group" if args.group else "static"
    t0 = time.monotonic()
    with EmbeddedBroker() as broker:
        asyncio.run(create_topic(broker.bootstrap, f"{name}-in", 3))
        procs = WorkerProcs(broker.bootstrap, tmp)
        try:
            for k in range(args.kills):
                crash = "after_checkpoint:0.1,mid_publish:0.1" if k % 2 else ""
                proc = procs.start(topo, group=name, assignment=assignment, crash_points=crash)
                chunk = []
                for _ in range(args.events_per_round):
                    r = rng.choice(routers)
                    src = f"10.{rng.randrange(3)}.0.{int(rng.paretovariate(1.1)) % 100}"
                    exact[r][src] += 1
                    chunk.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
                asyncio.run(produce(broker.bootstrap, f"{name}-in", chunk))
                # a group member needs a join (and, after a kill -9, the old member's
                # session timeout) before it owns anything: let it live longer
                life = rng.uniform(4.0, 14.0) if args.group else rng.uniform(0.5, 3.0)
                deadline = time.monotonic() + life
                while time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.01)
                procs.kill9(proc)
                print(f"kill {k + 1}/{args.kills}", flush=True)
            final = procs.start(topo, group=name, assignment=assignment)

            def done(msgs: list) -> bool:
                latest = latest_by_shard(msgs)
                return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                           for r, c in exact.items() if c)

            msgs = asyncio.run(read_all(broker.bootstrap, f"{name}-out", done, 180,
                                        give_up=lambda: final.poll() is not None))
            ok = done(msgs) and not conflicting_ids(msgs)
            crash_hits = procs.logs().count("crash point")
            print(f"{'PASS' if ok else 'FAIL'}: {args.kills} kills, "
                  f"{sum(sum(c.values()) for c in exact.values())} events, {len(msgs)} releases "
                  f"read, conflicting ids: {len(conflicting_ids(msgs))}, crash-point kills in "
                  f"log tails: {crash_hits}, {time.monotonic() - t0:.0f}s; logs in {tmp}")
            return 0 if ok else 1
        finally:
            procs.close()


if __name__ == "__main__":
    sys.exit(main())
