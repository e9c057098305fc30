"""Smoke tests of benchmarks/bench_fig3.py's pure helpers (no sketch is run, no broker).

The benchmark reproduces paper 002's Figure 3; what must be right before any
number means anything is the memory model that turns a byte budget into
widths (the paper: 24 KB -> CMS 2000, LazyCMS 55, PunctualCMS 33 at d=3,
T=2**20) and the ARE metric. All tests are deterministic.
"""

from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest

import benchmarks.bench_fig3 as bench_fig3
from benchmarks.fig3.model import cell_bytes, matched_width, model_memory, tree_levels
from benchmarks.fig3.runs import Setup, punctual_final_query
from benchmarks.fig3.streams import are, top_items, zipf_stream

T = 2**20


@pytest.mark.parametrize(
    ("kind", "width"),
    [("CMS", 2000), ("CS", 2000), ("LazyCMS", 55), ("LazyCS", 55),
     ("PunctualCMS", 33), ("PunctualCS", 33)],
)
def test_paper_widths_at_24kb(kind: str, width: int) -> None:
    """The memory model reproduces the widths stated in paper 002, Sec. 6.4."""
    assert matched_width(kind, 24_000, 3, T) == width


@pytest.mark.parametrize("kind", ["CMS", "LazyCMS", "PunctualCS"])
@pytest.mark.parametrize("memory", [3_000, 8_000, 24_000, 64_000, 200_000])
@pytest.mark.parametrize("depth", [1, 3, 5])
def test_matched_width_is_the_widest_that_fits(kind: str, memory: int, depth: int) -> None:
    """Width w fits the budget and w+1 does not (memory is monotone in width)."""
    w = matched_width(kind, memory, depth, T)
    assert model_memory(kind, depth, w, T) <= memory
    assert model_memory(kind, depth, w + 1, T) > memory


def test_lazy_cells_shrink_with_width_punctual_cells_do_not() -> None:
    """Lazy counters see ceil(T/w) rounds, Punctual counters all T rounds (Alg. 3 vs Alg. 5)."""
    assert cell_bytes("LazyCMS", 1024, T) < cell_bytes("LazyCMS", 16, T)
    assert cell_bytes("PunctualCMS", 1024, T) == cell_bytes("PunctualCMS", 16, T)
    assert tree_levels(T) == math.ceil(math.log2(T + 1)) == 21


def test_top_items_and_are() -> None:
    """Exact top-k with ties broken by item id, and ARE as defined in Sec. 6.2."""
    stream = np.array([5, 5, 5, 9, 9, 2, 2, 7], dtype=np.int64)
    items, counts = top_items(stream, 3)
    assert items.tolist() == [5, 2, 9] and counts.tolist() == [3, 2, 2]
    assert are(counts, counts.astype(float)) == 0.0
    assert are(np.array([4, 10]), np.array([2.0, 15.0])) == pytest.approx(0.5)


def test_zipf_stream_is_seeded() -> None:
    """Same seed, same stream; another seed, another stream."""
    a, b, c = (zipf_stream(1.3, 5000, s) for s in (3, 3, 4))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_docstring_examples() -> None:
    """The module's doctest examples run."""
    result = doctest.testmod(bench_fig3, verbose=False)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------ Punctual end-of-stream shortcut


def _punctual(kind: str, horizon: int, width: int, noise: Any) -> Any:
    from sketches.continual.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
    from sketches.privacy import Calibrator, Relation

    cls = PunctualCMS if kind == "PunctualCMS" else PunctualCS
    spec = PunctualSketchSpec(3, width, horizon, 0.3, 1e-3, relation=Relation.REPLACE,
                              calibrator=Calibrator.PAPER, hash_seed=5)
    return cls(spec, noise)


@pytest.mark.parametrize("kind", ["PunctualCMS", "PunctualCS"])
def test_punctual_shortcut_exact_with_zero_noise(kind: str) -> None:
    """With zero noise the shortcut answers exactly what the real Alg. 3 sketch answers."""
    from sketches.core.noise import make_noise

    zero = make_noise("zero", allow_insecure=True)
    stream = zipf_stream(1.3, 700, seed=2)
    items = np.unique(stream)
    real = _punctual(kind, 1000, 16, zero)
    real.update_batch(stream)
    setup = Setup(kind, 3, 16, 1000, hash_seed=5)
    short = punctual_final_query(setup, stream, items, noise=zero)
    assert np.array_equal(np.asarray(real.query(items), dtype=float), short)


@pytest.mark.parametrize("kind", ["PunctualCMS", "PunctualCS"])
def test_real_punctual_noise_matches_the_shortcut_model(kind: str) -> None:
    """Real Alg. 3 release minus exact counts ~ N(0, popcount(T) sigma^2) per cell.

    T = 1023 (popcount 10), 3 x 16 cells, 8 seeds: 384 residuals. The sum of
    squares over 10 sigma^2 is chi-square(384) under the model; the test fails
    outside its 1e-6 / 1 - 1e-6 quantiles (false-failure rate 2e-6 per kind).
    A release that used one node instead of ten would be 10x off.
    """
    from scipy.stats import chi2

    from sketches.continual.plain import CMS, CS, PlainSketchSpec
    from sketches.core.noise import FastNoise

    n, width, seeds = 1023, 16, 8
    stream = zipf_stream(1.3, n, seed=3)
    exact = (CMS if kind == "PunctualCMS" else CS)(PlainSketchSpec(3, width, 5))
    exact.update_batch(stream)
    resid = []
    for seed in range(seeds):
        real = _punctual(kind, n, width, FastNoise(100 + seed))
        real.update_batch(stream)
        resid.append(real.noisy_matrix() - exact.matrix())
        sigma = real.calibration.sigma
    stat = float(np.sum(np.square(resid))) / (n.bit_count() * sigma**2)
    dof = seeds * 3 * width
    assert chi2.ppf(1e-6, dof) < stat < chi2.ppf(1 - 1e-6, dof)
