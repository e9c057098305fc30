"""LazySketchSpec: every parameter of a LazyCMS / LazyCS, validated, plus the
release error statement (paper 002, Lemma 5) derived from it.

Kept apart from :mod:`sketches.continual.lazy` (the algorithm) so the spec can be
imported and validated (e.g. by topology loading) on its own. The validators
at the bottom are shared with :mod:`sketches.continual.punctual`.

Examples
--------
>>> spec = LazySketchSpec(depth=4, width=1024, horizon=86_400, eps=1.0, delta=1e-6,
...                       columns_per_tick=64)
>>> spec.steps_per_round, spec.rounds
(16, 5400)
>>> aligned = LazySketchSpec(depth=4, width=1024, horizon=3600, eps=1.0, delta=1e-6,
...                          round_ticks=60)   # release every 60 ticks: 60 rounds
>>> aligned.steps_per_round, aligned.rounds, aligned.rounds_at(119), aligned.rounds_at(120)
(60, 60, 1, 2)
>>> LazySketchSpec(depth=4, width=1024, horizon=10, eps=1.0, delta=1e-6,
...                columns_per_tick=3)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: columns_per_tick: must be a divisor of width=1024, got 3; ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from sketches.core.hashing import HashSpec
from sketches.core.serialization import spec_to_dict
from sketches.counters.factorization import SQRT_MAX_VALUES, CounterKind
from sketches.errors import SpecError
from sketches.privacy import (
    Calibration,
    Calibrator,
    Clock,
    Relation,
    check_clock,
    lemma5_depth,
    neighbouring_cells,
)

__all__ = ["LazySketchSpec", "coerce_enums", "error_bound", "validate_numbers"]


def coerce_enums(obj: Any, names: tuple[tuple[str, type[Enum]], ...]) -> None:
    """Turn str fields of a frozen spec into their enums, or raise SpecError naming the field."""
    for name, enum in names:
        value = getattr(obj, name)
        try:
            object.__setattr__(obj, name, enum(value))
        except ValueError:
            allowed = ", ".join(str(e.value) for e in enum)
            raise SpecError(f"{name}: unknown value {value!r}; use one of {allowed}") from None


def validate_numbers(obj: Any, ints: tuple[str, ...]) -> None:
    """Check ``ints`` are integers >= 1 and eps > 0, 0 < delta < 1; normalise to int/float."""
    for name in ints:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise SpecError(f"{name}: must be an integer >= 1, got {value!r}")
        object.__setattr__(obj, name, int(value))
    for name in ("eps", "delta"):
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
            raise SpecError(f"{name}: must be a number, got {value!r}")
        object.__setattr__(obj, name, float(value))
    if not (math.isfinite(obj.eps) and obj.eps > 0):
        raise SpecError(f"eps: must be a finite number > 0, got {obj.eps!r}")
    if not 0 < obj.delta < 1:
        raise SpecError(f"delta: must be in (0, 1), got {obj.delta!r}")


@dataclass(frozen=True)
class LazySketchSpec:
    """Every parameter of a LazyCMS / LazyCS (frozen, JSON-able via ``to_dict``).

    Parameters
    ----------
    depth, width : int
        Sketch dimensions ``d x w``.
    horizon : int
        Arrival clock: events ``T``; tick clock: ticks.
    eps, delta : float
        Privacy parameters of the whole epoch (continual release).
    relation : Relation
        Neighbouring relation (``add_remove`` default; ``replace`` = paper).
    clock : Clock
        ``tick`` (default) or ``arrival`` (needs ``replace``).
    columns_per_tick : int or None
        Tick clock: columns pushed per tick, must divide ``width``; ``None``
        means ``width`` (one round per tick, no lag at tick boundaries).
        Arrival clock: must be ``None`` or 1.
    round_ticks : int or None
        Tick clock only: *aligned rounds* of this many ticks. Every column is pushed at
        once, when the round's last tick closes, so a release at a multiple of
        ``round_ticks`` sees every event before it (no lag), and the counters run
        ``horizon / round_ticks`` rounds instead of ``horizon`` (less noise, and for
        ``blt_int`` one draw per cell and round). Must divide ``horizon``; excludes a
        ``columns_per_tick`` below ``width``. ``None`` (default): one round per
        ``width / columns_per_tick`` ticks, staggered (Algorithm 5). The worker sets it to
        ``release.every_ticks`` (docs/PRIVACY.md 13.2).
    calibrator : Calibrator
        ``discrete`` (default, integer noise), ``analytic`` or ``paper``.
    hash_seed : int
        Public hash seed.
    unit_cap : int
        Exact per-unit contribution cap (1 = event-level privacy).
    counter : CounterKind
        The continual counter of every cell: ``tree`` (default, paper 002's
        binary mechanism, exact discrete Gaussian), ``blt`` (Buffered Linear
        Toeplitz factorization: about 3x lower noise at equal privacy for
        ``10^3-10^4`` rounds, 7 floats per cell) or ``sqrt`` (the exact square-root
        factorization, ``rounds`` floats per cell: a reference for small
        sketches, refused above ``SQRT_MAX_VALUES``) or ``blt_int`` (the BLT on an
        integer lattice with exact discrete Gaussian noise: certified, the error of
        ``blt`` within about 1%; tick clock with every column per tick). See
        docs/PRIVACY.md 13 for the guarantee of each. The dataclass default is
        ``tree`` (a stored spec without the field); a spec built from topology
        parameters without ``counter`` gets ``blt_int`` where it wins
        (:func:`sketches.continual.lazy.default_counter`).
    """

    depth: int
    width: int
    horizon: int
    eps: float
    delta: float
    relation: Relation = Relation.ADD_REMOVE
    clock: Clock = Clock.TICK
    columns_per_tick: int | None = None
    calibrator: Calibrator = Calibrator.DISCRETE
    hash_seed: int = 0
    unit_cap: int = 1
    counter: CounterKind = field(default=CounterKind.TREE,
                                 metadata={"omit_if_default": True})
    round_ticks: int | None = field(default=None, metadata={"omit_if_default": True})

    def __post_init__(self) -> None:
        coerce_enums(self, (("relation", Relation), ("clock", Clock), ("calibrator", Calibrator),
                            ("counter", CounterKind)))
        validate_numbers(self, ("depth", "width", "horizon", "unit_cap"))
        cpt = self.columns_per_tick
        if self.clock is Clock.ARRIVAL and cpt not in (None, 1):
            raise SpecError(
                f"columns_per_tick: the arrival clock pushes one column per event; got {cpt!r},"
                " leave it unset or use clock='tick'"
            )
        if cpt is not None and (
            isinstance(cpt, bool) or not isinstance(cpt, int | np.integer)
            or cpt < 1 or self.width % cpt
        ):
            raise SpecError(
                f"columns_per_tick: must be a divisor of width={self.width}, got {cpt!r};"
                " pick a divisor (e.g. width itself) or change width"
            )
        HashSpec(self.hash_seed, self.depth, self.width)  # validates seed
        object.__setattr__(self, "hash_seed", int(self.hash_seed))
        if cpt is not None:
            object.__setattr__(self, "columns_per_tick", int(cpt))
        check_clock(self.relation, self.clock)
        self._check_round_ticks()
        self._check_counter()

    def _check_round_ticks(self) -> None:
        """Aligned rounds: tick clock, a divisor of ``horizon``, no staggered columns."""
        r = self.round_ticks
        if r is None:
            return
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
            raise SpecError(f"round_ticks: must be an integer >= 1, got {r!r}")
        r = int(r)
        object.__setattr__(self, "round_ticks", r)
        if self.clock is not Clock.TICK:
            raise SpecError("round_ticks: aligned rounds are ticks; the arrival clock has none,"
                            " leave round_ticks unset or use clock='tick'")
        if self.horizon % r:
            raise SpecError(f"round_ticks: must divide horizon={self.horizon}, got {r}; pick a"
                            " divisor (e.g. the release interval of an epoch that is a"
                            " multiple of it)")
        if self.columns_per_tick is not None and self.columns_per_tick != self.width:
            raise SpecError(
                f"round_ticks: aligned rounds push every column at once; columns_per_tick="
                f"{self.columns_per_tick} staggers them: leave columns_per_tick unset")

    def _check_counter(self) -> None:
        """Refuse counter/calibrator pairs without a guarantee and a too-large ``sqrt``."""
        if self.counter is CounterKind.TREE:
            return
        if self.counter is CounterKind.BLT_INT and self.calibrator is not Calibrator.DISCRETE:
            raise SpecError(
                "counter: 'blt_int' adds exact discrete Gaussian noise on a lattice; it needs"
                f" calibrator 'discrete', got {self.calibrator.value!r}")
        if self.calibrator is Calibrator.PAPER:
            raise SpecError(
                f"counter: {self.counter.value!r} needs calibrator 'discrete' (or 'analytic');"
                " 'paper' reproduces paper 002's tree: use counter: tree with it")
        cells = self.depth * self.width
        if self.counter is CounterKind.SQRT and self.rounds * cells > SQRT_MAX_VALUES:
            raise SpecError(
                f"counter: 'sqrt' keeps every round's noise of every cell: rounds x cells ="
                f" {self.rounds} x {cells} values ({8 * self.rounds * cells / 2**20:.0f} MiB)"
                f" exceed the limit of {SQRT_MAX_VALUES}; use counter: blt (same error within"
                " about 1%, 7 values per cell) or counter: tree (exact integer noise, about 3x"
                " the error)")

    # ------------------------------------------------------------ derived
    @property
    def cpt(self) -> int:
        """Columns pushed per step (1 on the arrival clock)."""
        if self.clock is Clock.ARRIVAL:
            return 1
        return self.width if self.columns_per_tick is None else int(self.columns_per_tick)

    @property
    def aligned(self) -> bool:
        """Aligned rounds (``round_ticks`` set): every column pushed at a round's end."""
        return self.round_ticks is not None

    @property
    def steps_per_round(self) -> int:
        """Steps (events or ticks) per round: ``round_ticks``, else ``width / cpt``."""
        if self.round_ticks is not None:
            return int(self.round_ticks)
        return self.width // self.cpt

    @property
    def rounds(self) -> int:
        """GaussBM horizon in rounds: ``ceil(horizon / steps_per_round)``."""
        return -(-self.horizon // self.steps_per_round)

    def rounds_at(self, steps: int) -> int:
        """Rounds opened once ``steps`` steps are closed: a staggered round opens with its
        first step (``ceil``), an aligned one when its last step closes (``floor``)."""
        if self.aligned:
            return steps // self.steps_per_round
        return -(-steps // self.steps_per_round)

    @property
    def hash_spec(self) -> HashSpec:
        return HashSpec(self.hash_seed, self.depth, self.width)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every field (enums as strings)."""
        return spec_to_dict(self)

    # ------------------------------------------------- planning (no sketch built)
    def calibration(self, *, signed: bool = False) -> Calibration:
        """The noise calibration a LazyCMS (``signed=False``) or LazyCS (``True``) of
        this spec uses: sigma, sensitivity, counter norms."""
        from sketches.counters.family import calibrate_counter

        return calibrate_counter(
            self.counter, self.eps, self.delta,
            m=neighbouring_cells(self.relation, self.depth, signed=signed),
            rounds=self.rounds, calibrator=self.calibrator, unit_cap=self.unit_cap,
            cells=self.depth * self.width)

    def sigma(self, *, signed: bool = False) -> float:
        """Per-draw noise standard deviation (tree: per node; factorized: of ``z``)."""
        return self.calibration(signed=signed).sigma

    def error_bound_per_release(self, beta: float, *, signed: bool = False) -> float:
        """Noise error of one release: w.p. ``>= 1 - beta`` every cell of one release
        (at the epoch's last round, the largest) is within this of its exact pushed
        count (union bound over ``d w`` cells)."""
        return self.calibration(signed=signed).error_bound(
            n=self.depth * self.width, steps=1, beta=beta)

    def error_bound_epoch(self, beta: float, *, signed: bool = False) -> float:
        """Noise error over the whole epoch: w.p. ``>= 1 - beta`` every cell of every
        release of the epoch is within this (the ``noise`` of a release's ``error_bound``)."""
        return self.calibration(signed=signed).error_bound(
            n=self.depth * self.width, steps=self.rounds, beta=beta)

    def memory_bytes(self) -> int:
        """Bytes of numpy state of a sketch with this spec: ``P`` plus the counters."""
        from sketches.counters.family import counter_memory_bytes

        cells = self.depth * self.width
        return 8 * cells + counter_memory_bytes(self.counter, cells, self.rounds)


def error_bound(spec: LazySketchSpec, cal: Calibration, estimator: str,
                beta: float) -> dict[str, Any]:
    """Lemma 5 error statement of a release, with the sigma actually used.

    ``noise``: with probability ``>= 1 - beta`` every cell of every release of
    the epoch is within ``noise`` of its exact pushed count (Lemma 4 with the
    exact sigma, :func:`sketches.privacy.counter_error_bound`, union bound over
    ``d w`` counters and ``rounds`` distinct values each). ``lag``: lazy-update
    error (``[-lag, 0]`` CMS, ``[-lag, lag]`` CS) in ``lag_unit``. ``eta``:
    collision error ``<= eta * t`` (CMS, ``eta = e/w``) or ``eta * sqrt(F2)``
    (CS, ``eta = sqrt(3/w)``); it holds for all times w.p. ``1 - beta/2`` only
    when ``depth >= ceil(ln(2T/beta))`` (``collision_depth_ok``).
    """
    noise = cal.error_bound(n=spec.depth * spec.width, steps=spec.rounds, beta=beta)
    cms = estimator == "min"
    lag = spec.steps_per_round
    extra: dict[str, Any] = {}
    if spec.counter is CounterKind.BLT_INT:
        extra = {"counter": spec.counter.value, "lattice_scale": cal.lattice.scale,
                 "sigma_lattice": cal.sigma, "sigma_counts": cal.release_sigma,
                 "noise_reference": "docs/PRIVACY.md 13.1 Lattice BLT: (sigma_L / s) sqrt(2"
                                    " max_row(B)^2 ln(2 rounds d w / beta)) + bias + 1/2"}
    elif spec.counter is not CounterKind.TREE:
        extra = {"counter": spec.counter.value,
                 "noise_reference": "docs/PRIVACY.md Factorized counters: sigma sqrt(2"
                                    " max_row(B)^2 ln(2 rounds d w / beta)) + 1/2"}
    return {**extra,
        "beta": beta,
        "noise": noise,
        "lag": [-lag, 0] if cms else [-lag, lag],
        "lag_unit": "events" if spec.clock is Clock.ARRIVAL else "ticks",
        "eta": math.e / spec.width if cms else math.sqrt(3.0 / spec.width),
        "collision_term": "eta * t" if cms else "eta * sqrt(F2)",
        "collision_depth_ok": spec.depth >= lemma5_depth(spec.horizon, beta),
        "reference": "paper 002 Lemma 5 (noise term via Lemma 4 with the calibrated sigma)",
    }
