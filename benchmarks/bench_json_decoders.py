"""JSON decoder candidates for one-event-per-message input, and the worker's decode step.

Decodes N demo-producer events (about 120 bytes each, 6 fields; the topology names 2)
with each candidate, best of 3, in this process (no broker). Then times
``worker.decode.decode_batch`` in batches of 50,000 with the typed fast path and with it
switched off (the reference path, ``json.loads`` of the joined batch). Writes
``results/json_decoders.md``.

Usage::

    .venv/bin/python benchmarks/bench_json_decoders.py [--n 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker import decode  # noqa: E402
from worker.demo_producer import NetmonGenerator  # noqa: E402
from worker.topology import FieldPaths, InputSpec  # noqa: E402


def messages(n: int) -> list[bytes]:
    """``n`` demo events, one compact JSON object each."""
    ev = NetmonGenerator(routers=8, seed=1).chunk(n)
    cols = {k: np.asarray(ev[k]).tolist() for k in ev}
    keys = list(cols)
    return [json.dumps({k: cols[k][i] for k in keys}, separators=(",", ":")).encode()
            for i in range(n)]


def best(fn: Callable[[], Any], reps: int = 3) -> float:
    """Best wall time of ``reps`` runs."""
    out = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> None:
    """Time every candidate; write the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--out", default=str(ROOT / "results" / "json_decoders.md"))
    args = ap.parse_args(argv)
    orjson: Any = None
    simdjson: Any = None
    try:  # optional candidates (pip install orjson pysimdjson): rows skipped without them
        import orjson
    except ImportError:
        pass
    try:
        import simdjson
    except ImportError:
        pass
    n, vals = args.n, messages(args.n)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())

    class Ev(msgspec.Struct):
        router: str
        src_ip: str

    one, many, anyd = (msgspec.json.Decoder(Ev), msgspec.json.Decoder(list[Ev]),
                       msgspec.json.Decoder())
    parser = simdjson.Parser() if simdjson else None

    def joined() -> bytes:
        return b"[" + b",".join(vals) + b"]"

    def simd() -> None:
        assert parser is not None
        for v in vals:
            o = parser.parse(v)
            (o["router"], o["src_ip"])
            del o

    cands: list[tuple[str, Callable[[], Any]]] = [
        ("json.loads, per message", lambda: [json.loads(v) for v in vals]),
        ("json.loads, joined batch (the reference path)", lambda: json.loads(joined())),
        ("msgspec untyped, joined batch", lambda: anyd.decode(joined())),
        ("msgspec typed Struct (2 fields), per message", lambda: [one.decode(v) for v in vals]),
        ("msgspec typed list[Struct], joined batch", lambda: many.decode(joined())),
    ]
    if orjson is not None:
        cands += [("orjson.loads, per message", lambda: [orjson.loads(v) for v in vals]),
                  ("orjson.loads, joined batch", lambda: orjson.loads(joined()))]
    if parser is not None:
        cands.append(("pysimdjson parse + 2 fields, per message", simd))
    rows = [(name, best(fn)) for name, fn in cands]
    spec = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src_ip"))
    batches = [[(i, None, v, 0) for i, v in enumerate(vals[s:s + 50_000], s)]
               for s in range(0, n, 50_000)]

    def run_decode() -> None:
        for b in batches:
            decode.decode_batch(spec, b)

    fast = best(run_decode)
    real = decode._typed_columns
    decode._typed_columns = lambda *a, **k: None
    try:
        ref = best(run_decode)
    finally:
        decode._typed_columns = real
    out = ["# JSON decoders (`benchmarks/bench_json_decoders.py`)", "",
           f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} "
           f"cores shared, load average {load}. {n:,} demo events (about "
           f"{sum(map(len, vals)) / n:.0f} bytes, 6 fields; the topology reads 2), best of 3.",
           "", "| decoder | us/message | messages/s |", "|---|---|---|"]
    out += [f"| {name} | {t / n * 1e6:.2f} | {n / t:,.0f} |" for name, t in rows]
    out += ["", "## The worker's decode step (`decode_batch`, batches of 50,000, to numpy "
            "columns, all checks)", "", "| path | us/message | messages/s |", "|---|---|---|",
            f"| reference (`json.loads` of the joined batch, column checks) | "
            f"{ref / n * 1e6:.2f} | {n / ref:,.0f} |",
            f"| typed fast path (msgspec Struct per message, ASCII/escape guards) | "
            f"{fast / n * 1e6:.2f} | {n / fast:,.0f} |",
            f"| speed-up | {ref / fast:.2f}x | |", "",
            "Choice: msgspec with a typed Struct of only the named fields. It is the fastest "
            "(pysimdjson per message comes next; in one noisy run the two tied); msgspec "
            "also checks both field types in C and returns plain str "
            "values (pysimdjson hands out proxies tied to a reusable parser), and skips the "
            "other fields without building Python objects. orjson and untyped msgspec build "
            "every field. See docs/INGESTION.md for when the fast path "
            "declines and the reference path decides.", ""]
    text = "\n".join(out)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
