"""LazyNoiseCounters' read paths with exact values (issue 24, mutation survivors of
``sketches/counters/gauss_bm_lazy.py``): every release checked against the sum of the
current nodes it must read, with integer noise too large for a float64 (a sum formed in
floating point, or a stale cached node, shows in the last digits); the routing of
``query_at``/``query_min`` (compiled kernel, numpy path, rounds 0, negative indices); the
one-round ``push`` fast path against the eager counter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.counters import lazy_kernel
from sketches.counters.gauss_bm import ContinualCounters, set_bits
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters

BIG = 1 << 55  # float64 spacing is 8 here: an integer sum formed in floats loses digits


class Distinct:
    """Every drawn value is new: ``BIG + 7 * i + 1`` (integer) or ``i + 0.25`` (float)."""

    def __init__(self) -> None:
        self.i = 0

    def _next(self, size: int) -> np.ndarray:
        idx = np.arange(self.i, self.i + int(size), dtype=np.int64)
        self.i += int(size)
        return idx

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self._next(size) + 0.25

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return BIG + 7 * self._next(size) + 1


def truth(c: LazyNoiseCounters, cells: Any) -> np.ndarray:
    """``prefix + sum`` of the current nodes, summed exactly (Python ints / fixed order)."""
    idx = np.asarray(cells, dtype=np.int64) % c.n
    node = c.state_arrays()["lazy_node_noise"]
    drawn = c.state_arrays()["drawn"]
    bits = set_bits(c.rounds)
    assert all(drawn[b][idx].all() for b in bits), "a read counter has an undrawn node"
    prefix = c.state_arrays()["prefix"]
    if c.integer_noise:
        out = [int(prefix[x]) + sum(int(node[b][x]) for b in bits) for x in idx.ravel()]
        return np.array(out, dtype=np.int64).reshape(idx.shape)
    acc = node[bits[-1]][idx].copy()
    for b in bits[-2::-1]:
        acc += node[b][idx]
    return prefix[idx] + acc


class Spy:
    """Counts the calls of the kernel's read functions and of the numpy path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {"apply": 0, "apply_min": 0, "_materialize": 0}
        for name in ("apply", "apply_min"):
            fn = getattr(lazy_kernel, name)
            monkeypatch.setattr(lazy_kernel, name, self._wrap(name, fn))
        mat = LazyNoiseCounters._materialize
        monkeypatch.setattr(LazyNoiseCounters, "_materialize", self._wrap("_materialize", mat))

    def _wrap(self, name: str, fn: Any) -> Any:
        def f(*a: Any, **k: Any) -> Any:
            self.calls[name] += 1
            return fn(*a, **k)
        return f

    def take(self) -> dict[str, int]:
        out = dict(self.calls)
        for k in self.calls:
            self.calls[k] = 0
        return out


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("integer", [True, False])
def test_reads_in_any_order_release_the_exact_sum_of_the_current_nodes(
        compiled: bool, integer: bool) -> None:
    """Reads through query_min, query_at and noise_sum, interleaved, at rounds whose high
    levels are kept (16..), carried (18, 32) and far apart (16 -> 4096, where ``r >> 4``
    equals ``16 << 4``): each equals the exact sum of its current nodes, and a node once
    drawn keeps its value while it is current."""
    c = LazyNoiseCounters(8, 8192, 1.0, integer, Distinct())
    c._compiled = compiled
    rng = np.random.default_rng(5)
    cells = np.array([[0, 3, 5], [1, 3, 7]])
    seen: dict[tuple[int, int, int], Any] = {}
    plan = [16, 1, 1, 1, 14, 4096 - 33, 1, 1]
    for k in plan:
        c.push(rng.integers(0, 5, size=8).astype(np.int64), k)
        for read in ("min", "at", "min", "sum", "min", "at_neg", "min"):
            if read == "min":
                got = c.query_min(cells)
                want = truth(c, cells).min(axis=0)
            elif read == "at":
                got = c.query_at(cells[:, ::-1])
                want = truth(c, cells[:, ::-1])
            elif read == "at_neg":
                got = c.query_at(np.array([-1, 2, -8]))
                want = truth(c, np.array([-1, 2, -8]))
            else:
                got = c.noise_sum(c.rounds) + c.state_arrays()["prefix"]
                want = truth(c, np.arange(8))
            assert got.dtype == want.dtype
            assert got.tolist() == want.tolist(), (c.rounds, read)
        node, drawn = c.state_arrays()["lazy_node_noise"], c.state_arrays()["drawn"]
        for b in set_bits(c.rounds):
            start = (c.rounds >> b) << b
            for x in np.flatnonzero(drawn[b]):
                v = seen.setdefault((start, b, int(x)), node[b][x])
                assert v == node[b][x]


