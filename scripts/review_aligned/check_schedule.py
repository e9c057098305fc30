"""Independent review (aligned rounds): per-event reference of the aligned schedule.

For random small streams, compares LazyCMS/LazyCS (tree, blt, blt_int; zero noise) with
an explicit per-event reference: event at tick t -> round floor(t/R)+1 (1-based), the
counters' per-round increments spied on `_counters.push(total, k)` (total -> first of the
k new rounds), the released matrix = exact per-cell prefix of the closed rounds.

Modes
  worker : one tick per batch, advance_to(t) before the batch (ShardState.apply), random
           extra advance_to; random checkpoint/restore round trips.
  random : random batch cuts (a batch may close several rounds), random advance_to.
Reports, per mode, mismatches of (a) released matrix at every call, (b) per-round
increments vs the reference x A.
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import make_noise

ZERO = make_noise("zero", allow_insecure=True)


def spy(sk, log):
    orig = sk._counters.push

    def push(total, k):
        total = np.asarray(total).copy()
        orig(total, k)
        if k >= 1:
            log.append(total)
            log.extend([np.zeros_like(total)] * (k - 1))
        else:
            assert not np.any(total), "push(total, 0) with a nonzero total"
    sk._counters.push = push


def reference(sk_hash, signed, d, w, items, ticks, R, H):
    keys = sk_hash.item_keys(items)
    b, s = sk_hash.buckets_and_signs(keys)
    nr = H // R
    x = np.zeros((nr, d * w), dtype=np.int64)
    for e in range(items.size):
        r = int(ticks[e]) // R
        for i in range(d):
            x[r, i * w + b[i, e]] += int(s[i, e]) if signed else 1
    return x  # per-round increments (x A)


def run(cls, counter, R, H, seed, mode):
    rng = np.random.default_rng(seed)
    d, w = 2, 8
    n = int(rng.integers(0, 60))
    items = rng.integers(0, 20, n)
    ticks = np.sort(rng.integers(0, H, n))
    spec = LazySketchSpec(depth=d, width=w, horizon=H, eps=1.0, delta=1e-6,
                          counter=counter, round_ticks=R)
    sk = cls(spec, ZERO)
    log: list[np.ndarray] = []
    spy(sk, log)
    xref = reference(sk.hash, cls.signed, d, w, items, ticks, R, H)
    pref = np.vstack([np.zeros((1, d * w), np.int64), np.cumsum(xref, axis=0)])
    bad_release = bad_rounds = 0

    def check():
        nonlocal bad_release, sk
        closed = sk.steps_closed // R
        if sk.rounds != closed:
            bad_release += 1
        if not np.array_equal(sk.noisy_matrix().ravel(), pref[closed]):
            bad_release += 1
        if rng.random() < 0.2:  # checkpoint round trip
            back = cls.from_bytes(sk.to_bytes(), ZERO, expected_spec=spec)
            assert np.array_equal(back.noisy_matrix(), sk.noisy_matrix())
            sk = back
            spy(sk, log)

    if mode == "worker":
        for t in range(H):
            m = ticks == t
            sk.advance_to(t)
            check()
            if m.any():
                sk.update_batch(items[m], ticks[m])
                check()
            if rng.random() < 0.3:
                sk.advance_to(min(H, t + 1))
                check()
    else:
        cuts = np.sort(rng.choice(n + 1, min(n + 1, int(rng.integers(1, 8))), replace=False)) \
            if n else np.array([0])
        bounds = np.unique(np.r_[0, cuts, n])
        for a, b in itertools.pairwise(bounds):
            sk.update_batch(items[a:b], ticks[a:b])
            check()
            if rng.random() < 0.3:
                nxt = int(ticks[b]) if b < n else H
                sk.advance_to(int(rng.integers(sk.steps_closed, nxt + 1)))
                check()
    sk.advance_to(H)
    check()
    got = np.array(log) if log else np.zeros((0, d * w), np.int64)
    if got.shape != xref.shape or not np.array_equal(got, xref):
        bad_rounds += 1
    return bad_release, bad_rounds


def main(trials: int = 40) -> int:
    total_rel = 0
    for mode in ("worker", "random"):
        for cls in (LazyCMS, LazyCS):
            for counter in ("tree", "blt", "blt_int"):
                for R, H in ((1, 12), (2, 12), (3, 12), (4, 12), (6, 12)):
                    rel = rnd = 0
                    for seed in range(trials):
                        a, b = run(cls, counter, R, H, seed, mode)
                        rel += a
                        rnd += b
                    total_rel += rel
                    print(f"{mode:6s} {cls.name:8s} {counter:7s} R={R} H={H}: "
                          f"release mismatches {rel}, streams whose per-round increments "
                          f"differ from xA {rnd}/{trials}")
    return 1 if total_rel else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
