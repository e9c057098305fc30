"""Profile LazyHH's hot path (cProfile) in the two configurations of issue 12 target 5.

- ``netmon``: ``topologies/netmon.yaml``'s spec (k = 10, k~ = 64, tick clock,
  add/remove, secure discrete noise), IPv4 ``src_ip`` strings of the demo generator,
  the topology's sustained maximum of ``ceil(event_horizon / epoch_ticks)`` events per
  tick, 2^16-event batches (``benchmarks/bench_core.py``'s LazyHH rows);
- ``fig4``: the Fig. 4 point k = 128, k~ = 512, eps = 0.5 (replace, arrival clock,
  paper sigma, seeded noise) on a 5% thinning of the CAIDA minute
  (``benchmarks/bench_lazyhh.py``).

Each runs with the compiled path (``sketches/continual/lazy_hh/kernel.py``) and with
the numpy path it replaced (``_kernel = False`` and the counters' and candidate
set's ``_compiled = False``; identical releases), after a warm-up,
and writes the top functions by own time to ``results/lazyhh_profile.md``.

Usage::

    .venv/bin/python benchmarks/profile_lazyhh.py [--out results/lazyhh_profile.md]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec  # noqa: E402
from sketches.core.base import lookup  # noqa: E402
from sketches.core.candidates import CandidateSet  # noqa: E402
from sketches.core.noise import FastNoise, SecureNoise  # noqa: E402
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters  # noqa: E402
from sketches.privacy import Calibrator, Clock, Relation  # noqa: E402

_NAME = "caida2016_chicagoA_20160406-125912_dst16_counts.csv"  # docs/DATA.md
CAIDA = next((p / "shared" / "data" / _NAME for p in (ROOT.parent, ROOT.parent.parent)
              if (p / "shared" / "data" / _NAME).exists()), ROOT.parent / "shared" / "data" / _NAME)


def netmon_case(total: int = 1 << 20) -> Callable[[bool], int]:
    from worker.config.topology import load_topology
    from worker.kafka.demo_producer import NetmonGenerator

    entry = lookup("lazy_hh")
    spec = entry.build_spec(load_topology(ROOT / "topologies" / "netmon.yaml").spec_params())
    items = NetmonGenerator(routers=1, seed=0).chunk(total)["src_ip"]
    ticks = np.arange(total, dtype=np.int64) // -(-spec.event_horizon // spec.horizon)

    def run(kernel: bool) -> int:
        hh = entry.build(spec, SecureNoise())
        hh._kernel = kernel
        for a in range(0, total, 1 << 16):
            hh.update_batch(items[a:a + (1 << 16)], ticks=ticks[a:a + (1 << 16)])
        return total
    return run


def fig4_case(data: Path) -> Callable[[bool], int]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_lazyhh

    keys, counts = bench_lazyhh.load_counts(data)
    stream = bench_lazyhh.build_stream(keys, counts, 2026, 0.05)
    spec = LazyHHSpec(k=128, k_tilde=512, horizon=stream.size, eps=0.5, delta=1e-3,
                      relation=Relation.REPLACE, clock=Clock.ARRIVAL,
                      calibrator=Calibrator.PAPER, hash_seed=2026)

    def run(kernel: bool) -> int:
        hh = LazyHH(spec, FastNoise(2026))
        hh._kernel = kernel
        for a in range(0, stream.size, 1 << 20):
            hh.update_batch(stream[a:a + (1 << 20)])
        return int(stream.size)
    return run


def profile(run: Callable[[bool], int], kernel: bool, top: int) -> tuple[float, str]:
    # the numpy path: every compiled path off (LazyHH, lazy counters, candidate merge)
    LazyNoiseCounters._compiled = CandidateSet._compiled = kernel
    run(kernel)  # warm-up: compiled kernels load from the on-disk cache
    t0 = time.perf_counter()
    n = run(kernel)
    rate = n / (time.perf_counter() - t0)
    prof = cProfile.Profile()
    prof.enable()
    run(kernel)
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    body = [ln.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "") for ln in
            lines[start:start + top + 1]]
    return rate, "\n".join(body)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "lazyhh_profile.md")
    ap.add_argument("--data", type=Path, default=CAIDA)
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    cases: list[tuple[str, Callable[[bool], int]]] = [("netmon", netmon_case())]
    if args.data.exists():
        cases.append(("fig4", fig4_case(args.data)))
    out = ["# LazyHH hot-path profile (issue 12, target 5)", "",
           f"`benchmarks/profile_lazyhh.py`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
           f" load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
           " (2 shared cores). Rates are one timed run after a warm-up, without the"
           " profiler; tables are cProfile's top functions by own time (the profiler"
           " inflates per-call overhead). The numpy path is the code the compiled path"
           " replaced (`_kernel = False`, identical releases).", ""]
    for name, run in cases:
        for kernel in (False, True):
            rate, table = profile(run, kernel, args.top)
            label = "compiled path" if kernel else "numpy path (before)"
            print(f"{name} {label}: {rate / 1e6:.2f}M updates/s", flush=True)
            out += [f"## {name}: {label}, {rate / 1e6:.2f}M updates/s", "", "```", table,
                    "```", ""]
    out.append(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    args.out.write_text("\n".join(out) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
