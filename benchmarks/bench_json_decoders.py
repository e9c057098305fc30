"""JSON decoder candidates for the ``json`` encoding, per message, on demo events.

Times (best of ``--reps``) the candidate ways to turn a fetched batch of
one-event JSON messages into the topology's columns (shard key, item), and
the worker's own :func:`worker.ingest.decode.decode_batch` (msgspec fast path) and
its reference (``json.loads`` path, :func:`worker.ingest.decode._decode_json`). The
broker is not involved: this is the decoder alone, on ``--n`` messages of the
demo producer (8 routers, IPv4 text items). orjson and pysimdjson are
optional (measured if installed: ``pip install orjson pysimdjson``).

Writes ``results/json_decoders.md``.

Usage::

    .venv/bin/python benchmarks/bench_json_decoders.py [--n 40000] [--reps 7]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
import numpy as np  # noqa: E402

from worker.config.topology import FieldPaths, InputSpec  # noqa: E402
from worker.ingest.decode import _decode_json, decode_batch  # noqa: E402
from worker.kafka.demo_producer import NetmonGenerator, json_messages  # noqa: E402


def candidates(values: list[bytes], recs: list[Any], spec: InputSpec
               ) -> dict[str, Callable[[], Any]]:
    """name -> zero-argument function decoding the whole batch to columns."""
    def joined() -> bytes:
        return b"[" + b",".join(values) + b"]"

    def cols(docs: list[Any]) -> Any:
        return (np.array([d["src_ip"] for d in docs], dtype=object),
                np.array([d["router"] for d in docs], dtype=object))

    class Ev(msgspec.Struct, gc=False):
        router: str
        src_ip: str

    one, many = msgspec.json.Decoder(Ev), msgspec.json.Decoder(list[Ev])
    out: dict[str, Callable[[], Any]] = {
        "json.loads per message": lambda: cols([json.loads(v) for v in values]),
        "json.loads joined batch": lambda: cols(json.loads(joined())),
        "msgspec Struct per message": lambda: [one.decode(v) for v in values],
        "msgspec list[Struct] joined batch": lambda: many.decode(joined()),
        "worker reference (_decode_json, json.loads)": lambda: _decode_json(
            spec, recs, lambda s: None),
        "worker decode_batch (msgspec fast path + checks)": lambda: decode_batch(spec, recs),
    }
    try:
        import orjson

        out["orjson per message"] = lambda: cols([orjson.loads(v) for v in values])
        out["orjson joined batch"] = lambda: cols(orjson.loads(joined()))
    except ImportError:
        pass
    try:
        import simdjson

        parser = simdjson.Parser()

        def simd() -> Any:
            sh, it = [], []
            for v in values:
                d: Any = parser.parse(v)
                sh.append(d["router"])
                it.append(d["src_ip"])
                del d  # the parser is reused only once no proxy object is alive
            return np.array(it, dtype=object), np.array(sh, dtype=object)

        out["pysimdjson per message (lazy, 2 fields)"] = simd
    except ImportError:
        pass
    return out


def main(argv: list[str] | None = None) -> None:
    """Time every candidate, write results/json_decoders.md."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "results" / "json_decoders.md"))
    args = ap.parse_args(argv)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    msgs = json_messages(NetmonGenerator(routers=8, seed=1).chunk(args.n))
    values = [v for _, v in msgs]
    recs = [(i, k, v, 0) for i, (k, v) in enumerate(msgs)]
    spec = InputSpec("flows", 4, "json", FieldPaths(shard="router", item="src_ip"))
    rows = []
    for name, fn in candidates(values, recs, spec).items():
        best = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        rows.append((name, best / args.n * 1e6))
        print(f"{name:55s} {rows[-1][1]:.3f} us/msg", flush=True)
    out = ["# JSON decoder candidates (`benchmarks/bench_json_decoders.py`)", "",
           f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.n:,} demo "
           f"messages (about {sum(map(len, values)) // len(values)} bytes each, 8 routers, "
           f"IPv4 text items), best of {args.reps}; load average before the run: {load} "
           "(2 shared cores: absolute figures vary 2x between runs).", "",
           "| decoder | us per message | messages/s |", "|---|---|---|"]
    out += [f"| {n} | {us:.2f} | {1e6 / us:,.0f} |" for n, us in rows]
    out += ["", "The worker uses msgspec typed to the topology's fields on the joined batch "
            "(worker/ingest/fast_json.py): it builds only the named fields and skips the rest in "
            "C. orjson and pysimdjson build (or look up) every field through Python objects "
            "and were slower here. The worker's row includes the exactness checks (UTF-8, "
            "escapes, depth, lengths, gate) and the numpy columns.", ""]
    Path(args.out).write_text("\n".join(out))


if __name__ == "__main__":
    main()
