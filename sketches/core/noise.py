"""Noise sources: the only place randomness enters a dpstream mechanism.

Mechanisms never create randomness; they receive a :class:`NoiseSource`.

- :class:`SecureNoise` (``kind="secure"``): production. Every random bit comes
  from the operating system CSPRNG (``os.urandom``, i.e. Linux ``getrandom``).
  Integer noise (:meth:`~NoiseSource.discrete_gaussian`,
  :meth:`~NoiseSource.discrete_laplace`) is sampled with integer comparisons
  only, from a 128-bit fixed-point CDF table (:mod:`sketches.core.noise_tables`;
  two composed tables for a discrete Gaussian sigma above about ``1.56e5``,
  :mod:`sketches.core.noise_compose`), within total-variation distance
  ``2**-100`` of the exact distribution, so it
  is immune to floating-point attacks (Mironov 2012).
- :class:`FastNoise` (``kind="fast"``): numpy PCG64 seeded; same samplers, fed
  by the PRNG (large Gaussian draws run compiled, with numpy's values:
  :mod:`sketches.core.noise_kernel`). For benchmarks and reproducible tests only.
- :class:`ZeroNoise` (``kind="zero"``): zeros; exactness tests only.

:func:`make_noise` refuses ``fast`` and ``zero`` unless ``allow_insecure=True``,
and then logs a WARNING naming the mode.

Floating-point caveat
---------------------
:meth:`~NoiseSource.gaussian` and :meth:`~NoiseSource.laplace` return float64
noise (Box-Muller / inverse CDF on uniforms from secure bits). Adding a
float sample to a value and publishing the float result can leak the value
through the pattern of representable low-order bits (Mironov 2012). This is why
integer counters use the discrete Gaussian (calibrator ``discrete``), whose
output is an exact integer. Continuous noise is provided for the ``analytic``
and ``paper`` calibrators, which are for reproducing the paper and benchmarks
only: production topologies must use ``discrete`` (the worker enforces it;
docs/PRIVACY.md §9). Rounding a float release reduces but does not remove the
leak.

Integer-noise range
-------------------
The discrete Gaussian supports ``1e-3 <= sigma <= 1e8``: one table up to about
``1.56e5``, above it ``m Y + Z`` from two tables within TV ``< 2**-102.99``
per sample (:mod:`sketches.core.noise_compose`, ``discrete_gaussian_tv``). The
discrete Laplace supports ``scale <= ~2.33e4``.
:func:`sketches.core.noise_compose.validate_discrete_sigma` checks the range
(and builds the sampler with ``build=True``) so that sketches can fail at
construction instead of at a draw.

Checkpoints
-----------
Sketches store the noise they have drawn in their state, so a noise source is
never serialized. :class:`FastNoise` exposes its ``seed`` for reproducibility.

Examples
--------
>>> noise = make_noise("secure")
>>> noise.discrete_gaussian(20.0, 3).dtype
dtype('int64')
>>> make_noise("zero", allow_insecure=True).gaussian(1.0, (2, 2)).tolist()
[[0.0, 0.0], [0.0, 0.0]]
"""

from __future__ import annotations

import logging
import math
import os
from typing import Protocol, runtime_checkable

import numpy as np

from sketches.core.noise_compose import discrete_gaussian32_sampler, discrete_gaussian_sampler
from sketches.core.noise_kernel import normal as _compiled_normal
from sketches.core.noise_tables import discrete_laplace_table
from sketches.errors import PrivacyError, SpecError

log = logging.getLogger(__name__)

_NORMAL_KERNEL_SIZE = 2048  # FastNoise.gaussian: compiled from here (below, numpy is cheaper)

Size = int | tuple[int, ...]

__all__ = [
    "FastNoise",
    "NoiseSource",
    "SecureNoise",
    "ZeroNoise",
    "make_noise",
]


@runtime_checkable
class NoiseSource(Protocol):
    """Structural type of every noise source (see module docstring)."""

    kind: str

    def gaussian(self, sigma: float, size: Size) -> np.ndarray:
        """float64 samples of ``N(0, sigma^2)``."""
        ...

    def discrete_gaussian(self, sigma: float, size: Size) -> np.ndarray:
        """int64 samples of the discrete Gaussian ``N_Z(0, sigma^2)`` (CKS 2020, Def. 1)."""
        ...

    def laplace(self, scale: float, size: Size) -> np.ndarray:
        """float64 samples of ``Laplace(0, scale)``."""
        ...

    def discrete_laplace(self, scale: float, size: Size) -> np.ndarray:
        """int64 samples with ``P[x] ∝ exp(-|x| / scale)`` (two-sided geometric)."""
        ...

    def uniform(self, size: Size) -> np.ndarray:
        """float64 samples uniform on ``[0, 1)``."""
        ...

    def random_bytes(self, n: int) -> bytes:
        """``n`` random bytes (secret keys, hash seeds)."""
        ...


