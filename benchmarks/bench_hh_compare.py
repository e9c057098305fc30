"""Heavy-hitter mechanisms compared on the same real streams (issue #4, last paragraph).

Mechanisms (all event-level, relation add/remove, eps = 1, total delta <= 1e-6):

- ``LazyHH`` (paper 002, continual): production model -- tick clock (``W`` ticks
  over the stream, ``ticks = position * W // n``), discrete noise, DP stream length.
  Its guarantee is ``(eps, delta_tilde)`` with ``delta_tilde = delta~(eps_s, delta_s)
  + e^eps_s delta_l + beta`` (:func:`sketches.continual.lazy_hh.spec.guarantee`); the spec's
  ``delta`` is chosen so that this *total* is <= 1e-6 (:func:`lazyhh_delta`). It
  publishes at every tick; we score its **final** output (the whole stream).
- ``PMG`` (paper 000, Alg. 2, two-sided geometric), one window = the whole stream.
- ``TrieHH`` (paper 001, exact accountant), sub-window and all-levels modes.
- ``dp_cms_hh`` (paper 003 DP Count-Min + private hierarchical candidates); ``phi``
  either public (fixed in advance) or oracle-tuned (half the true 128-th frequency
  over n: NOT private, an upper bound on what tuning can buy).

Data (``/work/shared/data``; skipped cleanly when absent): the CAIDA 2016 minute
(packets per destination /16) and the AGH flows thinned with ``rng.binomial(counts,
0.0147)`` (seed 0; key diversity of paper 002's experiment). Streams: keys repeated
``count`` times, seeded random permutation (packet order is not available; Misra-
Gries depends on the order, linear sketches do not). Noise: FastNoise (seeded,
benchmark only; production refuses it).

Metrics, k = 128: the released items ranked by estimate, top 128 of them (R) vs the
true top 128 (T): recall@128 = |R & T|/128, precision = |R & T|/|R|; HH recall =
share of the ``f > n/k`` heavy hitters in R (LazyHH's and MG's target); ARE over R
(denominator max(f, 1)); ``memory_bytes()`` after the stream; updates/s = events /
wall time of ``update_batch`` (2^20-event batches) + closing the window.

Usage::

    .venv/bin/python benchmarks/bench_hh_compare.py --quick   # 5% thinned, ~1 min
    .venv/bin/python benchmarks/bench_hh_compare.py           # full, writes results/
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec  # noqa: E402
from sketches.continual.lazy_hh.spec import item_key_collision_delta  # noqa: E402
from sketches.core.noise import FastNoise  # noqa: E402
from sketches.privacy import Calibrator, Clock, Relation, delta_tilde  # noqa: E402
from sketches.windowed.linear.dp_cms_hh import DPCMSHeavyHitters, DPCMSHeavyHittersSpec  # noqa: E402
from sketches.windowed.misra_gries.misra_gries import PMG, PMGSpec  # noqa: E402
from sketches.windowed.triehh.triehh import TrieHH, TrieHHSpec  # noqa: E402

DATA = Path("/work/shared/data")
CAIDA = "caida2016_chicagoA_20160406-125912_dst16_counts.csv"
AGH = "agh2015061019_flow_pktcounts.npz"
K, EPS, DELTA = 128, 1.0, 1e-6
BATCH = 1 << 20
W = 256  # ticks over the stream (LazyHH outputs, TrieHH sub-windows)
LAZY_KS = ((K, 4 * K), (K, 8 * K), (8 * K, 64 * K))  # LazyHH (k, k~) configurations


def caida_counts(data: Path) -> np.ndarray:
    """Packets per destination /16 (index ``a * 256 + b``), length 2^16."""
    rows = np.loadtxt(data / CAIDA, delimiter=",", skiprows=1, dtype=str)
    ab = np.char.partition(rows[:, 0], ".")
    f = np.zeros(1 << 16, dtype=np.int64)
    np.add.at(f, ab[:, 0].astype(np.int64) * 256 + ab[:, 2].astype(np.int64),
              rows[:, 1].astype(np.int64))
    return f


def agh_counts(data: Path) -> np.ndarray:
    """Packets per flow, thinned with ``binomial(counts, 0.0147)``, seed 0 (data README)."""
    counts = np.load(data / AGH)["counts"].astype(np.int64)
    return np.random.default_rng(0).binomial(counts, 0.0147)


def stream(f: np.ndarray, seed: int) -> np.ndarray:
    """Each key repeated ``f[key]`` times, seeded random permutation."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(f.size), f))


