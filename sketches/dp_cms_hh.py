"""Heavy hitters from DP Count-Min sketches with private candidates (paper 003 + dyadic search).

"DP Count-Min + candidates": the frequency oracle is paper 003's DP Count-Min
(noise once, at initialisation). Candidates must not leak: ranking the items
*seen* in the window (what paper 003's experiments do) reveals that an item
occurred, and thresholding their CMS estimates does not fix it, because an
item seen once can collide with heavy items in every row and pass any
threshold. So candidates come from a **hierarchical search over the public
domain** ``[0, 2^bits)``: one DP Count-Min per prefix level (levels every
``branch_bits`` bits, dense top levels exact, see
:mod:`sketches.dyadic_levels`), and the search expands only children of
prefixes whose *noisy* estimate passes the threshold. Every output is a
function of the noisy counters only (post-processing), so the guarantee is
exactly that of the Gaussian mechanism on all levels, calibrated to the joint
sensitivity ``sqrt(sum_levels Delta_level^2)``.

Threshold ``tau = phi * N_hat`` (``N_hat``: noisy root counter), or an
absolute ``threshold``. The frontier is capped at ``max_frontier`` nodes (the
largest estimates are kept): a public bound on work, post-processing.

Payload (ARCHITECTURE "heavy hitters")::

    {"kind": "heavy_hitters", "items": [{"item": int, "estimate": float}, ...],
     "threshold": tau, "n_estimate", "sigma", "levels", "eps", "delta", "relation",
     "error_bound": {"beta", "noise_abs_max", "collision_per_row"}}

Examples
--------
>>> import numpy as np
>>> from sketches.noise import make_noise
>>> spec = DPCMSHeavyHittersSpec(bits=8, eps=1.0, delta=1e-6, phi=0.2, calibrator="paper")
>>> hh = DPCMSHeavyHitters(spec, make_noise("zero", allow_insecure=True))
>>> hh.update_batch(np.array([7] * 50 + [200] * 30 + list(range(20))))
>>> [(d["item"], d["estimate"]) for d in hh.release()["items"]]
[(7, 51.0), (200, 30.0)]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.base import MechanismEntry, register
from sketches.dp_linear import CALIBRATORS, RELATIONS, clip_weights, gaussian_sigma
from sketches.dyadic_levels import DyadicLevels, check_domain
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.serialization import check_header, pack, unpack

__all__ = ["DPCMSHeavyHitters", "DPCMSHeavyHittersSpec", "hierarchical_search"]


@dataclass(frozen=True)
class DPCMSHeavyHittersSpec:
    """Parameters of one DP Count-Min heavy-hitter window (all public).

    Parameters
    ----------
    bits : int
        Item domain ``[0, 2^bits)`` (e.g. 16 for /16 prefixes, 32 for IPv4).
    eps, delta : float
        Privacy of the one release.
    depth, width : int
        Count-Min size per hashed level.
    branch_bits : int
        Bits per search step (levels at shifts ``0, b, 2b, ..., bits``).
    phi : float
        Relative threshold ``tau = phi * N_hat`` (ignored when ``threshold`` is set).
    threshold : float or None
        Absolute threshold.
    max_frontier : int
        Public cap on the prefixes kept per level.
    top_k : int or None
        Publish at most ``top_k`` items (largest estimates).
    relation, calibrator, hash_seed, weight_clip, turnstile, beta, unit_cap
        As in :class:`sketches.dp_linear.DPLinearSpec`.
    """

    bits: int
    eps: float
    delta: float
    depth: int = 5
    width: int = 1024
    branch_bits: int = 4
    phi: float = 0.001
    threshold: float | None = None
    max_frontier: int = 1024
    top_k: int | None = None
    relation: str = "add_remove"
    calibrator: str = "discrete"
    hash_seed: int = 0
    weight_clip: int = 1
    turnstile: bool = False
    beta: float = 0.01
    unit_cap: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 62:
            raise SpecError(f"bits: must be in [1, 62], got {self.bits!r}")
        if not 1 <= self.branch_bits <= min(self.bits, 16):
            raise SpecError(f"branch_bits: must be in [1, min(bits, 16)], got {self.branch_bits}")
        object.__setattr__(self, "relation", str(self.relation))
        object.__setattr__(self, "calibrator", str(self.calibrator))
        for f in ("depth", "width", "weight_clip", "unit_cap", "max_frontier"):
            if int(getattr(self, f)) != getattr(self, f) or getattr(self, f) < 1:
                raise SpecError(f"{f}: must be an integer >= 1, got {getattr(self, f)!r}")
        if self.max_frontier << self.branch_bits > 1 << 24:
            raise SpecError("max_frontier: max_frontier * 2**branch_bits must be <= 2**24 "
                            "(children examined per level); lower one of them")
        if self.threshold is None and not 0 < self.phi <= 1:
            raise SpecError(f"phi: must be in (0, 1], got {self.phi}; or set 'threshold'")
        if not self.eps > 0 or not 0 < self.delta < 1 or not 0 < self.beta < 1:
            raise SpecError("eps/delta/beta: need eps > 0, delta in (0, 1), beta in (0, 1)")
        if self.relation not in RELATIONS or self.calibrator not in CALIBRATORS:
            raise SpecError(f"relation/calibrator: use one of {RELATIONS} / {CALIBRATORS}")

    @property
    def shifts(self) -> tuple[int, ...]:
        return (*range(0, self.bits, self.branch_bits), self.bits)

    @classmethod
    def from_params(cls, params: Any) -> DPCMSHeavyHittersSpec:
        """Build from topology params (unknown keys ignored)."""
        return cls(**{k: params[k] for k in cls.__dataclass_fields__ if k in params})


def hierarchical_search(levels: DyadicLevels, tau: float,
                        max_frontier: int) -> tuple[np.ndarray, np.ndarray]:
    """Leaves whose noisy estimate passes ``tau``, found by descending from the root.

    Returns ``(items, estimates)`` sorted by estimate (descending), ties by item.
    """
    frontier = np.zeros(1, dtype=np.int64)
    est = np.zeros(0)
    for i in range(len(levels.shifts) - 2, -1, -1):
        step = levels.shifts[i + 1] - levels.shifts[i]
        children = ((frontier[:, None] << step) + np.arange(1 << step)).ravel()
        est = levels.estimate(i, children)
        keep = est >= tau
        frontier, est = children[keep], est[keep]
        if frontier.shape[0] > max_frontier:
            top = np.lexsort((frontier, -est))[:max_frontier]
            frontier, est = frontier[top], est[top]
    order = np.lexsort((frontier, -est))
    return frontier[order], est[order]


class DPCMSHeavyHitters:
    """DP Count-Min heavy hitters with a private hierarchical candidate search.

    Parameters
    ----------
    spec : DPCMSHeavyHittersSpec
    noise : NoiseSource
        Noise of every counter of every level is drawn here, once.
    """

    name: ClassVar[str] = "dp_cms_hh"

    def __init__(self, spec: DPCMSHeavyHittersSpec, noise: Any, *,
                 _restore: bool = False) -> None:
        self.spec = spec
        self.levels = DyadicLevels(spec.bits, spec.shifts, "cms", spec.depth, spec.width,
                                   spec.hash_seed)
        self.sensitivity = self.levels.l2_sensitivity(spec.relation, spec.weight_clip,
                                                      spec.turnstile, spec.unit_cap)
        self.sigma = gaussian_sigma(spec.eps, spec.delta, self.sensitivity, spec.calibrator)
        self._released = False
        if not _restore:
            self.levels.draw_noise(noise, self.sigma, spec.calibrator == "discrete")

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        """Add integer items (vectorised per level); ``ticks`` ignored (one window)."""
        if self._released:
            raise PrivacyError("update_batch: this window was already released; start a fresh "
                               "instance (fresh noise) for the next window")
        x = check_domain(items, self.spec.bits)
        w = clip_weights(weights, x.shape[0], self.spec.weight_clip, self.spec.turnstile)
        if x.shape[0]:
            self.levels.update(x, w)

    def release(self) -> dict[str, Any]:
        """The ``heavy_hitters`` payload (module docstring); once per instance."""
        if self._released:
            raise PrivacyError("release: already released; a second release after more "
                               "updates reveals the exact increments")
        self._released = True
        s = self.spec
        n_hat = max(float(self.levels.estimate(len(s.shifts) - 1, np.zeros(1, int))[0]), 0.0)
        tau = float(s.threshold) if s.threshold is not None else s.phi * n_hat
        tau = max(tau, 1.0)
        items, est = hierarchical_search(self.levels, tau, s.max_frontier)
        if s.top_k is not None:
            items, est = items[: s.top_k], est[: s.top_k]
        e = self.sigma * math.sqrt(2 * math.log(4 * self.levels.cells() / s.beta))
        return {
            "kind": "heavy_hitters",
            "items": [{"item": int(i), "estimate": float(v)} for i, v in zip(items, est,
                                                                             strict=True)],
            "threshold": tau, "n_estimate": n_hat, "sigma": self.sigma,
            "levels": len(s.shifts), "eps": s.eps, "delta": s.delta, "relation": s.relation,
            "calibrator": s.calibrator, "mechanism": self.name,
            "error_bound": {"beta": s.beta, "noise_abs_max": e,
                            "collision_per_row": "L1 mass / width in expectation"},
        }

    def memory_bytes(self) -> int:
        """Bytes of counters and noise over all levels."""
        return self.levels.memory_bytes()

    def to_bytes(self) -> bytes:
        """Private checkpoint (exact counts and drawn noise)."""
        return pack(self.name, asdict(self.spec), {"released": self._released},
                    self.levels.arrays())

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> DPCMSHeavyHitters:
        """Restore a checkpoint; noise already drawn is reused, never redrawn."""
        header, arrays = unpack(data)
        check_header(header, cls.name, None)
        try:
            out = cls(DPCMSHeavyHittersSpec.from_params(header["spec"]), noise, _restore=True)
            out.levels.load(arrays)
            out._released = bool(header["state"]["released"])
        except (KeyError, TypeError, SpecError) as exc:
            raise SerializationError(f"dp_cms_hh state: {exc}") from None
        return out


register(MechanismEntry(name=DPCMSHeavyHitters.name, build_spec=DPCMSHeavyHittersSpec.from_params,
                        build=DPCMSHeavyHitters, from_bytes=DPCMSHeavyHitters.from_bytes,
                        continual=False))