def test_a_high_level_sum_is_not_reused_after_a_numpy_path_read_at_the_same_round() -> None:
    """A numpy-path read (noise_sum) between two query_min reads at a round with high
    levels: the second still equals the exact sum."""
    c = LazyNoiseCounters(4, 64, 1.0, True, Distinct())
    cells = np.array([[0, 1], [2, 3]])
    c.push(np.arange(4, dtype=np.int64), 20)
    assert c.query_min(cells).tolist() == truth(c, cells).min(axis=0).tolist()
    c.noise_sum(20)
    c.push(np.ones(4, dtype=np.int64), 2)
    assert c.query_min(cells).tolist() == truth(c, cells).min(axis=0).tolist()
    c.noise_sum(22)
    assert c.query_min(cells).tolist() == truth(c, cells).min(axis=0).tolist()


@pytest.mark.parametrize("integer", [True, False])
def test_query_min_routing(monkeypatch: pytest.MonkeyPatch, integer: bool) -> None:
    """query_min: one compiled kernel call for a ``(d, m)`` read after round 0 (also an
    empty one); the numpy path (no kernel) when ``_compiled`` is off; at round 0 neither,
    the prefix in the noise dtype; 1-D cells and negative indices through query_at."""
    spy = Spy(monkeypatch)
    dt = np.int64 if integer else np.float64
    c = LazyNoiseCounters(6, 64, 1.0, integer, Distinct())
    cells = np.array([[0, 2, 4], [1, 2, 5]])
    got = c.query_min(cells)
    assert got.dtype == dt and got.tolist() == [0, 0, 0]
    assert spy.take() == {"apply": 0, "apply_min": 0, "_materialize": 0}
    c.push(np.array([3, 1, 4, 1, 5, 9], dtype=np.int64), 1)
    got = c.query_min(cells)
    assert got.shape == (3,) and got.tolist() == truth(c, cells).min(axis=0).tolist()
    assert spy.take() == {"apply": 0, "apply_min": 1, "_materialize": 0}
    assert c.query_min(np.zeros((2, 0), dtype=np.int64)).shape == (0,)
    assert spy.take()["apply_min"] == 1
    one = c.query_min(np.array([4, 0, 5]))
    assert np.ndim(one) == 0 and one == truth(c, [4, 0, 5]).min()
    spy.take()
    neg = np.array([[-6, 2, -1], [1, -4, 5]])
    got = c.query_min(neg)
    assert got.shape == (3,) and got.tolist() == truth(c, neg).min(axis=0).tolist()
    assert spy.take()["_materialize"] == 1
    c._compiled = False
    c.push(np.ones(6, dtype=np.int64), 2)
    got = c.query_min(cells)
    assert got.shape == (3,) and got.tolist() == truth(c, cells).min(axis=0).tolist()
    assert spy.take() == {"apply": 0, "apply_min": 0, "_materialize": 1}


@pytest.mark.parametrize("integer", [True, False])
def test_query_at_routing(monkeypatch: pytest.MonkeyPatch, integer: bool) -> None:
    """query_at: at round 0 the prefix in the noise dtype; after it the compiled kernel
    for indices in range, never the numpy path."""
    spy = Spy(monkeypatch)
    c = LazyNoiseCounters(5, 16, 1.0, integer, Distinct())
    got = c.query_at(np.array([[0, 4], [2, 2]]))
    assert got.dtype == (np.int64 if integer else np.float64) and got.shape == (2, 2)
    c.push(np.arange(5, dtype=np.int64), 3)
    cells = np.array([[0, 4], [2, 2]])
    got = c.query_at(cells)
    assert got.shape == (2, 2) and got.tolist() == truth(c, cells).tolist()
    assert spy.take() == {"apply": 1, "apply_min": 0, "_materialize": 0}


