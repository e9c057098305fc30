"""Seeded Zipf streams, their exact top items, and the ARE metric (paper 002, Sec. 6.2)."""

from __future__ import annotations

import numpy as np


def zipf_stream(skew: float, length: int, seed: int) -> np.ndarray:
    """Seeded Zipf(``skew``) stream of ``length`` int64 items (numpy's unbounded Zipf).

    Examples
    --------
    >>> s = zipf_stream(1.3, 1000, seed=1)
    >>> s.dtype, len(s), int(s.min()) >= 1
    (dtype('int64'), 1000, True)
    """
    return np.random.default_rng(seed).zipf(skew, size=length).astype(np.int64)


def top_items(stream: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most frequent items of ``stream`` and their exact counts (ties: smaller id).

    Examples
    --------
    >>> top_items(np.array([3, 1, 3, 2, 3, 1]), 2)
    (array([3, 1]), array([3, 2]))
    """
    items, counts = np.unique(stream, return_counts=True)
    order = np.lexsort((items, -counts))[:k]
    return items[order], counts[order]


def are(true: np.ndarray, est: np.ndarray) -> float:
    """Average relative error ``mean(|f - f_hat| / f)`` (paper 002, Sec. 6.2).

    Examples
    --------
    >>> are(np.array([10, 20]), np.array([11.0, 18.0]))
    0.1
    """
    t = np.asarray(true, dtype=np.float64)
    return float(np.mean(np.abs(t - np.asarray(est, dtype=np.float64)) / t))
