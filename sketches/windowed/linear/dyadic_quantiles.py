"""Private dyadic Count Sketch for quantiles in the turnstile model (paper 003, sec. 4).

Items are integers in ``[0, 2^bits)``; a deletion is an event with weight
``-1`` (turnstile). Levels ``s = r, r+1, ..., bits`` count the prefixes
``x >> s`` (``r`` = ``resolution_bits``: answers are exact up to ``2^r``);
dense top levels are exact, the others are Count Sketches (see
:mod:`sketches.windowed.linear.dyadic_levels`). Noise is drawn once at construction and the
whole structure is released once, as quantile answers (post-processing).

Quantile search (post-processing of the noisy counts): ``N_hat`` = the noisy
root counter; for each ``phi`` the target is ``t = phi * N_hat`` and the tree
is descended from the root: at each level go left if ``t <= count(left
child)``, else subtract that count and go right. With exact counts this finds
the smallest ``x`` (at resolution ``2^r``) with ``#{items <= x} >= t``, i.e.
the ``phi``-quantile. The descent never needs monotone ranks.

Privacy: Gaussian noise on every counter of every level, calibrated to the
joint sensitivity (relation ``replace`` under the turnstile: ``2 sqrt(d)`` per
hashed level, 2 per exact level; ``add_remove``: ``sqrt(d)`` / 1) with the
exact calibrators of :mod:`sketches.privacy`. One release per instance.

Payload ``"kind": "quantiles"``::

    {"kind": "quantiles", "bits", "resolution_bits", "n_estimate",
     "quantiles": [{"phi": float, "value": int}, ...],
     "sigma", "levels", "eps", "delta", "relation",
     "error_bound": {"beta", "rank_noise_abs_max", "hashed_levels"}}

``value`` is the lower end of the ``2^r``-wide cell holding the quantile.
``rank_noise_abs_max``: w.p. ``1 - beta/2`` every counter's noise is within
``E = sigma sqrt(2 ln(4 cells / beta))``; a descent reads one node per
non-root level and the root (through ``phi * N_hat``, ``phi <= 1``), so the
true rank interval of the returned cell is within ``levels * E`` of the target
``phi * N`` (hashed levels add Count-Sketch collision error on top).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = DyadicQuantilesSpec(bits=8, eps=1.0, delta=1e-6, phis=(0.5,), calibrator="paper")
>>> q = DyadicQuantiles(spec, make_noise("zero", allow_insecure=True))
>>> q.update_batch(np.array([10, 20, 30, 40, 30]), weights=np.array([1, 1, 1, 1, -1]))
>>> q.release()["quantiles"]
[{'phi': 0.5, 'value': 20}]
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

__all__ = ["DEFAULT_PHIS", "DyadicQuantiles", "DyadicQuantilesSpec", "descend_quantiles"]

DEFAULT_PHIS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class DyadicQuantilesSpec:
    """Parameters of one private dyadic quantile sketch window (all public).

    Parameters
    ----------
    bits : int
        Domain ``[0, 2^bits)``.
    eps, delta : float
        Privacy of the one release.
    depth, width : int
        Count Sketch size of each hashed level (paper: ``d = ceil(ln(bits / gamma))``,
        ``w = sqrt(bits * d) / gamma``).
    resolution_bits : int
        Leaves are ``x >> resolution_bits``.
    phis : tuple of float
        Quantiles released, each in (0, 1].
    relation, calibrator, hash_seed, weight_clip, turnstile, beta, unit_cap
        As in :class:`sketches.windowed.linear.dp_linear.DPLinearSpec`
        (``turnstile`` defaults to True).
    """

    bits: int
    eps: float
    delta: float
    depth: int = 7
    width: int = 512
    resolution_bits: int = 0
    phis: tuple[float, ...] = DEFAULT_PHIS
    relation: str = "add_remove"
    calibrator: str = "discrete"
    hash_seed: int = 0
    weight_clip: int = 1
    turnstile: bool = True
    beta: float = 0.01
    unit_cap: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "phis", tuple(float(p) for p in self.phis))
        if not 1 <= self.bits <= 62:
            raise SpecError(f"bits: must be in [1, 62], got {self.bits!r}")
        if not 0 <= self.resolution_bits < self.bits:
            raise SpecError(f"resolution_bits: must be in [0, bits), got {self.resolution_bits}")
        check_window_fields(self, ("depth", "width", "weight_clip", "unit_cap"))
        if not self.phis or not all(0 < p <= 1 for p in self.phis):
            raise SpecError(f"phis: need at least one quantile, each in (0, 1]; got {self.phis}")
        check_window_budget(self)

    @property
    def shifts(self) -> tuple[int, ...]:
        return tuple(range(self.resolution_bits, self.bits + 1))

    @classmethod
    def from_params(cls, params: Any) -> DyadicQuantilesSpec:
        """Build from topology params (unknown keys ignored)."""
        kw = {k: params[k] for k in cls.__dataclass_fields__ if k in params}
        if "phis" in kw:
            kw["phis"] = tuple(kw["phis"])
        return cls(**kw)


def descend_quantiles(levels: DyadicLevels, targets: np.ndarray) -> np.ndarray:
    """Leaf prefix reached by the rank descent for each target rank (vectorised over targets).

    ``levels.shifts`` must end with the root (``bits``); returns prefixes at ``shifts[0]``.
    """
    if list(levels.shifts) != list(range(levels.shifts[0], levels.bits + 1)):
        raise SpecError("shifts: the quantile descent needs consecutive levels up to the root")
    t = np.asarray(targets, dtype=np.float64).copy()
    node = np.zeros(t.shape[0], dtype=np.int64)
    for i in range(len(levels.shifts) - 2, -1, -1):
        left = node << 1
        c = levels.estimate(i, left)
        go_left = t <= c
        t = np.where(go_left, t, t - c)
        node = np.where(go_left, left, left + 1)
    return node


class DyadicQuantiles(DyadicWindow):
    """Private dyadic Count Sketch quantiles (paper 003), single release.

    Construction, updates (weight +1 adds, -1 deletes), the single-release guard and
    checkpoints are those of
    :class:`~sketches.windowed.linear.dyadic_window.DyadicWindow` (Count Sketch
    hashed levels).

    Parameters
    ----------
    spec : DyadicQuantilesSpec
    noise : NoiseSource
        Noise of every counter of every level is drawn here, once.
    """

    name: ClassVar[str] = "dyadic_quantiles"
    level_kind: ClassVar[str] = "cs"
    spec_type: ClassVar[Any] = DyadicQuantilesSpec
    spec: DyadicQuantilesSpec

    def _answer(self) -> tuple[float, np.ndarray]:
        n_hat = self._root_estimate()
        targets = np.array(self.spec.phis) * n_hat
        leaves = descend_quantiles(self.levels, targets)
        return n_hat, leaves << self.spec.resolution_bits

    def release(self) -> dict[str, Any]:
        """The ``quantiles`` payload (module docstring); once per instance."""
        self._begin_release("release: this quantile sketch was already released")
        s = self.spec
        n_hat, values = self._answer()
        e = self._noise_abs_max()
        hashed = sum(not self.levels.is_exact(i) for i in range(len(s.shifts)))
        return {
            "kind": "quantiles", "bits": s.bits, "resolution_bits": s.resolution_bits,
            "n_estimate": n_hat,
            "quantiles": [{"phi": p, "value": int(v)} for p, v in zip(s.phis, values,
                                                                        strict=True)],
            "sigma": self.sigma, "levels": len(s.shifts), "eps": s.eps, "delta": s.delta,
            "relation": s.relation, "calibrator": s.calibrator, "mechanism": self.name,
            "error_bound": {"beta": s.beta, "rank_noise_abs_max": len(s.shifts) * e,
                            "hashed_levels": hashed},
        }


register(MechanismEntry(name=DyadicQuantiles.name, build_spec=DyadicQuantilesSpec.from_params,
                        build=DyadicQuantiles, from_bytes=DyadicQuantiles.from_bytes,
                        continual=False))
