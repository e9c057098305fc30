"""Theorem 2's sensitivity claim as a property test (hypothesis).

For neighbouring streams X ~ X' (add/remove one event, or replace one event),
the zero-noise input streams to the d*w output counters of LazyCMS/LazyCS must
be m-neighbouring: with D_c = sum over rounds |v_c - v'_c| per counter c,
sum_c D_c^2 <= m = neighbouring_cells(relation, d, signed) (the per-level
L2 bound of sketches.privacy.calibration), and for CMS at most m counters differ, by
at most 1 each (paper Definition 2). Both clocks (tick: any columns_per_tick).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import ZeroNoise
from sketches.counters.gauss_bm import ContinualCounters
from sketches.privacy import Clock, Relation, neighbouring_cells


class Recording(ContinualCounters):
    """ContinualCounters that records what each step pushes (test double).

    The sketch is driven one step per call (one event on the arrival clock,
    one tick on the tick clock), so each recorded vector is the input of the
    counters in exactly one round; batching is covered by test_lazy's
    batch == per-event-reference tests.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: dict[int, np.ndarray] = {}
        self.step = 0

    def push(self, total: np.ndarray, new_rounds: int) -> None:
        self.log[self.step] = self.log.get(self.step, 0) + np.asarray(total, dtype=np.int64)
        super().push(total, new_rounds)


def _streams(cls: type, spec: LazySketchSpec, items: list[int],
             ticks: list[int] | None) -> dict[int, np.ndarray]:
    sk = cls(spec, ZeroNoise())
    rec = Recording(spec.depth * spec.width, spec.rounds, 1.0, True, ZeroNoise())
    sk._counters = rec
    if ticks is None:
        for t, x in enumerate(items):
            rec.step = t
            sk.update_batch(np.array([x], dtype=np.int64))
        return rec.log
    by_tick: dict[int, list[int]] = {}
    for x, tk in zip(items, ticks, strict=True):
        by_tick.setdefault(tk, []).append(x)
    for tk in range(spec.horizon):
        rec.step = tk
        if tk in by_tick:
            batch = np.array(by_tick[tk], dtype=np.int64)
            sk.update_batch(batch, ticks=np.full(len(batch), tk, dtype=np.int64))
        sk.advance_to(tk + 1)
    return rec.log


def _check(cls: type, spec: LazySketchSpec, log_a: dict[int, np.ndarray],
           log_b: dict[int, np.ndarray]) -> None:
    n = spec.depth * spec.width
    total = np.zeros(n, dtype=np.int64)
    for r in set(log_a) | set(log_b):
        total += np.abs(log_a.get(r, np.zeros(n, np.int64)) - log_b.get(r, np.zeros(n, np.int64)))
    m = neighbouring_cells(spec.relation, spec.depth, signed=cls is LazyCS)
    assert int((total**2).sum()) <= m, (total.reshape(spec.depth, spec.width), m)
    if cls is LazyCMS:
        assert total.max(initial=0) <= 1 and int((total > 0).sum()) <= m


streams = st.lists(st.integers(0, 12), min_size=1, max_size=50)


@settings(max_examples=60, deadline=None)
@given(items=streams, data=st.data())
def test_arrival_clock_replace_is_2d_neighbouring(items, data):
    cls = data.draw(st.sampled_from([LazyCMS, LazyCS]))
    depth, width = data.draw(st.integers(1, 3)), data.draw(st.sampled_from([2, 3, 4, 8]))
    spec = LazySketchSpec(depth=depth, width=width, horizon=64, eps=1.0, delta=1e-6,
                          relation=Relation.REPLACE, clock=Clock.ARRIVAL,
                          hash_seed=data.draw(st.integers(0, 5)))
    pos = data.draw(st.integers(0, len(items) - 1))
    other = list(items)
    other[pos] = data.draw(st.integers(0, 12))
    _check(cls, spec, _streams(cls, spec, items, None), _streams(cls, spec, other, None))


@settings(max_examples=60, deadline=None)
@given(items=streams, data=st.data())
def test_tick_clock_add_remove_and_replace(items, data):
    cls = data.draw(st.sampled_from([LazyCMS, LazyCS]))
    relation = data.draw(st.sampled_from([Relation.ADD_REMOVE, Relation.REPLACE]))
    depth, width = data.draw(st.integers(1, 3)), data.draw(st.sampled_from([2, 4, 6]))
    cpt = data.draw(st.sampled_from([c for c in (1, 2, 3, 6) if width % c == 0]))
    spec = LazySketchSpec(depth=depth, width=width, horizon=40, eps=1.0, delta=1e-6,
                          relation=relation, clock=Clock.TICK, columns_per_tick=cpt,
                          hash_seed=data.draw(st.integers(0, 5)))
    ticks = sorted(data.draw(st.lists(st.integers(0, 39), min_size=len(items),
                                      max_size=len(items))))
    pos = data.draw(st.integers(0, len(items) - 1))
    other, other_ticks = list(items), list(ticks)
    if relation is Relation.ADD_REMOVE:
        del other[pos]
        del other_ticks[pos]
    else:
        other[pos] = data.draw(st.integers(0, 12))
    _check(cls, spec, _streams(cls, spec, items, ticks),
           _streams(cls, spec, other, other_ticks))


def test_signed_replace_can_move_one_cell_by_two():
    """Why LazyCS under replace needs m = 4d: find items sharing a bucket with
    opposite signs; replacing one by the other moves that cell by 2."""
    spec = LazySketchSpec(depth=1, width=2, horizon=8, eps=1.0, delta=1e-6,
                          relation=Relation.REPLACE, clock=Clock.ARRIVAL)
    h = spec.hash_spec
    keys = h.item_keys(np.arange(50))
    b, s = h.buckets_and_signs(keys)
    x = 0
    y = next(j for j in range(1, 50) if b[0, j] == b[0, x] and s[0, j] != s[0, x])
    a, c = _streams(LazyCS, spec, [x], None), _streams(LazyCS, spec, [y], None)
    diff = sum(np.abs(a[r] - c[r]) for r in a)
    assert int(np.max(diff)) == 2
    _check(LazyCS, spec, a, c)
