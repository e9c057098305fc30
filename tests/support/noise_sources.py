"""Noise sources that fail or return patterns, for catch-up tests."""

from __future__ import annotations

import numpy as np


class Pattern:
    """Deterministic noise: value ``i`` of the stream is a fixed function of ``i``.

    A draw of ``m`` values is the concatenation of ``m`` one-value draws, so the
    canonical draw order is observable: any change of which nodes are drawn, or
    in which order, changes the values.
    """

    kind = "fast"

    def __init__(self) -> None:
        self.i = 0

    def _next(self, size: int) -> np.ndarray:
        idx = np.arange(self.i, self.i + int(size), dtype=np.int64)
        self.i += int(size)
        return (idx * 7919) % 2001 - 1000

    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self._next(size) * 0.37 + 0.1

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self._next(size)


class Failing(Pattern):
    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        raise RuntimeError("entropy source failed")



class FailsAtDraw(Pattern):
    """``Pattern`` whose ``fail_at``-th integer draw call (1-based) raises; 0: never."""

    def __init__(self, fail_at: int = 0) -> None:
        super().__init__()
        self.calls, self.fail_at = 0, fail_at

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("entropy source failed")
        return super().discrete_gaussian(sigma, size)
