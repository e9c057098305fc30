"""Benchmark of the single-release (windowed) mechanisms of papers 003 and 004 on real data.

One window = the whole data set, released once (as the worker does at window end).

1. Heavy hitters on the CAIDA 2016 minute (packets per destination /16): DP Count-Min +
   private hierarchical candidates (``dp_cms_hh``) vs. the same structure without noise
   (non-private baseline, same run); recall / precision against the true top-k, ARE of the
   released estimates, memory, update throughput.
2. Point queries (paper 003 Fig. 1 analogue) on the CAIDA minute: DP CMS / DP CS vs. their
   zero-noise versions: ARE over all prefixes.
3. Quantiles (turnstile): private dyadic Count Sketch on AGH flow sizes (packets per flow)
   and on FIMI retail item ids; all values inserted then a random 20% deleted (weight -1);
   rank error / N. Heavy hitters are also run on a thinned AGH packet stream (flow ids).
4. F_p (p in {0.25, 0.5, 0.75, 1}) on a thinned AGH packet stream: relative error of the
   released estimate at eps = 1 (padding chosen by ``pad_for_eps``).

Streams are built from exact per-key counts by repetition and a seeded permutation (the
data has no packet order; linear sketches do not depend on order). Noise: FastNoise
(seeded, benchmark only). Skips cleanly when /work/shared/data is absent.

Usage: ``python benchmarks/bench_windowed_003_004.py [--data DIR] [--write results/...md]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sketches.core.noise import FastNoise, ZeroNoise  # noqa: E402
from sketches.windowed.fp.fp_sketch import FpSketch, FpSketchSpec, pad_for_eps  # noqa: E402
from sketches.windowed.linear.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec  # noqa: E402
from sketches.windowed.linear.dp_linear import DPLinearSketch, DPLinearSpec  # noqa: E402
from sketches.windowed.linear.dyadic_quantiles import DyadicQuantiles, DyadicQuantilesSpec  # noqa: E402

DATA = Path("/work/shared/data")
CAIDA = "caida2016_chicagoA_20160406-125912_dst16_counts.csv"
AGH = "agh2015061019_flow_pktcounts.npz"
FIMI = "fimi_retail.txt"
BATCH = 1 << 20


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


def feed(sk: object, items: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Update in batches; return events per second."""
    t = time.perf_counter()
    for i in range(0, items.shape[0], BATCH):
        w = None if weights is None else weights[i:i + BATCH]
        sk.update_batch(items[i:i + BATCH], weights=w)  # type: ignore[attr-defined]
    return items.shape[0] / (time.perf_counter() - t)


def heavy_hitters(f: np.ndarray, items: np.ndarray, k: int, eps: float,
                  bits: int = 16, width: int = 1024) -> list[str]:
    n = int(f.sum())
    true_top = set(np.argsort(-f, kind="stable")[:k].tolist())
    out = ["| mechanism | eps | recall@k | precision@k | ARE (released) | memory KiB | "
           "updates/s |", "|---|---|---|---|---|---|---|"]
    for label, noise in (("dp_cms_hh (DP CMS + private candidates)", FastNoise(1)),
                         ("same, zero noise (non-private baseline)", ZeroNoise())):
        spec = DPCMSHeavyHittersSpec(bits=bits, eps=eps, delta=1e-6, depth=5, width=width,
                                     branch_bits=4, phi=0.5 * f[sorted(true_top)].min() / n,
                                     top_k=k, max_frontier=4096)
        sk = DPCMSHeavyHitters(spec, noise)
        rate = feed(sk, items)
        rel = sk.release()
        got = [d["item"] for d in rel["items"]]
        hit = len(set(got) & true_top)
        are = np.mean([abs(d["estimate"] - f[d["item"]]) / max(f[d["item"]], 1)
                       for d in rel["items"]]) if got else float("nan")
        out.append(f"| {label} | {eps if noise.kind != 'zero' else 'inf'} | {hit / k:.3f} | "
                   f"{hit / max(len(got), 1):.3f} | {are:.4f} | {sk.memory_bytes() / 1024:.0f} | "
                   f"{rate:,.0f} |")
    out.append(f"\nd x w = 5 x {width} per hashed level; k = {k}; threshold phi = half the "
               f"k-th largest frequency / N; N = {n:,}; "
               f"sigma = {sk.sigma:.1f} (joint over {rel['levels']} levels).")
    return out


def point_queries(f: np.ndarray, items: np.ndarray, eps: float) -> list[str]:
    keys = np.flatnonzero(f)
    out = ["| sketch | d x w | eps | ARE (all prefixes) | ARE zero-noise | sigma | updates/s |",
           "|---|---|---|---|---|---|---|"]
    for kind in ("cms", "cs"):
        spec = DPLinearSpec(kind=kind, depth=5, width=512, eps=eps, delta=1e-6)
        res = []
        for noise in (FastNoise(2), ZeroNoise()):
            sk = DPLinearSketch(spec, noise)
            rate = feed(sk, items)
            est = sk.query(keys)
            res.append(float(np.mean(np.abs(est - f[keys]) / f[keys])))
        out.append(f"| DP {kind.upper()} | 5 x 512 | {eps} | {res[0]:.3f} | {res[1]:.3f} | "
                   f"{spec.sigma:.1f} | {rate:,.0f} |")
    return out


