"""Building the six sketches of Fig. 3 and running one configuration (ARE or throughput).

Private sketches use the paper's model (replace relation, arrival clock,
``Calibrator.PAPER``) and seeded fast noise: benchmark-only settings that
production refuses. Punctual's ARE comes from :func:`punctual_final_query`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .streams import are


@dataclass(frozen=True)
class Setup:
    """One sketch configuration of an experiment (all public parameters)."""

    kind: str
    depth: int
    width: int
    horizon: int
    eps: float = 0.3
    delta: float = 1e-3
    hash_seed: int = 0
    noise_seed: int = 0


def make_sketch(setup: Setup) -> Any:
    """Build the sketch of ``setup`` with the paper's model and seeded fast noise.

    Private kinds use ``Relation.REPLACE``, ``Clock.ARRIVAL``, ``Calibrator.PAPER``
    (paper 002's sigma, Alg. 1) and ``FastNoise(noise_seed)``: benchmark-only
    settings that production refuses.
    """
    from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
    from sketches.continual.plain import CMS, CS, PlainSketchSpec
    from sketches.continual.punctual import PunctualCMS, PunctualCS, PunctualSketchSpec
    from sketches.core.noise import FastNoise
    from sketches.privacy import Calibrator, Clock, Relation

    if setup.kind in ("CMS", "CS"):
        plain = CMS if setup.kind == "CMS" else CS
        return plain(PlainSketchSpec(depth=setup.depth, width=setup.width,
                                     hash_seed=setup.hash_seed))
    noise = FastNoise(setup.noise_seed)
    if setup.kind.startswith("Lazy"):
        lazy = LazyCMS if setup.kind == "LazyCMS" else LazyCS
        return lazy(LazySketchSpec(setup.depth, setup.width, setup.horizon, setup.eps,
                                   setup.delta, relation=Relation.REPLACE, clock=Clock.ARRIVAL,
                                   calibrator=Calibrator.PAPER, hash_seed=setup.hash_seed), noise)
    punctual = PunctualCMS if setup.kind == "PunctualCMS" else PunctualCS
    return punctual(PunctualSketchSpec(setup.depth, setup.width, setup.horizon, setup.eps,
                                       setup.delta, relation=Relation.REPLACE,
                                       calibrator=Calibrator.PAPER, hash_seed=setup.hash_seed),
                    noise)


def feed(sketch: Any, stream: np.ndarray, batch: int) -> None:
    """Feed ``stream`` to ``sketch`` in arrival-clock batches of ``batch`` events."""
    for start in range(0, len(stream), batch):
        sketch.update_batch(stream[start : start + batch])


def batch_size(kind: str, width: int, depth: int) -> int:
    """Events per ``update_batch`` call: bounded so Punctual's d*w*batch work stays small."""
    if kind.startswith("Punctual"):
        return max(64, min(1 << 16, (1 << 22) // (depth * width)))
    return 1 << 16


def punctual_final_query(
    setup: Setup, stream: np.ndarray, items: np.ndarray, noise: Any = None
) -> np.ndarray:
    """Punctual's answer for ``items`` after ``stream``, drawn from its exact distribution.

    Running Alg. 3 costs O(d*w) noise per event (about 30 s per 2**20 events
    here), too slow for every point of Fig. 3b-f. Its release at round ``r``
    is ``exact counts + sum of the noise of the popcount(r) tree nodes that
    partition [1, r]`` (Alg. 1 query; :mod:`sketches.counters.gauss_bm`), each node
    ``N(0, sigma^2)`` with the sketch's own calibration. So we take the exact
    matrix from CMS/CS (same hash), add that many seeded draws per cell, and
    apply Alg. 4 (:func:`sketches.core.release.estimate`). The smoke test and
    :func:`punctual_crosscheck` compare this with the real sketch. ``noise``
    defaults to ``FastNoise(setup.noise_seed)``.
    """
    from sketches.continual.plain import CMS, CS, PlainSketchSpec
    from sketches.core.noise import FastNoise
    from sketches.core.release import estimate

    sketch = make_sketch(setup)  # only for its calibration and hash: never fed
    cal = sketch.calibration
    plain = (CS if sketch.signed else CMS)(PlainSketchSpec(setup.depth, setup.width,
                                                           setup.hash_seed))
    plain.update_batch(stream)
    nodes = max(1, len(stream).bit_count())
    noise = FastNoise(setup.noise_seed) if noise is None else noise
    draw = noise.discrete_gaussian if cal.integer_noise else noise.gaussian
    gamma = draw(cal.sigma, (nodes, setup.depth, setup.width)).sum(axis=0)
    matrix = plain.matrix() + gamma if len(stream) else plain.matrix()
    return np.asarray(estimate(matrix, sketch.hash, items, sketch.estimator), dtype=np.float64)


def run_are(setup: Setup, stream: np.ndarray, items: np.ndarray, counts: np.ndarray) -> float:
    """ARE on ``items`` after the whole ``stream`` (Punctual: :func:`punctual_final_query`)."""
    if setup.kind.startswith("Punctual"):
        return are(counts, punctual_final_query(setup, stream, items))
    sketch = make_sketch(setup)
    feed(sketch, stream, batch_size(setup.kind, setup.width, setup.depth))
    return are(counts, np.asarray(sketch.query(items), dtype=np.float64))


def run_throughput(setup: Setup, stream: np.ndarray, repeats: int) -> tuple[float, float]:
    """Best updates per CPU-second and per wall-second of ``update_batch`` over ``stream``.

    A fresh sketch per repeat. CPU (process) time is the stable measure on
    this shared 2-core machine (numpy runs single-threaded here); wall-clock
    rates swing up to 3x with the other jobs' load.
    """
    cpu, wall = [], []
    for r in range(repeats):
        sketch = make_sketch(replace(setup, noise_seed=setup.noise_seed + r))
        bs = batch_size(setup.kind, setup.width, setup.depth)
        t0, c0 = time.perf_counter(), time.process_time()
        feed(sketch, stream, bs)
        cpu.append(len(stream) / (time.process_time() - c0))
        wall.append(len(stream) / (time.perf_counter() - t0))
    return max(cpu), max(wall)