@pytest.mark.parametrize("total", [
    np.array([1, 2, 3], dtype=np.int64), np.array([1, 2, 3], dtype=np.int32),
    np.array([1.0, 2.0, 3.0]), np.array([1], dtype=np.int64), np.array([[1, 2, 3]]),
])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_push_agrees_with_the_eager_counter(total: np.ndarray, k: int) -> None:
    """Any total and round count: the same prefix and rounds as ContinualCounters, or the
    same error (a mis-shaped total is refused, not broadcast); also past the horizon."""
    out = []
    for cls in (ContinualCounters, LazyNoiseCounters):
        c = cls(3, 4, 1.0, True, Distinct())
        res: list[Any] = []
        for _ in range(5):  # horizon 4: k = 1 reaches it by the fast path
            try:
                c.push(total, k)
                res.append((c.rounds, c.state_arrays()["prefix"].tolist()))
            except Exception as exc:  # the error type is compared
                res.append(type(exc).__name__)
        out.append(res)
    assert out[0] == out[1]


@pytest.mark.parametrize("integer", [True, False])
def test_query_min_far_apart_does_not_reuse_the_old_high_levels(integer: bool) -> None:
    """query_min at round 16, then at 4096 (``4096 >> 4 == 16 << 4``) on the same cells:
    the level-12 node, not round 16's level-4 sum."""
    c = LazyNoiseCounters(4, 8192, 1.0, integer, Distinct())
    cells = np.array([[0, 1], [3, 2]])
    c.push(np.arange(4, dtype=np.int64), 16)
    assert c.query_min(cells).tolist() == truth(c, cells).min(axis=0).tolist()
    c.push(np.ones(4, dtype=np.int64), 4096 - 16)
    assert c.query_min(cells).tolist() == truth(c, cells).min(axis=0).tolist()


class Ones:
    """Every drawn node is 1 (float or int64)."""

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.ones(size)

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.ones(size, np.int64)


@pytest.mark.parametrize("integer", [False, True])
def test_query_at_an_empty_list_is_an_empty_release(integer: bool) -> None:
    """``query_at([])`` reads no counter at round 0 and later (compiled path): an empty
    release of the noise dtype, nothing drawn. ``np.asarray([])`` is float64, so the int64
    conversion of the cells matters (without it: IndexError at round 0, a numba TypingError
    later; mutants ``query_at`` 3 and 5)."""
    c = LazyNoiseCounters(n=4, horizon=8, sigma=1.0, integer_noise=integer, noise=Ones())
    dt = np.int64 if integer else np.float64
    out0 = c.query_at([])                      # round 0
    assert out0.shape == (0,) and out0.dtype == dt
    c.push(np.array([1, 2, 3, 4]), 3)
    out = c.query_at([])                       # round 3, compiled read path
    assert out.shape == (0,) and out.dtype == dt
    assert c.drawn_count() == 0
    assert c.query_at([0, 2]).tolist() == [3, 5]


@pytest.mark.parametrize("integer", [False, True])
def test_query_min_of_rows_without_candidates_is_empty(integer: bool) -> None:
    """``query_min([[], []])`` (d = 2 rows, no candidate) returns an empty result of the
    noise dtype and draws nothing: the rows are converted to int64 first (without it the
    (2, 0) float64 array reaches ``lazy_kernel.plan``: numba TypingError; mutants
    ``query_min`` 3 and 5)."""
    c = LazyNoiseCounters(n=4, horizon=8, sigma=1.0, integer_noise=integer, noise=Ones())
    c.push(np.array([1, 2, 3, 4]), 3)
    out = c.query_min([[], []])
    assert out.shape == (0,)
    assert out.dtype == (np.int64 if integer else np.float64)
    assert c.drawn_count() == 0
