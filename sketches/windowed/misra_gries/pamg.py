"""User-level PAMG and merged Misra-Gries sketches (paper 000, §7-§8), single release.

- :func:`agarwal_merge` / :func:`merge_mg`: the mergeable-summaries merge of
  standard MG sketches (zero keys dropped). For neighbours (one event of one
  shard removed) merged sketches satisfy ``c <= c' <= c + 1`` pointwise or the
  reverse, at most ``k`` keys differ (Lemma 1 / Corollary 2 of §7), so the
  structure Algorithm 2 needs is *lost*: a merged sketch is released by its
  own rule, :class:`MergedMG` (``release="geometric"``: two-sided geometric
  noise of scale ``k/eps`` on stored keys plus threshold
  ``1 + (k/eps) ln(k/((1+a) delta))``, ``a = e^(-eps/k)``; or
  ``release="gshm"``: the Gaussian sparse histogram mechanism with ``l = k``).
- :class:`PAMG` (Algorithm 4): each privacy unit contributes a *set* of at
  most ``m`` distinct items, all counters of the set are incremented and the
  sketch decrements at most once per unit. Neighbours differ in one unit; the
  ±1 monotone structure holds (Lemma 9), so the release is GSHM with ``l = k``
  (Theorem 12), calibrated with the exact condition of Theorem 5
  (:func:`gshm_delta`).

A unit's set must be processed atomically (a unit split over two sets counts
as two units). In a window the sketch cannot know a unit is complete, so the
sets are buffered (memory O(units * m)) and folded into the counters at
:meth:`PAMG.release`, units in order of first appearance (removing one unit
does not change the relative order of the others).

Examples
--------
>>> agarwal_merge({1: 5, 2: 3, 3: 1}, {2: 2, 4: 4}, k=2)
{1: 1, 2: 1}
>>> round(gshm_delta(1.0, 54.3, 336.6, 100), 9) < 1e-7
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register
from sketches.core.candidates import decode_items, encode_items
from sketches.core.hashing import HashSpec
from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import IncompatibleSpecError, PrivacyError, SerializationError, SpecError
from sketches.privacy.gshm import gshm_calibrate, gshm_delta, gshm_release
from sketches.windowed.misra_gries.mg_state import ItemCodec, worker_params
from sketches.windowed.misra_gries.misra_gries import PMG

# gshm_calibrate and gshm_delta live in sketches.privacy.gshm (re-exported here).
__all__ = ["PAMG", "MergedMG", "PAMGSpec", "agarwal_merge", "gshm_calibrate", "gshm_delta",
           "merge_mg", "merge_pamg"]


# ---------------------------------------------------------------------------
# Merging (§7)
# ---------------------------------------------------------------------------
def agarwal_merge(a: dict[Any, int], b: dict[Any, int], k: int) -> dict[Any, int]:
    """Mergeable-summaries merge of two MG sketches (Agarwal et al.; paper 000 §7).

    Sum the counters; if more than ``k`` remain, subtract the (k+1)-th largest
    value and drop non-positive counters. Result keys are sorted.
    """
    c: dict[Any, int] = {x: a.get(x, 0) + b.get(x, 0) for x in sorted(set(a) | set(b))}
    if len(c) > k:
        v = sorted(c.values(), reverse=True)[k]
        c = {x: w - v for x, w in c.items() if w - v > 0}
    return c


def _merge_arrays(ka: np.ndarray, ca: np.ndarray, kb: np.ndarray, cb: np.ndarray,
                  k: int) -> tuple[np.ndarray, np.ndarray]:
    keys, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
    counts = np.bincount(inv, weights=np.concatenate([ca, cb]), minlength=keys.size)
    counts = counts.astype(np.int64)
    if keys.size > k:
        v = np.partition(counts, keys.size - k - 1)[keys.size - k - 1]
        counts = counts - v
        keep = counts > 0
        keys, counts = keys[keep], counts[keep]
    return keys, counts


class MergedMG:
    """A merged (standard) MG sketch of several shards with its own release rule.

    Parameters
    ----------
    k, eps, delta : sketch size and the budget of the single release.
    release : {"geometric", "gshm"}
        Section 7 options (2) and (3). Algorithm 2 is *not* valid here.
    """

    def __init__(self, k: int, eps: float, delta: float, noise: Any,
                 release: str = "geometric", item_kind: str = "int", hash_seed: int = 0) -> None:
        if release not in ("geometric", "gshm"):
            raise SpecError(f"release: use 'geometric' or 'gshm', got {release!r}")
        self.k, self.eps, self.delta, self.release_rule = k, eps, delta, release
        self._noise = noise
        self._codec = ItemCodec(item_kind, hash_seed)
        self.keys = self._codec.empty_keys()
        self.counts = np.zeros(0, np.int64)
        self._released = False

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Merge one more standard MG sketch (exact keys with counts > 0)."""
        self.keys, self.counts = _merge_arrays(self.keys, self.counts, keys, counts, self.k)

    def threshold(self) -> float:
        """Release threshold of the chosen rule."""
        if self.release_rule == "gshm":
            return gshm_calibrate(self.eps, self.delta, self.k)[1]
        a = math.exp(-self.eps / self.k)
        return 1.0 + (self.k / self.eps) * math.log(self.k / ((1 + a) * self.delta))

    def release(self) -> dict[str, Any]:
        """Single release of the merged sketch (PrivacyError on a second call)."""
        if self._released:
            raise PrivacyError("release: merged MG already released; merge fresh sketches")
        self._released = True
        tau = self.threshold()
        if self.release_rule == "gshm":
            sigma = gshm_calibrate(self.eps, self.delta, self.k)[0]
            keys, est = gshm_release(self.keys, self.counts, sigma, tau, self._noise)
        else:
            vals = self.counts + self._noise.discrete_laplace(self.k / self.eps, self.keys.size)
            keep = vals >= tau
            keys, est = self.keys[keep], vals[keep]
        return {"kind": "heavy_hitters", "mechanism": "merged_mg", "release": self.release_rule,
                "items": self._codec.entries(keys, [int(e) for e in est.tolist()]),
                "threshold": tau, "k": self.k, "eps": self.eps, "delta": self.delta,
                "relation": "add_remove",
                "error_bound": {"sketch_error": "N/(k+1) over all shards (§7)",
                                "threshold": tau, "source": "paper 000 §7"}}


