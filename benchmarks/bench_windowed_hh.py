"""Windowed heavy hitters on real data: PMG / merged MG / PAMG (paper 000) and TrieHH (001).

One window = the whole data set, released once (as the worker does at window end).
For each data set: recall and precision of the released top-k against the true top-k,
ARE over the true top-k (an item not released counts as estimate 0), memory of the
sketch state, update throughput (``update_batch`` on batches of 2^20 events). The
non-private baseline is the same structure with zero noise, measured in the same run.

Data (``/work/shared/data``, skipped cleanly when absent): CAIDA 2016 minute (packets
per destination /16), AGH flows thinned with ``rng.binomial(counts, 0.0147)`` (seed 0),
FIMI retail (the real item order). The network sets carry counts only: streams are the
keys repeated ``count`` times in a seeded random permutation (Misra-Gries depends on the
order, so its numbers are for that order). Noise: FastNoise (seeded, benchmark only).

Usage: ``python benchmarks/bench_windowed_hh.py [--data DIR] [--quick] [--write FILE]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sketches.core.noise import FastNoise, ZeroNoise  # noqa: E402
from sketches.windowed.misra_gries.misra_gries import PMG, PMGSpec  # noqa: E402
from sketches.windowed.misra_gries.pamg import PAMG, PAMGSpec, merge_mg  # noqa: E402
from sketches.windowed.triehh.triehh import TrieHH, TrieHHSpec  # noqa: E402

DATA = Path("/work/shared/data")
CAIDA = "caida2016_chicagoA_20160406-125912_dst16_counts.csv"
AGH = "agh2015061019_flow_pktcounts.npz"
FIMI = "fimi_retail.txt"
BATCH = 1 << 20
TOPK = 128
EPS, DELTA = 1.0, 1e-6


def caida_counts(data: Path) -> np.ndarray:
    """Packets per /16 prefix (index a*256+b), length 2^16."""
    rows = np.loadtxt(data / CAIDA, delimiter=",", skiprows=1, dtype=str)
    ab = np.array([p.split(".") for p in rows[:, 0]], dtype=np.int64)
    f = np.zeros(1 << 16, dtype=np.int64)
    np.add.at(f, ab[:, 0] * 256 + ab[:, 1], rows[:, 1].astype(np.int64))
    return f


def stream_from_counts(f: np.ndarray, seed: int) -> np.ndarray:
    items = np.repeat(np.arange(f.shape[0], dtype=np.int64), f)
    return items[np.random.default_rng(seed).permutation(items.shape[0])]


def feed(sk: Any, items: np.ndarray, ticks: np.ndarray | None = None) -> float:
    """Update in batches; return events per second."""
    t = time.perf_counter()
    for i in range(0, items.shape[0], BATCH):
        sk.update_batch(items[i:i + BATCH], ticks=None if ticks is None else ticks[i:i + BATCH])
    return items.shape[0] / (time.perf_counter() - t)


def score(rel: dict[str, Any], f: np.ndarray) -> tuple[float, float, float, float, int]:
    """(recall@k, precision@k, ARE over the true top-k, ARE over released, #released).

    ARE over the true top-k counts an unreleased item as estimate 0 (so it mixes
    misses and estimation error); ARE over released items measures the estimates only.
    """
    top = np.argsort(-f, kind="stable")[:TOPK]
    est = {int(d["item"]): float(d["estimate"]) for d in rel["items"]}
    ranked = sorted(est, key=lambda x: -est[x])[:TOPK]
    truth = set(top.tolist())
    hit = len(truth & set(ranked))
    are = float(np.mean([abs(est.get(int(x), 0.0) - f[x]) / f[x] for x in top]))
    rel_are = float(np.mean([abs(v - f[x]) / max(f[x], 1) for x, v in est.items()])) if est \
        else float("nan")
    return hit / TOPK, hit / max(len(ranked), 1), are, rel_are, len(est)


Row = tuple[str, float, tuple[float, float, float, float, int], int, float]


def run(label: str, make: Callable[[Any], Any], noise: Any, items: np.ndarray, f: np.ndarray,
        eps: float, ticks: np.ndarray | None = None) -> Row:
    sk = make(noise)
    rate = feed(sk, items, ticks)
    mem = sk.memory_bytes()
    return label, eps, score(sk.release(), f), mem, rate


def dataset_rows(name: str, items: np.ndarray, f: np.ndarray, universe: int,
                 bits: int, levels: int) -> list[Row]:
    rows: list[Row] = []
    fast = FastNoise(1)
    for k in (128, 1024, 8192):
        spec = PMGSpec(k=k, eps=EPS, delta=DELTA)
        rows.append(run(f"PMG Alg.2 geometric, k={k}", partial(PMG, spec), fast, items, f, EPS))
        rows.append(run(f"  same, zero noise (MG baseline), k={k}", partial(PMG, spec),
                        ZeroNoise(), items, f, float("inf")))
    pure = PMGSpec(k=1024, eps=EPS, delta=0.0, release_mode="pure", universe=universe)
    rows.append(run(f"PMG Alg.3 pure eps-DP over U={universe}, k=1024",
                    partial(PMG, pure), fast, items, f, EPS))
    # Arbitrary (round-robin) partitioning into 4 shards, trusted merge (§7).
    for rule in ("geometric", "gshm"):
        spec = PMGSpec(k=1024, eps=EPS, delta=DELTA)
        t0 = time.perf_counter()
        shards = [PMG(spec, fast) for _ in range(4)]
        for j, sh in enumerate(shards):
            feed(sh, items[j::4])
        merged = merge_mg(shards, fast, rule)
        rate = items.shape[0] / (time.perf_counter() - t0)
        mem = sum(s.memory_bytes() for s in shards)
        rows.append((f"merged MG, 4 round-robin shards, k=1024, {rule}", EPS,
                     score(merged.release(), f), mem, rate))
    # TrieHH: sub-window levels (ticks = position * W // n: stationary stream) and all-levels.
    W = 1000
    ticks = (np.arange(items.shape[0], dtype=np.int64) * W) // items.shape[0]
    for mode, acc in (("subwindow", "note"), ("all", "note"), ("subwindow", "exact"),
                      ("all", "exact")):
        spec_t = TrieHHSpec(levels=levels, bits=bits, eps=EPS, delta=DELTA, mode=mode,
                            window_ticks=W, accountant=acc)
        rows.append(run(f"TrieHH {mode}, {acc} accountant, L={levels} x {bits} bits, "
                        f"theta={spec_t.theta}, p={spec_t.sampling_rate:.4f}",
                        partial(TrieHH, spec_t), fast, items, f, EPS, ticks))
    return rows


def pamg_rows(items: np.ndarray, f: np.ndarray) -> list[Row]:
    """PAMG on FIMI with pseudo-baskets (blocks of 10 consecutive lines = one unit)."""
    units = (np.arange(items.shape[0]) // 10).astype(str)
    rows: list[Row] = []
    for k in (128, 1024):
        spec = PAMGSpec(k=k, m=10, eps=EPS, delta=DELTA)
        sk = PAMG(spec, FastNoise(2))
        t = time.perf_counter()
        for i in range(0, items.shape[0], BATCH):
            sk.update_batch(items[i:i + BATCH], units=units[i:i + BATCH])
        mem = sk.memory_bytes()
        rel = sk.release()
        rate = items.shape[0] / (time.perf_counter() - t)
        sigma, tau = spec.gshm()
        rows.append((f"PAMG + GSHM (user = 10-line block, m=10), k={k}, sigma={sigma:.0f}, "
                     f"tau={tau:.0f}", EPS, score(rel, f), mem, rate))
    return rows


def table(rows: list[Row]) -> list[str]:
    out = ["| mechanism | eps | recall@128 | precision@128 | ARE top-128 | ARE released | "
           "released | state KiB | events/s |", "|---|---|---|---|---|---|---|---|---|"]
    for label, eps, (rec, prec, are, rare, nrel), mem, rate in rows:
        out.append(f"| {label} | {eps:g} | {rec:.3f} | {prec:.3f} | {are:.4f} | {rare:.4f} | "
                   f"{nrel} | {mem / 1024:,.0f} | {rate:,.0f} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--quick", action="store_true", help="first 2M events of each stream")
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    if not (args.data / CAIDA).exists():
        print(f"skip: real data not found in {args.data}")
        return 0
    cut = 2_000_000 if args.quick else None
    lines: list[str] = []

    def section(title: str, items: np.ndarray, universe: int, bits: int, levels: int,
                extra: Callable[[np.ndarray, np.ndarray], list[Row]] | None = None) -> None:
        items = items[:cut]
        f = np.bincount(items, minlength=universe)
        t0 = time.perf_counter()
        rows = dataset_rows(title, items, f, universe, bits, levels)
        if extra is not None:
            rows += extra(items, f)
        lines.extend([f"## {title}", "", f"N = {items.shape[0]:,} events, "
                      f"{int((f > 0).sum()):,} distinct, top-{TOPK} mass "
                      f"{np.sort(f)[::-1][:TOPK].sum() / f.sum():.1%}; "
                      f"section time {time.perf_counter() - t0:.0f} s", "", *table(rows), ""])
        print("\n".join(lines[-len(rows) - 6:]), flush=True)

    section("CAIDA 2016 minute (dst /16)", stream_from_counts(caida_counts(args.data), 0),
            1 << 16, 4, 4)
    agh = np.load(args.data / AGH)["counts"].astype(np.int64)
    thin = np.random.default_rng(0).binomial(agh, 0.0147)
    section("AGH flows thinned p=0.0147 (flow ids)", stream_from_counts(thin, 0), 1 << 23, 4, 6)
    fimi = np.loadtxt(args.data / FIMI, dtype=np.int64)
    section("FIMI retail (real order)", fimi, 1 << 16, 4, 4, pamg_rows)
    if args.write:
        args.write.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
