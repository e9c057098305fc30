"""The one small interface every dpstream mechanism shares.

A mechanism is a frozen *spec* dataclass (every parameter, hashable, JSON-able)
plus private numpy state. The worker only ever talks to this interface and to
the registry below, so a new mechanism needs no change in ``worker/``: what a
mechanism can do beyond the required methods it *declares* on its registry
entry (:class:`Capabilities`), and the worker asks the entry; it never probes an
instance or a spec for optional methods, and never tests a mechanism's name.

Contract
--------
Required of every mechanism (:class:`Mechanism`):

- ``Mechanism(spec, noise)``: construct from a frozen spec and an injected
  :class:`~sketches.core.noise.NoiseSource`; ``mechanism.spec`` is that spec.
- ``update_batch(items, ticks=None, weights=None) -> None``: ``items`` is a
  numpy array (integer dtype, or object/str/bytes), ``ticks`` an optional
  non-decreasing int64 array of the same length (tick clock: the tick each
  event belongs to; ``None`` means arrival clock, one step per event).
- ``release() -> dict``: a JSON-serialisable, *public* payload (noisy values
  only, never raw counts) plus the public hash spec and the error bound.
- ``to_bytes() -> bytes`` / ``from_bytes(data, noise) -> Mechanism``: full state
  in a versioned binary format (never pickle).
- ``memory_bytes() -> int``: bytes of numpy state held.
- State-changing methods return ``None``.

Registered with :func:`register` as a :class:`MechanismEntry`: its name (the
``mechanism.name`` of ``topologies/*.yaml``), ``build_spec(params)``,
``build(spec, noise)``, ``from_bytes``, ``continual`` (released every
``release.every_ticks``) or windowed (one release per epoch),
``float_noise_only``, and its optional :class:`Capabilities`:

- ``tick_clock``: ``advance_to(tick) -> None`` closes every tick before ``tick``
  (empty ticks still push their columns, so the schedule never depends on the
  data); the engine calls it on the tick clock, else it only counts ticks.
- ``takes_units``: ``update_batch(..., units=)`` takes the privacy unit of every
  event (e.g. PAMG's per-unit sets); the engine passes them.
- ``event_horizon(spec) -> int``: public bound on events per epoch on the tick
  clock (0: none); the engine drops later events, ``dpstream plan`` warns.
- ``item_kind(spec) -> str``: the item type it needs (``"int"``/``"str"``),
  checked against ``input.item_type`` when a topology loads.
- ``memory_model(spec) -> int``: bytes of the epoch's *peak* state, a model
  tested against the measured state (memory limit, ``dpstream plan``).
- ``memory_for_item_bytes(spec, max_item_bytes) -> int``: the worst case when the
  peak depends on the longest item (PMG).
- ``state_growth``: what the state grows with inside a window when that has no
  fixed bound; a memory limit refuses the mechanism.
- ``counters``: the values its spec's ``counter`` field accepts (the continual
  counters it can run); empty: no such field.
- ``aligned_rounds``: its spec takes ``round_ticks`` (counter rounds of that many ticks,
  every cell pushed at a round's last tick); the worker sets it to
  ``release.every_ticks`` unless the topology pins it (docs/PRIVACY.md 13.2).
- ``unbounded_lattice_cells``: ``counter: blt_int`` has no public, enforced
  per-cell count bound, so it is not certified (production refuses it).
- ``noise(mechanism) -> NoiseSummary``: sigma, counter, per-cell error and
  lattice scale, as ``dpstream plan`` states them.
- ``point_query(spec, events, noise) -> (lo, hi)``: worst-case range of a point
  query's ``estimate - count`` after ``events`` events, given the release's
  per-cell noise bound.
- ``sketch_error(spec, events) -> float``: the sketch's own one-sided error after
  ``events`` events (Misra-Gries: ``n/(k+1)``).
- ``heavy_hitters(mechanism) -> DetectionAnalysis``: thresholds and detection
  times of a continual heavy-hitter mechanism, for ``dpstream plan``.
- ``guarantee(mechanism) -> dict``: the ``(eps, delta)`` guarantee the mechanism
  states itself when it differs from the topology's privacy block (LazyHH:
  ``delta_tilde > delta``), for the worker's gauges.

A capability left at its default means "the mechanism does not do this".

The worker reads a spec's parameters only through :func:`spec_fields` (the
what-if knobs of ``dpstream plan``). ``sketches`` never imports the worker.

Examples
--------
>>> from sketches import lookup
>>> caps = lookup("lazy_cms").capabilities
>>> caps.tick_clock, caps.takes_units, caps.heavy_hitters is None
(True, False, True)
>>> lookup("pamg").capabilities.takes_units, lookup("lazy_hh").capabilities.counters[0]
(True, 'tree')
>>> spec_fields(lookup("pmg").build_spec({"k": 4, "eps": 1.0, "delta": 1e-6}))["k"]
4
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from sketches.errors import SpecError


@runtime_checkable
class Mechanism(Protocol):
    """Structural type of every dpstream mechanism."""

    name: ClassVar[str]

    def update_batch(
        self,
        items: np.ndarray,
        ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None: ...

    def release(self) -> dict[str, Any]: ...

    def to_bytes(self) -> bytes: ...

    def memory_bytes(self) -> int: ...


@dataclass(frozen=True)
class NoiseSummary:
    """The noise of a built mechanism, as ``dpstream plan`` states it (all public)."""

    #: Gaussian noise scale of a released count, in counts (None: none, or stated in
    #: the release payload's ``sigma``)
    sigma: float | None = None
    #: the continual counter the cells run (``tree``, ``blt``, ``sqrt``, ``blt_int``)
    counter: str | None = None
    #: w.p. ``>= 1 - beta`` every released cell of the epoch is within it of its exact
    #: count; None: the release's ``error_bound.noise`` states it
    counter_error: float | None = None
    #: lattice BLT: the lattice scale ``s``
    lattice_scale: int | None = None


class DetectionAnalysis(Protocol):
    """Thresholds and detection times of a continual heavy-hitter mechanism."""

    def output_bounds(self, events: float) -> dict[str, Any]:
        """Threshold, coverage, estimate range, gamma and failure probability after
        ``events`` events."""
        ...

    def min_detectable_share(self) -> float:
        """The traffic share an item needs to be reported at all."""
        ...

    def detection_events(self, share: float, *, guaranteed: bool = False) -> float | None:
        """Events until an item with ``share`` of the traffic is reported (surely, with
        ``guaranteed``); None: never."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """Optional abilities of a mechanism, declared on its registry entry (module docstring)."""

    tick_clock: bool = False
    takes_units: bool = False
    event_horizon: Callable[[Any], int] | None = None
    item_kind: Callable[[Any], str] | None = None
    memory_model: Callable[[Any], int] | None = None
    memory_for_item_bytes: Callable[[Any, int], int] | None = None
    state_growth: str | None = None
    counters: tuple[str, ...] = ()
    #: the spec takes ``round_ticks`` (aligned counter rounds, every cell pushed at a
    #: round's end): the worker sets it to ``release.every_ticks`` unless pinned
    aligned_rounds: bool = False
    unbounded_lattice_cells: bool = False
    noise: Callable[[Any], NoiseSummary] | None = None
    point_query: Callable[[Any, float, float], tuple[float, float]] | None = None
    sketch_error: Callable[[Any, float], float] | None = None
    heavy_hitters: Callable[[Any], DetectionAnalysis] | None = None
    guarantee: Callable[[Any], dict[str, Any]] | None = None


@dataclass(frozen=True)
class MechanismEntry:
    """How the worker builds a mechanism from a topology's parameters."""

    name: str
    build_spec: Callable[[Mapping[str, Any]], Any]
    build: Callable[[Any, Any], Any]
    from_bytes: Callable[[bytes, Any], Any]
    continual: bool
    #: the release always draws float noise (open to the floating-point attack,
    #: Mironov 2012): ``production: true`` topologies refuse the mechanism
    float_noise_only: bool = False
    #: what else it can do (:class:`Capabilities`; the default: nothing optional)
    capabilities: Capabilities = Capabilities()


def spec_fields(spec: Any) -> dict[str, Any]:
    """Every field of a spec dataclass by name, values as stored (its parameters);
    ``{}`` for anything else."""
    if not dataclasses.is_dataclass(spec) or isinstance(spec, type):
        return {}
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


_REGISTRY: dict[str, MechanismEntry] = {}


def register(entry: MechanismEntry) -> None:
    """Register a mechanism under ``entry.name`` (used by ``topologies/*.yaml``)."""
    _REGISTRY[entry.name] = entry


def lookup(name: str) -> MechanismEntry:
    """Return the registered mechanism ``name`` or raise a SpecError listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "(none registered)"
        raise SpecError(
            f"mechanism: unknown mechanism {name!r}; use one of: {known}"
        ) from None


def registered() -> list[str]:
    """Names of every registered mechanism."""
    return sorted(_REGISTRY)
