"""The ``arrow`` decoder alone (no broker): ns per event for each column layout.

Messages of ``--rows`` demo IPv4 text items (8 routers) written by pyarrow at its
defaults in each layout the decoder accepts: ``utf8`` (the reference row),
``uint32`` (IPv4), ``large_utf8``, ``string_view``, dictionary-encoded, ``binary``,
and ``utf8`` with LZ4_FRAME / ZSTD IPC body compression. Each row times
:func:`worker.ingest.arrow.decode_arrow` over ``--messages`` messages (best of
``--reps``, process CPU time: the 2 shared cores are often loaded) and checks that
it dead-letters nothing (a layout the decoder refuses prints ``refused``).

``--compare OLD.py`` also times another version of ``decode_arrow.py`` (e.g. from
``git show main:worker/ingest/arrow.py``) in the same process, the two alternating
rep by rep (each first every other rep), so load changes hit both alike.

Usage::

    .venv/bin/python benchmarks/bench_decode_arrow.py [--rows 5000] [--messages 40] [--reps 7]
        [--compare /tmp/old_decode_arrow.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from worker.config.topology import FieldPaths, InputSpec  # noqa: E402
from worker.ingest import arrow as decode_arrow  # noqa: E402
from worker.ingest.arrow import META_SHARD, META_VERSION  # noqa: E402
from worker.ingest.records import accept_all  # noqa: E402
from worker.kafka.demo_producer import ipv4_str  # noqa: E402

SPEC = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), 1 << 22)


def message(shard: str, col: Any, options: Any = None) -> bytes:
    schema = pa.schema([("item", col.type)],
                       metadata={META_VERSION: b"1", META_SHARD: shard.encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=options) as w:
        w.write_batch(pa.RecordBatch.from_arrays([col], schema=schema))
    return bytes(sink.getvalue().to_pybytes())


LAYOUTS: dict[str, tuple[Callable[[np.ndarray, list[str]], Any], Any]] = {
    "utf8": (lambda a, s: pa.array(s, pa.string()), None),
    "uint32 (IPv4)": (lambda a, s: pa.array(a, pa.uint32()), None),
    "large_utf8": (lambda a, s: pa.array(s, pa.large_string()), None),
    "string_view": (lambda a, s: pa.array(s, pa.string_view()), None),
    "dictionary<utf8>": (lambda a, s: pa.array(s, pa.string()).dictionary_encode(), None),
    "binary": (lambda a, s: pa.array([x.encode() for x in s], pa.binary()), None),
    "utf8 + LZ4_FRAME": (lambda a, s: pa.array(s, pa.string()),
                         pa.ipc.IpcWriteOptions(compression="lz4")),
    "utf8 + ZSTD": (lambda a, s: pa.array(s, pa.string()),
                    pa.ipc.IpcWriteOptions(compression="zstd")),
}


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("decode_arrow_compared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--messages", type=int, default=40)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--compare", help="another decode_arrow.py to time alongside")
    args = ap.parse_args()
    versions = {"this": decode_arrow}
    if args.compare:
        versions["compared"] = load(args.compare)
    rng = np.random.default_rng(1)
    # heavy-tailed demo addresses: a few thousand distinct sources
    pool = rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)
    names = "".join(f" {v + ' ns/ev':>16}" for v in versions)
    print(f"{'layout':<20} {'bytes/msg':>10}{names} {'Mev/s (this)':>13}")
    for name, (make, options) in LAYOUTS.items():
        recs = []
        for m in range(args.messages):
            a = pool[rng.zipf(1.3, args.rows) % pool.shape[0]]
            recs.append((m, None, message(f"r{m % 8}", make(a, list(ipv4_str(a))), options), 0))
        best = {v: float("inf") for v in versions}
        for v, module in versions.items():
            out = module.decode_arrow(SPEC, recs, accept_all)
            if out.dead:
                best[v] = float("nan")
        for rep in range(args.reps):
            order = list(versions.items())
            for v, module in (order if rep % 2 else order[::-1]):  # neither always first
                if best[v] != best[v]:  # refused
                    continue
                t0 = time.process_time()
                module.decode_arrow(SPEC, recs, accept_all)
                best[v] = min(best[v], time.process_time() - t0)
        n = args.rows * args.messages
        size = sum(len(r[2]) for r in recs) // len(recs)
        cells = "".join(f" {'refused':>16}" if t != t else f" {t / n * 1e9:>16.1f}"
                        for t in best.values())
        this = best["this"]
        print(f"{name:<20} {size:>10,}{cells} {n / this / 1e6 if this == this else 0:>13.2f}")


if __name__ == "__main__":
    main()