def lazyhh_delta(spec_for: Callable[[float], LazyHHSpec], target: float) -> float:
    """Largest spec ``delta`` (within 0.1%) whose total LazyHH delta_tilde is <= target.

    Total (add/remove): ``delta~(eps_s, delta_s) + e^eps_s delta_l + beta`` plus the
    item-key collision term (:func:`sketches.continual.lazy_hh.spec.guarantee`),
    linear-ish in ``delta``.
    """
    def total(d: float) -> float:
        s = spec_for(d)
        (es, ds), (_, dl) = s.sketch_budget, s.count_budget
        return (delta_tilde(es, ds) + math.exp(es) * dl + s.beta_value
                + item_key_collision_delta(s))

    d = target * target / total(target)
    while total(d) > target:
        d *= 0.999
    return d


@dataclass
class Row:
    """One (data set, mechanism) result."""

    data: str
    mechanism: str
    config: str
    eps: float
    delta: float
    memory: int
    rate: float
    released: int
    recall: float
    precision: float
    hh_recall: float
    hh_recall_1024: float
    are: float


def score(items: list[dict[str, Any]], f: np.ndarray) -> tuple[int, float, float, float, float,
                                                               float]:
    """(#released, recall@K, precision@K, HH recall n/128, HH recall n/1024, ARE top-K).

    HH recalls use every released item; the others the top K released by estimate.
    """
    est = {int(d["item"]): float(d["estimate"]) for d in items}
    ranked = sorted(est, key=lambda x: (-est[x], x))[:K]
    truth = set(np.argsort(-f, kind="stable")[:K].tolist())
    hit = len(truth & set(ranked))
    hh = []
    for k in (K, 8 * K):
        heavy = set(np.flatnonzero(f > f.sum() / k).tolist())
        hh.append(len(heavy & set(est)) / len(heavy) if heavy else math.nan)
    are = float(np.mean([abs(est[x] - f[x]) / max(f[x], 1) for x in ranked])) if ranked \
        else math.nan
    return (len(est), hit / K, hit / len(ranked) if ranked else math.nan, hh[0], hh[1], are)


def feed(sk: Any, items: np.ndarray, ticks: np.ndarray | None, close: int | None) -> float:
    """Update in batches, close the window at tick ``close``; return events per second."""
    t0 = time.perf_counter()
    for a in range(0, items.size, BATCH):
        sk.update_batch(items[a:a + BATCH], None if ticks is None else ticks[a:a + BATCH])
    if close is not None:
        sk.advance_to(close)
    return items.size / (time.perf_counter() - t0)


