"""Throughput and memory of the sketch core, against baselines measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_core.py [--quick]``; prints a table and
writes ``results/bench_core.md``.

Measured (wall clock, best of 3 repetitions, after one warm-up batch):

- baselines: a plain numpy Count-Min (``sketches.continual.plain.CMS``: hash + bincount,
  no privacy) and a straightforward per-event Python transcription of
  Algorithm 5 (what the vectorised LazySketch replaces);
- LazyCMS / LazyCS, d=4, w=1024, arrival clock, int items, FastNoise, batches of
  2^16 and 2^20 events, discrete (integer) and analytic (float) calibration;
- LazyCMS on the tick clock; IPv4 text items (including hashing);
- LazyCMS with SecureNoise (os.urandom, the production source);
- PunctualCMS (Alg. 3, the slow baseline) on a short stream;
- the real FIMI retail stream (skipped when ../shared/data is absent);
- LazyHH in the production configuration of ``topologies/netmon.yaml`` (its spec,
  SecureNoise, IPv4 ``src_ip`` strings of the demo generator as Python str objects,
  ``ceil(event_horizon / epoch_ticks)`` events per tick, 2^16-event batches), with the
  compiled hot path and, as the same-run baseline, the numpy path it replaced
  (identical releases; ``--only-lazyhh`` runs just these rows without writing);
- state memory per sketch vs the algorithmic minimum (d*w counters + one
  noise value per tree level per counter).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.continual.plain import CMS, PlainSketchSpec
from sketches.continual.punctual import PunctualCMS, PunctualSketchSpec
from sketches.core.base import lookup
from sketches.core.hashing import HASH_ALGORITHM
from sketches.core.noise import FastNoise, SecureNoise
from sketches.privacy import Calibrator, Clock, Relation

D, W = 4, 1024
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "fimi_retail.txt"
ROWS: list[tuple[str, str, str]] = []


def best_rate(run: Callable[[], int], reps: int = 3) -> float:
    """Events per second of ``run`` (returns events processed), best of ``reps``."""
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        n = run()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def record(name: str, rate: float, note: str = "") -> float:
    shown = f"{rate / 1e6:.2f}" if rate >= 1e5 else f"{rate / 1e6:.5f}"
    ROWS.append((name, shown, note))
    print(f"{name:66s} {shown:>9s} M/s  {note}", flush=True)
    return rate


def lazy_spec(calibrator: Calibrator = Calibrator.DISCRETE, clock: Clock = Clock.ARRIVAL,
              horizon: int = 2**30, cpt: int | None = None) -> LazySketchSpec:
    relation = Relation.REPLACE if clock is Clock.ARRIVAL else Relation.ADD_REMOVE
    return LazySketchSpec(depth=D, width=W, horizon=horizon, eps=1.0, delta=1e-6,
                          relation=relation, clock=clock, columns_per_tick=cpt,
                          calibrator=calibrator, hash_seed=1)


def stream_rate(make: Callable[[], object], items: np.ndarray, batch: int, total: int,
                ticks_per_batch: int = 0) -> float:
    def run() -> int:
        sk = make()
        done = 0
        tick = 0
        while done < total:
            chunk = items[done % len(items):][:batch]
            if len(chunk) < batch:
                chunk = items[:batch]
            if ticks_per_batch:
                ticks = tick + (np.arange(batch, dtype=np.int64) * ticks_per_batch) // batch
                sk.update_batch(chunk, ticks=ticks)  # type: ignore[attr-defined]
                tick += ticks_per_batch
            else:
                sk.update_batch(chunk)  # type: ignore[attr-defined]
            done += batch
        return done
    run()  # warm-up (allocator, tables)
    return best_rate(run)


def sequential_reference_rate(items: np.ndarray) -> float:
    """Per-event Python Alg. 5 (hash per event, push one column per event)."""
    spec = lazy_spec(Calibrator.ANALYTIC)
    h = spec.hash_spec
    noise = FastNoise(0)

    def run() -> int:
        p = np.zeros((D, W), dtype=np.int64)
        prefix = np.zeros((D, W), dtype=np.int64)
        node = np.zeros((24, D, W))
        rows = np.arange(D)
        for t, x in enumerate(items):
            b = h.buckets(h.item_keys(np.array([x])))[:, 0]
            p[rows, b] += 1
            pos = t % W
            r = t // W + 1
            if pos == 0:
                node[(r & -r).bit_length() - 1] = noise.gaussian(1.0, (D, W))
            prefix[:, pos] += p[:, pos]
            p[:, pos] = 0
        return len(items)
    return best_rate(run, reps=2)


NETMON = Path(__file__).resolve().parents[1] / "topologies" / "netmon.yaml"


def lazyhh_netmon_rows(total: int) -> None:
    """LazyHH with topologies/netmon.yaml's spec on its own item (src_ip) and tick rate."""
    from worker.config.topology import load_topology
    from worker.kafka.demo_producer import NetmonGenerator  # benchmark only: the demo's IPv4 pool

    entry = lookup("lazy_hh")
    spec = entry.build_spec(load_topology(NETMON).spec_params())
    items = NetmonGenerator(routers=1, seed=0).chunk(total)["src_ip"]  # object array of str
    per_tick = -(-spec.event_horizon // spec.horizon)  # the topology's sustained maximum
    ticks = np.arange(total, dtype=np.int64) // per_tick
    batch = 2**16
    depth = entry.build(spec, SecureNoise()).params.depth
    label = (f"LazyHH netmon.yaml (k={spec.k}, k~={spec.k_tilde}, d={depth}, tick, add/remove,"
             f" SECURE noise), IPv4 str, {per_tick} ev/tick, 2^16")
    rates = {}
    for kernel in (False, True):
        def run(kernel: bool = kernel) -> int:
            hh = entry.build(spec, SecureNoise())
            hh._kernel = kernel  # benchmark only: the numpy path as the same-run baseline
            for a in range(0, total, batch):
                hh.update_batch(items[a:a + batch], ticks=ticks[a:a + batch])
            return total
        run()  # warm-up (compiled kernels load from the on-disk cache)
        rates[kernel] = best_rate(run)
    record(f"baseline: {label}, numpy path", rates[False])
    record(f"{label}, compiled path", rates[True], f"{rates[True] / rates[False]:.2f}x numpy path")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller streams (smoke run)")
    ap.add_argument("--only-lazyhh", action="store_true",
                    help="run only the LazyHH netmon rows; print, do not write results")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results"
                                          / "bench_core.md"))
    args = ap.parse_args()
    total = 2**20 if args.quick else 2**23
    if args.only_lazyhh:
        lazyhh_netmon_rows(total // 8)
        return
    rng = np.random.default_rng(0)
    ints = rng.integers(0, 2**32, 2**20)
    ips = np.array([f"{a}.{b}.{c}.{d}" for a, b, c, d in rng.integers(0, 256, (2**18, 4))])
    ips_obj = ips.astype(object)
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"{os.cpu_count()} cpus (shared), events per measurement: {total}")

    base = record("baseline: plain numpy CMS (hash+bincount), 2^16 batches",
                  stream_rate(lambda: CMS(PlainSketchSpec(D, W, 1)), ints, 2**16, total))
    seq = record("baseline: per-event Python Alg. 5 (20k events)",
                 sequential_reference_rate(ints[:20_000]))
    lazy_rates = []
    for cal in (Calibrator.DISCRETE, Calibrator.ANALYTIC):
        spec = lazy_spec(cal)
        for batch in (2**16, 2**20):
            r = stream_rate(partial(LazyCMS, spec, FastNoise(1)), ints, batch, total)
            label = f"{cal.value}, batch 2^{batch.bit_length() - 1}"
            lazy_rates.append(record(f"LazyCMS arrival, int items, fast noise, {label}",
                                     r, f"{r / base:.2f}x plain CMS, {r / seq:.0f}x per-event"))
    r = stream_rate(lambda: LazyCS(lazy_spec(), FastNoise(1)), ints, 2**16, total)
    record("LazyCS arrival, int items, fast noise, discrete, batch 2^16", r)
    r = stream_rate(lambda: LazyCMS(lazy_spec(clock=Clock.TICK, cpt=64), FastNoise(1)),
                    ints, 2**16, total, ticks_per_batch=64)
    record("LazyCMS tick clock (64 cols/tick, 64 ticks/batch), discrete, 2^16", r)
    r = stream_rate(lambda: LazyCMS(lazy_spec(), FastNoise(1)), ips, 2**16, total // 4)
    record("LazyCMS arrival, IPv4 text (numpy str array) incl. hashing, 2^16", r)
    r = stream_rate(lambda: LazyCMS(lazy_spec(), FastNoise(1)), ips_obj, 2**16, total // 4)
    record("LazyCMS arrival, IPv4 text (Python str objects) incl. hashing, 2^16", r)
    r = stream_rate(lambda: LazyCMS(lazy_spec(), SecureNoise()), ints, 2**16, total // 2)
    record("LazyCMS arrival, int items, SECURE noise, discrete, 2^16", r)
    r = stream_rate(lambda: LazyCMS(lazy_spec(), SecureNoise()), ints, 2**20, total)
    record("LazyCMS arrival, int items, SECURE noise, discrete, 2^20", r)
    n_punct = 500 if args.quick else 2000
    pspec = PunctualSketchSpec(depth=D, width=W, horizon=2**20, eps=0.5, delta=1e-6)
    r = stream_rate(lambda: PunctualCMS(pspec, FastNoise(1)), ints, 100, n_punct)
    record("PunctualCMS (Alg. 3, slow baseline), fast noise, discrete", r,
           f"LazyCMS (discrete, 2^16) is {lazy_rates[0] / r:.0f}x faster")
    if DATA.exists():
        fimi = np.loadtxt(DATA, dtype=np.int64)
        r = stream_rate(lambda: LazyCMS(lazy_spec(), FastNoise(1)), fimi, 2**16,
                        len(fimi) - len(fimi) % 2**16)
        record("LazyCMS arrival on real FIMI retail stream, 2^16", r)
    else:
        print("real data not found, FIMI row skipped")
    lazyhh_netmon_rows(total // 8)

    mem_rows = []
    for horizon in (2**20, 2**26):
        sk = LazyCMS(lazy_spec(horizon=horizon), FastNoise(1))
        levels = sk._counters.levels
        minimum = 8 * D * W * (1 + levels)
        mem_rows.append((horizon, levels, sk.memory_bytes(), minimum))
        print(f"memory T=2^{horizon.bit_length() - 1}: {sk.memory_bytes()} B, minimum {minimum} B,"
              f" ratio {sk.memory_bytes() / minimum:.3f}")
    write_md(Path(args.out), total, mem_rows)


def write_md(path: Path, total: int, mem_rows: list[tuple[int, int, int, int]]) -> None:
    lines = [
        "# bench_core: sketch core throughput and memory",
        "",
        f"`benchmarks/bench_core.py`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())};"
        f" python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs"
        " shared with other jobs (numbers are best-of-3 wall clock and vary with load).",
        f" d={D}, w={W}, eps=1, delta=1e-6, {total} events per measurement unless noted.",
        "",
        f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        "| configuration | M events/s | note |",
        "|---|---:|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in ROWS],
        "",
        "Memory (state only: P, exact prefix, one noise value per level per counter;"
        " minimum = d*w*(1 + levels) 8-byte words):",
        "",
        "| horizon (events) | levels | memory_bytes | minimum | ratio |",
        "|---:|---:|---:|---:|---:|",
        *[f"| 2^{h.bit_length() - 1} | {lv} | {m} | {mn} | {m / mn:.3f} |"
          for h, lv, m, mn in mem_rows],
        "",
        "Real data: FIMI `retail` (anonymised Belgian retail market baskets, Brijs et al. 1999,"
        " via the FIMI repository), 908,576 items in original order.",
        "",
        f"Hash: `{HASH_ALGORITHM}` (strongly universal vector multiply-shift rows with"
        " independent per-row parameters, independent sign hash; str keys include the true"
        " byte length), see sketches/core/hashing.py.",
        "",
        "Noise cost: each update_batch call draws one d*w noise vector per tree level"
        " completed in the call (sketches/counters/gauss_bm.py), so larger batches amortise it;"
        " PunctualCMS draws d*w values per event by design (Alg. 3).",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
