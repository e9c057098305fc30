"""Benchmark of dpstream's noise samplers vs. baselines measured in the same run.

Measures samples per second of :class:`sketches.core.noise.SecureNoise` (OS CSPRNG +
128-bit CDF table) and :class:`sketches.core.noise.FastNoise` (PCG64 + same table)
for the discrete Gaussian at sigma in {10, 100, 1000} and at large sigma
{1e5 (one table), 1e6, 1e7 (two composed tables, ``sketches.core.noise_compose``)},
the one-off table build time, and two baselines:

- numpy ``Generator.normal`` (float, insecure): the speed ceiling;
- a textbook exact CKS20 rejection sampler (Canonne, Kamath & Steinke 2020,
  Algorithms 1-3: Bernoulli(exp(-γ)) with rational arithmetic, discrete Laplace,
  discrete Gaussian) with ``secrets`` randomness, one sample at a time: the
  approach of the reference implementations (OpenDP, IBM's discretegauss).

Usage::

    .venv/bin/python benchmarks/bench_noise.py [--out results/bench_noise.md] [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import secrets
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sketches.core.noise import FastNoise, SecureNoise  # noqa: E402
from sketches.core.noise_compose import (  # noqa: E402
    composed_sampler,
    discrete_gaussian_sampler,
    discrete_gaussian_tv,
)
from sketches.core.noise_tables import (  # noqa: E402
    IntegerTable,
    discrete_gaussian_table,
    discrete_gaussian_variance_table,
)

# ------------------------------------------------------------ CKS20 baseline


def _bernoulli(p: Fraction) -> bool:
    return secrets.randbelow(p.denominator) < p.numerator


def _bernoulli_exp(gamma: Fraction) -> bool:
    """Bernoulli(exp(-gamma)), exact (CKS20 Algorithm 1)."""
    if gamma <= 1:
        k = 1
        while _bernoulli(gamma / k):
            k += 1
        return k % 2 == 1
    for _ in range(math.floor(gamma)):
        if not _bernoulli_exp(Fraction(1)):
            return False
    return _bernoulli_exp(gamma - math.floor(gamma))


def _discrete_laplace(t: int) -> int:
    """P[x] ∝ exp(-|x|/t), exact (CKS20 Algorithm 2 with s = 1)."""
    while True:
        u = secrets.randbelow(t)
        if not _bernoulli_exp(Fraction(u, t)):
            continue
        v = 0
        while _bernoulli_exp(Fraction(1)):
            v += 1
        y = u + t * v
        b = secrets.randbelow(2)
        if b == 1 and y == 0:
            continue
        return (1 - 2 * b) * y


def cks_discrete_gaussian(sigma: int) -> int:
    """N_Z(0, sigma^2), exact (CKS20 Algorithm 3), integer sigma."""
    s2 = Fraction(sigma * sigma)
    t = sigma + 1
    while True:
        y = _discrete_laplace(t)
        gamma = (abs(y) - s2 / t) ** 2 / (2 * s2)
        if _bernoulli_exp(gamma):
            return y


# ------------------------------------------------------------ timing


def rate(fn: Callable[[int], object], n: int, repeat: int) -> float:
    """Best-of-``repeat`` samples per second of ``fn(n)``."""
    fn(min(n, 1000))  # warm caches / tables
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t0)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    args = ap.parse_args()
    n = 100_000 if args.quick else 1_000_000
    repeat = 1 if args.quick else 3
    secure, fast = SecureNoise(), FastNoise(0)
    rng = np.random.default_rng(0)
    rows: list[tuple[str, str, str]] = []

    def add(name: str, sigma: str, r: float) -> None:
        rows.append((name, sigma, f"{r / 1e6:,.2f} M/s" if r >= 1e5 else f"{r / 1e3:,.1f} k/s"))
        print(f"{name:58s} sigma={sigma:>6s} {rows[-1][2]:>12s}", flush=True)

    add("numpy Generator.normal (float, PCG64, insecure ceiling)", "1",
        rate(lambda k: rng.normal(0.0, 1.0, k), n, repeat))
    for sigma in (10.0, 100.0, 1000.0):
        discrete_gaussian_table.cache_clear()
        t0 = time.perf_counter()
        table = discrete_gaussian_table(sigma)
        build = time.perf_counter() - t0
        s = f"{sigma:g}"
        rows.append((f"table build (K={-table.offset}, TV<={table.tv_bound:.1e})", s,
                     f"{build * 1e3:.1f} ms"))
        print(f"{rows[-1][0]:58s} sigma={s:>6s} {rows[-1][2]:>12s}", flush=True)
        def secure_big(k: int, sg: float = sigma) -> object:
            return secure.discrete_gaussian(sg, k)

        def secure_small(k: int, sg: float = sigma) -> object:
            return [secure.discrete_gaussian(sg, 4096) for _ in range(k // 4096)]

        def fast_big(k: int, sg: float = sigma) -> object:
            return fast.discrete_gaussian(sg, k)

        def cks(k: int, sg: int = int(sigma)) -> object:
            return [cks_discrete_gaussian(sg) for _ in range(k)]

        add("SecureNoise.discrete_gaussian, batch 1M", s, rate(secure_big, n, repeat))
        add("SecureNoise.discrete_gaussian, batches of 4096", s,
            rate(secure_small, n, repeat) * (n // 4096 * 4096) / n)
        add("FastNoise.discrete_gaussian, batch 1M", s, rate(fast_big, n, repeat))
        m = 2000 if args.quick else 10_000
        add("baseline: exact CKS20 sampler, secrets, per sample", s, rate(cks, m, 1))
    for sigma in (1e5, 1e6, 1e7):
        for cache in (discrete_gaussian_table, discrete_gaussian_variance_table,
                      composed_sampler):
            cache.cache_clear()
        t0 = time.perf_counter()
        sampler = discrete_gaussian_sampler(sigma)
        build = time.perf_counter() - t0
        s = f"{sigma:g}"
        tv = discrete_gaussian_tv(sigma)
        if isinstance(sampler, IntegerTable):
            what = f"table build (K={-sampler.offset}, TV<={tv:.1e})"
        else:
            what = (f"composed build (m={sampler.params.m}, K={-sampler.coarse.offset}"
                    f"+{-sampler.fine.offset}, TV<={tv:.1e})")
        rows.append((what, s, f"{build * 1e3:.1f} ms"))
        print(f"{rows[-1][0]:58s} sigma={s:>6s} {rows[-1][2]:>12s}", flush=True)

        def secure_big_l(k: int, sg: float = sigma) -> object:
            return secure.discrete_gaussian(sg, k)

        def secure_small_l(k: int, sg: float = sigma) -> object:
            return [secure.discrete_gaussian(sg, 4096) for _ in range(k // 4096)]

        def fast_big_l(k: int, sg: float = sigma) -> object:
            return fast.discrete_gaussian(sg, k)

        add("SecureNoise.discrete_gaussian, batch 1M", s, rate(secure_big_l, n, repeat))
        add("SecureNoise.discrete_gaussian, batches of 4096", s,
            rate(secure_small_l, n, repeat) * (n // 4096 * 4096) / n)
        add("FastNoise.discrete_gaussian, batch 1M", s, rate(fast_big_l, n, repeat))
    add("SecureNoise.gaussian (float, Box-Muller)", "100",
        rate(lambda k: secure.gaussian(100.0, k), n, repeat))
    add("SecureNoise.discrete_laplace", "100",
        rate(lambda k: secure.discrete_laplace(100.0, k), n, repeat))

    lines = [
        "# Noise sampler benchmark (`benchmarks/bench_noise.py`)",
        "",
        f"Machine: {platform.machine()}, {platform.python_version()}, numpy {np.__version__}; "
        f"best of {repeat}, batch {n:,} unless stated; load average at the end "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} shared cores (other jobs running "
        "lower every number; compare rows of the same run).",
        "",
        "| sampler | sigma | throughput |",
        "|---|---:|---:|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
    ]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
