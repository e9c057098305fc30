"""The one small interface every dpstream mechanism shares.

A mechanism is a frozen *spec* dataclass (every parameter, hashable, JSON-able)
plus private numpy state. The worker only ever talks to this interface and to
the registry below, so a new mechanism needs no change in ``worker/``.

Contract
--------
- ``Mechanism(spec, noise)``: construct from a frozen spec and an injected
  :class:`~sketches.core.noise.NoiseSource`.
- ``update_batch(items, ticks=None, weights=None) -> None``: ``items`` is a
  numpy array (integer dtype, or object/str/bytes), ``ticks`` an optional
  non-decreasing int64 array of the same length (tick clock: the tick each
  event belongs to; ``None`` means arrival clock, one step per event).
- ``advance_to(tick) -> None``: tick clock only; close every tick before
  ``tick`` (empty ticks still push their columns, so the schedule never depends
  on the data).
- ``release() -> dict``: a JSON-serialisable, *public* payload (noisy values
  only, never raw counts) plus the public hash spec and the error bound.
- ``to_bytes() -> bytes`` / ``from_bytes(data, noise) -> Mechanism``: full state
  in a versioned binary format (never pickle).
- ``memory_bytes() -> int``: bytes of numpy state held.
- State-changing methods return ``None``.
"""

from __future__ import annotations

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