def merge_mg(sketches: Sequence[PMG], noise: Any, release: str = "geometric") -> MergedMG:
    """Merge PMG shard sketches, in the given (fixed, data-independent) order.

    All sketches must share ``k``, ``eps``, ``delta``, ``item_kind`` and
    ``hash_seed``. Zero counters and dummies are dropped first (standard MG).
    Order the shards by their public shard id; the sensitivity bound holds for
    any fixed order (Corollary 2).
    """
    if not sketches:
        raise SpecError("sketches: need at least one sketch to merge")
    s0 = sketches[0].spec
    for s in sketches:
        if (s.spec.k, s.spec.eps, s.spec.delta, s.spec.item_kind, s.spec.hash_seed) != (
                s0.k, s0.eps, s0.delta, s0.item_kind, s0.hash_seed):
            raise IncompatibleSpecError("sketches: merge needs equal k, eps, delta, item_kind, "
                                        "hash_seed; build the shards from one spec")
    out = MergedMG(s0.k, s0.eps, s0.delta, noise, release, s0.item_kind, s0.hash_seed)
    for s in sketches:
        keys, counts = s.take_for_merge()  # consumed: no release on its own any more
        pos = counts > 0
        out.add(keys[pos], counts[pos])
    return out


# ---------------------------------------------------------------------------
# PAMG (Algorithm 4)
# ---------------------------------------------------------------------------
_MASK = (1 << 64) - 1
_HASHED, _ANON, _NAMED = 0, 1, 2  # unit kinds in the serialized state


