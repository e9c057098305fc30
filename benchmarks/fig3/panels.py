"""The experiments of Fig. 3: run-wide configuration and one function per panel.

Each panel returns rows (dicts) that :mod:`.report` tabulates and
:mod:`.plot` draws; progress is printed as each point completes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .model import KINDS, matched_width, model_memory
from .runs import (
    Setup,
    batch_size,
    feed,
    make_sketch,
    punctual_final_query,
    run_are,
    run_throughput,
)
from .streams import are, top_items, zipf_stream


@dataclass(frozen=True)
class Config:
    """Run-wide parameters (``--quick`` shrinks them)."""

    horizon: int = 1 << 20
    model_horizon: int = 1 << 20  # T of the memory model (the paper's, also under --quick)
    depth: int = 3
    eps: float = 0.3
    skew: float = 1.3
    memory: int = 24_000
    top_k: int = 15
    trials: int = 5
    repeats: int = 3
    widths_a: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048)
    punctual_prefix_cells: int = 1 << 25  # Fig. 3a: Punctual timed on d*w*n <= this
    punctual_prefix_max: int = 1 << 16  # ... and on at most this many events
    memories_kb: tuple[int, ...] = (8, 16, 24, 32, 48, 64)
    depths: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    skews: tuple[float, ...] = (1.1, 1.3, 1.5, 1.7, 1.9, 2.1)
    epss: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)


QUICK = Config(
    horizon=1 << 16,
    trials=1,
    repeats=1,
    widths_a=(64, 256, 1024),
    punctual_prefix_cells=1 << 22,
    memories_kb=(8, 24, 64),
    depths=(1, 3, 5),
    skews=(1.1, 1.3, 2.1),
    epss=(0.1, 0.3, 0.9),
)

Row = dict[str, Any]


def _stream(cfg: Config, skew: float, trial: int) -> np.ndarray:
    return zipf_stream(skew, cfg.horizon, seed=1000 * trial + round(100 * skew))


def _are_point(
    cfg: Config,
    panel: str,
    x: float,
    widths: Callable[[str], int],
    *,
    depth: int,
    eps: float,
    skew: float,
    memory: int,
) -> list[Row]:
    """Mean ARE over ``cfg.trials`` seeded trials for every kind at one x value."""
    per_kind: dict[str, list[float]] = {k: [] for k in KINDS}
    for trial in range(cfg.trials):
        stream = _stream(cfg, skew, trial)
        items, counts = top_items(stream, cfg.top_k)
        for kind in KINDS:
            setup = Setup(kind, depth, widths(kind), cfg.horizon, eps, 1e-3, trial, 7 + trial)
            per_kind[kind].append(run_are(setup, stream, items, counts))
    return [
        {
            "panel": panel,
            "kind": kind,
            "x": x,
            "are": float(np.mean(v)),
            "are_sd": float(np.std(v)),
            "width": widths(kind),
            "depth": depth,
            "eps": eps,
            "skew": skew,
            "model_bytes": model_memory(kind, depth, widths(kind), cfg.model_horizon),
            "budget_bytes": memory,
        }
        for kind, v in per_kind.items()
    ]


def _matched(cfg: Config, memory: int, depth: int) -> Callable[[str], int]:
    return lambda kind: matched_width(kind, memory, depth, cfg.model_horizon)


def panel_a(cfg: Config) -> list[Row]:
    """Fig. 3a: updates/s vs width (Punctual on a prefix of d*w*n <= punctual_prefix_cells)."""
    stream = _stream(cfg, cfg.skew, 0)
    rows = []
    for width in cfg.widths_a:
        for kind in KINDS:
            n = len(stream)
            if kind.startswith("Punctual"):
                n = min(n, cfg.punctual_prefix_max,
                        max(1024, cfg.punctual_prefix_cells // (cfg.depth * width)))
            setup = Setup(kind, cfg.depth, width, cfg.horizon, cfg.eps, 1e-3, 0, 1)
            rate, wall = run_throughput(setup, stream[:n], cfg.repeats)
            rows.append({"panel": "a", "kind": kind, "x": width, "rate": rate, "wall": wall,
                         "events": n})
            print(f"  3a w={width:5d} {kind:12s} {rate:14,.0f} updates/CPU-s "
                  f"{wall:14,.0f} updates/wall-s ({n:,} events)", flush=True)
    return rows


def panel_b(cfg: Config) -> list[Row]:
    """Fig. 3b: ARE vs memory (KB), memory changed through the width."""
    rows = []
    for kb in cfg.memories_kb:
        mem = 1000 * kb
        rows += _are_point(cfg, "b", kb, _matched(cfg, mem, cfg.depth),
                           depth=cfg.depth, eps=cfg.eps, skew=cfg.skew, memory=mem)
        _print_point(rows[-len(KINDS):], f"3b {kb} KB")
    return rows


def panel_c(cfg: Config) -> list[Row]:
    """Fig. 3c: ARE vs memory, memory changed through the depth (width of 24 KB at d=3)."""
    rows = []
    row_budget = cfg.memory // cfg.depth
    for depth in cfg.depths:
        mem = row_budget * depth
        widths = _matched(cfg, cfg.memory, cfg.depth)  # width fixed, memory grows with depth
        rows += _are_point(cfg, "c", mem / 1000, widths,
                           depth=depth, eps=cfg.eps, skew=cfg.skew, memory=mem)
        _print_point(rows[-len(KINDS):], f"3c d={depth}")
    return rows


def panel_d(cfg: Config) -> list[Row]:
    """Fig. 3d: ARE vs Zipf parameter at 24 KB, eps 0.3."""
    rows = []
    for skew in cfg.skews:
        rows += _are_point(cfg, "d", skew, _matched(cfg, cfg.memory, cfg.depth),
                           depth=cfg.depth, eps=cfg.eps, skew=skew, memory=cfg.memory)
        _print_point(rows[-len(KINDS):], f"3d skew={skew}")
    return rows


def panel_eps(cfg: Config, panel: str, skew: float) -> list[Row]:
    """Fig. 3e (skew 1.1) / 3f (skew 2.1): ARE vs eps at 24 KB."""
    rows = []
    for eps in cfg.epss:
        rows += _are_point(cfg, panel, eps, _matched(cfg, cfg.memory, cfg.depth),
                           depth=cfg.depth, eps=eps, skew=skew, memory=cfg.memory)
        _print_point(rows[-len(KINDS):], f"3{panel} eps={eps}")
    return rows


def punctual_crosscheck(cfg: Config) -> list[Row]:
    """Run the real PunctualCMS/CS over one full stream at 24 KB; compare with the shortcut.

    Checks, at full scale, that the released matrix minus the exact counts has
    the standard deviation ``sqrt(popcount(T)) * sigma`` that
    :func:`punctual_final_query` draws from, and reports both ARE values.
    """
    from sketches.continual.plain import CMS, CS, PlainSketchSpec

    stream = _stream(cfg, cfg.skew, 0)
    items, counts = top_items(stream, cfg.top_k)
    rows = []
    for kind in ("PunctualCMS", "PunctualCS"):
        setup = Setup(kind, cfg.depth, _matched(cfg, cfg.memory, cfg.depth)(kind), cfg.horizon,
                      cfg.eps, 1e-3, 0, 7)
        sketch = make_sketch(setup)
        t0 = time.perf_counter()
        feed(sketch, stream, batch_size(kind, setup.width, setup.depth))
        seconds = time.perf_counter() - t0
        exact = (CS if sketch.signed else CMS)(PlainSketchSpec(setup.depth, setup.width, 0))
        exact.update_batch(stream)
        resid = sketch.noisy_matrix() - exact.matrix()
        rows.append({
            "panel": "x", "kind": kind, "width": setup.width, "seconds": seconds,
            "resid_sd": float(resid.std()),
            "model_sd": math.sqrt(len(stream).bit_count()) * sketch.calibration.sigma,
            "are_real": are(counts, np.asarray(sketch.query(items), dtype=np.float64)),
            "are_model": are(counts, punctual_final_query(setup, stream, items)),
            "memory_bytes": sketch.memory_bytes()})
        r = rows[-1]
        print(f"  {kind}: {len(stream):,} events in {seconds:.1f} s; residual sd "
              f"{r['resid_sd']:.1f} vs model {r['model_sd']:.1f}; ARE real {r['are_real']:.3g}"
              f" vs model {r['are_model']:.3g}", flush=True)
    return rows


def _print_point(rows: Sequence[Row], label: str) -> None:
    print(f"  {label:14s} " + "  ".join(f"{r['kind']}(w={r['width']})={r['are']:.3g}"
                                         for r in rows), flush=True)


TITLES = {"a": "(a) updates per CPU-second vs width", "b": "(b) ARE vs memory (width)",
          "c": "(c) ARE vs memory (depth)", "d": "(d) ARE vs Zipf skew, 24 KB",
          "e": "(e) ARE vs eps, 24 KB, skew 1.1", "f": "(f) ARE vs eps, 24 KB, skew 2.1",
          "x": "(x) real PunctualSketch vs its end-of-stream distribution"}
XLABEL = {"a": "width w", "b": "memory (KB, paper model)", "c": "memory (KB, paper model)",
          "d": "Zipf parameter", "e": "eps", "f": "eps"}
