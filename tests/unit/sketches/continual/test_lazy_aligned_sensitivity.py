"""Brute-force sensitivity of aligned rounds (docs/PRIVACY.md 13.2 [D]; adapted from the
independent review of issue 20c, its findings F1 and F5).

For small streams and EVERY neighbour of a family (add/remove of one event, or of two events
of one unit with ``unit_cap = 2``, at any item and tick; replace of one event by any item and
tick), the counters' inputs are compared with zero noise, and the norm that each counter's
calibration bounds must stay within the calibrated ``Delta_2`` of the spec with
``round_ticks = R`` (``H / R`` rounds):

- tree: the root-sum-square over every counter and dyadic node of the node sums of the
  per-round difference (paper 002's binary mechanism, docs/PRIVACY.md 5);
- blt: ``||C diff||`` with ``C`` the BLT's (13);
- blt_int: ``||f(x) - f(x')||`` of the lattice's rounded ``f = round(s C x)`` (13.1).

The worker drives a sketch one tick at a time; ``blt_int`` is also fed in fixed windows of
several ticks (a library caller), where one ``update_batch`` closes several rounds: every
event must still land in the round of its own tick (review F1: before the fix, adding one
event moved another to an earlier round, 1.29 Delta_2).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import make_noise
from sketches.counters.factorization import factorization

ZERO = make_noise("zero", allow_insecure=True)
D, W, H, ITEMS = 2, 3, 6, range(4)


def _feed(cls, spec: LazySketchSpec, items: list, ticks: list,
          window: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The per-round counter inputs (one row per round) and, for blt_int, ``f``."""
    sk = cls(spec, ZERO)
    log: list[np.ndarray] = []
    push = sk._counters.push

    def logged(total: np.ndarray, k: int) -> None:
        total = np.asarray(total).copy()
        push(total, k)
        if k:
            log.append(total)
            log.extend([np.zeros_like(total)] * (k - 1))

    sk._counters.push = logged
    lattice = spec.counter.value == "blt_int"
    if lattice:
        sk._counters._f_log = []
    order = np.argsort(ticks, kind="stable")
    items_a, ticks_a = np.asarray(items)[order], np.asarray(ticks, dtype=np.int64)[order]
    for t0 in range(0, H, window):  # window 1: the worker (advance, then one tick's batch)
        sk.advance_to(t0)
        m = (ticks_a >= t0) & (ticks_a < t0 + window)
        if m.any():
            sk.update_batch(items_a[m], ticks_a[m])
    sk.advance_to(H)
    return np.array(log), (np.vstack(sk._counters._f_log) if lattice else None)


def _tree_norm(diff: np.ndarray) -> float:
    n, tot = diff.shape[0], 0.0
    for lev in range(int(n).bit_length()):
        size = 1 << lev
        for k in range(n // size):
            tot += float((diff[k * size:(k + 1) * size].sum(axis=0).astype(float) ** 2).sum())
    return tot ** 0.5


def _blt_norm(diff: np.ndarray, n: int) -> float:
    c = factorization("blt", n).c_coeffs()
    cm = np.zeros((n, n))
    for i in range(n):
        cm[i, : i + 1] = c[: i + 1][::-1]
    return float(np.sqrt(((cm @ diff.astype(float)) ** 2).sum()))


def _neighbours(seed: int) -> tuple[tuple[list, list], list]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    items, ticks = list(rng.integers(0, 4, n)), list(rng.integers(0, H, n))
    ev = [(i, t) for i in ITEMS for t in range(H)]
    add_one = [([*items, i], [*ticks, t]) for i, t in ev]
    add_one += [(items[:k] + items[k + 1:], ticks[:k] + ticks[k + 1:]) for k in range(n)]
    add_two = [([*items, a[0], b[0]], [*ticks, a[1], b[1]])
               for a, b in itertools.combinations_with_replacement(ev, 2)]
    replace = [([*items[:k], i, *items[k + 1:]], [*ticks[:k], t, *ticks[k + 1:]])
               for k in range(n) for i, t in ev]
    return (items, ticks), [("add_remove", 1, add_one), ("add_remove", 2, add_two),
                            ("replace", 1, replace)]


CASES = [(cls, counter, r, 1) for cls in (LazyCMS, LazyCS)
         for counter in ("tree", "blt", "blt_int") for r in (2, 3)]
CASES += [(cls, "blt_int", r, window) for cls in (LazyCMS, LazyCS) for r in (2, 3)
          for window in (4, 5)]


@pytest.mark.parametrize(("cls", "counter", "r", "window"), CASES)
def test_every_neighbour_stays_within_the_calibrated_sensitivity(cls, counter, r,
                                                                 window) -> None:
    for seed in range(2):
        base, families = _neighbours(seed)
        for relation, cap, nbrs in families:
            spec = LazySketchSpec(depth=D, width=W, horizon=H, eps=1.0, delta=1e-6,
                                  counter=counter, round_ticks=r, relation=relation,
                                  unit_cap=cap)
            bound = spec.calibration(signed=cls.signed).sensitivity
            x0, f0 = _feed(cls, spec, *base, window)
            for items, ticks in nbrs:
                x1, f1 = _feed(cls, spec, items, ticks, window)
                if counter == "tree":
                    norm = _tree_norm(x1 - x0)
                elif counter == "blt":
                    norm = _blt_norm(x1 - x0, spec.rounds)
                else:
                    assert f0 is not None and f1 is not None
                    norm = float(np.sqrt(((f1 - f0).astype(float) ** 2).sum()))
                assert norm <= bound * (1 + 1e-9), (relation, cap, seed, items, ticks)
