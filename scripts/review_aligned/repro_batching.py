"""Reproducer (library API, not the worker): with aligned rounds, update_batch puts every
event it pushes into the FIRST of the rounds it closes, and the rounds it closes depend on
the tick of the batch's LAST event (close_to = ticks[-1]), i.e. on the data. So even with
data-independent batch boundaries (here: one batch per 9 ticks, R = 3), adding one event
moves ANOTHER event to an earlier counter round; for blt_int this breaks the sensitivity
bound Delta_2 the noise is calibrated for (f depends on each round's increment).

Base x : item a at tick 4 (round 2).            counters get  [a, -, -] in rounds [1, 2, 3]?
         close_to = 4 -> a waits in P; advance_to(9) pushes it into round 2 (correct).
Nbr x' : x + item b at tick 7 (round 3). close_to = 7 closes rounds 1-2 in one push:
         a goes to round 1 (wrong), b to round 3.
"""
from __future__ import annotations

import numpy as np

from sketches.continual.lazy import LazyCMS, LazySketchSpec
from sketches.core.noise import make_noise

ZERO = make_noise("zero", allow_insecure=True)


def run(events, spec, batch_ticks=9):
    sk = LazyCMS(spec, ZERO)
    sk._counters._f_log = []
    rounds = []
    orig = sk._counters.push

    def push(total, k):
        orig(total, k)
        if k:
            rounds.append(np.asarray(total).copy())
            rounds.extend([np.zeros_like(total)] * (k - 1))
    sk._counters.push = push
    items = np.array([e[0] for e in events])
    ticks = np.array([e[1] for e in events])
    for start in range(0, spec.horizon, batch_ticks):  # data-independent batch windows
        m = (ticks >= start) & (ticks < start + batch_ticks)
        sk.update_batch(items[m], ticks[m])
        sk.advance_to(start + batch_ticks)
    return np.array(rounds), np.vstack(sk._counters._f_log), sk


def worker(events, spec):
    """The same events fed as the worker does: advance_to(t), then one batch per tick."""
    sk = LazyCMS(spec, ZERO)
    sk._counters._f_log = []
    for t in range(spec.horizon):
        sk.advance_to(t)
        ev = [e for e in events if e[1] == t]
        if ev:
            sk.update_batch(np.array([e[0] for e in ev]), np.array([t] * len(ev)))
    sk.advance_to(spec.horizon)
    return np.vstack(sk._counters._f_log)


def main() -> None:
    base, nbr = [(1, 4)], [(1, 4), (2, 7)]
    for rt in (3, None):  # aligned rounds of 3 ticks; per-tick rounds (issue 20, pre-existing)
        spec = LazySketchSpec(depth=4, width=64, horizon=18, eps=1.0, delta=1e-6,
                              counter="blt_int", round_ticks=rt)
        x0, f0, s0 = run(base, spec)
        x1, f1, s1 = run(nbr, spec)
        def first(x):
            return [i + 1 for i, r in enumerate(x) if r.any()]
        bound = spec.calibration().sensitivity
        diff = float(np.sqrt(((f1 - f0).astype(float) ** 2).sum()))
        dw = float(np.sqrt(((worker(nbr, spec) - worker(base, spec)).astype(float) ** 2).sum()))
        print(f"round_ticks={rt}: counter rounds with increments: x {first(x0)}, x' {first(x1)}")
        print(f"  batches of 9 ticks: ||f(x) - f(x')||_2 = {diff:.1f} vs Delta_2 = {bound:.1f}:"
              f" ratio {diff / bound:.3f} (rho x{(diff / bound) ** 2:.2f})")
        print(f"  one tick per batch (worker): {dw:.1f}, ratio {dw / bound:.3f}")
        print(f"  zero-noise final releases equal x/x' up to b's cells: "
              f"{int(np.abs(s1.noisy_matrix() - s0.noisy_matrix()).sum())} (= depth 4)")


if __name__ == "__main__":
    main()
