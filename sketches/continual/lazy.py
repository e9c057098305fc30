"""LazyCMS and LazyCS: continual-observation DP sketches (paper 002, Algorithm 5).

State: a private ``d x w`` array ``P`` of exact counts of the current interval
of every cell, and ``d x w`` GaussBM counters ``O``
(:class:`~sketches.counters.gauss_bm.ContinualCounters`) that receive column ``j`` of
``P`` (then reset it) once per round. Queries use Algorithm 4 on ``O``.

Clocks (SEMANTICS.md §2)
---------------------------------------
Both clocks are the same schedule over *steps*: step ``s`` (0-based) first adds
its events to ``P``, then pushes ``c = columns_per_tick`` consecutive columns
``(s*c) mod w .. (s*c) mod w + c - 1`` into ``O`` at round ``floor(s*c/w) + 1``.
A round is ``w / c`` steps.

- Arrival clock (the paper's): one step per event, ``c = 1``. Event ``t``
  (0-based) increments ``P``, then column ``pos = t mod w`` is pushed at round
  ``floor(t/w) + 1`` -- exactly Algorithm 5, line 15 (the paper's ``t`` is
  0-based there: ``pos`` starts at 0). Horizon: ``T`` events,
  ``ceil(T / w)`` rounds (Theorem 2). Only private under ``relation="replace"``
  (stream length public); the spec refuses it otherwise.
- Tick clock: step = tick. A tick carries a (possibly empty) batch of events.
  ``update_batch(items, ticks)`` closes every tick before the last tick of the
  batch (the last one stays open for more events); ``advance_to(k)`` closes
  every tick ``< k``, empty ones included, so which columns are pushed when
  depends on the ticks only. Horizon: ``T`` ticks, ``ceil(T / (w/c))`` rounds. Per
  round every cell still receives one increment, so Theorem 2's sensitivity
  argument carries over (m = 2d replace, d add/remove).
- Aligned rounds (``round_ticks = R``, tick clock): every column is pushed when
  a round's last tick closes, ``T / R`` rounds (docs/PRIVACY.md 13.2).

Where a call that closes several rounds puts their events: the tree and the float
factorizations get their sum in the first new round (their releases depend on prefix
sums only); ``blt_int`` gets one round at a time, so every event enters the round of
its own tick (a lattice release depends on where each increment sits;
:meth:`_LazySketch._ingest_by_round`).

Vectorised update
-----------------
A batch is turned into this schedule without a per-event loop
(:mod:`sketches.continual.lazy_schedule`): per cell, the sum of the events pushed by a
closed step and of those still waiting in ``P``, one ``bincount`` over
``2 d w`` bins. The test-suite checks state and releases against a per-event
implementation of Algorithm 5 with explicit trees.

Floating-point noise (Mironov 2012)
-----------------------------------
Only the ``discrete`` calibrator (default) adds integer noise to integer
counts, so a release is exactly the distribution the proof analyses. Under
``analytic`` or ``paper`` the noise is IEEE-754 float64: the low-order bits of
a noisy value can reveal which exact count it was added to, so the
calibrated guarantee does not hold for the released floats. These
calibrators exist to reproduce paper 002; every release made with them
carries ``"float_noise": true`` and the worker refuses non-discrete
calibrators in production topologies.

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> zero = make_noise("zero", allow_insecure=True)
>>> spec = LazySketchSpec(depth=2, width=4, horizon=64, eps=1.0, delta=1e-6)
>>> sk = LazyCMS(spec, zero)          # tick clock, all columns pushed per tick
>>> sk.update_batch(np.array([7, 7, 7, 9]), ticks=np.array([0, 0, 1, 1]))
>>> sk.query(np.array([7])).tolist()  # tick 0 closed, tick 1 still open
[2]
>>> sk.advance_to(2)
>>> sk.query(np.array([7, 9])).tolist()  # exact with zero noise at a tick boundary
[3, 1]
>>> arr = LazyCS(LazySketchSpec(depth=3, width=4, horizon=64, eps=1.0, delta=1e-6,
...                             relation="replace", clock="arrival"), zero)
>>> arr.update_batch(np.array([5] * 8))
>>> bool(-4 <= arr.query(np.array([5]))[0] - 8 <= 4)   # lazy lag at most w
True
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from sketches.continual.lazy_schedule import batch_steps, pushed_columns, split_sums
from sketches.continual.lazy_spec import LazySketchSpec, error_bound
from sketches.core.base import NoiseSummary
from sketches.core.release import estimate
from sketches.core.serialization import spec_from_params, state_from_bytes, state_to_bytes
from sketches.counters import family
from sketches.counters.factorization import CounterKind
from sketches.counters.family import make_counters
from sketches.errors import HorizonExceededError, SerializationError, SpecError
from sketches.privacy import Calibration, Calibrator, Clock
from sketches.privacy.bounds import sketch_point_query

if TYPE_CHECKING:
    from sketches.core.noise import NoiseSource

__all__ = ["LazyCMS", "LazyCS", "LazySketchSpec"]


class _LazySketch:
    """Shared implementation of LazyCMS / LazyCS (see module docstring)."""

    name: ClassVar[str] = ""
    estimator: ClassVar[str] = ""
    signed: ClassVar[bool] = False

    def __init__(self, spec: LazySketchSpec, noise: NoiseSource) -> None:
        if not isinstance(spec, LazySketchSpec):
            raise SpecError(f"spec: expected LazySketchSpec, got {type(spec).__name__}")
        self.spec = spec
        self.hash = spec.hash_spec
        if spec.counter is CounterKind.BLT_INT and spec.steps_per_round != 1 \
                and not spec.aligned:
            raise SpecError(
                "counter: 'blt_int' releases a round once, when it opens, so every column must"
                " be pushed at once: use the tick clock with columns_per_tick unset (= width),"
                " or aligned rounds (round_ticks),"
                f" got clock={spec.clock.value!r}, columns_per_tick={spec.columns_per_tick!r}")
        self.calibration: Calibration = spec.calibration(signed=self.signed)
        self._noise = noise
        d, w = spec.depth, spec.width
        self._P = np.zeros((d, w), dtype=np.int64)
        # tree (ContinualCounters) or factorized (FactorizedCounters): one interface
        self._counters = make_counters(spec.counter, d * w, spec.rounds, self.calibration, noise)
        self._steps = 0  # steps closed (arrival: events seen; tick: ticks closed)
        # the step of its round at which a column is pushed (aligned rounds: the last)
        self._slot = (np.full(w, spec.steps_per_round - 1, dtype=np.int64) if spec.aligned
                      else np.arange(w, dtype=np.int64) // spec.cpt)
        self._work: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
        self._limbs = np.empty((3, 0), dtype=np.uint64)  # key limbs + hash scratch

    # ------------------------------------------------------------ updates
    def update_batch(
        self, items: np.ndarray, ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Add a batch of events (vectorised Algorithm 5).

        Parameters
        ----------
        items : array of int / str / bytes
        ticks : int64 array, optional
            Tick clock only (required there): non-decreasing tick of each event,
            ``>=`` the current open tick and ``< horizon``.
        weights : None
            Not supported (one event = one unit of sensitivity).
        """
        if weights is not None:
            raise SpecError(
                f"weights: {self.name} counts one unit per event; expand weighted events into"
                " repeated events (bounded by unit_cap) instead"
            )
        items = np.asarray(items)
        n = int(items.shape[0]) if items.ndim else 1
        batch = batch_steps(self.spec, self._steps, n, ticks)
        if batch is None:
            return
        steps, close_to = batch
        keys = self.hash.item_keys(items.reshape(-1))
        if self.spec.counter is CounterKind.BLT_INT:
            self._ingest_by_round(steps, keys, close_to)
        else:
            self._ingest(steps, keys, close_to)

    def advance_to(self, tick: int) -> None:
        """Tick clock: close every tick ``< tick`` (empty ticks push their columns)."""
        if self.spec.clock is not Clock.TICK:
            raise SpecError("clock: advance_to() is for the tick clock; the arrival clock has none")
        tick = int(tick)
        if tick > self.spec.horizon:
            raise HorizonExceededError(
                f"horizon: cannot close ticks up to {tick}, the horizon is {self.spec.horizon}"
                " ticks; start a new epoch (fresh sketch)"
            )
        if tick > self._steps:
            self._ingest(np.zeros(0, np.int64), np.zeros(0, np.uint64), tick)

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Reusable work buffers (not state): fresh multi-MB arrays cost page faults
        on every batch, which doubled the update time in measurements."""
        if self._work is None or self._work[0].shape[1] < n:
            d = self.spec.depth
            self._work = (
                np.empty((d, n), dtype=np.int64),
                np.empty(n, dtype=np.int64),
                np.empty((d, n), dtype=np.int64) if self.signed else None,
            )
            self._limbs = np.empty((3, n), dtype=np.uint64)
        idx, tmp, weights = self._work
        return idx[:, :n], tmp[:n], None if weights is None else weights[:, :n]

    def _ingest_by_round(self, steps: np.ndarray, keys: np.ndarray, close_to: int) -> None:
        """``blt_int``: ingest a batch one counter round at a time, so that every event enters
        the round of its own tick (``tick // steps_per_round``).

        :meth:`_ingest` puts everything a call pushes into the *first* round it opens; for
        the tree and the float factorizations a release depends only on the prefix sum, so
        that is harmless, but a lattice release rounds ``s (C x)`` and depends on where each
        increment sits, and which rounds one call closes depends on the tick of the batch's
        last event (data): independent review of issue 20c, finding 1 (docs/PRIVACY.md
        13.1). Atomic: a failed draw leaves the sketch as it was before the call.
        """
        spr = self.spec.steps_per_round  # 1 (a round per tick) or R (aligned rounds)
        rounds = steps // spr
        cuts = np.flatnonzero(rounds[1:] != rounds[:-1]) + 1
        if not cuts.size:
            self._ingest(steps, keys, close_to)
            return
        saved = (self._P.copy(), self._steps, dict(self._counters.state_header()),
                 {k: v.copy() for k, v in self._counters.state_arrays().items()})
        empty_s, empty_k = np.zeros(0, np.int64), np.zeros(0, np.uint64)
        try:
            starts = [0, *cuts.tolist()]
            ends = [*cuts.tolist(), steps.size]
            for a, b in zip(starts, ends, strict=True):
                first = int(rounds[a]) * spr  # the first step of this group's round
                if first > self._steps:  # close the rounds before it (P into its own)
                    self._ingest(empty_s, empty_k, first)
                end = close_to if b == steps.size else first + spr
                self._ingest(steps[a:b], keys[a:b], end)
        except BaseException:
            p, st, header, arrays = saved
            self._counters.restore(header, arrays)
            self._P, self._steps = p, st
            raise

    def _ingest(self, steps: np.ndarray, keys: np.ndarray, close_to: int) -> None:
        spec = self.spec
        d, w, spr = spec.depth, spec.width, spec.steps_per_round
        s0 = self._steps
        close_to = max(close_to, s0)
        if steps.size:
            work = self._scratch(keys.shape[0])  # may reallocate self._limbs: call first
            sums = split_sums(spec, self.hash, steps, keys, close_to, work,
                              self._limbs[:, : keys.shape[0]])
        else:
            sums = np.zeros((2, d, w), dtype=np.int64)
        # pending P columns are pushed at the next step >= s0 serving their slot
        p_pushed = pushed_columns(self._slot, spr, s0, close_to)
        pushed = sums[0] + np.where(p_pushed, self._P, 0)
        new_p = sums[1] + np.where(p_pushed, 0, self._P)
        new_rounds = spec.rounds_at(close_to) - self._counters.rounds
        if new_rounds > 0 or close_to > s0:
            # atomic: push() draws all noise before changing the counters; P and the
            # step count change only after it succeeded (a failed draw leaves the
            # sketch exactly as before this call)
            self._counters.push(pushed.reshape(-1), new_rounds)
        self._P = new_p
        self._steps = close_to

    # ------------------------------------------------------------- queries
    def _behind(self) -> np.ndarray | None:
        pos = self._steps % self.spec.steps_per_round
        if pos == 0 or self.spec.aligned:  # aligned: every cell is at the last round
            return None
        return np.broadcast_to(self._slot >= pos, (self.spec.depth, self.spec.width)).ravel()

    def noisy_matrix(self) -> np.ndarray:
        """The released ``d x w`` matrix: every cell's GaussBM estimate (noisy)."""
        est = self._counters.query(self._behind())
        return est.reshape(self.spec.depth, self.spec.width)

    def query(self, items: np.ndarray) -> np.ndarray:
        """Noisy point estimates (Algorithm 4) for ``items``."""
        return estimate(self.noisy_matrix(), self.hash, items, self.estimator)

    @property
    def steps_closed(self) -> int:
        """Arrival clock: events seen; tick clock: ticks closed (= the open tick)."""
        return self._steps

    @property
    def rounds(self) -> int:
        """Rounds opened so far on the GaussBM counters."""
        return self._counters.rounds

    def lag_bound(self) -> dict[str, Any]:
        """Worst-case lazy lag of any cell (Lemma 5 proof: ``[-w, 0]`` CMS, ``[-w, w]`` CS).

        Arrival clock: a cell misses at most the last ``w`` events. Tick clock:
        every column is pushed once per ``w / columns_per_tick`` ticks, so a
        cell misses at most the events of that many last closed ticks plus
        the open tick; in events this is data-dependent (private), so it is
        stated in ticks only (``lag_bound_events`` is None).
        """
        spr = self.spec.steps_per_round
        if self.spec.clock is Clock.ARRIVAL:
            return {"lag_bound": spr, "lag_unit": "events", "lag_bound_events": spr,
                    "lag_bound_ticks": None}
        return {"lag_bound": spr, "lag_unit": "ticks", "lag_bound_events": None,
                "lag_bound_ticks": spr}

    def release(self, beta: float = 0.05) -> dict[str, Any]:
        """Public payload: noisy matrix, hash spec, estimator, rounds, error and lag bounds."""
        matrix = self.noisy_matrix()
        payload: dict[str, Any] = {
            "kind": "sketch",
            "mechanism": self.name,
            "estimator": self.estimator,
            "hash": self.hash.to_public(),
            "matrix": matrix.tolist(),
            "rounds": int(self._counters.rounds),
            "clock": self.spec.clock.value,
            "steps_closed": int(self._steps),
            # True under the analytic/paper calibrators: float noise (see module docstring)
            "float_noise": not self.calibration.integer_noise,
            "error_bound": error_bound(self.spec, self.calibration, self.estimator, beta),
        }
        payload.update(self.lag_bound())
        if self.spec.counter is CounterKind.BLT_INT:
            # the lattice's exact sampler is within TV t per draw: the release states
            # delta + (1 + e^eps) D t (the envelope adds it; docs/PRIVACY.md 9, 13.1)
            payload["sampler"] = sampler_term(self.spec, self.calibration.sigma)
        return payload

    def privacy(self) -> dict[str, Any]:
        """The stated ``(eps, delta)``: the spec's, plus the sampler's term with ``blt_int``
        (:func:`sampler_term`; none for the tree and float factorized counters)."""
        term = sampler_term(self.spec, self.calibration.sigma)
        delta = float(self.spec.delta)
        return {"eps": float(self.spec.eps),
                "delta": delta if term is None else add_up(delta, term["delta"]),
                "sampler": term}

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of numpy state: ``P`` plus the counters (prefix + one node per level)."""
        return int(self._P.nbytes + self._counters.memory_bytes())

    def to_bytes(self) -> bytes:
        """Versioned binary state (private: holds exact counts). See sketches.core.serialization."""
        state = {"steps": self._steps, **self._counters.state_header()}
        arrays = {"P": self._P, **self._counters.state_arrays()}
        return state_to_bytes(self.name, self.spec, state, arrays)

    @classmethod
    def from_bytes(
        cls, data: bytes, noise: NoiseSource, expected_spec: LazySketchSpec | None = None
    ) -> _LazySketch:
        """Restore a state written by :meth:`to_bytes`.

        The restored sketch continues exactly as the original would, given a
        noise source in the same state. ``expected_spec`` (recommended) makes a
        state with any other spec raise IncompatibleSpecError.
        """
        spec, state, arrays = state_from_bytes(cls.name, LazySketchSpec, data, expected_spec)
        sketch = cls(spec, noise)
        p = arrays.get("P")
        if p is None or p.shape != sketch._P.shape:
            raise SerializationError(f"arrays.P: missing or not of shape {sketch._P.shape}")
        sketch._counters.restore(state, arrays)
        sketch._P = p.astype(np.int64)
        steps = int(state["steps"])
        if sketch._counters.rounds != spec.rounds_at(steps):
            raise SerializationError("state: steps and rounds are inconsistent; corrupt state")
        sketch._steps = steps
        return sketch


def sampler_term(spec: LazySketchSpec, sigma: float) -> dict[str, Any] | None:
    """The lattice sampler's share of delta, ``(1 + e^eps) D t``, or None (not ``blt_int``).

    Every lattice draw is within total variation ``t = lattice_sampler_tv(sigma_L)`` of
    the exact ``N_Z(0, sigma_L^2)`` (``2^-104`` for one table, ``2 * 2^-104 + e`` for two
    composed tables from ``COMPOSE32_MIN``); an epoch draws ``D = d w n`` (one per cell and
    round, ``n = rounds``), and a mechanism within TV ``D t`` of an ``(eps, delta)``-DP one is
    ``(eps, delta + (1 + e^eps) D t)``-DP (docs/PRIVACY.md 9, 13.1 step 5). The tree counters'
    term stays stated, not added (their release bytes are frozen).

    >>> spec = LazySketchSpec(depth=2, width=8, horizon=16, eps=1.0, delta=1e-6,
    ...                       counter="blt_int")
    >>> t = sampler_term(spec, 100.0)
    >>> t["draws"], t["tv_per_draw"] == 2.0**-104, 0 < t["delta"] < 1e-28
    (256, True, True)
    >>> sampler_term(LazySketchSpec(depth=2, width=8, horizon=16, eps=1.0, delta=1e-6), 1.0)
    """
    if spec.counter is not CounterKind.BLT_INT:
        return None
    from sketches.counters.lattice import lattice_sampler_tv

    draws = int(spec.depth) * int(spec.width) * int(spec.rounds)
    tv = float(lattice_sampler_tv(sigma))
    return {"delta": (1.0 + math.exp(spec.eps)) * draws * tv, "draws": draws,
            "tv_per_draw": tv,
            "statement": "lattice sampler's total-variation distance to the exact discrete "
                         "Gaussian, (1 + e^eps) x draws x tv_per_draw, added to the stated "
                         "delta (docs/PRIVACY.md 9, 13.1)"}


def add_up(delta: float, term: float) -> float:
    """``delta + term`` rounded up (never below the exact sum): a term far below
    ``delta``'s ulp still moves the stated delta up by one ulp.

    >>> add_up(1e-6, 1e-28) > 1e-6, add_up(0.5, 0.25), add_up(1e-6, 0.0)
    (True, 0.75, 1e-06)
    """
    total = delta + term
    if term > 0 and (total - delta < term or total == delta):
        total = math.nextafter(total, math.inf)
    return total


def _guarantee(sketch: _LazySketch) -> dict[str, Any]:
    return sketch.privacy()


class LazyCMS(_LazySketch):
    """LazySketch with Count-Min rows (estimator: min). See module docstring."""

    name = "lazy_cms"
    estimator = "min"
    signed = False


class LazyCS(_LazySketch):
    """LazySketch with Count Sketch rows (signs; estimator: median)."""

    name = "lazy_cs"
    estimator = "median"
    signed = True


def default_counter(spec: LazySketchSpec, *, signed: bool) -> LazySketchSpec:
    """``spec`` with ``counter: blt_int`` when the lattice BLT wins (issue 20), else ``spec``.

    Applies to specs built from topology parameters without a ``counter`` key (new
    epochs); a checkpoint keeps its own recorded counter (a stored spec without the
    field is a tree: the dataclass default). ``blt_int`` wins when it is eligible
    (``discrete`` calibrator, tick clock, every column per tick or aligned rounds, a
    lattice scale within the sampler's range, at most
    :data:`~sketches.counters.family.DEFAULT_LATTICE_MAX_DRAWS` draws an epoch) and
    :func:`sketches.counters.family.lattice_wins` (lower epoch error bound at the same
    ``(eps, delta)``, memory within 1.5x of the tree's).
    """
    from sketches.counters.family import (
        DEFAULT_LATTICE_MAX_DRAWS,
        DEFAULT_LATTICE_MAX_ROUNDS,
        lattice_wins,
    )

    if spec.counter is not CounterKind.TREE or spec.calibrator is not Calibrator.DISCRETE \
            or spec.clock is not Clock.TICK \
            or (spec.steps_per_round != 1 and not spec.aligned) \
            or spec.rounds > DEFAULT_LATTICE_MAX_ROUNDS \
            or spec.depth * spec.width * spec.rounds > DEFAULT_LATTICE_MAX_DRAWS:
        return spec
    try:
        lat = dataclasses.replace(spec, counter=CounterKind.BLT_INT)
        lat_err = lat.error_bound_epoch(0.05, signed=signed)
    except SpecError:  # e.g. sigma_L beyond the exact sampler's range
        return spec
    if lattice_wins(spec.error_bound_epoch(0.05, signed=signed), lat_err, spec.memory_bytes(),
                    lat.memory_bytes()):
        return lat
    return spec


def _build_spec(params: Any, *, signed: bool = False) -> LazySketchSpec:
    spec = spec_from_params(LazySketchSpec, params)
    if "counter" not in params and family.DEFAULT_TO_LATTICE:
        spec = default_counter(spec, signed=signed)
    return spec


def _noise(sketch: _LazySketch) -> NoiseSummary:
    """Sigma in counts (lattice BLT: ``sigma_L / s``), the counter and its lattice scale."""
    cal = sketch.calibration
    return NoiseSummary(sigma=float(cal.release_sigma), counter=sketch.spec.counter.value,
                        lattice_scale=None if cal.lattice is None else int(cal.lattice.scale))


def _register() -> None:
    from sketches.core.base import Capabilities, MechanismEntry, register

    for cls in (LazyCMS, LazyCS):
        register(MechanismEntry(
            name=cls.name,
            build_spec=functools.partial(_build_spec, signed=cls.signed),
            build=cls,
            from_bytes=cls.from_bytes,
            continual=True,
            capabilities=Capabilities(
                tick_clock=True, memory_model=LazySketchSpec.memory_bytes,
                counters=tuple(k.value for k in CounterKind), aligned_rounds=True,
                # blt_int clamps each round's per-cell increment (docs/PRIVACY.md 13.1): the
                # per-cell bound is enforced on the data path, so the capability stays False
                noise=_noise,
                # blt_int: delta + the lattice sampler's term (worker gauges; the envelope
                # reads the payload's "sampler")
                guarantee=_guarantee,
                point_query=functools.partial(sketch_point_query,
                                              median=cls.estimator == "median")),
        ))


_register()
