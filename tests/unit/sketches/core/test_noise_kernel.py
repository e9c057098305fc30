"""FastNoise's compiled Gaussian draws are numpy's, bit for bit (sketches/core/noise_kernel.py).

Seeded and deterministic: a failure is a real difference, not chance.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core import noise, noise_kernel
from sketches.core.noise import _NORMAL_KERNEL_SIZE, FastNoise


def test_kernel_values_and_state_equal_numpy_over_millions_of_draws() -> None:
    # 4M draws: about 1% take the ziggurat's slow path (wedges; about 1,000 the tail)
    ours, ref = np.random.default_rng(11), np.random.default_rng(11)
    for n, sigma in ((1, 1.0), (3_000_001, 2.5), (1_000_000, 1e-3), (7, 1e6)):
        assert np.array_equal(noise_kernel.normal(ours, sigma, n), ref.normal(0.0, sigma, n))
    assert ours.bit_generator.state == ref.bit_generator.state
    assert ours.integers(0, 2**63) == ref.integers(0, 2**63)  # the same stream goes on


@pytest.mark.parametrize("size", [1, _NORMAL_KERNEL_SIZE - 1, _NORMAL_KERNEL_SIZE,
                                  20_000, (3, 5_000), (0,)])
def test_fast_noise_gaussian_is_generator_normal_at_every_size(size: int | tuple[int, ...]) -> None:
    noise, ref = FastNoise(5), np.random.Generator(np.random.PCG64(5))
    for _ in range(3):  # consecutive calls continue the same stream
        got, want = noise.gaussian(7.0, size), ref.normal(0.0, 7.0, size)
        assert got.shape == want.shape and got.dtype == np.float64
        assert np.array_equal(got, want)


def test_kernel_is_used_for_large_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = noise_kernel.normal

    def spy(rng: np.random.Generator, sigma: float, n: int) -> np.ndarray:
        calls.append(n)
        return real(rng, sigma, n)

    monkeypatch.setattr(noise, "_compiled_normal", spy)
    FastNoise(1).gaussian(1.0, _NORMAL_KERNEL_SIZE - 1)
    FastNoise(1).gaussian(1.0, (2, _NORMAL_KERNEL_SIZE))
    assert calls == [2 * _NORMAL_KERNEL_SIZE]