@dataclass(frozen=True)
class PAMGSpec:
    """Parameters of a user-level PAMG sketch (paper 000 §8).

    Parameters
    ----------
    k : int
        Counters (error ``N/(k+1)``, N = total items after capping).
    m : int
        Exact cap: a unit contributes its first ``m`` distinct items of the
        window (arrival order); further items of the unit are dropped.
        ``m <= k`` (Lemma 8 is vacuous otherwise).
    eps, delta : float
        Budget of the single GSHM release (user-level, add/remove one unit).
    sigma, tau : float or None
        GSHM parameters; ``None`` -> :func:`gshm_calibrate` (exact Theorem 5).
        Given values are checked against the exact condition.
    item_kind, hash_seed : as :class:`sketches.windowed.misra_gries.misra_gries.PMGSpec`.
    """

    k: int
    m: int
    eps: float
    delta: float
    sigma: float | None = None
    tau: float | None = None
    item_kind: str = "int"
    hash_seed: int = 0

    #: What the state holds beyond its start-of-window size (no fixed worst case: a
    #: memory limit cannot be checked against it; worker/engine/memory_model.py refuses).
    state_growth: ClassVar[str] = ("the (unit, item) pairs of the window, up to m per unit,"
                                   " for every unit of the window")

    def __post_init__(self) -> None:
        if not (isinstance(self.k, int) and 1 <= self.k <= 1 << 20):
            raise SpecError(f"k: need an int in [1, 2**20], got {self.k!r}")
        if not (isinstance(self.m, int) and 1 <= self.m <= self.k):
            raise SpecError(f"m: need an int cap with 1 <= m <= k={self.k}, got {self.m!r}")
        if not (math.isfinite(self.eps) and self.eps > 0 and 0 < self.delta < 1):
            raise SpecError("eps, delta: need eps > 0 and 0 < delta < 1")
        if (self.sigma is None) != (self.tau is None):
            raise SpecError("sigma, tau: give both or neither (None = exact calibration)")
        if self.sigma is not None and self.tau is not None:
            d = gshm_delta(self.eps, self.sigma, self.tau, self.k)
            if d > self.delta:
                raise PrivacyError(f"sigma, tau: GSHM needs delta >= {d:.3g} > {self.delta}; "
                                   "raise sigma/tau or leave them None")
        ItemCodec(self.item_kind, self.hash_seed)

    def sketch_error(self, events: float) -> float:
        """Misra-Gries undercount bound ``N/(k+1)`` for ``events`` items after capping (§7).

        Examples
        --------
        >>> PAMGSpec(k=99, m=2, eps=1.0, delta=1e-6).sketch_error(1000)
        10.0
        """
        return float(events) / (self.k + 1)

    def gshm(self) -> tuple[float, float]:
        """(sigma, tau) of the release."""
        if self.sigma is not None and self.tau is not None:
            return self.sigma, self.tau
        return gshm_calibrate(self.eps, self.delta, self.k)


