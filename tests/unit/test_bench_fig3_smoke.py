"""Smoke tests of benchmarks/bench_fig3.py's pure helpers (no sketch is run, no broker).

The benchmark reproduces paper 002's Figure 3; what must be right before any
number means anything is the memory model that turns a byte budget into
widths (the paper: 24 KB -> CMS 2000, LazyCMS 55, PunctualCMS 33 at d=3,
T=2**20) and the ARE metric. All tests are deterministic.
"""

from __future__ import annotations

import doctest
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    path = ROOT / "benchmarks" / "bench_fig3.py"
    spec = importlib.util.spec_from_file_location("bench_fig3", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fig3"] = module
    spec.loader.exec_module(module)
    return module


B = _load()
T = 2**20


@pytest.mark.parametrize(
    ("kind", "width"),
    [("CMS", 2000), ("CS", 2000), ("LazyCMS", 55), ("LazyCS", 55),
     ("PunctualCMS", 33), ("PunctualCS", 33)],
)
def test_paper_widths_at_24kb(kind: str, width: int) -> None:
    """The memory model reproduces the widths stated in paper 002, Sec. 6.4."""
    assert B.matched_width(kind, 24_000, 3, T) == width


@pytest.mark.parametrize("kind", ["CMS", "LazyCMS", "PunctualCS"])
@pytest.mark.parametrize("memory", [3_000, 8_000, 24_000, 64_000, 200_000])
@pytest.mark.parametrize("depth", [1, 3, 5])
def test_matched_width_is_the_widest_that_fits(kind: str, memory: int, depth: int) -> None:
    """Width w fits the budget and w+1 does not (memory is monotone in width)."""
    w = B.matched_width(kind, memory, depth, T)
    assert B.model_memory(kind, depth, w, T) <= memory
    assert B.model_memory(kind, depth, w + 1, T) > memory


def test_lazy_cells_shrink_with_width_punctual_cells_do_not() -> None:
    """Lazy counters see ceil(T/w) rounds, Punctual counters all T rounds (Alg. 3 vs Alg. 5)."""
    assert B.cell_bytes("LazyCMS", 1024, T) < B.cell_bytes("LazyCMS", 16, T)
    assert B.cell_bytes("PunctualCMS", 1024, T) == B.cell_bytes("PunctualCMS", 16, T)
    assert B.tree_levels(T) == math.ceil(math.log2(T + 1)) == 21


def test_top_items_and_are() -> None:
    """Exact top-k with ties broken by item id, and ARE as defined in Sec. 6.2."""
    stream = np.array([5, 5, 5, 9, 9, 2, 2, 7], dtype=np.int64)
    items, counts = B.top_items(stream, 3)
    assert items.tolist() == [5, 2, 9] and counts.tolist() == [3, 2, 2]
    assert B.are(counts, counts.astype(float)) == 0.0
    assert B.are(np.array([4, 10]), np.array([2.0, 15.0])) == pytest.approx(0.5)


def test_zipf_stream_is_seeded() -> None:
    """Same seed, same stream; another seed, another stream."""
    a, b, c = (B.zipf_stream(1.3, 5000, s) for s in (3, 3, 4))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_docstring_examples() -> None:
    """The module's doctest examples run."""
    result = doctest.testmod(B, verbose=False)
    assert result.attempted > 0 and result.failed == 0
