"""The doctest examples of the ``benchmarks/fig3/`` package behind bench_fig3.py.

``make test`` collects doctests from ``sketches`` and ``worker`` only; the
memory model's examples (24 KB -> 2000 / 55 / 33 columns) live in
``benchmarks/fig3/model.py`` and must keep running.
"""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODULES = ("model", "streams", "runs", "panels", "plot", "report")


@pytest.mark.parametrize("name", MODULES)
def test_fig3_module_doctests(name: str) -> None:
    module = importlib.import_module(f"benchmarks.fig3.{name}")
    result = doctest.testmod(module, verbose=False)
    assert result.failed == 0
    if name in ("model", "streams"):
        assert result.attempted > 0