def _count(size: Size) -> int:
    """Number of elements of a numpy ``size`` argument, validated."""
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    if any(int(s) < 0 for s in shape):
        raise SpecError(f"size: dimensions must be >= 0, got {size!r}")
    return math.prod(int(s) for s in shape)


def _shape(size: Size) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, int | np.integer) else tuple(int(s) for s in size)


def _check_scale(name: str, value: float) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise SpecError(f"{name}: must be a finite number > 0, got {value!r}")
    return v


class _BitNoise:
    """Shared samplers over an abstract source of uniform 64-bit words."""

    kind: str = ""

    def _u64(self, n: int) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def _unit(self, n: int) -> np.ndarray:
        """Uniform float64 on [0, 1) with 53 random bits each."""
        return (self._u64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    def _open_unit(self, n: int) -> np.ndarray:
        """Uniform on (0, 1] from 128 random bits: never 0, and values down to ``2**-128``.

        The fine resolution near 0 keeps ``-log(u)`` tails long (Box-Muller
        reaches ``sqrt(2 ln 2**128) = 13.3`` sigma instead of 8.6 with 53 bits),
        so truncation changes a Gaussian/Laplace tail by less than ``2**-120``.
        """
        hi = self._u64(n).astype(np.float64) * 2.0**-64
        lo = (self._u64(n).astype(np.float64) + 1.0) * 2.0**-128
        return np.minimum(hi + lo, 1.0)

    def uniform(self, size: Size) -> np.ndarray:
        return self._unit(_count(size)).reshape(_shape(size))

    def gaussian(self, sigma: float, size: Size) -> np.ndarray:
        s = _check_scale("sigma", sigma)
        n = _count(size)
        half = (n + 1) // 2
        r = np.sqrt(-2.0 * np.log(self._open_unit(half)))
        theta = (2.0 * np.pi) * self._unit(half)
        z = np.concatenate([r * np.cos(theta), r * np.sin(theta)])[:n]
        return (s * z).reshape(_shape(size))

    def laplace(self, scale: float, size: Size) -> np.ndarray:
        b = _check_scale("scale", scale)
        n = _count(size)
        words = self._u64(n)
        sign = np.where((words & np.uint64(1)) == 0, 1.0, -1.0)
        mag = -np.log(self._open_unit(n))
        return (b * sign * mag).reshape(_shape(size))

    def discrete_gaussian(self, sigma: float, size: Size) -> np.ndarray:
        sampler = discrete_gaussian_sampler(_check_scale("sigma", sigma))
        return sampler.draw(self._u64, _count(size)).reshape(_shape(size))

    def discrete_gaussian32(self, sigma: float, size: Size) -> np.ndarray:
        """``N_Z(0, sigma^2)`` within TV ``discrete_gaussian32_tv(sigma)`` per draw, bits read
        lazily: one table reads 32 first (:meth:`~sketches.core.noise_tables.IntegerTable.
        draw32`: half a word per draw where :meth:`discrete_gaussian` reads one); from
        ``COMPOSE32_MIN`` the composed rule of docs/PRIVACY.md 9.1 on two cache-sized
        tables, each read 16 bits first (about half a word per draw;
        :func:`~sketches.core.noise_compose.discrete_gaussian32_sampler`). The lattice
        counter's sampler; other values than :meth:`discrete_gaussian` from one seed."""
        sampler = discrete_gaussian32_sampler(_check_scale("sigma", sigma))
        return sampler.draw_lazy(self._u64, _count(size)).reshape(_shape(size))

    def discrete_laplace(self, scale: float, size: Size) -> np.ndarray:
        table = discrete_laplace_table(_check_scale("scale", scale))
        return table.sample(self._u64(_count(size)), self._u64).reshape(_shape(size))


class SecureNoise(_BitNoise):
    """Noise from the OS CSPRNG (``os.urandom``). The production source.

    Examples
    --------
    >>> x = SecureNoise().discrete_gaussian(50.0, 100_000)
    >>> bool(abs(x.std() - 50.0) < 1.0)
    True
    >>> len(SecureNoise().random_bytes(16))
    16
    """

    kind = "secure"

    def _u64(self, n: int) -> np.ndarray:
        if n == 0:
            return np.empty(0, dtype=np.uint64)
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()

    def random_bytes(self, n: int) -> bytes:
        return os.urandom(int(n))

    def __repr__(self) -> str:
        return "SecureNoise()"


class FastNoise(_BitNoise):
    """Seeded numpy PCG64 noise: reproducible, NOT private. Benchmarks and tests only.

    Integer samplers use the same exact tables as :class:`SecureNoise`, so the
    distributions are identical; only the bit source differs.

    Examples
    --------
    >>> a = FastNoise(7).discrete_gaussian(10.0, 5)
    >>> b = FastNoise(7).discrete_gaussian(10.0, 5)
    >>> bool((a == b).all()), FastNoise(7).seed
    (True, 7)
    """

    kind = "fast"

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise SpecError(f"seed: FastNoise needs an int >= 0, got {seed!r}")
        self.seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self.seed))

    def _u64(self, n: int) -> np.ndarray:
        return self._rng.bit_generator.random_raw(n).astype(np.uint64, copy=False)

    def gaussian(self, sigma: float, size: Size) -> np.ndarray:
        """``Generator.normal(0, sigma, size)``; large draws in compiled code, with the
        same values and the same generator state after (:mod:`sketches.core.noise_kernel`)."""
        shape, s = _shape(size), _check_scale("sigma", sigma)
        n = math.prod(shape)
        if n >= _NORMAL_KERNEL_SIZE:
            with self._rng.bit_generator.lock:  # as numpy's own methods (compiled code: no GIL)
                return _compiled_normal(self._rng, s, n).reshape(shape)
        return self._rng.normal(0.0, s, shape)

    def laplace(self, scale: float, size: Size) -> np.ndarray:
        return self._rng.laplace(0.0, _check_scale("scale", scale), _shape(size))

    def uniform(self, size: Size) -> np.ndarray:
        return self._rng.random(_shape(size))

    def random_bytes(self, n: int) -> bytes:
        return self._rng.bytes(int(n))

    def __repr__(self) -> str:
        return f"FastNoise(seed={self.seed})"


