"""PunctualCMS / PunctualCS: the prior-art baseline (paper 002, Algorithm 3).

Every arrival updates *every* cell of a ``d x w`` array of GaussBM counters
(``c = 1`` or ``g_i(x)`` in the item's cells, ``0`` elsewhere), so each event
is one round of :class:`~sketches.counters.gauss_bm.ContinualCounters` and draws one
fresh noise vector of ``d*w`` values: ``O(d w)`` work per event by design.
This is the slow baseline LazySketch is measured against; it is vectorised
over cells, and loops over events only because every event is a separate
release of the continual-observation output.

Privacy (Alg. 3 discussion): ``m = 2d`` under replace (``4d`` for CS, see
:func:`sketches.privacy.neighbouring_cells`), ``T`` = horizon in events, so
``levels = ceil(log2(T + 1))``. One step per arrival is the arrival clock:
only private when the stream length is public, so ``relation`` must be
``replace`` (add/remove raises PrivacyError; use LazySketch's tick clock).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = PunctualSketchSpec(depth=2, width=8, horizon=16, eps=0.5, delta=1e-6)
>>> sk = PunctualCMS(spec, make_noise("zero", allow_insecure=True))
>>> sk.update_batch(np.array([3, 3, 4]))
>>> sk.query(np.array([3])).tolist()   # no lag: exact with zero noise
[2]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from sketches.continual.lazy_spec import coerce_enums, validate_numbers
from sketches.core.base import NoiseSummary
from sketches.core.hashing import HashSpec
from sketches.core.release import estimate
from sketches.core.serialization import spec_from_params, state_from_bytes, state_to_bytes
from sketches.counters.gauss_bm import ContinualCounters
from sketches.errors import HorizonExceededError, SerializationError, SpecError
from sketches.privacy import (
    Calibration,
    Calibrator,
    Clock,
    Relation,
    calibrate,
    check_clock,
    counter_error_bound,
    neighbouring_cells,
)
from sketches.privacy.bounds import sketch_point_query

if TYPE_CHECKING:
    from sketches.core.noise import NoiseSource

__all__ = ["PunctualCMS", "PunctualCS", "PunctualSketchSpec"]


@dataclass(frozen=True)
class PunctualSketchSpec:
    """Parameters of a PunctualSketch (Algorithm 3).

    Parameters
    ----------
    depth, width : int
        Sketch dimensions.
    horizon : int
        Maximum number of events ``T`` (= rounds).
    eps, delta : float
        Privacy of the whole epoch.
    relation : Relation
        Must be ``replace`` (arrival clock, see module docstring).
    calibrator : Calibrator
        ``discrete`` (default), ``analytic`` or ``paper``.
    hash_seed, unit_cap : int
        Public hash seed; exact per-unit contribution cap.
    """

    depth: int
    width: int
    horizon: int
    eps: float
    delta: float
    relation: Relation = Relation.REPLACE
    calibrator: Calibrator = Calibrator.DISCRETE
    hash_seed: int = 0
    unit_cap: int = 1

    def __post_init__(self) -> None:
        coerce_enums(self, (("relation", Relation), ("calibrator", Calibrator)))
        validate_numbers(self, ("depth", "width", "horizon", "unit_cap"))
        HashSpec(self.hash_seed, self.depth, self.width)
        object.__setattr__(self, "hash_seed", int(self.hash_seed))
        check_clock(self.relation, Clock.ARRIVAL)

    def memory_bytes(self) -> int:
        """Bytes of numpy state of a sketch with this spec: one tree counter per cell
        over ``horizon`` rounds (:func:`sketches.counters.family.counter_memory_bytes`)."""
        from sketches.counters.family import counter_memory_bytes

        return counter_memory_bytes("tree", self.depth * self.width, self.horizon)

    @property
    def hash_spec(self) -> HashSpec:
        return HashSpec(self.hash_seed, self.depth, self.width)


class _PunctualSketch:
    name: ClassVar[str] = ""
    estimator: ClassVar[str] = ""
    signed: ClassVar[bool] = False

    def __init__(self, spec: PunctualSketchSpec, noise: NoiseSource) -> None:
        if not isinstance(spec, PunctualSketchSpec):
            raise SpecError(f"spec: expected PunctualSketchSpec, got {type(spec).__name__}")
        self.spec = spec
        self.hash = spec.hash_spec
        self.calibration: Calibration = calibrate(
            spec.eps, spec.delta,
            m=neighbouring_cells(spec.relation, spec.depth, signed=self.signed),
            rounds=spec.horizon, calibrator=spec.calibrator, unit_cap=spec.unit_cap,
        )
        dw = spec.depth * spec.width
        self._counters = ContinualCounters(
            dw, spec.horizon, self.calibration.sigma, self.calibration.integer_noise, noise
        )
        self._row_offsets = np.arange(spec.depth, dtype=np.int64) * spec.width

    def update_batch(
        self, items: np.ndarray, ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """One round per event: every cell receives its increment (0 for most)."""
        if ticks is not None:
            raise SpecError("ticks: PunctualSketch uses the arrival clock; pass ticks=None")
        if weights is not None:
            raise SpecError("weights: one event is one unit; expand weighted events instead")
        keys = self.hash.item_keys(np.asarray(items).reshape(-1))
        n = keys.shape[0]
        if self._counters.rounds + n > self.spec.horizon:
            raise HorizonExceededError(
                f"horizon: {self._counters.rounds + n} events exceed the horizon of"
                f" {self.spec.horizon}; start a new epoch (fresh sketch)"
            )
        b, s = self.hash.buckets_and_signs(keys)
        cells = (b + self._row_offsets[:, None]).T  # (n, d)
        vals = s.T.astype(np.int64) if self.signed else np.ones_like(cells)
        row = np.zeros((1, self._counters.n), dtype=np.int64)
        header = self._counters.state_header()
        saved = {k: v.copy() for k, v in self._counters.state_arrays().items()}
        try:
            for e in range(n):  # one release per event: O(d w) noise each (Alg. 3)
                row[0, cells[e]] = vals[e]
                self._counters.advance(row)
                row[0, cells[e]] = 0
        except BaseException:
            # all-or-nothing batch: a failed noise draw leaves the state as before the call
            self._counters.restore(header, saved)
            raise

    def noisy_matrix(self) -> np.ndarray:
        """Released ``d x w`` matrix of GaussBM estimates."""
        return self._counters.query().reshape(self.spec.depth, self.spec.width)

    def query(self, items: np.ndarray) -> np.ndarray:
        """Noisy point estimates (Algorithm 4)."""
        return estimate(self.noisy_matrix(), self.hash, items, self.estimator)

    @property
    def rounds(self) -> int:
        return self._counters.rounds

    def release(self, beta: float = 0.05) -> dict[str, Any]:
        """Public payload; ``error_bound.noise`` is Lemma 4 with the calibrated sigma."""
        spec, cal = self.spec, self.calibration
        noise = counter_error_bound(cal.sigma, levels=cal.levels, n=spec.depth * spec.width,
                                    steps=spec.horizon, beta=beta)
        return {
            "kind": "sketch",
            "mechanism": self.name,
            "estimator": self.estimator,
            "hash": self.hash.to_public(),
            "matrix": self.noisy_matrix().tolist(),
            "rounds": int(self._counters.rounds),
            "clock": Clock.ARRIVAL.value,
            "error_bound": {"beta": beta, "noise": noise, "lag": [0, 0],
                            "reference": "paper 002 Lemma 4 with the calibrated sigma"},
            "lag_bound": 0,
            "lag_unit": "events",
            "float_noise": not cal.integer_noise,
        }

    def memory_bytes(self) -> int:
        return int(self._counters.memory_bytes())

    def to_bytes(self) -> bytes:
        return state_to_bytes(self.name, self.spec, self._counters.state_header(),
                              self._counters.state_arrays())

    @classmethod
    def from_bytes(
        cls, data: bytes, noise: NoiseSource, expected_spec: PunctualSketchSpec | None = None
    ) -> _PunctualSketch:
        spec, state, arrays = state_from_bytes(cls.name, PunctualSketchSpec, data, expected_spec)
        out = cls(spec, noise)
        try:
            out._counters.restore(state, arrays)
        except KeyError as exc:
            raise SerializationError(f"state.{exc.args[0]}: missing from the header") from None
        return out


class PunctualCMS(_PunctualSketch):
    """PunctualSketch with Count-Min rows."""

    name = "punctual_cms"
    estimator = "min"
    signed = False


class PunctualCS(_PunctualSketch):
    """PunctualSketch with Count Sketch rows."""

    name = "punctual_cs"
    estimator = "median"
    signed = True


def _build_spec(params: Any) -> PunctualSketchSpec:
    """Build the spec from topology params; the worker also passes ``clock``.

    Algorithm 3 has one round per event, so it runs on the arrival clock only;
    ``clock`` is checked here and not stored (the spec has no other clock).
    """
    params = dict(params)
    clock = params.pop("clock", Clock.ARRIVAL.value)
    if Clock(clock) is not Clock.ARRIVAL:
        raise SpecError(
            f"privacy.clock: {clock!r} is not supported by the punctual sketches (Algorithm 3"
            " has one round per event, so they run on the arrival clock only); set"
            " `privacy.clock: arrival` with `relation: replace`, or use lazy_cms / lazy_cs"
            " for the tick clock"
        )
    return spec_from_params(PunctualSketchSpec, params)


def _noise(sketch: _PunctualSketch) -> NoiseSummary:
    """Sigma of the punctual counters, in counts."""
    return NoiseSummary(sigma=float(sketch.calibration.release_sigma))


def _register() -> None:
    from sketches.core.base import Capabilities, MechanismEntry, register

    for cls in (PunctualCMS, PunctualCS):
        register(MechanismEntry(name=cls.name, build_spec=_build_spec, build=cls,
                                from_bytes=cls.from_bytes, continual=True,
                                capabilities=Capabilities(
                                    memory_model=PunctualSketchSpec.memory_bytes, noise=_noise,
                                    point_query=functools.partial(
                                        sketch_point_query, median=cls.estimator == "median"))))


_register()
