"""ContinualCounters with lazy node noise: a node's noise is drawn when first read.

:class:`~sketches.counters.gauss_bm.ContinualCounters` draws, at every round, the noise
of the node that completes (one value per counter). LazyHH (paper 002,
Algorithm 6) reads only the counters its candidates hash to (about 63% of the
``d x k~`` cells on CAIDA), so most draws for the other cells are never part
of any output. :class:`LazyNoiseCounters` draws a node's noise for a counter
the first time a query reads that counter while the node is current, stores
it, and never redraws it (a drawn mask per level says which stored values are
live).

Distribution: every node's noise is an independent ``N(0, sigma^2)`` (or
discrete Gaussian) value, independent of the data; a released value is
``prefix + sum`` of the current nodes' noise at the counters it reads. Drawing
a node's value at its first read instead of at its completion gives every
sequence of reads exactly the same joint distribution (each node gets one
fresh independent value, used by every later read of that node), so the
release distribution is that of :class:`~sketches.counters.gauss_bm.ContinualCounters`.
What changes is the order in which a seeded noise source is consumed (and
how much of it): a seeded run gives other (equally distributed) values.

Draw order (deterministic, a function of the reads): at a query at round
``r``, for the set bits ``b`` of ``r`` ascending, the counters read whose
level-``b`` node is not drawn yet, ascending; all of them in one call
``gaussian(sigma, m)`` / ``discrete_gaussian(sigma, m)``. Atomic: the values
are drawn into a temporary before any state changes.

Bookkeeping: ``drawn[level]`` is cleared when a level completes. The read set
and round of the last query are remembered: a node that already existed then
was drawn for every counter of that read set, so only counters outside it are
checked (the common case reads almost the same set at consecutive rounds).

Reads: the noise of a counter at round ``r`` is the sum of its current
nodes (one per set bit of ``r``), always formed in a fixed order (top set bit
first, then each lower set bit added), so float values are bit-identical
however they were reached (also after a restore). One n-vector caches it on the
last read set (the base class's ``_noise_now``; derived, not checkpointed): a
round whose bits extend the last query's takes one vector add per new bit;
integer noise also subtracts the levels that completed (exact); float noise
after a carry recomputes the sum at full width (one add per set bit). Memory:
the algorithm's ``(levels + 1) * n`` 8-byte values, the ``levels * n`` byte
mask and ``17 * n`` bytes (cache, last read set, high-level sums below).

Compiled reads: :meth:`LazyNoiseCounters.query_at` and :meth:`LazyNoiseCounters.query_min`
(LazyHH's min over rows) do this bookkeeping in :mod:`sketches.counters.lazy_kernel`
over the read counters only (the cache is extended by the fresh levels where no node
was dropped, else recomputed in the fixed order): the same draws in the same order,
the same state and bit-identical values as the numpy path (``_compiled = False``).
:meth:`~LazyNoiseCounters.query_min` also keeps, per read counter, the fixed-order sum
of its nodes at levels ``>= 4`` (a prefix of the fixed order; those nodes change only
when ``rounds >> 4`` does), so after a carry a sum costs that value plus the few low
levels instead of every level (1.14-1.16x on the Fig. 4 stream); derived, not
checkpointed, and invalidated by any other read and by a restore.

Checkpoint: arrays ``prefix``, ``lazy_node_noise`` and ``drawn`` (the key
differs from the eager ``node_noise`` so an eager reader refuses the state
instead of reusing undrawn slots, which hold superseded values). An eager
checkpoint (``node_noise``, all drawn) is accepted.

Examples
--------
>>> import numpy as np
>>> class One:
...     def gaussian(self, sigma, size): return np.ones(size)
...     def discrete_gaussian(self, sigma, size): return np.ones(size, np.int64)
>>> c = LazyNoiseCounters(n=4, horizon=8, sigma=1.0, integer_noise=True, noise=One())
>>> c.push(np.array([1, 2, 3, 4]), 3)   # rounds 1..3: nodes of levels 0 and 1
>>> c.query_at(np.array([0, 2])).tolist(), int(c.drawn_count())
([3, 5], 4)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sketches.counters import lazy_kernel
from sketches.counters.gauss_bm import (
    ContinualCounters,
    GaussianNoise,
    completed_levels,
    set_bits,
    trailing_zeros,
)
from sketches.errors import SerializationError, SpecError

__all__ = ["LazyNoiseCounters"]

_HIGH = 4  # query_min keeps the noise sum of the levels >= _HIGH (it changes every 16 rounds)


class LazyNoiseCounters(ContinualCounters):
    """``n`` GaussBM counters whose node noise is drawn at first read (module docstring).

    Same parameters as :class:`~sketches.counters.gauss_bm.ContinualCounters`. Reads go
    through :meth:`query_at` (or :meth:`query`, which reads every counter);
    ``behind`` masks are not supported.
    """

    _compiled = True  # reads through lazy_kernel (False: the numpy path; same draws and values)

    def __init__(
        self, n: int, horizon: int, sigma: float, integer_noise: bool, noise: GaussianNoise
    ) -> None:
        super().__init__(n, horizon, sigma, integer_noise, noise)
        self._drawn = np.zeros((self.levels, self.n), dtype=bool)
        self._read_mask = np.zeros(self.n, dtype=bool)  # counters read by the last query
        self._read_round = -1  # its round (-1: none, e.g. after a restore)
        self._high = np.empty(self.n, dtype=self._noise_now.dtype)  # query_min: high levels
        self._high_round = -1  # the read at which _high was valid on the read set (-1: none)

    def _commit(self, total: np.ndarray | None, k: int) -> None:
        """Open ``k`` rounds: completed levels become undrawn; no noise is drawn here."""
        r0 = self.rounds
        levels = [trailing_zeros(r0 + 1)] if k == 1 else completed_levels(r0, r0 + k)
        if total is not None:
            self._prefix += total
        for level in levels:
            self._drawn[level] = False
        self.rounds = r0 + k

    def push(self, total: np.ndarray, new_rounds: int) -> None:
        """:meth:`ContinualCounters.push` (fast path for one round of int64 totals)."""
        if (new_rounds == 1 and self.rounds < self.horizon and isinstance(total, np.ndarray)
                and total.dtype == np.int64 and total.shape == self._prefix.shape):
            self._prefix += total  # no noise is drawn: nothing can fail after this
            self.rounds += 1
            self._drawn[trailing_zeros(self.rounds)] = False
            return
        super().push(total, new_rounds)

    def advance_empty(self, ends: np.ndarray) -> np.ndarray:
        """Not supported: lazy counters draw at reads (open rounds with :meth:`push`)."""
        raise SpecError("advance_empty: LazyNoiseCounters draws noise at reads; use push()")

    def _materialize(self, mask: np.ndarray) -> None:
        """Draw every undrawn current node of the counters in ``mask`` (module order)
        and bring the noise-sum cache up to date there.

        Cache ``self._noise_now``: valid on the last read set, where it holds the
        fixed-order sum (top set bit first, then each lower set bit added). Extended
        by the fresh (low) bits when the last round's bits are all still current;
        with integer noise, the dropped levels are subtracted first (exact);
        otherwise (float noise after a carry, or a mostly new read set) the sum
        is recomputed at full width. Counters new to the read set: gathered in
        the same fixed order. Every valid entry is the fixed-order sum, however
        it was reached, so float reads are bit-identical after a restore.
        """
        r, last = self.rounds, self._read_round
        bits = set_bits(r)
        n_old = sum(1 for b in bits if (r >> b) << b <= last or last < 0)
        fresh, old = bits[:len(bits) - n_old], np.array(bits[len(bits) - n_old:], dtype=np.int64)
        every = np.flatnonzero(mask) if fresh else None  # fresh nodes: undrawn everywhere
        outside = np.flatnonzero(mask & ~self._read_mask)  # not read by the last query
        lin = (old[:, None] * self.n + outside).ravel()  # (old bit, counter), bit-major
        need = lin[~self._drawn.reshape(-1)[lin]]
        m = need.size + (every.size * len(fresh) if every is not None else 0)
        values = self._draw_values(m) if m else None  # a temporary: state changes after it
        acc = self._noise_now
        dropped = [b for b in set_bits(last) if not (r >> b) & 1 or (r >> b) << b > last]
        extend = last >= 0 and (not dropped or self.integer_noise)
        if not extend or 4 * outside.size > self.n:
            extend, outside = False, np.zeros(0, dtype=np.int64)
        for b in dropped if extend else ():
            acc -= self._node_noise[b]  # integer only: exact (values of the last round)
        if values is not None:
            start = 0
            for b in fresh:
                assert every is not None
                self._node_noise[b][every] = values[start:start + every.size]
                np.copyto(self._drawn[b], mask)
                start += every.size
            self._node_noise.reshape(-1)[need] = values[start:]
            self._drawn.reshape(-1)[need] = True
        if extend:
            for b in reversed(fresh):
                acc += self._node_noise[b]
        else:
            np.copyto(acc, self._node_noise[bits[-1]])
            for b in bits[-2::-1]:
                acc += self._node_noise[b]
        if outside.size:
            part = self._node_noise[bits[-1]][outside]
            for b in bits[-2::-1]:
                part += self._node_noise[b][outside]
            acc[outside] = part
        self._read_mask = mask
        self._read_round = r
        self._high_round = -1

    def _read_compiled(self, idx: np.ndarray, rows: np.ndarray | None = None
                       ) -> np.ndarray | None:
        """:meth:`_materialize` then ``(prefix + noise)[idx]`` (:mod:`lazy_kernel
        <sketches.counters.lazy_kernel>`): the same draws in the same order, the same
        state and bit-identical values, with the work over the read counters only.

        The cache is recomputed in the fixed order on every read counter (the numpy
        path's extension by the fresh bits yields the same sums). Atomic: the values are
        drawn before any state changes. ``rows``: ``idx`` shaped ``(d, m)``; then the
        minimum over its rows is returned instead (:meth:`query_min`). None (and nothing
        done) when an index is outside ``[0, n)``: the caller takes the numpy path.
        """
        r, last = self.rounds, self._read_round
        bits = set_bits(r)
        n_old = sum(1 for b in bits if (r >> b) << b <= last or last < 0)
        fresh = np.array(bits[:len(bits) - n_old], dtype=np.int64)
        old = np.array(bits[len(bits) - n_old:], dtype=np.int64)
        ok, mask, every, need = lazy_kernel.plan(idx, self.n, self._read_mask, self._drawn, old)
        if not ok:
            return None
        m = need.size + every.size * fresh.size
        values = self._draw_values(m) if m else np.zeros(0, dtype=self._node_noise.dtype)
        extend = last >= 0 and set(set_bits(last)) <= set(old.tolist())  # no node dropped
        bits_desc = np.array(bits[::-1], dtype=np.int64)
        if rows is None:
            out = lazy_kernel.apply(values, fresh, every, need, self._node_noise, self._drawn,
                                    bits_desc, self._prefix, self._noise_now, idx, extend,
                                    self._read_mask)
            self._high_round = -1
        else:
            # the levels from _HIGH up change only when r >> _HIGH does: their sum is kept
            n_high = sum(1 for b in bits if b >= _HIGH)
            high_ok = n_high > 0 and self._high_round >= 0 and \
                self._high_round >> _HIGH == r >> _HIGH
            out = lazy_kernel.apply_min(values, fresh, every, need, self._node_noise,
                                        self._drawn, bits_desc, n_high, self._prefix,
                                        self._noise_now, extend, self._read_mask, self._high,
                                        high_ok, rows)
            # valid on this read set unless an extension kept sums of older high levels
            self._high_round = r if n_high and (high_ok or not extend) else -1
        self._read_mask = mask
        self._read_round = r
        return out

    def query_at(self, cells: np.ndarray) -> np.ndarray:
        """Noisy prefix sums of the counters ``cells`` (any shape; repeats allowed).

        Draws the noise of the current nodes of those counters that no earlier
        query read. Returns int64 (integer noise) or float64, shaped like ``cells``.
        """
        idx = np.asarray(cells, dtype=np.int64)
        if self.rounds == 0:
            return self._prefix[idx].astype(self._node_noise.dtype)
        out = self._read_compiled(idx.reshape(-1)) if self._compiled else None
        if out is not None:
            return out.reshape(idx.shape)
        mask = np.zeros(self.n, dtype=bool)
        mask[idx] = True
        self._materialize(mask)
        return (self._prefix + self._noise_now)[idx]

    def query_min(self, cells: np.ndarray) -> np.ndarray:
        """``query_at(cells).min(axis=0)`` for ``cells`` of shape ``(d, m)`` (Alg. 4, min):
        the same draws, state and values, without the ``d x m`` intermediate."""
        idx = np.asarray(cells, dtype=np.int64)
        if idx.ndim != 2 or not idx.shape[0] or not self._compiled or self.rounds == 0:
            return self.query_at(idx).min(axis=0)
        rows = np.ascontiguousarray(idx)
        out = self._read_compiled(rows.reshape(-1), rows)
        return self.query_at(idx).min(axis=0) if out is None else out

    def query(self, behind: np.ndarray | None = None) -> np.ndarray:
        """Noisy prefix sums of every counter (draws every undrawn current node)."""
        if behind is not None and bool(np.any(behind)):
            raise SpecError("behind: LazyNoiseCounters has no partially pushed rounds")
        return self.query_at(np.arange(self.n))

    def noise_sum(self, r: int) -> np.ndarray:
        """Noise of the current nodes (``r == rounds`` only; draws the undrawn ones)."""
        if r != self.rounds:
            raise SpecError(f"r: only the current round {self.rounds} can be read, got {r}")
        if r == 0:
            return np.zeros(self.n, dtype=self._node_noise.dtype)
        self._materialize(np.ones(self.n, dtype=bool))
        return self._noise_now.copy()

    def drawn_count(self) -> int:
        """Number of (level, counter) node values drawn and live."""
        return int(np.count_nonzero(self._drawn))

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of numpy state (prefix, node noise, drawn mask, last read set, noise-sum cache).

        ``(levels + 1) * n * 8`` for the algorithm's state, plus ``levels * n`` (mask)
        and ``17 * n`` (read set, noise-sum cache, :meth:`query_min`'s high-level sums):
        within 1.2x for ``levels >= 9``.
        """
        return int(super().memory_bytes() + self._drawn.nbytes + self._read_mask.nbytes
                   + self._noise_now.nbytes + self._high.nbytes)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for serialization (private: exact counts and node noise)."""
        return {"prefix": self._prefix, "lazy_node_noise": self._node_noise,
                "drawn": self._drawn}

    def restore(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Load :meth:`state_arrays` output, or an eager checkpoint (every node drawn)."""
        if "lazy_node_noise" in arrays:
            drawn = arrays.get("drawn")
            if drawn is None or drawn.shape != self._drawn.shape:
                raise SerializationError(f"counters: 'drawn' mask missing or not of shape"
                                         f" {self._drawn.shape}")
            eager = {k: v for k, v in arrays.items() if k == "prefix"}
            eager["node_noise"] = arrays["lazy_node_noise"]
        else:
            drawn, eager = np.ones_like(self._drawn), dict(arrays)
        super().restore(header, eager)  # checks sigma, shapes and dtypes
        self._drawn = np.array(drawn, dtype=bool, order="C")  # reshape(-1) writes must hit it

    def _reset_query_cache(self) -> None:
        """No valid read set after a restore: the next read rebuilds the cache."""
        self._noise_now = np.zeros(self.n, dtype=self._node_noise.dtype)
        self._read_mask = np.zeros(self.n, dtype=bool)
        self._read_round = -1
        self._high_round = -1

