"""Heavy hitters from DP Count-Min sketches with private candidates (paper 003 + dyadic search).

"DP Count-Min + candidates": the frequency oracle is paper 003's DP Count-Min
(noise once, at initialisation). Candidates must not leak: ranking the items
*seen* in the window (what paper 003's experiments do) reveals that an item
occurred, and thresholding their CMS estimates does not fix it, because an
item seen once can collide with heavy items in every row and pass any
threshold. So candidates come from a **hierarchical search over the public
domain** ``[0, 2^bits)``: one DP Count-Min per prefix level (levels every
``branch_bits`` bits, dense top levels exact, see
:mod:`sketches.windowed.linear.dyadic_levels`), and the search expands only children of
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
>>> from sketches.core.noise import make_noise
>>> spec = DPCMSHeavyHittersSpec(bits=8, eps=1.0, delta=1e-6, phi=0.2, calibrator="paper")
>>> hh = DPCMSHeavyHitters(spec, make_noise("zero", allow_insecure=True))
>>> hh.update_batch(np.array([7] * 50 + [200] * 30 + list(range(20))))
>>> [(d["item"], d["estimate"]) for d in hh.release()["items"]]
[(7, 51.0), (200, 30.0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import MechanismEntry, register
from sketches.errors import SpecError
from sketches.windowed.linear.dyadic_levels import DyadicLevels
from sketches.windowed.linear.dyadic_window import (
    DyadicWindow,
    check_window_budget,
    check_window_fields,
)

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
        As in :class:`sketches.windowed.linear.dp_linear.DPLinearSpec`.
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
        check_window_fields(self, ("depth", "width", "weight_clip", "unit_cap", "max_frontier"))
        if self.max_frontier << self.branch_bits > 1 << 24:
            raise SpecError("max_frontier: max_frontier * 2**branch_bits must be <= 2**24 "
                            "(children examined per level); lower one of them")
        if self.threshold is None and not 0 < self.phi <= 1:
            raise SpecError(f"phi: must be in (0, 1], got {self.phi}; or set 'threshold'")
        check_window_budget(self)

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


class DPCMSHeavyHitters(DyadicWindow):
    """DP Count-Min heavy hitters with a private hierarchical candidate search.

    Construction, updates, the single-release guard and checkpoints are those of
    :class:`~sketches.windowed.linear.dyadic_window.DyadicWindow` (Count-Min hashed levels).

    Parameters
    ----------
    spec : DPCMSHeavyHittersSpec
    noise : NoiseSource
        Noise of every counter of every level is drawn here, once.
    """

    name: ClassVar[str] = "dp_cms_hh"
    level_kind: ClassVar[str] = "cms"
    spec_type: ClassVar[Any] = DPCMSHeavyHittersSpec
    spec: DPCMSHeavyHittersSpec

    def release(self) -> dict[str, Any]:
        """The ``heavy_hitters`` payload (module docstring); once per instance."""
        self._begin_release("release: already released")
        s = self.spec
        n_hat = self._root_estimate()
        tau = float(s.threshold) if s.threshold is not None else s.phi * n_hat
        tau = max(tau, 1.0)
        items, est = hierarchical_search(self.levels, tau, s.max_frontier)
        if s.top_k is not None:
            items, est = items[: s.top_k], est[: s.top_k]
        e = self._noise_abs_max()
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


register(MechanismEntry(name=DPCMSHeavyHitters.name, build_spec=DPCMSHeavyHittersSpec.from_params,
                        build=DPCMSHeavyHitters, from_bytes=DPCMSHeavyHitters.from_bytes,
                        continual=False))
