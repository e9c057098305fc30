"""Noise sources for the audit: the production source and deliberately broken variants.

The audit runs every mechanism on :class:`sketches.SecureNoise`, the
production source (OS CSPRNG feeding the exact discrete Gaussian / discrete
Laplace samplers): it is fast enough (about 10M discrete Gaussian draws/s
here), so no seeded stand-in is needed and the audited distribution is
exactly the released one. Only the *inputs* (which items, which background)
come from a seeded generator.

The broken variants exist to show that the audit can fail (power check):
:class:`ScaledNoise` multiplies every noise scale by a factor (``0.25`` =
noise divided by 4) and :class:`sketches.ZeroNoise` removes noise (and makes
every secret key zero, TrieHH samples everyone).

Examples
--------
>>> from sketches import SecureNoise
>>> n = ScaledNoise(SecureNoise(), 0.0001)
>>> bool(abs(n.discrete_gaussian(100.0, 1000)).max() <= 1)
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sketches import NoiseSource

__all__ = ["ScaledNoise"]


class ScaledNoise:
    """A :class:`sketches.NoiseSource` whose every scale is ``factor`` times the requested one.

    It reports ``kind = "secure"`` so mechanisms treat it as production noise
    (a test double of a miscalibrated release). Uniforms and random bytes pass
    through unchanged.
    """

    kind = "secure"

    def __init__(self, inner: NoiseSource, factor: float) -> None:
        if not factor > 0:
            raise ValueError(f"factor: must be > 0, got {factor!r}")
        self.inner = inner
        self.factor = float(factor)

    def gaussian(self, sigma: float, size: Any) -> np.ndarray:
        return self.inner.gaussian(sigma * self.factor, size)

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        return self.inner.discrete_gaussian(sigma * self.factor, size)

    def laplace(self, scale: float, size: Any) -> np.ndarray:
        return self.inner.laplace(scale * self.factor, size)

    def discrete_laplace(self, scale: float, size: Any) -> np.ndarray:
        return self.inner.discrete_laplace(scale * self.factor, size)

    def uniform(self, size: Any) -> np.ndarray:
        return self.inner.uniform(size)

    def random_bytes(self, n: int) -> bytes:
        return self.inner.random_bytes(n)

    def __repr__(self) -> str:
        return f"ScaledNoise({self.inner!r}, factor={self.factor})"
