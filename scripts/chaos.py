"""Chaos run: kill/restart the worker and the broker, pause the worker, inject bad records.

What runs: the embedded broker (Tansu, in-memory) on one fixed loopback port,
a zero-noise exact-count topology (``test_exact_counts``, 3 partitions, 10
shards) and worker subprocesses (``dpstream run``, static assignment).

The embedded broker keeps everything in memory, so a broker kill loses every
topic, checkpoint and release. The run is therefore split into *phases*, one
per broker life, and each phase is checked on its own:

1. start the broker on the fixed port (the same port in every phase);
2. ``--rounds`` rounds: start a worker (every other one with crash points that
   SIGKILL it inside the release path), produce good events with bad records
   and poison pills interleaved, then one fault: ``kill -9`` after a random
   time, or ``SIGSTOP`` for 1-3 s, ``SIGCONT``, and ``kill -9`` later;
3. a clean worker must publish, for every shard, exactly the counts of every
   good event produced in the phase (nothing lost, nothing counted twice), no
   ``(topology, shard, epoch, seq)`` may carry two payloads, and every bad
   record must be in the dead-letter topic (by partition and offset);
4. ``kill -9`` of the broker under the running worker: the worker must notice
   (``dpstream_broker_connected`` 0 / a log line naming the outage) and exit
   with a clear message after its outage limit, instead of crash-looping;
   events of the phase are gone with the broker (not counted as lost: they
   were checked in step 3). The next phase restarts the broker on the same
   port, with new topic names.

Usage: ``python scripts/chaos.py --phases 3 --rounds 12 [--seed 1]``; prints a
summary line and, with ``--out``, writes it as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.exact_mechanism import POISON  # noqa: E402
from tests.support.kafka import (  # noqa: E402
    conflicting_ids,
    create_topic,
    latest_by_shard,
    produce,
    read_all,
)
from tests.support.workers import TOPOLOGY, WorkerProcs  # noqa: E402
from worker.kafka.embedded import EmbeddedBroker, free_port  # noqa: E402

BAD = [
    b'{"router": "r0", "src": ', b"\xff\xfe\x00garbage\x81", b"[1, 2, 3]",
    b'{"router": "r0"}', b'{"router": "r0", "src": {"ip": 1}}', b"",
    b'{"router": "r1", "src": "\\ud800"}', b"[" * 3000,
    json.dumps({"router": "r2", "src": "x" * 5000}).encode(),
    json.dumps({"router": "r3", "src": POISON}).encode(),
]
"""Bad records and poison pills (each one is dead-lettered exactly at its offset)."""

WORKER_ENV = {"DPSTREAM_POISON_ATTEMPTS": "2", "DPSTREAM_BROKER_OUTAGE_LIMIT_S": "6"}


def _sleep_alive(proc, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)


async def _dead_letter_offsets(bootstrap: str, topic: str, want: int,
                               timeout: float) -> set[tuple[int, int]]:
    def enough(msgs: list) -> bool:
        return len({(json.loads(m.value)["partition"], json.loads(m.value)["offset"])
                    for m in msgs}) >= want

    msgs = await read_all(bootstrap, topic, enough, timeout)
    return {(json.loads(m.value)["partition"], json.loads(m.value)["offset"]) for m in msgs}


def run_phase(phase: int, port: int, args: argparse.Namespace, rng: random.Random,
              tmp: Path, stats: Counter[str]) -> bool:
    name = f"chaos{args.seed}p{phase}x{int(time.time())}"
    topo = tmp / f"{name}.yaml"
    topo.write_text(TOPOLOGY.format(
        name=name, partitions=3, encoding="json", tick_ms=100, epoch_ticks=10_000_000,
        every_ticks=1, mechanism="test_exact_counts", params="{}", shards="", unit_field="",
        unit_cap="", max_message_bytes=1_048_576))
    routers = [f"r{i}" for i in range(10)]
    exact: dict[str, Counter[str]] = {r: Counter() for r in routers}
    broker = EmbeddedBroker(port=port)
    broker.start()
    stats["broker_starts"] += 1
    bad_offsets_expected = 0
    procs = WorkerProcs(broker.bootstrap, tmp / name)
    (tmp / name).mkdir()
    ok = True
    try:
        asyncio.run(create_topic(broker.bootstrap, f"{name}-in", 3))
        for k in range(args.rounds):
            crash = "after_checkpoint:0.3,mid_publish:0.3" if k % 2 else ""
            proc = procs.start(topo, group=name, assignment="static", crash_points=crash,
                               extra_env=WORKER_ENV)
            chunk: list[tuple[bytes | None, bytes]] = []
            for i in range(args.events_per_round):
                r = rng.choice(routers)
                src = f"10.{rng.randrange(3)}.0.{int(rng.paretovariate(1.1)) % 100}"
                exact[r][src] += 1
                chunk.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
                if i % 97 == 0:
                    chunk.append((rng.choice(routers).encode(), rng.choice(BAD)))
                    bad_offsets_expected += 1
            asyncio.run(produce(broker.bootstrap, f"{name}-in", chunk))
            stats["good_events"] += args.events_per_round
            stats["bad_records"] += len(chunk) - args.events_per_round
            if rng.random() < 0.4:
                _sleep_alive(proc, rng.uniform(0.5, 2.0))
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGSTOP)
                    time.sleep(rng.uniform(1.0, 3.0))
                    os.kill(proc.pid, signal.SIGCONT)
                    stats["worker_pauses"] += 1
            _sleep_alive(proc, rng.uniform(1.5, 4.0))
            if proc.poll() is None:
                stats["worker_kills"] += 1
            else:
                stats["worker_self_kills"] += 1  # a crash point fired
            procs.kill9(proc)
            print(f"phase {phase + 1} round {k + 1}/{args.rounds}", flush=True)
        final = procs.start(topo, group=name, assignment="static", extra_env=WORKER_ENV)
        final_log = procs.log_dir / f"worker-{len(procs.procs) - 1}.log"
        deadline = time.monotonic() + 60  # the broker kill below must hit a running worker
        while ("worker started" not in final_log.read_text(errors="replace")
               and time.monotonic() < deadline and final.poll() is None):
            time.sleep(0.05)

        def done(msgs: list) -> bool:
            latest = latest_by_shard(msgs)
            return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                       for r, c in exact.items() if c)

        msgs = asyncio.run(read_all(broker.bootstrap, f"{name}-out", done, 180,
                                    give_up=lambda: final.poll() is not None))
        counted = Counter()
        for r, doc in latest_by_shard(msgs).items():
            counted[r] = sum(doc["payload"]["counts"].values())
        produced = {r: sum(c.values()) for r, c in exact.items()}
        stats["events_lost"] += sum(max(0, produced[r] - counted[r]) for r in produced)
        stats["events_counted_twice"] += sum(max(0, counted[r] - produced[r]) for r in produced)
        stats["conflicting_ids"] += len(conflicting_ids(msgs))
        stats["releases_read"] += len(msgs)
        exact_ok = done(msgs)
        dead = asyncio.run(_dead_letter_offsets(broker.bootstrap, f"{name}-dlq",
                                                bad_offsets_expected, 60))
        stats["bad_records_dead_lettered"] += len(dead)
        ok = exact_ok and not conflicting_ids(msgs) and len(dead) == bad_offsets_expected
        # the broker dies under a running worker: it must notice and exit clearly
        os.kill(broker.pid or 0, signal.SIGKILL)
        stats["broker_kills"] += 1
        t0 = time.monotonic()
        _sleep_alive(final, 60)
        clear = final.poll() is not None and final.returncode != 0 and (
            "unreachable for" in final_log.read_text(errors="replace"))
        stats["broker_kill_clear_exits"] += int(clear)
        stats["broker_kill_exit_seconds_max"] = max(stats["broker_kill_exit_seconds_max"],
                                                    int(time.monotonic() - t0))
        ok = ok and clear
        stats["crash_point_kills"] += procs.full_logs().count("crash point")
        stats["poison_skips"] += procs.full_logs().count("skipped as poison")
        if not ok:
            print(f"phase {phase + 1} FAILED: exact={exact_ok}, dead letters {len(dead)}/"
                  f"{bad_offsets_expected}, clear exit after broker kill={clear}; logs in "
                  f"{tmp / name}", flush=True)
        return ok
    finally:
        procs.close()
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", type=int, default=3, help="broker lives (kill -9 at the end)")
    ap.add_argument("--rounds", type=int, default=10, help="worker faults per phase")
    ap.add_argument("--events-per-round", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="write the summary as Markdown here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="dpstream-chaos-"))
    port = free_port()
    stats: Counter[str] = Counter()
    t0 = time.monotonic()
    ok = all([run_phase(p, port, args, rng, tmp, stats) for p in range(args.phases)])
    faults = (stats["worker_kills"] + stats["worker_self_kills"] + stats["worker_pauses"]
              + stats["broker_kills"])
    line = (f"{'PASS' if ok else 'FAIL'}: {args.phases} phases (broker on port {port}, "
            f"restarted {stats['broker_starts'] - 1} times on the same port), faults injected "
            f"{faults} (worker kill -9 {stats['worker_kills']}, worker self-kills at crash "
            f"points {stats['worker_self_kills']} (crash-point lines in the logs "
            f"{stats['crash_point_kills']}), SIGSTOP/SIGCONT {stats['worker_pauses']}, "
            f"broker kill -9 {stats['broker_kills']} with clear worker exit "
            f"{stats['broker_kill_clear_exits']}/{stats['broker_kills']}, slowest "
            f"{stats['broker_kill_exit_seconds_max']} s), good events {stats['good_events']}, "
            f"bad records {stats['bad_records']} (dead-lettered at distinct offsets "
            f"{stats['bad_records_dead_lettered']}, poison skips logged "
            f"{stats['poison_skips']}), events lost {stats['events_lost']}, events counted "
            f"twice {stats['events_counted_twice']}, conflicting (topology, shard, epoch, seq) "
            f"{stats['conflicting_ids']}, {time.monotonic() - t0:.0f} s; logs in {tmp}")
    print(line, flush=True)
    if args.out:
        Path(args.out).write_text(
            "# Chaos run (`scripts/chaos.py`)\n\n"
            f"`python scripts/chaos.py --phases {args.phases} --rounds {args.rounds} "
            f"--events-per-round {args.events_per_round} --seed {args.seed}`, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, 2 shared cores.\n\n"
            f"{line.split('; logs in')[0]}\n\n"
            "What is checked, per phase (one embedded-broker life; the broker is in-memory, "
            "so its kill ends the phase): exact zero-noise counts of every good event "
            "produced in the phase after all worker faults, no (topology, shard, epoch, seq) "
            "with two payloads, every bad record dead-lettered at its offset, and a clear "
            "exit of the worker after the broker's kill -9. See the script's docstring.\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
