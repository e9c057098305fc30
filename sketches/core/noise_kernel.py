"""Compiled (numba) Gaussian draws of :class:`~sketches.core.noise.FastNoise`.

numpy's ``Generator.normal(0, sigma, n)`` costs about 10.5 ns per value here (its
ziggurat behind the generic ``cont`` broadcasting loop); numba's implementation of
the same ``Generator.normal`` (a port of numpy's ziggurat that calls the bit
generator's own ``next_uint64``/``next_double``) costs about 4 ns, and consumes the
same words of the same bit generator, so the values are bit-identical and the
generator's state after the call is the same (tests/unit/sketches/core/
test_noise_kernel.py compares millions of values, tails included).

Passing the generator into compiled code costs about 7.5 us per call, so
:meth:`FastNoise.gaussian <sketches.core.noise.FastNoise.gaussian>` uses
:func:`normal` only from 2,048 values (LazyHH's lazy node noise draws
about 11,000 per output on the Fig. 4 stream). Compiled on first use and cached on
disk like :mod:`sketches.continual.lazy_hh.kernel`.
"""

from __future__ import annotations

import numpy as np

from sketches.core.jit import njit

__all__ = ["normal"]


@njit
def normal(rng: np.random.Generator, sigma: float, n: int) -> np.ndarray:
    """``rng.normal(0.0, sigma, n)``: the same values, drawn in compiled code.

    >>> a = normal(np.random.default_rng(3), 2.0, 5)
    >>> bool((a == np.random.default_rng(3).normal(0.0, 2.0, 5)).all())
    True
    """
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = rng.normal(0.0, sigma)
    return out