class PAMG:
    """Privacy-aware Misra-Gries (Algorithm 4) with GSHM release (Theorem 12)."""

    name: ClassVar[str] = "pamg"
    # 3: str items keyed by their exact bytes; 2: exact unit names; 1: hashed units
    # (formats 1-2 are readable for item_kind 'int' only)
    FORMAT_VERSION: ClassVar[int] = 3

    def __init__(self, spec: PAMGSpec, noise: Any) -> None:
        self.spec = spec
        self._noise = noise
        self._codec = ItemCodec(spec.item_kind, spec.hash_seed)
        # unit -> its distinct item keys, in order of first appearance. Units are keyed
        # by their exact name (str): hashing them with the public seed would let two
        # colliding units share one cap of m, doubling a unit's sensitivity. Anonymous
        # (event-level) units get ints > _MASK; ints <= _MASK are hashed units restored
        # from a format-1 checkpoint.
        self._pending: dict[str | int, list[int]] = {}
        # a window restored from a format-1 state keeps that format's hashed unit keys
        # until it is released, so a unit's earlier and later events share one set
        self._legacy_units: HashSpec | None = None
        self._released = False
        self.dropped = 0  # items over the cap (private, operator metric)

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None, units: np.ndarray | None = None) -> None:
        """Add events; ``units[i]`` names the privacy unit of ``items[i]``.

        ``units=None`` makes every event its own unit (event-level). Weights
        are refused: a unit's set holds distinct items.
        """
        if self._released:
            raise PrivacyError("update_batch: PAMG window already released; start a fresh one")
        if weights is not None:
            raise SpecError("weights: PAMG counts distinct items per unit; pass weights=None")
        keys = self._codec.keys(items).tolist()
        if units is None:
            base = _MASK + 1 + len(self._pending)  # anonymous unit ids, beyond any hash key
            for i, x in enumerate(keys):
                self._pending[base + i] = [x]
            return
        if len(units) != len(keys):
            raise SpecError("units: need one unit per item")
        names = np.asarray(units).astype(str)
        if self._legacy_units is None:
            ukeys: list[Any] = names.tolist()
        else:
            ukeys = self._legacy_units.item_keys(names).tolist()
        pending, m = self._pending, self.spec.m
        for u, x in zip(ukeys, keys, strict=True):
            s = pending.get(u)
            if s is None:
                pending[u] = [x]
            elif x not in s:
                if len(s) < m:
                    s.append(x)
                else:
                    self.dropped += 1

    def advance_to(self, tick: int) -> None:
        """No-op: a window-scoped PAMG has no clock (the worker's tick clock may call it)."""

    def _fold(self) -> dict[int, int]:
        """Run Algorithm 4 over the buffered unit sets, in order of first appearance."""
        k, base = self.spec.k, 0
        raw: dict[int, int] = {}
        for items in self._pending.values():
            for x in items:
                raw[x] = raw.get(x, base) + 1
            if len(raw) > k:  # at most one decrement per unit
                base += 1
                raw = {x: r for x, r in raw.items() if r > base}
        return {x: r - base for x, r in sorted(raw.items())}

    def counts(self) -> dict[Any, int]:
        """Exact (private) PAMG counters if the window closed now."""
        c = self._fold()
        keys = self._codec.key_array(list(c))
        return dict(zip(self._codec.labels(keys), c.values(), strict=True))

    def release(self) -> dict[str, Any]:
        """Single GSHM release of the window (PrivacyError on a second call)."""
        if self._released:
            raise PrivacyError("release: PAMG is single-release; start a fresh instance")
        self._released = True
        c = self._fold()
        sigma, tau = self.spec.gshm()
        keys, est = gshm_release(self._codec.key_array(list(c)),
                                  np.array(list(c.values()), dtype=np.int64), sigma, tau,
                                  self._noise)
        s = self.spec
        return {"kind": "heavy_hitters", "mechanism": self.name,
                "items": self._codec.entries(keys, [int(e) for e in est.tolist()]),
                "threshold": tau, "sigma": sigma, "k": s.k, "m": s.m, "eps": s.eps,
                "delta": s.delta, "relation": "add_remove", "unit": "user",
                "error_bound": {"vs_truth": f"N/(k+1) + {2 * tau - 1:.6g} w.p. 1-2*delta",
                                "source": "paper 000 Theorem 12"}}

    def memory_bytes(self) -> int:
        """Buffered unit sets (8 bytes per item, or its exact bytes for str items, + overhead)."""
        return sum(sum(len(x) + 33 if isinstance(x, bytes) else 8 for x in v) + 64
                   for v in self._pending.values())

    def to_bytes(self) -> bytes:
        """Versioned state: the buffered sets as (unit, item) arrays in order."""
        ids = list(self._pending)
        lens = np.array([len(self._pending[u]) for u in ids], dtype=np.int64)
        flat = self._codec.key_array([x for u in ids for x in self._pending[u]])
        kinds = np.array([_NAMED if isinstance(u, str) else _ANON if u > _MASK else _HASHED
                          for u in ids], dtype=np.uint8)
        names = np.array([u for u in ids if isinstance(u, str)], dtype=object)
        state = {"format": self.FORMAT_VERSION, "released": self._released,
                 "legacy_hashed_units": self._legacy_units is not None,
                 "dropped": self.dropped}
        units = np.array([0 if isinstance(u, str) else u & _MASK for u in ids], np.uint64)
        arrays: dict[str, np.ndarray] = {"units": units, "unit_kind": kinds, "lens": lens,
                                         **self._codec.encode(flat, "item_")}
        arrays.update({f"unit_name_{k}": v for k, v in encode_items(names).items()})
        return pack(self.name, asdict(self.spec), state, arrays)

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> PAMG:
        """Restore a sketch written by :meth:`to_bytes`."""
        head, arr = unpack(data)
        check_header(head, cls.name, None)
        st = head["state"]
        spec = PAMGSpec(**head["spec"])
        fmt = st.get("format")
        if fmt in (1, 2) and spec.item_kind == "str":
            raise SerializationError(
                f"pamg: state format {fmt} keyed str items by a public-seed 64-bit hash, under "
                "which a forged item can take another item's published label (issue 8); it "
                "cannot be converted exactly. Release or discard this window with the dpstream "
                "that wrote it, or delete the window's checkpoint (docs/OPERATIONS.md)")
        if fmt not in (1, 2, cls.FORMAT_VERSION):
            raise SerializationError(f"pamg: state format {fmt} unsupported")
        obj = cls(spec, noise)
        obj._released, obj.dropped = bool(st["released"]), int(st["dropped"])
        if fmt == 1 or st.get("legacy_hashed_units"):
            obj._legacy_units = HashSpec(seed=obj.spec.hash_seed ^ 0x5A5A, depth=1, width=1)
        flat = arr["items"] if fmt in (1, 2) else obj._codec.decode(arr, "item_")
        if int(arr["lens"].sum()) != flat.size:
            raise SerializationError("pamg: lens do not add up to the item count")
        items = flat.tolist()
        if fmt == 1:
            kinds = np.where(arr["anon"], _ANON, _HASHED).tolist()
            names: list[str] = []
        else:
            kinds = arr["unit_kind"].tolist()
            names = decode_items({k: arr[f"unit_name_{k}"]
                                  for k in ("blob", "lengths", "is_bytes")}).tolist()
        named = iter(names)
        pos = 0
        for u, kind, n in zip(arr["units"].tolist(), kinds, arr["lens"].tolist(), strict=True):
            key: str | int = next(named) if kind == _NAMED else u + _MASK + 1 if kind == _ANON \
                else u
            obj._pending[key] = items[pos:pos + n]
            pos += n
        return obj