def quantiles(values: np.ndarray, eps: float, bits: int, what: str) -> list[str]:
    rng = np.random.default_rng(3)
    x = np.minimum(values.astype(np.int64), (1 << bits) - 1)
    dele = rng.choice(x.shape[0], x.shape[0] // 5, replace=False)
    items = np.concatenate([x, x[dele]])
    weights = np.concatenate([np.ones(x.shape[0], np.int64), -np.ones(dele.shape[0], np.int64)])
    keep = np.ones(x.shape[0], bool)
    keep[dele] = False
    srt = np.sort(x[keep])
    n = srt.shape[0]
    out = ["| noise | eps | mean rank err / N | max rank err / N | bound / N | memory KiB | "
           "updates/s |", "|---|---|---|---|---|---|---|"]
    for noise in (FastNoise(4), ZeroNoise()):
        spec = DyadicQuantilesSpec(bits=bits, eps=eps, delta=1e-6, depth=7, width=1024)
        sk = DyadicQuantiles(spec, noise)
        rate = feed(sk, items, weights)
        rel = sk.release()
        errs = []
        for d in rel["quantiles"]:
            lo = np.searchsorted(srt, d["value"], side="left")
            hi = np.searchsorted(srt, d["value"], side="right")
            t = d["phi"] * n
            errs.append(max(lo - t, t - hi, 0.0) / n)
        out.append(f"| {noise.kind} | {eps if noise.kind != 'zero' else 'inf'} | "
                   f"{np.mean(errs):.2e} | {np.max(errs):.2e} | "
                   f"{rel['error_bound']['rank_noise_abs_max'] / n:.2e} | "
                   f"{sk.memory_bytes() / 1024:.0f} | {rate:,.0f} |")
    out.append(f"\nN = {n:,} {what} after deleting a random 20% of {x.shape[0]:,}; phis = "
               f"{list(spec.phis)}; bits = {bits}; d x w = 7 x 1024 per hashed level.")
    return out


def fp_moments(counts: np.ndarray, eps: float) -> list[str]:
    rng = np.random.default_rng(5)
    thin = rng.binomial(counts, 0.0015)
    items = stream_from_counts(thin, 6)
    out = ["| p | eps | pad_mass | median rel. err | max rel. err (5 keys) | events/s |",
           "|---|---|---|---|---|---|"]
    for p in (0.25, 0.5, 0.75, 1.0):
        truth = float(np.sum(thin[thin > 0].astype(float) ** p))
        pad = pad_for_eps(eps, p, 50, 1.0)
        errs, rate = [], 0.0
        for seed in range(5):
            sk = FpSketch(FpSketchSpec(p=p, rows=50, pad_mass=pad), FastNoise(seed))
            rate = feed(sk, items)
            errs.append(abs(sk.release()["estimate"] / truth - 1))
        out.append(f"| {p} | {eps} | {pad:.3g} | {np.median(errs):.3f} | {max(errs):.3f} | "
                   f"{rate:,.0f} |")
    out.append(f"\nThinned AGH stream: {items.shape[0]:,} packets over "
               f"{int((thin > 0).sum()):,} flows (binomial thinning p = 0.0015); r = 50.")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--write", type=Path, default=None)
    ap.add_argument("--eps", type=float, default=1.0)
    args = ap.parse_args()
    if not (args.data / CAIDA).exists() or not (args.data / AGH).exists():
        print(f"skip: real data not found under {args.data}")
        return 0
    f = caida_counts(args.data)
    items = stream_from_counts(f, 0)
    agh = np.load(args.data / AGH)["counts"]
    thin = np.random.default_rng(7).binomial(agh, 0.0147)
    agh_items = stream_from_counts(thin, 8)
    fimi = np.loadtxt(args.data / FIMI, dtype=np.int64)
    sections = [
        ("Heavy hitters, CAIDA 2016 minute (dst /16)", heavy_hitters(f, items, 128, args.eps)),
        (f"Heavy hitters, thinned AGH flows ({agh_items.shape[0]:,} packets, flow ids < 2^23)",
         heavy_hitters(thin, agh_items, 128, args.eps, bits=23, width=16384)),
        ("Point queries, CAIDA 2016 minute (paper 003 Fig. 1 analogue)",
         point_queries(f, items, args.eps)),
        ("Quantiles (turnstile), AGH flow sizes (packets per flow)",
         quantiles(agh, args.eps, 22, "flows")),
        ("Quantiles (turnstile), FIMI retail item ids", quantiles(fimi, args.eps, 15, "items")),
        ("F_p moments, thinned AGH packets", fp_moments(agh, args.eps)),
    ]
    text = "\n".join(f"## {title}\n\n" + "\n".join(rows) + "\n" for title, rows in sections)
    print(text)
    if args.write:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
