"""Reproduce Figure 3 of paper 002 (Holland, *Scalable DP Sketches under Continual Observation*).

Six sketches -- CMS, CS (non-private), LazyCMS, LazyCS (Alg. 5) and
PunctualCMS, PunctualCS (Alg. 3) -- on seeded Zipf streams, with the paper's
setup: depth d=3, stream length T=2**20, eps=0.3, delta=1e-3, Zipf 1.3, the
replace neighbouring relation, the arrival clock (one round per event), the
paper's sigma formula (``Calibrator.PAPER``) and seeded fast noise. This is a
benchmark: it deliberately uses the paper's model and a seeded noise source,
which production refuses.

Panels (one PNG ``results/fig3.png``, tables ``results/fig3.md``):

- **3a** updates per CPU-second (and per wall second) vs width; Punctual is
  O(d*w) per event, so it is timed on a prefix of the stream (length shown).
- **3b** ARE of the top-15 items vs memory, memory changed through the width.
- **3c** ARE vs memory, memory changed through the depth (width fixed).
- **3d** ARE vs Zipf parameter at 24 KB.
- **3e/3f** ARE vs eps at 24 KB, Zipf 1.1 and 2.1.
- **x** the real PunctualSketch over one whole stream, compared with
  :func:`punctual_final_query`, which 3b-3f use for Punctual (Alg. 3 is too
  slow to run for every point).

The memory model that turns the paper's 24 KB into CMS 2000 / LazyCMS 55 /
PunctualCMS 33 columns is :func:`cell_bytes`. ARE values are deterministic
(every seed is fixed); throughput depends on the machine's load.

The code lives in the package ``benchmarks/fig3/``: ``model`` (memory model),
``streams`` (Zipf streams, top items, ARE), ``runs`` (sketches, one ARE or
throughput run), ``panels`` (configuration and the panels), ``plot`` and
``report`` (PNG, markdown). This script is only the command line.

Usage::

    .venv/bin/python benchmarks/bench_fig3.py --quick     # T=2**16, 1 trial, < 1 min
    .venv/bin/python benchmarks/bench_fig3.py             # T=2**20, 5 trials, ~3-5 min
    .venv/bin/python benchmarks/bench_fig3.py --panels a,b --trials 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fig3.panels import (  # noqa: E402
    QUICK,
    TITLES,
    Config,
    Row,
    panel_a,
    panel_b,
    panel_c,
    panel_d,
    panel_eps,
    punctual_crosscheck,
)
from benchmarks.fig3.plot import plot  # noqa: E402
from benchmarks.fig3.report import write_markdown  # noqa: E402

PANELS = "abcdefx"


def parse_panels(text: str) -> str:
    """The panels named by ``--panels`` (``"a,b"`` or ``"ab"``), in the order given.

    Unknown letters are refused before anything runs (a typo used to surface
    as a ``KeyError`` after the earlier panels had run).

    Examples
    --------
    >>> parse_panels("a,b"), parse_panels("x"), parse_panels(PANELS)
    ('ab', 'x', 'abcdefx')
    >>> parse_panels("a,g")
    Traceback (most recent call last):
    ...
    ValueError: unknown panel(s) 'g'; use letters from abcdefx
    """
    panels = text.replace(",", "").replace(" ", "")
    bad = "".join(p for p in panels if p not in PANELS)
    if bad:
        raise ValueError(f"unknown panel(s) {bad!r}; use letters from {PANELS}")
    return panels


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the process exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="T=2**16, 1 trial, fewer points")
    ap.add_argument("--panels", default="abcdefx",
                    help="subset of abcdefx, e.g. 'a,b' (x: real-Punctual cross-check)")
    ap.add_argument("--trials", type=int, help="override trials per point")
    ap.add_argument("--out", type=Path, default=ROOT / "results", help="output directory")
    args = ap.parse_args(argv)
    try:
        panels = parse_panels(args.panels)
    except ValueError as exc:
        ap.error(str(exc))
    cfg = QUICK if args.quick else Config()
    if args.trials:
        cfg = replace(cfg, trials=args.trials)
    t0 = time.perf_counter()
    rows: list[Row] = []
    runners: dict[str, Callable[[], list[Row]]] = {
        "a": lambda: panel_a(cfg), "b": lambda: panel_b(cfg), "c": lambda: panel_c(cfg),
        "d": lambda: panel_d(cfg), "e": lambda: panel_eps(cfg, "e", 1.1),
        "f": lambda: panel_eps(cfg, "f", 2.1), "x": lambda: punctual_crosscheck(cfg)}
    for p in panels:
        print(f"Fig. 3{p}: {TITLES[p]}", flush=True)
        t = time.perf_counter()
        rows += runners[p]()
        print(f"  ({time.perf_counter() - t:.1f} s)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    plot(rows, args.out / f"fig3{suffix}.png")
    write_markdown(rows, cfg, args.out / f"fig3{suffix}.md", time.perf_counter() - t0)
    print(f"wrote {args.out / f'fig3{suffix}.png'} and .md in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