class ZeroNoise:
    """All-zero noise of the right dtype and shape. Exactness tests only.

    ``random_bytes`` returns zero bytes (deterministic keys).

    Examples
    --------
    >>> ZeroNoise().discrete_gaussian(3.0, 2).tolist()
    [0, 0]
    """

    kind = "zero"

    def gaussian(self, sigma: float, size: Size) -> np.ndarray:
        _check_scale("sigma", sigma)
        return np.zeros(_shape(size), dtype=np.float64)

    def discrete_gaussian(self, sigma: float, size: Size) -> np.ndarray:
        _check_scale("sigma", sigma)
        return np.zeros(_shape(size), dtype=np.int64)

    def discrete_gaussian32(self, sigma: float, size: Size) -> np.ndarray:
        _check_scale("sigma", sigma)
        return np.zeros(_shape(size), dtype=np.int64)

    def laplace(self, scale: float, size: Size) -> np.ndarray:
        _check_scale("scale", scale)
        return np.zeros(_shape(size), dtype=np.float64)

    def discrete_laplace(self, scale: float, size: Size) -> np.ndarray:
        _check_scale("scale", scale)
        return np.zeros(_shape(size), dtype=np.int64)

    def uniform(self, size: Size) -> np.ndarray:
        return np.zeros(_shape(size), dtype=np.float64)

    def random_bytes(self, n: int) -> bytes:
        return bytes(int(n))

    def __repr__(self) -> str:
        return "ZeroNoise()"


KINDS = ("secure", "fast", "zero")


def make_noise(
    kind: str, seed: int | None = None, *, allow_insecure: bool = False
) -> NoiseSource:
    """Build the noise source ``kind`` ("secure" | "fast" | "zero").

    Parameters
    ----------
    kind:
        ``"secure"`` for production; ``"fast"`` (seeded PRNG) and ``"zero"``
        are refused with :class:`~sketches.errors.PrivacyError` unless
        ``allow_insecure=True``.
    seed:
        Seed of ``"fast"`` (default 0). Refused for ``"secure"``: a seeded
        production source would be reproducible by anyone knowing the seed.
    allow_insecure:
        The explicit flag that admits ``fast``/``zero``; a WARNING naming the
        mode is logged every time it is used.

    Examples
    --------
    >>> make_noise("secure").kind
    'secure'
    >>> make_noise("fast", 3, allow_insecure=True).seed
    3
    >>> try:
    ...     make_noise("zero")
    ... except PrivacyError as err:
    ...     print("allow_insecure" in str(err))
    True
    """
    if kind not in KINDS:
        raise SpecError(f"noise: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "secure":
        if seed is not None:
            raise SpecError(
                "seed: the secure noise source cannot be seeded; drop the seed "
                "or use kind='fast' with allow_insecure=True for reproducible tests"
            )
        return SecureNoise()
    if not allow_insecure:
        raise PrivacyError(
            f"noise: kind {kind!r} is not differentially private (it is "
            f"{'a seeded PRNG' if kind == 'fast' else 'zero noise'}); use kind='secure', "
            "or pass allow_insecure=True (benchmarks/tests only)"
        )
    log.warning(
        "INSECURE NOISE MODE %r ENABLED (allow_insecure=True): releases are NOT "
        "differentially private; never use this in production",
        kind,
    )
    if kind == "fast":
        return FastNoise(0 if seed is None else seed)
    return ZeroNoise()
