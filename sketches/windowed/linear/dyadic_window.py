"""One noise-once window over dyadic levels (paper 003).

The levels are :class:`~sketches.windowed.linear.dyadic_levels.DyadicLevels`.

:class:`DyadicWindow` is what :mod:`sketches.windowed.linear.dp_cms_hh` and
:mod:`sketches.windowed.linear.dyadic_quantiles` share: build the levels from the spec, calibrate
``sigma`` to their joint L2 sensitivity, draw every counter's noise once, add
clipped weighted items, guard the single release, and checkpoint (exact counts
and drawn noise; a restore reuses the noise, never redraws it). A subclass sets
:attr:`DyadicWindow.name`, :attr:`DyadicWindow.level_kind` and
:attr:`DyadicWindow.spec_type`, and writes its own ``release()`` (a
post-processing of the noisy counters).

:func:`check_window_fields` and :func:`check_window_budget` are the spec checks
both specs make (each keeps its own order of checks, so the first error
reported is the same as before they were shared).

Examples
--------
>>> from dataclasses import dataclass
>>> from sketches.core.noise import make_noise
>>> @dataclass(frozen=True)
... class Spec:
...     bits: int = 4
...     eps: float = 1.0
...     delta: float = 1e-6
...     depth: int = 1
...     width: int = 4
...     relation: str = "add_remove"
...     calibrator: str = "paper"
...     hash_seed: int = 0
...     weight_clip: int = 1
...     turnstile: bool = False
...     beta: float = 0.01
...     unit_cap: int = 1
...     shifts: tuple[int, ...] = (0, 2, 4)
...     @classmethod
...     def from_params(cls, params):
...         return cls(**params)
>>> class Demo(DyadicWindow):
...     name, level_kind, spec_type = "demo", "cms", Spec
>>> w = Demo(Spec(), make_noise("zero", allow_insecure=True))
>>> w.update_batch(np.array([1, 2, 2, 15]))
>>> w._root_estimate()
4.0
>>> Demo.from_bytes(w.to_bytes(), None).levels.estimate(1, np.array([0, 3])).tolist()
[3.0, 1.0]
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, ClassVar, Self

import numpy as np

from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import SerializationError, SpecError
from sketches.windowed.linear.dp_linear import CALIBRATORS, RELATIONS, clip_weights, gaussian_sigma
from sketches.windowed.linear.dyadic_levels import DyadicLevels, check_domain
from sketches.windowed.single_release import SingleRelease

__all__ = ["DyadicWindow", "check_window_budget", "check_window_fields"]


def check_window_fields(spec: Any, int_fields: tuple[str, ...]) -> None:
    """Normalise ``relation``/``calibrator`` to str and check ``int_fields`` are integers >= 1."""
    object.__setattr__(spec, "relation", str(spec.relation))
    object.__setattr__(spec, "calibrator", str(spec.calibrator))
    for f in int_fields:
        if int(getattr(spec, f)) != getattr(spec, f) or getattr(spec, f) < 1:
            raise SpecError(f"{f}: must be an integer >= 1, got {getattr(spec, f)!r}")


def check_window_budget(spec: Any) -> None:
    """Check ``eps``, ``delta``, ``beta``, ``relation`` and ``calibrator``."""
    if not spec.eps > 0 or not 0 < spec.delta < 1 or not 0 < spec.beta < 1:
        raise SpecError("eps/delta/beta: need eps > 0, delta in (0, 1), beta in (0, 1)")
    if spec.relation not in RELATIONS or spec.calibrator not in CALIBRATORS:
        raise SpecError(f"relation/calibrator: use one of {RELATIONS} / {CALIBRATORS}")


class DyadicWindow(SingleRelease):
    """Noisy dyadic levels for one window, released once (module docstring).

    Parameters
    ----------
    spec : frozen dataclass
        Has ``bits``, ``shifts``, ``depth``, ``width``, ``hash_seed``, ``relation``,
        ``calibrator``, ``weight_clip``, ``turnstile``, ``unit_cap``, ``eps``, ``delta``
        and ``beta``.
    noise : NoiseSource
        Noise of every counter of every level is drawn here, once.
    """

    name: ClassVar[str]
    level_kind: ClassVar[str]
    """Hashed levels: ``"cms"`` (Count-Min) or ``"cs"`` (Count Sketch)."""
    spec_type: ClassVar[Any]
    """The spec class; its ``from_params`` rebuilds the spec of a checkpoint."""

    def __init__(self, spec: Any, noise: Any, *, _restore: bool = False) -> None:
        self.spec = spec
        self.levels = DyadicLevels(spec.bits, spec.shifts, self.level_kind, spec.depth,
                                   spec.width, spec.hash_seed)
        self.sensitivity = self.levels.l2_sensitivity(spec.relation, spec.weight_clip,
                                                      spec.turnstile, spec.unit_cap)
        self.sigma = gaussian_sigma(spec.eps, spec.delta, self.sensitivity, spec.calibrator)
        self._released = False
        if not _restore:
            self.levels.draw_noise(noise, self.sigma, spec.calibrator == "discrete")

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        """Add weighted integer items (vectorised per level); ``ticks`` ignored (one window)."""
        self._check_open()
        x = check_domain(items, self.spec.bits)
        w = clip_weights(weights, x.shape[0], self.spec.weight_clip, self.spec.turnstile)
        if x.shape[0]:
            self.levels.update(x, w)

    def _root_estimate(self) -> float:
        """``N_hat``: the noisy root counter, floored at 0."""
        return max(float(self.levels.estimate(len(self.spec.shifts) - 1, np.zeros(1, int))[0]),
                   0.0)

    def _noise_abs_max(self) -> float:
        """``E``: every counter's noise is within ``[-E, E]`` w.p. ``1 - beta/2``."""
        return self.sigma * math.sqrt(2 * math.log(4 * self.levels.cells() / self.spec.beta))

    def memory_bytes(self) -> int:
        """Bytes of counters and noise over all levels."""
        return self.levels.memory_bytes()

    def to_bytes(self) -> bytes:
        """Private checkpoint (exact counts and drawn noise of every level)."""
        return pack(self.name, asdict(self.spec), {"released": self._released},
                    self.levels.arrays())

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> Self:
        """Restore a checkpoint; noise already drawn is reused, never redrawn."""
        header, arrays = unpack(data)
        check_header(header, cls.name, None)
        try:
            out = cls(cls.spec_type.from_params(header["spec"]), noise, _restore=True)
            out.levels.load(arrays)
            out._released = bool(header["state"]["released"])
        except (KeyError, TypeError, SpecError) as exc:
            raise SerializationError(f"{cls.name} state: {exc}") from None
        return out
