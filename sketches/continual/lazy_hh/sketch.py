"""LazyHH: continual-observation DP heavy hitters (paper 002, Algorithm 6).

A ``d x k~`` LazyCMS (Algorithm 5) counts the stream: implemented here with
the same schedule and calibration as :class:`sketches.continual.lazy.LazyCMS`, but pushing
whole rounds (LazyHH only reads the sketch at round ends), which the tests check
against ``LazyCMS`` event by event (zero and constant noise). The counters are
:class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`: a node's noise is drawn when
an output first reads it (the candidates read ~63% of the cells on CAIDA), which
leaves the release distribution unchanged but consumes a seeded noise source in
another order than ``LazyCMS``. A candidate set (:mod:`sketches.core.candidates`) holds every item
seen since the last output plus the ``k~`` best candidates kept then. At every
output time the candidates with a noisy estimate ``> max(tau1, tau2) + c`` are
published, then the set is trimmed to the top ``k~`` estimates (thresholds:
:class:`sketches.privacy.LazyHHThresholds`; ``c`` = unit cap, 1 in the paper).

Output times ``I`` and clocks
-----------------------------
- Arrival clock (relation ``replace``, the paper): ``I = {t : t mod k~ = 0}``
  (events); one column pushed per event, so an output lags by ``<= k~`` events
  (``lag = k~``).
- Tick clock: all ``k~`` columns are pushed when a tick closes, so nothing is
  pending at a tick boundary (``lag = 0``); ``I`` = the close of every
  ``output_every``-th tick (ticks ``b - 1`` with ``b`` a multiple of
  ``output_every``). The Theorem 4 bounds hold at those boundaries.

Stream length ``t`` (SEMANTICS.md §6)
---------------------------------------
``replace``: ``t`` is public and enters the thresholds as in the paper.
``add_remove``: a GaussBM length counter (``count_fraction`` of eps and delta)
gives ``t_hat``; ``tau1`` uses ``t_hat``, ``lambda2``/``tau2`` use
``t_up = t_hat + E + c`` (``E``: its error bound at failure ``beta``).

The stated guarantee and its derivation: :func:`sketches.continual.lazy_hh.spec.guarantee`.

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = LazyHHSpec(k=2, k_tilde=64, horizon=2**16, eps=1.0, delta=1e-3,
...                   relation="replace", clock="arrival", hash_seed=1)
>>> hh = LazyHH(spec, make_noise("zero", allow_insecure=True))
>>> hh.update_batch(np.concatenate([np.full(40_000, 7), np.arange(2**16 - 40_000)]))
>>> [e["item"] for e in hh.release()["items"]], hh.release()["threshold"]
([7], 32769.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from sketches.continual.lazy import LazySketchSpec
from sketches.continual.lazy_hh import detection, kernel
from sketches.continual.lazy_hh.release import release_payload
from sketches.continual.lazy_hh.spec import LazyHHSpec, derive_params, guarantee
from sketches.continual.lazy_hh.state import (
    LazyHHState,
    check_seed,
    hash_from_state,
    item_key2_from_state,
    item_key_from_state,
    make_hash,
    make_item_key,
    make_item_key2,
    restore_state,
    state_of,
)
from sketches.core.base import Capabilities, MechanismEntry, NoiseSummary, register
from sketches.core.candidates import CandidateSet, top_order, unique_pairs
from sketches.core.hashing import HashSpec
from sketches.core.keyed_prf import siphash24, siphash24_multi
from sketches.core.serialization import spec_from_params, state_from_bytes, state_to_bytes
from sketches.counters import family
from sketches.counters.factorization import CounterKind
from sketches.counters.factorized import FactorizedCounters
from sketches.counters.family import make_counters
from sketches.counters.gauss_bm import ContinualCounters
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import HorizonExceededError, PrivacyError, SerializationError, SpecError
from sketches.privacy import Calibrator, Clock

if TYPE_CHECKING:
    from sketches.core.noise import NoiseSource

__all__ = ["LazyHH", "LazyHHSpec"]

_CHUNK = 1 << 15  # events per vectorised step (bounds the (rounds, d*w) work array)
_KCHUNK = 1 << 12  # the same for the compiled path: a work array that stays in cache
_KCELLS = 1 << 18  # tick clock, compiled path: at most this many (tick, cell) sums per call


class LazyHH:
    """Algorithm 6 with vectorised batches (see module docstring).

    Parameters
    ----------
    spec : LazyHHSpec
    noise : NoiseSource
        Injected noise, also the source of the secret hash parameters
        (:meth:`~sketches.core.hashing.HashSpec.random`). A fixed ``spec.hash_seed`` is
        refused (PrivacyError) unless ``noise.kind`` is ``fast`` or ``zero``.
    """

    name: ClassVar[str] = "lazy_hh"

    def __init__(self, spec: LazyHHSpec, noise: NoiseSource) -> None:
        if not isinstance(spec, LazyHHSpec):
            raise SpecError(f"spec: expected LazyHHSpec, got {type(spec).__name__}")
        hash_spec = make_hash(spec, noise, _depth(spec))
        self._setup(spec, noise, hash_spec, make_item_key(spec, noise),
                    make_item_key2(spec, noise))

    def _setup(self, spec: LazyHHSpec, noise: NoiseSource, hash_spec: HashSpec,
               item_key: bytes, item_key2: bytes) -> None:
        self.spec = spec
        self._item_key = item_key  # secret SipHash key of str/bytes items (never released)
        self._item_key2 = item_key2  # second, independent key: the identity's second word
        eps_s, delta_s = spec.sketch_budget
        depth = _depth(spec)
        if (hash_spec.depth, hash_spec.width) != (depth, spec.k_tilde):
            raise SpecError(f"hash: shape ({hash_spec.depth}, {hash_spec.width}) != sketch shape"
                            f" ({depth}, {spec.k_tilde}); rebuild the hash for this spec")
        # the embedded LazyCMS (Alg. 5), described by its own spec; columns_per_tick=None:
        # a tick pushes every column (nothing pending at a tick boundary)
        self.sketch_spec = LazySketchSpec(
            depth=depth, width=spec.k_tilde, horizon=spec.horizon, eps=eps_s, delta=delta_s,
            relation=spec.relation, clock=spec.clock, columns_per_tick=None,
            calibrator=spec.calibrator, hash_seed=hash_spec.seed or 0, unit_cap=spec.unit_cap,
            counter=spec.counter,
        )  # its hash_seed is a placeholder when the hash is secret: self.hash is the hash
        self.hash = hash_spec
        self._row0 = (np.arange(depth, dtype=np.int64) * spec.k_tilde)[:, None]
        # spec.truncated: events past event_horizon are dropped, so neighbours may also
        # differ by pushed-out events: 2d cells per unit, like replace (docs/PRIVACY.md 10.5)
        self.calibration = spec.sketch_calibration(depth)  # m = 2d under truncation
        lat = self.calibration.lattice
        if lat is not None and int(getattr(lat, "round_cap", 0)) != 0:
            # Theorem 3's event B needs every sketch cell's estimate within gamma of its
            # true count; a per-round clamp under-counts a cell past R = max_count // rounds,
            # so LazyHH takes only public, enforced bounds (truncation, arrival horizon)
            raise PrivacyError(
                f"counter blt_int: LazyHH needs an enforced cell-count bound (round_cap 0),"
                f" got round_cap={lat.round_cap}; the per-round clamp under-counts and would"
                f" break Theorem 3's event B (docs/PRIVACY.md 13.1); use the arrival clock or"
                f" set event_horizon")
        dw = depth * spec.k_tilde
        counters: LazyNoiseCounters | FactorizedCounters = LazyNoiseCounters(
            dw, self.sketch_spec.rounds, self.calibration.sigma,
            self.calibration.integer_noise, noise) if spec.counter is CounterKind.TREE \
            else make_counters(spec.counter, dw, self.sketch_spec.rounds, self.calibration, noise)
        self.params = derive_params(spec, self.calibration, depth)
        cal = self.params.count
        self._st = LazyHHState(
            counters=counters,
            counter=None if cal is None else ContinualCounters(
                1, spec.horizon, cal.sigma, cal.integer_noise, noise),
            carry=np.zeros((2, dw), dtype=np.int64),
            tick_counts=np.zeros(spec.output_every, dtype=np.int64),
        )
        self._fast_catch_up = True  # tests set False to force the sequential path
        self._kernel = True  # compiled hot path (kernel.py); tests set False: the numpy path
        self._sip_words = np.frombuffer(item_key + item_key2, dtype="<u8").astype(np.uint64)

    # ------------------------------------------------------------ updates
    def update_batch(
        self, items: np.ndarray, ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Add a batch of events; publishes a new set at every output time it crosses.

        ``ticks``: tick clock only, non-decreasing int64 (one per item).
        """
        if weights is not None:
            raise SpecError("weights: LazyHH counts events (one unit each); pass weights=None")
        items = np.asarray(items).reshape(-1)
        if self.spec.clock is Clock.ARRIVAL:
            if ticks is not None:
                raise SpecError("ticks: the arrival clock takes no ticks; pass ticks=None")
            self._check_items(items)
            self._update_arrival(items)
        else:
            if ticks is None:
                raise SpecError("ticks: the tick clock needs the tick of every event")
            tk = np.asarray(ticks, dtype=np.int64).reshape(-1)
            if tk.shape != items.shape:
                raise SpecError(f"ticks: length {tk.size} != number of items {items.size}")
            self._check_items(items)
            self._update_tick(items, tk)

    def _item_keys(self, items: np.ndarray) -> np.ndarray:
        """64-bit item keys: ints by the hash's bijection (distinct ints never collide),
        str/bytes by SipHash-2-4 under the secret ``_item_key`` (a keyed PRF: collisions
        cannot be forged; their probability is in ``delta_tilde``, :func:`guarantee`)."""
        if items.dtype.kind in "iub":
            return self.hash.item_keys(items)
        return siphash24(self._item_key, items)

    def _item_keys2(self, items: np.ndarray) -> np.ndarray:
        """Second 64-bit word of a str/bytes item's 128-bit identity (SipHash-2-4 under the
        independent secret ``_item_key2``); candidates are the pairs ``(key, key2)``, so
        labels need no 64-bit collision term (docs/PRIVACY.md 10.4). Int items: unused."""
        return siphash24(self._item_key2, items)

    def _item_key_words(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(keys, keys2)``: :meth:`_item_keys` and, for str/bytes items, :meth:`_item_keys2`
        (one encoding of the items for both words); ``keys2`` is None for int items."""
        if items.dtype.kind in "iub":
            return self.hash.item_keys(items), None
        enc = kernel.ascii_blob(items) if self._kernel else None
        if enc is not None:  # ASCII str items: the same SipHash words, compiled
            both = np.empty((2, items.size), dtype=np.uint64)
            kernel.siphash_pair(*enc, self._sip_words, both)
        else:
            both = siphash24_multi((self._item_key, self._item_key2), items)
        return both[0], both[1]

    def _check_items(self, items: np.ndarray) -> None:
        limit = self.spec.horizon if self.spec.clock is Clock.ARRIVAL else self.spec.event_horizon
        if items.size and self._st.events + items.size > limit:
            raise HorizonExceededError(
                f"horizon: {self._st.events + items.size} events exceed the epoch's bound of"
                f" {limit}; start a new epoch (or raise event_horizon)")
        if not items.size:
            return
        integer = items.dtype.kind in "iub"
        if not integer and items.dtype.kind not in "USO":
            raise SpecError(f"items: unsupported dtype {items.dtype}; pass integers, str or bytes")
        if self._st.cands is None:
            self._st.cands = CandidateSet(self.sketch_spec.depth, integer, wide=not integer)
        elif self._st.cands.integer_items != integer:
            raise SpecError("items: a LazyHH holds either integer or str/bytes items, not both;"
                            " convert the items to one type")

    def _update_arrival(self, items: np.ndarray) -> None:
        """Alg. 5 + 6 on the arrival clock, vectorised over chunks of events.

        Event ``s`` (0-based) lands in column ``j`` of row ``i``; column ``j`` is
        pushed at step ``s - s mod w + j`` if ``j >= s mod w`` (this round), else
        in the next round (Alg. 5 line 15). One ``bincount`` per chunk sums the
        increments of every (round, cell); a round ends, and an output happens,
        when ``s + 1`` is a multiple of ``w = k~``: the only per-round Python work.
        """
        w, dw = self.spec.k_tilde, self._st.carry.shape[1]
        chunk = _KCHUNK if self._kernel else _CHUNK  # same sums, any chunking
        for c0 in range(0, items.size, chunk):
            seg = items[c0:c0 + chunk]
            s0, m = self._st.events, seg.size
            base = s0 // w
            keys, keys2 = self._item_key_words(seg)
            slots = (s0 + m - 1) // w - base + 3
            if self._kernel:  # same sums; candidate cells computed for new candidates only
                buckets = None
                acc = kernel.round_sums(keys, s0, self.hash.words(), self.sketch_spec.depth,
                                        w, slots)
            else:
                buckets = self.hash.buckets(keys)
                acc = self._round_sums(buckets, s0, slots).reshape(slots, dw)
            acc[:2] += self._st.carry
            done = (s0 + m) // w - base  # rounds completed by this chunk
            for r in range(done):
                a, b = max(0, (base + r) * w - s0), (base + r + 1) * w - s0
                self._st.counters.push(acc[r], 1)  # one round (same noise rule as advance)
                self._absorb(seg[a:b], keys[a:b], None if buckets is None else buckets[:, a:b],
                             None if keys2 is None else keys2[a:b])
                self._st.events = s0 + b
                self._output()
            a = max(0, (base + done) * w - s0)
            if a < m:
                self._absorb(seg[a:], keys[a:], None if buckets is None else buckets[:, a:],
                             None if keys2 is None else keys2[a:])
            self._st.events = s0 + m
            self._st.carry[:] = acc[done:done + 2]  # later slots are empty

    def _round_sums(self, buckets: np.ndarray, s0: int, slots: int) -> np.ndarray:
        """``int64[slots, d, w]``: increments of every (local round, row, column).

        Event ``s`` with bucket ``j`` is pushed at step ``P = s + ((j - s) mod w)``
        (the next push of column ``j``), so it lands in round ``P // w`` at column
        ``P mod w = j``: ``P - base * w`` is its (local round, column) index. One
        ``bincount`` per row keeps the work arrays cache-sized (a loop over rows,
        not events).
        """
        w = self.spec.k_tilde
        pow2 = w & (w - 1) == 0
        depth, m = buckets.shape
        steps = np.arange(s0, s0 + m)
        lag = (-steps) % w  # (j - s) mod w = (j + lag) mod w
        local = steps - (s0 // w) * w
        acc = np.empty((slots, depth, w), dtype=np.int64)
        idx = np.empty(m, dtype=np.int64)
        for i in range(depth):
            np.add(buckets[i], lag, out=idx)
            if pow2:
                np.bitwise_and(idx, w - 1, out=idx)
            else:
                np.remainder(idx, w, out=idx)
            idx += local
            acc[:, i, :] = np.bincount(idx, minlength=slots * w).reshape(slots, w)
        return acc

    def _update_tick(self, items: np.ndarray, ticks: np.ndarray) -> None:
        if not items.size:
            return
        if np.any(ticks[1:] < ticks[:-1]):
            raise SpecError("ticks: must be non-decreasing within a batch; sort the batch")
        if int(ticks[0]) < self._st.open or int(ticks[-1]) >= self.spec.horizon:
            raise SpecError(f"ticks: must lie in [{self._st.open}, {self.spec.horizon}) (open tick,"
                            f" horizon); got {int(ticks[0])}..{int(ticks[-1])}")
        if self._fast_catch_up and self._st.quiet():  # first events of the epoch: catch up first
            self.advance_to(int(ticks[0]))
        every = self.spec.output_every
        bounds = np.arange(self._st.boundary + every, int(ticks[-1]) + 1, every)
        cuts = np.searchsorted(ticks, bounds, side="left")
        start = 0
        for b, cut in zip(bounds.tolist(), cuts.tolist(), strict=True):
            self._ingest_ticks(items[start:cut], ticks[start:cut])
            self._close(b)
            start = cut
        self._ingest_ticks(items[start:], ticks[start:])

    def _ingest_ticks(self, items: np.ndarray, ticks: np.ndarray) -> None:
        """Tick clock: an event of tick ``x`` goes to round ``x + 1`` (all columns pushed
        when the tick closes); loops over the distinct ticks of the batch, not events."""
        if not items.size:
            return
        keys, keys2 = self._item_key_words(items)
        if self._kernel:  # same sums; candidate cells for new candidates only
            dw = self._st.carry.shape[1]
            first = np.flatnonzero(np.r_[True, ticks[1:] != ticks[:-1]])  # each distinct tick
            ends = [*first[1:].tolist(), items.size]
            per = max(1, _KCELLS // dw)  # distinct ticks per kernel call: bounded work array
            for g in range(0, first.size, per):
                a, b = int(first[g]), ends[min(g + per, first.size) - 1]
                slot = np.repeat(np.arange(min(per, first.size - g)),
                                 np.diff(np.r_[first[g:g + per], b]))
                acc = kernel.cell_counts(keys[a:b], slot, self.hash.words(),
                                         self.sketch_spec.depth, self.spec.k_tilde,
                                         int(slot[-1]) + 1)
                for j, tick in enumerate(ticks[first[g:g + per]].tolist()):
                    self._close_ticks(tick)
                    self._st.carry[0] += acc[j]
            self._absorb(items, keys, None, keys2)
        else:
            buckets = self.hash.buckets(keys)
            cells = buckets + self._row0
            dw = self._st.carry.shape[1]
            uniq, first = np.unique(ticks, return_index=True)
            for tick, a, b in zip(uniq.tolist(), first.tolist(),
                                  [*first[1:].tolist(), items.size], strict=True):
                self._close_ticks(tick)
                self._st.carry[0] += np.bincount(cells[:, a:b].ravel(), minlength=dw)
            self._absorb(items, keys, buckets, keys2)
        self._st.events += items.size
        self._st.tick_counts += np.bincount(ticks - self._st.boundary,
                                            minlength=self.spec.output_every)

    def _close_ticks(self, tick: int) -> None:
        """Push the open tick's round and empty rounds for the ticks up to ``tick``."""
        if tick > self._st.open:
            self._st.counters.advance(self._st.carry[:1], empty_rounds=tick - self._st.open - 1)
            self._st.carry[0] = 0
            self._st.open = tick

    def advance_to(self, tick: int) -> None:
        """Tick clock: close every tick ``< tick``; publish at each output boundary crossed."""
        if self.spec.clock is not Clock.TICK:
            raise SpecError("clock: advance_to() is for the tick clock; the arrival clock has none")
        tick = int(tick)
        if tick > self.spec.horizon:
            raise HorizonExceededError(f"horizon: cannot close ticks up to {tick}, the horizon is"
                                       f" {self.spec.horizon} ticks; start a new epoch")
        bounds = range(self._st.boundary + self.spec.output_every, tick + 1, self.spec.output_every)
        if len(bounds) > 1 and self._fast_catch_up and self._st.quiet():
            self._catch_up(bounds)  # same releases, vectorised
        else:
            for b in bounds:
                self._close(b)
        self._close_ticks(tick)

    def _catch_up(self, bounds: range) -> None:
        """Close the output boundaries ``bounds`` of a quiet shard at once (tick clock).

        A tick-clock epoch is wall-clock aligned: a shard whose state is created (or
        first seen) ``x`` ticks into the epoch must close ``x`` ticks, i.e. about
        ``x / output_every`` output boundaries, before its first event. Closing them
        one by one (:meth:`_close`) costs a Python call and a length-counter noise
        call per boundary (~90 ms for a 3,600-tick epoch, per shard). This does the
        same in a few vectorised calls when the shard is quiet
        (:meth:`LazyHHState.quiet <sketches.continual.lazy_hh.state.LazyHHState.quiet>`:
        no candidate, nothing pending). Then every skipped output reads nothing from
        the sketch counters, so

        - the sketch (:class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`,
          which draws noise only at reads) takes all the empty rounds in one
          ``push`` (its state does not depend on how rounds are split into calls);
        - the length counter (``add_remove`` only) opens the same calls as the
          sequential path, one per boundary, through
          :meth:`~sketches.counters.gauss_bm.ContinualCounters.advance_empty`: the
          same nodes are drawn (one independent draw per node, shared by the
          outputs reading it), in the canonical order, in one noise call. Every
          skipped output's ``t_hat`` enters the running maximum of
          ``t_up = t_hat + E + c`` exactly as sequentially (docs/PRIVACY.md 10.3):
          the output set ``I`` is data-independent and none is dropped;
        - only the last output's ``last`` is observable (releases read it), and it
          is computed by the same :meth:`_output`.

        So releases, checkpoints and their distribution are those of the sequential
        path (bit-identical for a zero or a concatenation-consistent noise source;
        ``tests/unit/sketches/continual/lazy_hh/test_catchup.py``). Whether the fast
        path runs depends on the data (was there an event?), which only shows in the
        processing time: outside the DP model, like every timing signal
        (docs/PRIVACY.md 11).

        ``bounds``: ``range(boundary + every, stop, every)``, non-empty, within the
        horizon. Atomic w.r.t. a failing noise source (the only draw comes first).
        """
        st = self._st
        ends = np.arange(bounds.start, bounds.stop, bounds.step, dtype=np.int64)
        length = None
        if st.counter is not None:
            t_hats = st.counter.advance_empty(ends)[:, 0].astype(np.float64)
            length = (float(t_hats[-1]), self._running_upper(t_hats))  # every skipped output
        self._close_ticks(int(ends[-1]))  # lazy sketch: empty rounds, no draw
        st.boundary = int(ends[-1])
        st.outputs += ends.size - 1  # _output counts the last one
        self._output(length)

    def _close(self, boundary: int) -> None:
        self._close_ticks(boundary)
        if self._st.counter is not None:
            self._st.counter.advance(self._st.tick_counts[:, None])
        self._st.tick_counts[:] = 0
        self._st.boundary = boundary
        self._output()

    def _absorb(self, items: np.ndarray, keys: np.ndarray, buckets: np.ndarray | None,
                keys2: np.ndarray | None = None) -> None:
        """Alg. 6 line 9, vectorised: add the interval's distinct new items to C.

        ``keys2``: second words of str/bytes items, whose identity is ``(keys, keys2)``
        (equal first words, different second: distinct candidates sharing sketch cells).
        ``buckets`` None: the compiled path (first occurrences found by
        :mod:`~sketches.continual.lazy_hh.kernel`, cells hashed for the new candidates
        only); the same candidates, items and cells as the numpy path.
        """
        c = self._st.cands
        assert c is not None
        if buckets is None:
            first = (kernel.first_of_keys(keys) if keys2 is None
                     else kernel.first_of_pairs(keys, keys2))
            idx = first[c.missing(keys[first], None if keys2 is None else keys2[first])]
            idx = idx[np.argsort(keys[idx], kind="stable")]  # ascending: add() merges
            if idx.size:
                c.add(keys[idx], items[idx],
                      kernel.cells(keys[idx], self.hash.words(), c.cells.shape[0], self.hash.width),
                      None if keys2 is None else keys2[idx])
            return
        if keys2 is None:  # int items: the 64-bit key is a bijection
            pos = np.flatnonzero(c.missing(keys))  # most items are candidates already
            if pos.size:
                ukeys, first = np.unique(keys[pos], return_index=True)
                idx = pos[first]
                c.add(ukeys, items[idx], buckets[:, idx] + self._row0)
            return
        pos = np.flatnonzero(c.missing(keys, keys2))
        if pos.size:
            idx = pos[unique_pairs(keys[pos], keys2[pos])]
            c.add(keys[idx], items[idx], buckets[:, idx] + self._row0, keys2[idx])

    # ------------------------------------------------------------- outputs
    def _length(self) -> tuple[float, float]:
        """``(t_hat, t_up)``: public length (replace) or DP count and its upper bound."""
        if self._st.counter is None:
            return float(self._st.events), float(self._st.events)
        t_hat = float(self._st.counter.query()[0])
        return t_hat, self._running_upper(np.array([t_hat]))

    def _running_upper(self, t_hats: np.ndarray) -> float:
        """``t_up``: the maximum of ``t_hat + E + c`` over every output time so far.

        Lemma 10 bounds an evicted item with lambda2 at its eviction time, which
        needs lambda2 non-decreasing in time; ``t_hat`` is noisy, so ``t_hat + E + c``
        alone is not (the maximum is post-processing, free). ``t_hats``: the new outputs'.
        """
        ups = float(t_hats.max()) + self.params.count_error + self.spec.unit_cap
        return max(ups, float(self._st.last.get("t_up", -np.inf)))

    def _output(self, length: tuple[float, float] | None = None) -> None:
        """Alg. 6 ``output`` (lines 1-11) then the top-k~ trim (line 12).

        ``length``: ``(t_hat, t_up)`` already computed (catch-up), else :meth:`_length`.
        """
        th = self.params.thresholds
        t_hat, t_up = self._length() if length is None else length
        tau = th.threshold(max(t_hat, 0.0), t_up)
        c = self._st.cands
        # the read may draw lazy node noise: do it before any output state changes, so a
        # failing draw never pairs new thresholds with the previous output's items
        est = None
        if c is not None and c.size > 0 and self._kernel:  # the same read set, each cell once
            counters = self._st.counters
            if isinstance(counters, LazyNoiseCounters):  # the read and the min in kernels
                est = counters.query_min(c.cells)
            else:
                used = kernel.used_cells(c.cells, counters.n)
                est = kernel.min_over_rows(c.cells, used, counters.query_at(used), counters.n)
        elif c is not None and c.size > 0:
            est = self._st.counters.query_at(c.cells).min(axis=0)  # Alg. 4 (min), all pushed
        self._st.last = {"t_hat": t_hat, "t_up": t_up, "threshold": tau,
                      "tau1": th.tau1(max(t_hat, 0.0)), "tau2": th.tau2(t_up),
                      "lambda2": th.lambda2(t_up)}
        self._st.outputs += 1
        if c is None or est is None:
            return
        hot = np.flatnonzero(est > tau)
        order = hot[top_order(est[hot], c.keys[hot], None if c.keys2 is None else c.keys2[hot])]
        st = self._st
        st.hh_keys, st.hh_items, st.hh_est = c.keys[order], c.items[order], est[order]
        c.trim(est, self.spec.k_tilde)

    @property
    def events(self) -> int:
        """Events ingested this epoch (private: an exact count, never released)."""
        return self._st.events

    def heavy_hitters(self) -> tuple[np.ndarray, np.ndarray]:
        """``(items, estimates)`` of the last output (estimates descending)."""
        return self._st.hh_items.copy(), self._st.hh_est.copy()

    # ------------------------------------------------------------- release
    def privacy(self) -> dict[str, Any]:
        """The stated guarantee and its budget split.

        See :func:`~sketches.continual.lazy_hh.spec.guarantee`.
        """
        lat = self.calibration.lattice
        return guarantee(self.spec, self.params, self.calibration.sigma,
                         lattice_scale=None if lat is None else int(lat.scale))

    def release(self) -> dict[str, Any]:
        """Public ``heavy_hitters`` payload of the last output (ARCHITECTURE.md)."""
        return release_payload(self.name, self.spec, self.params, self.sketch_spec.depth,
                               self._st, self.privacy())

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of numpy state: sketch, candidates, length counter, last output."""
        extra = 0 if self._st.cands is None else self._st.cands.memory_bytes()
        extra += 0 if self._st.counter is None else self._st.counter.memory_bytes()
        return int(self._st.counters.memory_bytes() + self._st.carry.nbytes + extra
                   + self._st.hh_keys.nbytes + self._st.hh_est.nbytes + self._st.tick_counts.nbytes)

    def to_bytes(self) -> bytes:
        """Versioned binary state (private: exact counts, raw items, secret hash).

        Layout: :mod:`sketches.continual.lazy_hh.state`.
        """
        state, arrays = state_of(self._st, self.hash, self._item_key, self._item_key2)
        return state_to_bytes(self.name, self.spec, state, arrays)

    @classmethod
    def from_bytes(cls, data: bytes, noise: NoiseSource) -> LazyHH:
        """Restore a state written by :meth:`to_bytes`; continues exactly."""
        spec, state, arrays = state_from_bytes(cls.name, LazyHHSpec, data)
        check_seed(spec, noise)
        try:
            obj = cls.__new__(cls)
            hash_spec = hash_from_state(state, _depth(spec), spec.k_tilde)
            obj._setup(spec, noise, hash_spec, item_key_from_state(state, hash_spec),
                       item_key2_from_state(state, hash_spec))
            restore_state(obj._st, state, arrays, obj.hash, obj._item_keys, obj._item_keys2)
        except (KeyError, TypeError, ValueError, SpecError) as exc:
            raise SerializationError(f"state: incomplete LazyHH state ({exc!r})") from None
        return obj


def _depth(spec: LazyHHSpec) -> int:
    return derive_params(spec, None, None).depth


def default_counter(spec: LazyHHSpec) -> LazyHHSpec:
    """``spec`` with ``counter: blt_int`` when the lattice BLT wins (issue 20), else ``spec``.

    As :func:`sketches.continual.lazy.default_counter`: only for specs built from topology
    parameters without a ``counter`` key; ``discrete`` calibrator, a lattice scale within
    the sampler's range, lower noise bound (``gamma``'s) and memory within 1.5x.
    """
    from sketches.counters.family import DEFAULT_LATTICE_MAX_ROUNDS, lattice_wins

    if spec.counter is not CounterKind.TREE or spec.calibrator is not Calibrator.DISCRETE \
            or spec.sketch_rounds() > DEFAULT_LATTICE_MAX_ROUNDS:
        return spec
    beta = spec.beta_value / 2
    try:
        lat = dataclasses.replace(spec, counter=CounterKind.BLT_INT)
        lat_err = lat.error_bound_epoch(beta)
    except SpecError:
        return spec
    if lattice_wins(spec.error_bound_epoch(beta), lat_err, spec.memory_bytes(),
                    lat.memory_bytes()):
        return lat
    return spec


def _build_spec(params: Mapping[str, Any]) -> LazyHHSpec:
    spec = spec_from_params(LazyHHSpec, params)
    if "counter" not in params and family.DEFAULT_TO_LATTICE_HH:
        spec = default_counter(spec)
    return spec


class _Detection:
    """:class:`~sketches.core.base.DetectionAnalysis` of a built LazyHH (its spec and
    derived parameters, :mod:`sketches.continual.lazy_hh.detection`)."""

    def __init__(self, sketch: LazyHH) -> None:
        self.spec, self.params = sketch.spec, sketch.params

    def output_bounds(self, events: float) -> dict[str, Any]:
        return detection.output_bounds(self.spec, self.params, events)

    def min_detectable_share(self) -> float:
        return detection.min_detectable_share(self.spec, self.params)

    def detection_events(self, share: float, *, guaranteed: bool = False) -> float | None:
        return detection.detection_events(self.spec, self.params, share, guaranteed=guaranteed)


def _noise(sketch: LazyHH) -> NoiseSummary:
    """Sigma in counts, the counter and its per-cell error ``gamma``."""
    cal = sketch.calibration
    return NoiseSummary(sigma=float(cal.release_sigma), counter=sketch.spec.counter.value,
                        counter_error=sketch.params.gamma,
                        lattice_scale=None if cal.lattice is None else int(cal.lattice.scale))


CAPABILITIES = Capabilities(
    tick_clock=True, event_horizon=lambda spec: spec.event_horizon,
    memory_model=LazyHHSpec.memory_bytes, counters=tuple(k.value for k in CounterKind),
    noise=_noise, heavy_hitters=_Detection, guarantee=LazyHH.privacy)
"""What LazyHH offers the worker beyond the base contract (:mod:`sketches.core.base`)."""

for _name in (LazyHH.name, "LazyHH"):
    register(MechanismEntry(name=_name, build_spec=_build_spec, build=LazyHH,
                            from_bytes=LazyHH.from_bytes, continual=True,
                            capabilities=CAPABILITIES))
