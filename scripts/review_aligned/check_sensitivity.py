"""Independent review (aligned rounds): brute-force sensitivity of the round-summed stream.

Worker-style driving (advance_to(t), then one update_batch of tick t), zero noise. For
small random base streams and EVERY neighbour of a family (add/remove of one event or of a
unit's c events at any item and tick; replace of one event by any (item, tick)), compute
  tree    : sqrt(sum over counters and dyadic nodes of (node sum of the per-round diff)^2)
  blt     : sqrt(sum over counters ||C diff||^2)           (C from the BLT table)
  blt_int : ||f(x) - f(x')||_2 of the lattice's f (LatticeCounters._f_log)
and compare with the calibrated Delta_2 (spec.calibration(signed).sensitivity) of the
spec with round_ticks=R (rounds = H/R). Prints the max ratio per case (must be <= 1).
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import make_noise
from sketches.counters.factorization import factorization

ZERO = make_noise("zero", allow_insecure=True)
D, W = 2, 3


def feed(cls, spec, items, ticks):
    sk = cls(spec, ZERO)
    log = []
    orig = sk._counters.push

    def push(total, k):
        total = np.asarray(total).copy()
        orig(total, k)
        if k:
            log.append(total)
            log.extend([np.zeros_like(total)] * (k - 1))
    sk._counters.push = push
    if spec.counter.value == "blt_int":
        sk._counters._f_log = []
    order = np.argsort(ticks, kind="stable")
    items, ticks = np.asarray(items)[order], np.asarray(ticks)[order]
    for t in range(spec.horizon):
        sk.advance_to(t)
        m = ticks == t
        if m.any():
            sk.update_batch(items[m], ticks[m])
    sk.advance_to(spec.horizon)
    xbar = np.array(log)
    f = np.vstack(sk._counters._f_log) if spec.counter.value == "blt_int" else None
    return xbar, f


def tree_norm(diff):
    n = diff.shape[0]
    tot = 0.0
    for lev in range(int(n).bit_length()):
        size = 1 << lev
        for k in range(n // size):
            s = diff[k * size:(k + 1) * size].sum(axis=0)
            tot += float((s.astype(float) ** 2).sum())
    return tot ** 0.5


def blt_norm(diff, n):
    c = factorization("blt", n).c_coeffs()
    C = np.zeros((n, n))
    for i in range(n):
        C[i, : i + 1] = c[: i + 1][::-1]
    return float(np.sqrt(((C @ diff.astype(float)) ** 2).sum()))


def measure(cls, counter, relation, cap, H, R, base, nbrs):
    spec = LazySketchSpec(depth=D, width=W, horizon=H, eps=1.0, delta=1e-6, counter=counter,
                          round_ticks=R, relation=relation, unit_cap=cap)
    bound = spec.calibration(signed=cls.signed).sensitivity
    x0, f0 = feed(cls, spec, *base)
    worst = 0.0
    for it, tk in nbrs:
        x1, f1 = feed(cls, spec, it, tk)
        diff = x1 - x0
        if counter == "tree":
            v = tree_norm(diff)
        elif counter == "blt":
            v = blt_norm(diff, spec.rounds)
        else:
            v = float(np.sqrt(((f1 - f0).astype(float) ** 2).sum()))
        worst = max(worst, v / bound)
    return worst, bound


def main(seeds: int = 2) -> int:
    H, ITEMS = 6, range(4)
    bad = 0
    for cls, counter, R in itertools.product((LazyCMS, LazyCS), ("tree", "blt", "blt_int"),
                                             (2, 3)):
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            n = int(rng.integers(1, 6))
            items = list(rng.integers(0, 4, n))
            ticks = list(rng.integers(0, H, n))
            base = (items, ticks)
            ev = [(i, t) for i in ITEMS for t in range(H)]
            # add/remove, event level: add any one event; remove each existing event
            nb1 = [([*items, i], [*ticks, t]) for i, t in ev]
            nb1 += [(items[:k] + items[k + 1:], ticks[:k] + ticks[k + 1:]) for k in range(n)]
            # add/remove, unit cap 2: add any two events (any items and ticks)
            nb2 = [([*items, a[0], b[0]], [*ticks, a[1], b[1]])
                   for a, b in itertools.combinations_with_replacement(ev, 2)]
            # replace (event level): replace event k by any (item, tick)
            nb3 = [([*items[:k], i, *items[k + 1:]], [*ticks[:k], t, *ticks[k + 1:]])
                   for k in range(n) for i, t in ev]
            for rel, cap, nbrs in (("add_remove", 1, nb1), ("add_remove", 2, nb2),
                                   ("replace", 1, nb3)):
                w, bound = measure(cls, counter, rel, cap, H, R, base, nbrs)
                flag = "  <-- EXCEEDS" if w > 1 + 1e-9 else ""
                bad += w > 1 + 1e-9
                print(f"{cls.name:8s} {counter:7s} R={R} seed={seed} {rel:10s} c={cap}: "
                      f"{len(nbrs):4d} neighbours, max ||diff||/Delta2 = {w:.4f} "
                      f"(Delta2 {bound:.4g}){flag}")
    print("EXCEEDED:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