def run_all(name: str, f: np.ndarray, items: np.ndarray, bits: int, levels: int,
            cms_width: int, seed: int, *,
            lazy_ks: Sequence[tuple[int, int]] = LAZY_KS,
            on_release: Callable[[Row, dict[str, Any]], None] | None = None) -> list[Row]:
    """Run every mechanism configuration on ``items`` (true frequencies ``f``); one row each.

    ``bits``/``levels`` set the public domain of TrieHH and dp_cms_hh, ``cms_width`` the
    oracle dp_cms_hh row, ``lazy_ks`` the LazyHH ``(k, k~)`` pairs. ``on_release`` sees
    each row with the mechanism's raw release (tests check the released estimates).
    """
    n = items.size
    ticks = np.arange(n, dtype=np.int64) * W // n
    rows: list[Row] = []

    def add(mech: str, config: str, sk: Any, tk: np.ndarray | None, close: int | None,
            delta: float | None = None) -> dict[str, Any]:
        rate = feed(sk, items, tk, close)
        mem = sk.memory_bytes()
        rel = sk.release()
        d = float(rel.get("delta_tilde", rel["delta"]) if delta is None else delta)
        rows.append(Row(name, mech, config, float(rel["eps"]), d, mem, rate,
                        *score(rel["items"], f)))
        r = rows[-1]
        if on_release is not None:
            on_release(r, rel)
        print(f"  {mech:10s} {config:46s} mem {mem / 1024:9.0f} KiB  {rate / 1e6:6.2f} M/s  "
              f"rel {r.released:5d}  rec {r.recall:.3f} prec {r.precision:.3f} "
              f"hh {r.hh_recall:.3f}/{r.hh_recall_1024:.3f} ARE {r.are:.4f}  delta {d:.2e}",
              flush=True)
        return rel

    for k, kt in lazy_ks:
        def spec_for(d: float, k: int = k, kt: int = kt) -> LazyHHSpec:
            return LazyHHSpec(k=k, k_tilde=kt, horizon=W, eps=EPS, delta=d,
                              relation=Relation.ADD_REMOVE, clock=Clock.TICK,
                              calibrator=Calibrator.DISCRETE,
                              event_horizon=2 * n, hash_seed=seed)
        spec = spec_for(lazyhh_delta(spec_for, DELTA))
        hh = LazyHH(spec, FastNoise(seed))
        add("LazyHH", f"k={k}, k~={kt}, d={hh.params.depth}, spec delta={spec.delta:.2e}, final",
            hh, ticks, W)
    for k in (1024, 8192, 131072):
        add("PMG", f"Alg.2 geometric, k={k}", PMG(PMGSpec(k=k, eps=EPS, delta=DELTA),
                                                   FastNoise(seed)), None, None)
    for mode in ("subwindow", "all"):
        ts = TrieHHSpec(levels=levels, bits=bits // levels, eps=EPS, delta=DELTA, mode=mode,
                        window_ticks=W, accountant="exact")
        add("TrieHH", f"{mode}, exact acc., L={levels}, theta={ts.theta}, "
            f"p={ts.sampling_rate:.3f}", TrieHH(ts, FastNoise(seed)),
            ticks if mode == "subwindow" else None, W if mode == "subwindow" else None)
    kth = np.sort(f)[-K]
    for label, phi, width in (("public phi=1e-4", 1e-4, 1024), ("public phi=1e-4", 1e-4, 16384),
                              ("ORACLE phi", 0.5 * kth / f.sum(), cms_width)):
        cs = DPCMSHeavyHittersSpec(bits=bits, eps=EPS, delta=DELTA, depth=5, width=width,
                                   branch_bits=4, phi=phi, top_k=None, hash_seed=seed)
        add("dp_cms_hh", f"{label}, 5x{width}/level",
            DPCMSHeavyHitters(cs, FastNoise(seed)), None, None)
    return rows


def fmt(v: float, nd: int = 3) -> str:
    return "n/a" if math.isnan(v) else f"{v:.{nd}f}"


def table(rows: list[Row]) -> str:
    out = ["| data | mechanism | configuration | eps | total delta | memory (KiB) | updates/s |"
           " released | recall@128 | precision | HH recall n/128 | HH recall n/1024 | ARE |",
           "|" + "---|" * 13]
    for r in rows:
        out.append(f"| {r.data} | {r.mechanism} | {r.config} | {r.eps:g} | {r.delta:.2e} |"
                   f" {r.memory / 1024:,.0f} | {r.rate / 1e6:.2f}M | {r.released} |"
                   f" {fmt(r.recall)} | {fmt(r.precision)} | {fmt(r.hh_recall)} |"
                   f" {fmt(r.hh_recall_1024)} |"
                   f" {fmt(r.are, 4)} |")
    return "\n".join(out)


