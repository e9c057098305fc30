"""CMS and CS: the non-private Count-Min and Count Sketch (same hashing as the DP ones).

Baselines and building blocks: exact ``d x w`` integer counters updated with
``numpy.bincount`` and queried with Algorithm 4 (min for CMS, median of signed
counters for CS; Cormode & Muthukrishnan 2005, Charikar et al. 2002).

**Not differentially private.** ``release()`` would publish exact counts, so
it raises :class:`~sketches.errors.PrivacyError` unless the spec sets
``release_exact=True`` (for non-private baselines only).

Examples
--------
>>> import numpy as np
>>> cms = CMS(PlainSketchSpec(depth=3, width=64, hash_seed=1))
>>> cms.update_batch(np.array([1, 1, 2]))
>>> cms.query(np.array([1, 2])).tolist()
[2, 1]
>>> other = cms.copy(); other.update_batch(np.array([1]))
>>> cms.merge(other); cms.query(np.array([1])).tolist()
[5]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.hashing import HashSpec
from sketches.core.release import estimate
from sketches.core.serialization import spec_from_params, state_from_bytes, state_to_bytes
from sketches.errors import IncompatibleSpecError, PrivacyError, SerializationError, SpecError

__all__ = ["CMS", "CS", "PlainSketchSpec"]


@dataclass(frozen=True)
class PlainSketchSpec:
    """Parameters of a non-private CMS / CS.

    Parameters
    ----------
    depth, width : int
        Dimensions ``d x w``.
    hash_seed : int
        Public hash seed (:class:`~sketches.core.hashing.HashSpec`).
    release_exact : bool
        Allow ``release()`` to publish exact counts (non-private baselines only).
    """

    depth: int
    width: int
    hash_seed: int = 0
    release_exact: bool = False

    def __post_init__(self) -> None:
        HashSpec(self.hash_seed, self.depth, self.width)  # validates depth, width, seed
        if not isinstance(self.release_exact, bool):
            raise SpecError(f"release_exact: must be true or false, got {self.release_exact!r}")

    def memory_bytes(self) -> int:
        """Bytes of numpy state of a sketch with this spec: ``depth x width`` int64 counts."""
        return 8 * self.depth * self.width

    @property
    def hash_spec(self) -> HashSpec:
        return HashSpec(self.hash_seed, self.depth, self.width)


class _PlainSketch:
    name: ClassVar[str] = ""
    estimator: ClassVar[str] = ""
    signed: ClassVar[bool] = False

    def __init__(self, spec: PlainSketchSpec, noise: Any = None) -> None:
        if not isinstance(spec, PlainSketchSpec):
            raise SpecError(f"spec: expected PlainSketchSpec, got {type(spec).__name__}")
        self.spec = spec
        self.hash = spec.hash_spec
        self._counts = np.zeros((spec.depth, spec.width), dtype=np.int64)

    def update_batch(
        self, items: np.ndarray, ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Add items (optionally with integer ``weights``); ``ticks`` are ignored."""
        keys = self.hash.item_keys(np.asarray(items).reshape(-1))
        n = keys.shape[0]
        if n == 0:
            return
        d, w = self.spec.depth, self.spec.width
        b, s = self.hash.buckets_and_signs(keys)
        flat = (b + (np.arange(d, dtype=np.int64) * w)[:, None]).ravel()
        wts: np.ndarray | None = None
        if weights is not None:
            wv = np.asarray(weights).reshape(-1)
            if wv.shape[0] != n:
                raise SpecError(f"weights: length {wv.shape[0]} != number of items {n}")
            if wv.dtype.kind not in "iub":
                raise SpecError("weights: must be integers (counts); round them first")
            wts = np.broadcast_to(wv.astype(np.float64), (d, n))
        if self.signed:
            wts = s.astype(np.float64) if wts is None else wts * s
        if wts is None:
            self._counts += np.bincount(flat, minlength=d * w).reshape(d, w)
        else:
            acc = np.bincount(flat, weights=np.ascontiguousarray(wts).ravel(), minlength=d * w)
            self._counts += np.rint(acc).astype(np.int64).reshape(d, w)

    def query(self, items: np.ndarray) -> np.ndarray:
        """Point estimates (min for CMS, median of signed rows for CS)."""
        return estimate(self._counts, self.hash, items, self.estimator)

    def matrix(self) -> np.ndarray:
        """Copy of the exact ``d x w`` counters (private data)."""
        return self._counts.copy()

    def copy(self) -> _PlainSketch:
        """Independent copy with the same spec and counts."""
        out = type(self)(self.spec)
        out._counts = self._counts.copy()
        return out

    def merge(self, other: _PlainSketch) -> None:
        """Add ``other``'s counts (sketches are linear). Specs and types must match."""
        if type(other) is not type(self) or other.spec != self.spec:
            raise IncompatibleSpecError(
                f"spec: cannot merge {type(other).__name__}({other.spec}) into"
                f" {type(self).__name__}({self.spec}); build both with the same spec"
            )
        self._counts += other._counts

    def release(self) -> dict[str, Any]:
        """Exact counts (NOT private); refused unless ``spec.release_exact``."""
        if not self.spec.release_exact:
            raise PrivacyError(
                f"release_exact: {self.name} is not differentially private and its release"
                " publishes exact counts; use lazy_cms/lazy_cs, or set release_exact=true for"
                " a non-private baseline"
            )
        return {
            "kind": "sketch",
            "mechanism": self.name,
            "private": False,
            "estimator": self.estimator,
            "hash": self.hash.to_public(),
            "matrix": self._counts.tolist(),
            "rounds": 0,
            "error_bound": {"noise": 0.0, "note": "non-private: collision error only"},
            "lag_bound": 0,
        }

    def memory_bytes(self) -> int:
        return int(self._counts.nbytes)

    def to_bytes(self) -> bytes:
        return state_to_bytes(self.name, self.spec, {}, {"counts": self._counts})

    @classmethod
    def from_bytes(
        cls, data: bytes, noise: Any = None, expected_spec: PlainSketchSpec | None = None
    ) -> _PlainSketch:
        spec, _state, arrays = state_from_bytes(cls.name, PlainSketchSpec, data, expected_spec)
        out = cls(spec)
        counts = arrays.get("counts")
        if counts is None or counts.shape != out._counts.shape:
            raise SerializationError(f"arrays.counts: missing or not of shape {out._counts.shape}")
        out._counts = counts.astype(np.int64)
        return out


class CMS(_PlainSketch):
    """Count-Min sketch (non-private)."""

    name = "cms"
    estimator = "min"
    signed = False


class CS(_PlainSketch):
    """Count Sketch (non-private; signed counters, median estimator)."""

    name = "cs"
    estimator = "median"
    signed = True


def _build_spec(params: Any) -> PlainSketchSpec:
    return spec_from_params(PlainSketchSpec, params)


def _register() -> None:
    from sketches.core.base import Capabilities, MechanismEntry, register
    from sketches.privacy.bounds import sketch_point_query

    for cls in (CMS, CS):
        register(MechanismEntry(name=cls.name, build_spec=_build_spec, build=cls,
                                from_bytes=cls.from_bytes, continual=False,
                                capabilities=Capabilities(
                                    memory_model=PlainSketchSpec.memory_bytes,
                                    point_query=functools.partial(
                                        sketch_point_query, median=cls.estimator == "median"))))


_register()