def merge_pamg(sketches: Sequence[PAMG], noise: Any) -> MergedMG:
    """Merge PAMG shard sketches (fixed order) into one GSHM release (Corollary 10, Thm 12).

    Neighbours (one unit's set removed from one shard) keep the ±1 monotone
    structure with <= k differing keys after any number of merges, so the merged
    sketch is released once with GSHM(l = k) at the shards' (eps, delta). A unit
    whose events reach S shards has S sets: (S eps, ~S delta) by group privacy,
    unless the shard key is the unit (then S = 1). The shard sketches are
    consumed (they cannot be released on their own any more).
    """
    if not sketches:
        raise SpecError("sketches: need at least one sketch to merge")
    s0 = sketches[0].spec
    if any(s.spec != s0 for s in sketches):
        raise IncompatibleSpecError("sketches: merge needs identical PAMG specs")
    out = MergedMG(s0.k, s0.eps, s0.delta, noise, "gshm", s0.item_kind, s0.hash_seed)
    for s in sketches:
        if s._released:
            raise PrivacyError("sketches: a PAMG shard was already released or merged")
        c = s._fold()
        out.add(s._codec.key_array(list(c)), np.array(list(c.values()), dtype=np.int64))
        s._released = True
    return out


def _build_spec(params: Any) -> PAMGSpec:
    """Worker params -> spec; ``m`` defaults to the worker's exact per-unit ``unit_cap``."""
    p, _ = worker_params(params, PAMG.name)
    cap = int(p.pop("unit_cap", 1))
    p.setdefault("m", cap)
    return PAMGSpec(**p)


register(MechanismEntry(name=PAMG.name, build_spec=_build_spec, build=PAMG,
                        from_bytes=PAMG.from_bytes, continual=False,
                        float_noise_only=True,  # GSHM: float Gaussian noise
                        capabilities=Capabilities(
                            tick_clock=True, takes_units=True,
                            item_kind=lambda spec: spec.item_kind,
                            state_growth=PAMGSpec.state_growth,
                            sketch_error=PAMGSpec.sketch_error)))