def _short(r: Row) -> str:
    cfg = r.config.split(", d=")[0] if r.mechanism == "LazyHH" else r.config.split(",")[0]
    if r.mechanism == "PMG":
        cfg = r.config.split(", ")[-1]
    if r.mechanism == "dp_cms_hh":
        cfg = ("oracle " if "ORACLE" in r.config else "public ") + r.config.split(", ")[-1]
    return f"{r.mechanism}\n{cfg}"


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datas = list(dict.fromkeys(r.data for r in rows))
    fig, ax = plt.subplots(2, len(datas), figsize=(7 * len(datas), 9), squeeze=False)
    for j, data in enumerate(datas):
        rs = [r for r in rows if r.data == data]
        x = np.arange(len(rs))
        for i, (attr, lab) in enumerate((("recall", "recall@128"), ("precision", "precision"),
                                         ("hh_recall_1024", "HH recall (f > n/1024)"))):
            vals = [0 if math.isnan(getattr(r, attr)) else getattr(r, attr) for r in rs]
            ax[0, j].bar(x + (i - 1) * 0.27, vals, 0.27, label=lab)
        ax[0, j].set_xticks(x, [_short(r) for r in rs],
                            rotation=60, fontsize=7)
        ax[0, j].set(title=f"{data}: accuracy (eps=1, delta<=1e-6)", ylim=(0, 1.25))
        ax[0, j].legend(fontsize=8, ncol=3, loc="upper center")
        for r in rs:
            ax[1, j].scatter(r.memory / 1024, r.rate / 1e6, s=40)
            ax[1, j].annotate(_short(r).replace("\n", " "),
                              (r.memory / 1024, r.rate / 1e6), fontsize=7)
        ax[1, j].set(xscale="log", yscale="log", xlabel="memory_bytes (KiB)",
                     ylabel="updates/s (M)", title=f"{data}: memory vs throughput")
        ax[1, j].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="5%% binomially thinned streams")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path, default=None,
                   help="output dir (default results/, or /tmp/dpstream_hh_compare with --quick)")
    args = p.parse_args(argv)
    if not (args.data / CAIDA).exists() or not (args.data / AGH).exists():
        print(f"bench_hh_compare: data not found in {args.data}; skipping (see ../shared/data)")
        return 0
    t_start = time.perf_counter()
    sets = [("CAIDA dst/16", caida_counts(args.data), 16, 4, 1024),
            ("AGH flows p=0.0147", agh_counts(args.data), 24, 6, 16384)]
    rows: list[Row] = []
    info = []
    for name, f, bits, levels, width in sets:
        if args.quick:
            f = np.random.default_rng(1).binomial(f, 0.05)
        items = stream(f, args.seed)
        top = np.sort(f)[::-1]
        info.append(f"- {name}: n = {items.size:,} events, {np.count_nonzero(f):,} distinct, "
                    f"top-128 mass {top[:K].sum() / f.sum():.1%}, 128-th frequency {top[K - 1]:,},"
                    f" {int(np.sum(f > f.sum() / K))} items above n/128,"
                    f" {int(np.sum(f > f.sum() / (8 * K)))} above n/1024")
        print(info[-1], flush=True)
        rows += run_all(name, f, items, bits, levels, width, args.seed)
    out = args.out or (Path("/tmp/dpstream_hh_compare") if args.quick else ROOT / "results")
    out.mkdir(parents=True, exist_ok=True)
    plot(rows, out / "hh_compare.png")
    secs = time.perf_counter() - t_start
    (out / "hh_compare.md").write_text(report(rows, info, args, secs))
    print(table(rows))
    print(f"wrote {out}/hh_compare.md and hh_compare.png ({secs:.0f} s)")
    return 0


def report(rows: list[Row], info: list[str], args: argparse.Namespace, secs: float) -> str:
    head = [
        "# Heavy hitters compared: LazyHH, PMG, TrieHH, DP Count-Min + candidates", "",
        f"Generated by `benchmarks/bench_hh_compare.py{' --quick' if args.quick else ''}` "
        f"(seed {args.seed}, {secs:.0f} s on 2 shared cores). eps = 1, total delta <= 1e-6, "
        "event-level, relation add/remove, k = 128 for the metrics (LazyHH also run with "
        "k = 1024), FastNoise (seeded; benchmark only).", "",
        "Data (see docs/DATA.md): CAIDA Anonymized Internet Traces 2016, "
        "equinix-chicago A, one minute, packets per destination /16 (we acknowledge CAIDA; "
        "research use under its AUP); AGH campus NetFlow 2015-06-10 19-20h, packets per "
        "flow, thinned with `rng.binomial(counts, 0.0147)` (seed 0). Streams: keys "
        "repeated `count` times in a seeded random permutation"
        + (", then thinned to 5% (--quick)" if args.quick else "") + ".", "", *info, "",
        "![comparison](hh_compare.png)", "", table(rows), "",
    ]
    return "\n".join(head) + NOTES


