"""DP Count-Min and Count Sketch with noise added once, at initialisation (paper 003).

Zhao et al. (paper 003, Algorithm 3) add i.i.d. Gaussian noise to every
counter of a ``depth x width`` Count-Min / Count Sketch when it is created;
updates (Algorithm 1) and queries (Algorithm 2: min for CMS, median for CS)
are the plain ones. The noisy matrix is published **once** (a window's end).

Why a second release leaks: publishing the matrix at ``t1`` and again at
``t2`` reveals ``C(t2) - C(t1)``, the *exact, noiseless* sketch of the
events between the two releases (the noise cancels). So an instance is
released once (a second :meth:`DPLinearSketch.release` raises
:class:`~sketches.errors.PrivacyError`); the worker starts a fresh instance
(fresh noise) per window, and windows compose in parallel under event-level
privacy (each event is in exactly one window).

L2 sensitivity of the counter matrix (``d`` rows, weights clipped to
``[-V, V]`` (turnstile) or ``[0, V]`` (insert-only)), derived in
docs/MECHANISMS_003_004.md:

=====================  ==============  =====================================
relation               sketch          Delta_2
=====================  ==============  =====================================
add/remove one event   CMS or CS       ``V sqrt(d)``
replace one event      CMS, inserts    ``V sqrt(2 d)`` (paper eq. 1, V = 1)
replace one event      CS (any), or    ``2 V sqrt(d)``: two items colliding
                       CMS turnstile   in a row with opposite signs move one
                                       counter by 2V (paper's sqrt(2d) is
                                       wrong for the Count Sketch)
=====================  ==============  =====================================

Calibration (sigma for ``(eps, delta)`` and ``Delta_2``) is generic and lives
in :mod:`sketches.privacy`; ``calibrator="paper"`` uses paper 003's zCDP
route ``sigma = Delta_2 / sqrt(2 rho)`` with ``rho`` from Lemma 2.9.

Count-Min offset ``E`` (paper 003, Alg. 3 line 4, written with the actual
``d, w``): ``E = sigma sqrt(2 ln(4 d w / beta))`` bounds every one of the
``d w`` noise values with probability ``1 - beta/2`` (Gaussian tail + union
bound). It is public; the release reports it, and ``cms_offset=True`` adds it
to every counter as the paper does (the estimate then never underestimates
w.h.p.).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = DPLinearSpec(kind="cms", depth=3, width=64, eps=1.0, delta=1e-6, calibrator="paper")
>>> sk = DPLinearSketch(spec, make_noise("zero", allow_insecure=True))
>>> sk.update_batch(np.array([5, 5, 9]))
>>> sk.query(np.array([5, 9, 11])).tolist()
[2.0, 1.0, 0.0]
>>> out = sk.release()
>>> out["kind"], out["estimator"], len(out["matrix"]), len(out["matrix"][0])
('sketch', 'min', 3, 64)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register
from sketches.core.hashing import HashSpec
from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import SerializationError, SpecError
from sketches.privacy import analytic_gaussian_sigma, discrete_gaussian_sigma
from sketches.windowed.single_release import SingleRelease

__all__ = ["DPCountMin", "DPCountSketch", "DPLinearSketch", "DPLinearSpec",
           "accumulate", "cms_offset", "gaussian_sigma", "linear_l2_sensitivity",
           "paper_rho"]

RELATIONS = ("add_remove", "replace")
CALIBRATORS = ("discrete", "analytic", "paper")


def paper_rho(eps: float, delta: float) -> float:
    """zCDP budget ``rho`` whose Lemma 2.9 conversion gives ``(eps, delta)`` (paper 003).

    Inverts ``eps = rho + 2 sqrt(rho ln(1/delta))``:
    ``rho = (sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))^2``.

    >>> round(paper_rho(1.0, 1e-6), 5)
    0.01747
    """
    lg = math.log(1 / delta)
    return (math.sqrt(lg + eps) - math.sqrt(lg)) ** 2


def gaussian_sigma(eps: float, delta: float, l2: float, calibrator: str) -> float:
    """Gaussian noise scale for one release with L2 sensitivity ``l2``.

    ``"paper"``: paper 003 (Lemma 2.8 + 2.9), ``sigma = l2 / sqrt(2 rho)``, valid for every
    eps (zCDP), loose. ``"analytic"`` (continuous noise) and ``"discrete"`` (integer noise)
    use the exact calibrations of :mod:`sketches.privacy`.

    >>> round(gaussian_sigma(1.0, 1e-6, math.sqrt(12), "paper"), 2)   # paper 003's d=6 example
    18.53
    """
    if calibrator == "paper":
        return l2 / math.sqrt(2 * paper_rho(eps, delta))
    if calibrator == "analytic":
        return float(analytic_gaussian_sigma(eps, delta, l2))
    if calibrator == "discrete":
        return float(discrete_gaussian_sigma(eps, delta, l2))
    raise SpecError(f"calibrator: {calibrator!r}; use one of {', '.join(CALIBRATORS)}")


def linear_l2_sensitivity(kind: str, depth: int, relation: str, weight_clip: int = 1,
                          turnstile: bool = False, unit_cap: int = 1) -> float:
    """L2 sensitivity of a ``depth``-row CMS/CS counter matrix (table in the module docstring).

    >>> linear_l2_sensitivity("cms", 4, "replace")   # paper 003 eq. (1)
    2.8284271247461903
    >>> linear_l2_sensitivity("cs", 4, "replace")    # corrected for the Count Sketch
    4.0
    >>> linear_l2_sensitivity("cs", 4, "add_remove")
    2.0
    """
    v = float(weight_clip) * unit_cap   # a unit's <= c events: per-row L2 scales by c
    if relation == "add_remove":
        return v * math.sqrt(depth)
    if kind == "cms" and not turnstile:
        return v * math.sqrt(2 * depth)
    return 2 * v * math.sqrt(depth)


def cms_offset(sigma: float, depth: int, width: int, beta: float) -> float:
    """Paper 003's ``E``: all ``d w`` noise values lie in ``[-E, E]`` w.p. ``>= 1 - beta/2``.

    >>> round(cms_offset(1.0, 5, 512, 0.01), 3)
    5.261
    """
    return sigma * math.sqrt(2 * math.log(4 * depth * width / beta))


def accumulate(counts: np.ndarray, hashes: HashSpec, keys: np.ndarray, weights: np.ndarray,
               signed: bool) -> None:
    """Add ``weights`` of ``keys`` into ``counts`` (int64[d, w]) in place; one bincount per row.

    >>> c = np.zeros((2, 4), np.int64)
    >>> accumulate(c, HashSpec(1, 2, 4), np.array([3, 3], np.uint64), np.array([1, 2]), False)
    >>> c.sum(axis=1).tolist()
    [3, 3]
    """
    d, w = counts.shape
    if keys.shape[0] == 0:
        return
    buckets = hashes.buckets(keys)
    signs = hashes.signs(keys) if signed else None
    for r in range(d):
        wr = weights if signs is None else weights * signs[r]
        counts[r] += np.rint(np.bincount(buckets[r], weights=wr, minlength=w)).astype(np.int64)


@dataclass(frozen=True)
class DPLinearSpec:
    """Parameters of a single-release DP Count-Min / Count Sketch (all public).

    Parameters
    ----------
    kind : str
        ``"cms"`` (min estimator) or ``"cs"`` (median estimator).
    depth, width : int
        Rows ``d`` and columns ``w``.
    eps, delta : float
        Privacy of the one release.
    relation : str
        ``"add_remove"`` (default) or ``"replace"`` (paper 003's model).
    calibrator : str
        ``"discrete"`` (integer noise, default), ``"analytic"`` or ``"paper"``.
    hash_seed : int
        Public hash seed.
    weight_clip : int
        ``V``: weights are rounded and clipped to ``[-V, V]`` (turnstile) or ``[0, V]``.
    unit_cap : int
        Events per privacy unit (1 = event level); the worker enforces the cap exactly and
        the sensitivity is multiplied by it.
    turnstile : bool
        Accept negative weights (deletions).
    beta : float
        Failure probability of the reported noise bound ``E``.
    cms_offset : bool
        Add ``E`` to every CMS counter (paper 003's never-underestimate variant).
    """

    kind: str
    depth: int
    width: int
    eps: float
    delta: float
    relation: str = "add_remove"
    calibrator: str = "discrete"
    hash_seed: int = 0
    weight_clip: int = 1
    turnstile: bool = False
    beta: float = 0.01
    cms_offset: bool = False
    unit_cap: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("cms", "cs"):
            raise SpecError(f"kind: {self.kind!r}; use 'cms' (Count-Min) or 'cs' (Count Sketch)")
        object.__setattr__(self, "relation", str(self.relation))
        object.__setattr__(self, "calibrator", str(self.calibrator))
        for f in ("depth", "width", "weight_clip", "unit_cap"):
            v = getattr(self, f)
            if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 1:
                raise SpecError(f"{f}: must be an integer >= 1, got {v!r}")
        if not self.eps > 0:
            raise SpecError(f"eps: must be > 0, got {self.eps!r}")
        if not 0 < self.delta < 1:
            raise SpecError(f"delta: must be in (0, 1), got {self.delta!r}")
        if not 0 < self.beta < 1:
            raise SpecError(f"beta: must be in (0, 1), got {self.beta!r}")
        if self.relation not in RELATIONS:
            raise SpecError(f"relation: {self.relation!r}; use 'add_remove' or 'replace'")
        if self.calibrator not in CALIBRATORS:
            raise SpecError(f"calibrator: {self.calibrator!r}; use 'discrete' (integer noise), "
                            "'analytic' or 'paper'")

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of the counter matrix."""
        return linear_l2_sensitivity(self.kind, self.depth, self.relation, self.weight_clip,
                                     self.turnstile, self.unit_cap)

    @property
    def sigma(self) -> float:
        """Noise standard deviation for ``(eps, delta)`` at :attr:`sensitivity`."""
        return gaussian_sigma(self.eps, self.delta, self.sensitivity, self.calibrator)

    def memory_bytes(self) -> int:
        """Bytes of numpy state of a sketch with this spec: int64 counts plus float64
        noise, ``depth x width`` each."""
        return 16 * self.depth * self.width

    @classmethod
    def from_params(cls, params: Any) -> DPLinearSpec:
        """Build from topology params (unknown keys ignored)."""
        names = cls.__dataclass_fields__
        return cls(**{k: params[k] for k in names if k in params})


def clip_weights(weights: np.ndarray | None, n: int, clip: int, turnstile: bool) -> np.ndarray:
    """Round and clip event weights to ``[-clip, clip]`` (turnstile) or ``[0, clip]``.

    >>> clip_weights(np.array([3, -2, 1]), 3, 1, True).tolist()
    [1.0, -1.0, 1.0]
    """
    if weights is None:
        return np.ones(n)
    w = np.rint(np.asarray(weights, dtype=np.float64))
    if w.shape != (n,):
        raise SpecError(f"weights: must have one entry per item ({n}), got shape {w.shape}")
    return np.clip(w, -clip if turnstile else 0, clip)


class DPLinearSketch(SingleRelease):
    """Single-release DP Count-Min / Count Sketch (paper 003, Algorithms 1-3).

    Parameters
    ----------
    spec : DPLinearSpec
    noise : NoiseSource
        All ``d w`` noise values are drawn here, once, and kept in the state.
    """

    name: ClassVar[str] = "dp_linear"

    def __init__(self, spec: DPLinearSpec, noise: Any, *,
                 _state: tuple[np.ndarray, np.ndarray, bool] | None = None) -> None:
        self.spec = spec
        self.hash = HashSpec(seed=spec.hash_seed, depth=spec.depth, width=spec.width)
        shape = (spec.depth, spec.width)
        if _state is None:
            self._counts = np.zeros(shape, dtype=np.int64)
            if spec.calibrator == "discrete":
                self._noise = np.asarray(noise.discrete_gaussian(spec.sigma, shape), np.float64)
            else:
                self._noise = np.asarray(noise.gaussian(spec.sigma, shape), np.float64)
            self._released = False
        else:
            self._counts, self._noise, self._released = _state

    @property
    def estimator(self) -> str:
        return "min" if self.spec.kind == "cms" else "median"

    @property
    def offset(self) -> float:
        """The public bound ``E`` on every noise value (probability ``1 - beta/2``)."""
        s = self.spec
        return cms_offset(s.sigma, s.depth, s.width, s.beta)

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        """Add a batch (vectorised); ``ticks`` are accepted and ignored (one window)."""
        self._check_open()
        items = np.asarray(items)
        w = clip_weights(weights, items.shape[0], self.spec.weight_clip, self.spec.turnstile)
        accumulate(self._counts, self.hash, self.hash.item_keys(items), w,
                   self.spec.kind == "cs")

    def _noisy_matrix(self) -> np.ndarray:
        m = self._counts + self._noise
        if self.spec.kind == "cms" and self.spec.cms_offset:
            m = m + self.offset
        return np.rint(m).astype(np.int64)

    def query(self, items: np.ndarray) -> np.ndarray:
        """Point estimates from the noisy matrix (the values a reader of the release gets)."""
        keys = self.hash.item_keys(np.asarray(items))
        m = self._noisy_matrix()
        cells = m[np.arange(self.spec.depth)[:, None], self.hash.buckets(keys)].astype(np.float64)
        if self.spec.kind == "cms":
            return cells.min(axis=0)
        return np.median(cells * self.hash.signs(keys), axis=0)

    def release(self) -> dict[str, Any]:
        """The ``"kind": "sketch"`` payload; callable once per instance."""
        self._begin_release("release: this DP sketch was already released")
        s = self.spec
        return {
            "kind": "sketch", "estimator": self.estimator, "hash": self.hash.to_public(),
            "matrix": self._noisy_matrix().tolist(), "rounds": 1, "lag_bound": 0,
            "mechanism": self.name + "_" + s.kind, "eps": s.eps, "delta": s.delta,
            "relation": s.relation, "calibrator": s.calibrator, "sigma": s.sigma,
            "sensitivity": s.sensitivity,
            "error_bound": {"beta": s.beta, "noise_abs_max": self.offset,
                            "offset_added": bool(s.kind == "cms" and s.cms_offset),
                            "collision_per_row": "L1 mass / width in expectation"},
        }

    def memory_bytes(self) -> int:
        """Bytes of numpy state (counts and noise)."""
        return int(self._counts.nbytes + self._noise.nbytes)

    def to_bytes(self) -> bytes:
        """Private checkpoint (exact counts and drawn noise).

        Via :mod:`sketches.core.serialization`.
        """
        return pack(self.name, asdict(self.spec), {"released": self._released},
                    {"counts": self._counts, "noise": self._noise})

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> DPLinearSketch:
        """Restore a checkpoint; the noise already drawn is reused, never redrawn."""
        header, arrays = unpack(data)
        check_header(header, cls.name, None)
        try:
            spec = DPLinearSpec(**header["spec"])
            state = (arrays["counts"].astype(np.int64), arrays["noise"].astype(np.float64),
                     bool(header["state"]["released"]))
        except (KeyError, TypeError) as exc:
            raise SerializationError(f"dp_linear state: missing field ({exc})") from None
        if state[0].shape != (spec.depth, spec.width) or state[1].shape != state[0].shape:
            raise SerializationError("dp_linear state: array shapes do not match the spec")
        return cls(spec, noise, _state=state)


class DPCountMin(DPLinearSketch):
    """DP Count-Min (``kind`` forced to ``"cms"`` by the registry entry)."""

    name: ClassVar[str] = "dp_cms"


class DPCountSketch(DPLinearSketch):
    """DP Count Sketch (``kind`` forced to ``"cs"`` by the registry entry)."""

    name: ClassVar[str] = "dp_cs"


def _entry(cls: type[DPLinearSketch], kind: str) -> MechanismEntry:
    return MechanismEntry(name=cls.name,
                          build_spec=lambda p: DPLinearSpec.from_params({**p, "kind": kind}),
                          build=cls, from_bytes=cls.from_bytes, continual=False,
                          capabilities=Capabilities(memory_model=DPLinearSpec.memory_bytes))


register(_entry(DPCountMin, "cms"))
register(_entry(DPCountSketch, "cs"))
