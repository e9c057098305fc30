"""Offline: optimise the Buffered Linear Toeplitz (BLT) noise matrices of
``sketches/counters/factorization.py`` and print the parameter table.

The runtime never optimises (no scipy at run time, and the parameters must be
bit-identical on every machine that restores a checkpoint): this script is
run once, its output pasted into ``BLT_TABLE``. For each horizon ``n = 2**e``
it minimises, over ``k`` buffers ``(theta_i > 0, 0 < omega_i < 1)`` of the
noise matrix ``B = BLT(theta, omega)`` (``b_0 = 1``,
``b_j = sum_i theta_i omega_i**(j-1)``),

    loss = (sum_{j<n} b_j**2) * (sum_{j<n} c_j**2),   C = B^{-1} A,

i.e. the largest prefix-noise variance times the squared sensitivity: the
squared error of the worst released prefix at a fixed privacy level
(both factors are attained at the last row / first column of the Toeplitz
matrices). The exact square root has ``loss ~ (1 + ln(n)/pi)**2``.

Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
noise generation for streaming differential privacy" (FOCS 2024) optimise
the same kind of objective (they parametrise C; parametrising B is the same
family up to the choice of the inverted side). This script is written from
the definitions above, not from their code.

Usage: ``.venv/bin/python scripts/blt_params.py [--buffers 4] [--max-exp 20]``
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.optimize import minimize
from scipy.signal import lfilter

from sketches.counters.factorization import blt_polynomials


def coeffs(theta: np.ndarray, omega: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    p, q = blt_polynomials(theta, omega)
    imp = np.zeros(n)
    imp[0] = 1.0
    b = lfilter(p, q, imp)
    c = lfilter(q, np.convolve(p, [1.0, -1.0]), imp)
    return b, c


def loss(x: np.ndarray, n: int) -> float:
    k = x.size // 2
    theta, omega = np.exp(x[:k]), 1.0 / (1.0 + np.exp(-x[k:]))
    with np.errstate(all="ignore"):
        b, c = coeffs(theta, omega, n)
        val = float(np.sum(b * b) * np.sum(c * c))
    return val if math.isfinite(val) else 1e300


def optimise(n: int, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    best = None
    for spread in (1.0, 0.7, 1.3):
        tau = np.geomspace(1.0, max(n, 2) ** spread, k)
        omega = np.exp(-1.0 / tau)
        theta = np.full(k, 0.5 / k)
        x0 = np.concatenate([np.log(theta), np.log(omega / (1 - omega))])
        res = minimize(loss, x0, args=(n,), method="Nelder-Mead",
                       options={"maxiter": 4000, "xatol": 1e-9, "fatol": 1e-12})
        res = minimize(loss, res.x, args=(n,), method="L-BFGS-B")
        if best is None or res.fun < best.fun:
            best = res
    x = best.x
    return np.exp(x[:k]), 1.0 / (1.0 + np.exp(-x[k:])), float(best.fun)


def sqrt_loss(n: int) -> float:
    r = np.ones(n)
    for j in range(1, n):
        r[j] = r[j - 1] * (2 * j - 1) / (2 * j)
    s = float(np.sum(r * r))
    return s * s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--buffers", type=int, default=4)
    ap.add_argument("--max-exp", type=int, default=20)
    args = ap.parse_args()
    print("BLT_TABLE = {")
    for e in range(1, args.max_exp + 1):
        n = 1 << e
        theta, omega, val = optimise(n, args.buffers)
        ref = sqrt_loss(n)
        print(f"    {e}: (({', '.join(repr(float(t)) for t in theta)},),")
        print(f"         ({', '.join(repr(float(w)) for w in omega)},)),"
              f"  # loss {val:.4f}, sqrt {ref:.4f}, ratio {val / ref:.4f}")
    print("}")


if __name__ == "__main__":
    main()