NOTES = """
## How to read it

- **recall@128 / precision**: the released items ranked by estimate, top 128, against
  the true top 128. **HH recall n/128, n/1024**: share of the items with f > n/128
  (resp. n/1024) found among *all* released items -- what LazyHH and Misra-Gries are
  built to find (they do not aim at the top 128). On the AGH flows no flow exceeds n/128
  (n/a); on CAIDA the true top 128 and the items above n/1024 nearly coincide.
- **ARE**: mean |estimate - f| / max(f, 1) over the top-128 released items.
- **total delta**: what the release reports. LazyHH reports `delta_tilde` (Theorem 3 +
  the DP stream length: delta~(eps_s, delta_s) + e^eps_s delta_l + beta); we set its
  spec `delta` (shown in the configuration) so that this total is <= 1e-6.
- **memory**: `memory_bytes()` of the state at the end of the stream. It is not a knob
  we could equalise: LazyHH's floor is d x k~ x (tree levels + 1) counters with
  d = ceil(log2(2N/beta)) (Lemma 6; about 50 rows here); PMG is 16 bytes per counter;
  TrieHH keeps the sampled prefixes of the open levels (data-dependent); dp_cms_hh keeps
  counters + noise of every hashed level. So each windowed mechanism is run at a small
  size and at a size comparable to LazyHH's megabytes (PMG k = 131072, dp_cms_hh
  5 x 16384 per level).
- **updates/s**: events / wall time of `update_batch` in 2^20-event batches plus
  closing the window (2 cores shared with other jobs: read as an order of magnitude;
  the same configuration varied up to 3x between runs).

## Differences and caveats

- **Continual vs one release.** LazyHH publishes a heavy-hitter set at every one of the
  W = 256 ticks with the same (eps, delta_tilde) for the whole epoch; we score only its
  final output. PMG, TrieHH and dp_cms_hh release once per window (here: the whole
  stream). Publishing them every tick would need a fresh budget per release (composition
  over 256 releases) -- LazyHH's continual guarantee is what its memory and its
  threshold pay for.
- **Targets differ.** LazyHH reports only items above t/k, and suppresses the band
  t/k < f < 5t/k~ + 3 gamma (tau = max(t/k, 5t/k~ + 3 gamma) + 1 on the tick clock), so
  with k = 128 its recall@128 is bounded by the ~19 items above n/128 on CAIDA, and it
  reports nothing on the AGH flows (no flow is above n/128). The `k=1024` rows ask it
  for f > n/1024 instead, at 8x the memory of k = 128, k~ = 8k. On AGH that threshold is
  5n/k~ + 3 gamma ~ 6,100 + 8,900 = 15,000 > n/k = 9,800 (gamma = 2,974), so only the 12
  of the 24 flows above n/1024 with f >= 15,972 are reported.
- **Oracle-tuned phi.** The `ORACLE phi` dp_cms_hh row sets phi from the true 128-th
  frequency: data-dependent, not private; it shows the best threshold, not a deployable
  one. The `public phi=1e-4` rows are fixed in advance. The search keeps at most
  `max_frontier` = 1024 prefixes per level, hence "released 1024" on AGH; with 5 x 1024
  counters per level on a 24-bit domain, colliding never-seen ids pass the threshold
  (the huge ARE: f = 0 items with large estimates; DP is unaffected, accuracy is).
- **Stream order.** Misra-Gries (PMG) depends on the order; the streams are random
  permutations, which is benign for MG (adversarial or bursty orders are worse).
  Its Python per-event loop is also slower when most events hit Branch 2/3 (many
  distinct flows: AGH) than when they hit stored keys (CAIDA). Linear sketches
  (LazyHH's CMS, dp_cms_hh) and TrieHH's sampling do not depend on the order, except
  that TrieHH's sub-window mode estimates the window from 1/L of it (exact in
  expectation only for a stationary stream, which a random permutation is).
- **Domain.** dp_cms_hh and TrieHH search a public integer domain (16 bits for /16
  prefixes, 24 bits for AGH flow ids); LazyHH and PMG accept any item (str via a seeded
  64-bit key).
- **Noise kinds.** LazyHH and dp_cms_hh use discrete Gaussian noise (exact integer
  samplers), PMG two-sided geometric, TrieHH has no additive noise (Poisson sampling +
  threshold; exact accountant, our derivation, see docs/MECHANISMS_000_001.md).
  Accuracy numbers are deterministic for the seeds; one trial per row.
"""


if __name__ == "__main__":
    raise SystemExit(main())
