"""Audit cases: one mechanism, its worst-case neighbours ``X, X'`` and its best statistic.

Every case builds the mechanism through the public :mod:`sketches` API with a
production-like spec (the privacy parameters of the topology it comes from;
sizes that do not enter the calibration, e.g. a sketch's width, may be
smaller to make many trials cheap), feeds ``X`` or ``X' = X + one event``,
publishes exactly what the worker would publish, and reduces the public
release to one number (:meth:`Case.run`). Larger statistic = "looks like X'".

The statistics (and why they are the strongest we found)
--------------------------------------------------------
- LazyCMS over a factorized counter (``lazy_cms_blt``, float sampler;
  ``lazy_cms_blt_int``, the lattice BLT with the exact sampler): the
  ``(B_R B_R^T)^-1 1``-weighted sum of the item's cells over rounds ``1..R``
  (:func:`_lazy_factorized`).
- Continual sketches (LazyCMS/LazyCS on the tick clock): the differing event
  is at tick 0, so it enters round 1, and with it *every* dyadic node of the
  binary mechanism on the path of round 1 in each of its ``d`` cells. The
  prefix release at round ``2^j`` is exactly one node (``[1, 2^j]``), so the
  releases at rounds ``1, 2, 4, ..`` expose all ``h`` nodes of that path, each
  shifted by +1 and with independent noise. Their sum over the ``d`` cells
  (signed for Count Sketch) is the likelihood-ratio-optimal linear statistic:
  its shift is ``d h`` against variance ``d h sigma^2``, i.e. the full
  calibrated sensitivity ``sqrt(m h)`` in units of sigma.
- Single-release linear sketches (dp_cms/dp_cs): the sum of the ``d`` cells
  the event touches (signed), same argument with ``h = 1``.
- PMG / merged MG / PAMG: the published noisy estimate(s) of the item(s) the
  event changes (all ``k`` keys of the sketch when the event causes a
  Misra-Gries decrement), a sum of shifted Laplace/Gaussian variables.
- LazyHH: the published DP stream length ``t_estimate`` at the outputs of
  rounds ``1, 2, 4, ..`` (one length-counter node each; the hash is secret, so
  the item's estimates are a min over secret cells and not a linear
  statistic). ``lazy_hh_truncated``: the epoch at ``event_horizon``, where the
  added early event pushes out a late one (+1 at tick 0, -1 at tick 32): the
  prefix releases up to round 32 and the increments after it expose 11 nodes.
- TrieHH: the published sampled count of the item's level-0 node (0 when it
  is pruned), with the item's count chosen near the detection limit
  ``theta / p`` where pruning flips most often.
- dp_cms_hh: the published estimate of the heavy item plus the published
  noisy total ``n_estimate``; dyadic_quantiles: ``n_estimate`` (the quantile
  values move by at most one rank step and carry far less signal).
- fp_sketch: the published estimate of F_p (the only number in the release).
- columnar_neighbour: the worker's decoder on a ``columnar`` message whose one extra
  row makes the message fail as a whole (oversized): ``events`` events disappear,
  so the noise must be calibrated for ``max_events_per_message`` (issue 19); its
  power check scales the noise by ``1/(events+1)``, i.e. a calibration that forgets
  the message bound (the bug the review found).

Gaussian cases whose statistic is linear in the noise carry a
:class:`Parametric` (LazyCMS/LazyCS, dp_cms/dp_cs, dyadic_quantiles' root,
LazyHH's length counter): the parametric calibration check of
:func:`privacy_audit.gaussian_shift`. PMG (geometric noise), merged MG, PAMG
(thresholded), TrieHH (sampling) and the F_p sketch (Laplace) have none;
dp_cms_hh's statistic includes a min over rows (not linear).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketches import (
    PAMG,
    PMG,
    DPCMSHeavyHitters,
    DPCMSHeavyHittersSpec,
    DPCountMin,
    DPCountSketch,
    DPLinearSpec,
    DyadicQuantiles,
    DyadicQuantilesSpec,
    FpSketch,
    FpSketchSpec,
    HashSpec,
    LazyCMS,
    LazyCS,
    LazyHH,
    LazyHHSpec,
    LazySketchSpec,
    NoiseSource,
    PAMGSpec,
    PMGSpec,
    SecureNoise,
    TrieHH,
    TrieHHSpec,
    ZeroNoise,
    merge_mg,
)

__all__ = ["CASES", "Case", "Parametric", "all_cases", "case"]

IP = "10.0.0.1"
IP_INT = 167772161  # 10.0.0.1 as an unsigned 32-bit int
ABSENT = -1e18  # statistic of a release that does not show the item


@dataclass
class Case:
    """One audit case (see module docstring).

    ``run(noise, neighbour)`` returns the statistic of one fresh mechanism
    fed ``X'`` (``neighbour=True``) or ``X``. ``claim`` is the (eps, delta) the
    release states (read from a release of the same spec).
    """

    name: str
    mechanism: str
    clock: str
    relation: str
    source: str
    statistic: str
    inputs: str
    run: Callable[[NoiseSource, bool], float]
    claim: tuple[float, float] = field(default=(math.nan, math.nan))
    broken_factor: float = 0.25  # ScaledNoise factor of the power check
    parametric: Parametric | None = None  # Gaussian mechanisms with a linear statistic

    def claimed(self) -> tuple[float, float]:
        return self.claim


@dataclass(frozen=True)
class Parametric:
    """The parametric calibration check of a Gaussian case (:func:`privacy_audit.gaussian_shift`).

    The case's statistic is a linear function of Gaussian (discrete Gaussian)
    noise, so its shift from ``X`` to ``X'`` in units of its standard deviation
    is the ``mu`` of a Gaussian mechanism. ``mu_calibrated``: that shift computed
    from the mechanism's own sigma (number of shifted nodes / sqrt(nodes) /
    sigma); ``claim``: the (eps, delta) the statistic is bounded by (the
    release's, or the stated budget of the component it reads); ``mean0``: the
    exact (noise-free) statistic of ``X``.
    """

    mu_calibrated: float
    claim: tuple[float, float]
    claim_note: str
    mean0: float


def _mean0(run: Callable[[NoiseSource, bool], float]) -> float:
    return run(ZeroNoise(), False)


def _cells_sum(release: dict[str, Any], items: list[Any], signed: bool) -> float:
    """Sum (signed for Count Sketch) of the cells of ``items`` in a sketch release."""
    h = HashSpec.from_public(release["hash"])
    keys = h.item_keys(items)
    m = np.asarray(release["matrix"], dtype=np.float64)
    rows = np.arange(h.depth)[:, None]
    if signed:
        b, s = h.buckets_and_signs(keys)
        return float((m[rows, b] * s).sum())
    return float(m[rows, h.buckets(keys)].sum())


def _estimate(release: dict[str, Any], label: Any) -> float:
    for e in release["items"]:
        if e["item"] == label:
            return float(e["estimate"])
    return ABSENT


# ---------------------------------------------------------------- LazyCMS / LazyCS
def _lazy(kind: str, round_ticks: int | None = None) -> Case:
    # netmon_prefixes.yaml: eps 1, delta 1e-6, add/remove, tick clock, epoch 3600 ticks,
    # all columns per tick, depth 4 (width 1024 there: width does not enter sigma)
    # relation add_remove and the tick clock are the spec defaults
    # round_ticks: aligned rounds (docs/PRIVACY.md 13.2): round r is read at tick r * R
    spec = LazySketchSpec(depth=4, width=16, horizon=3600, eps=1.0, delta=1e-6,
                          hash_seed=20240601, round_ticks=round_ticks)
    step = 1 if round_ticks is None else round_ticks
    cls = LazyCMS if kind == "cms" else LazyCS
    powers = [1 << j for j in range(spec.rounds.bit_length()) if 1 << j <= spec.rounds]
    bg = np.array([11, 12, 13, 14], dtype=np.int64)  # fixed background, same in X and X'

    def run(noise: NoiseSource, neighbour: bool) -> float:
        sk = cls(spec, noise)
        items = np.concatenate([bg, [IP_INT]]) if neighbour else bg
        sk.update_batch(items, ticks=np.zeros(items.size, np.int64))
        total = 0.0
        for r in powers:
            sk.advance_to(r * step)  # round r closed: its prefix is the single node [1, r]
            total += _cells_sum(sk.release(), [IP_INT], signed=kind == "cs")
        return total

    return Case(
        name=f"lazy_{kind}" + ("" if round_ticks is None else "_tree_aligned"),
        mechanism=f"lazy_{kind}" + ("" if round_ticks is None else
                                    f" (tree, {spec.rounds} rounds of {round_ticks} ticks)"),
        clock="tick", relation="add_remove",
        source="topologies/netmon_prefixes.yaml (width 16, d=4, horizon 3600)",
        statistic=f"sum of the item's {spec.depth} cells over the releases at rounds "
                  f"1,2,4,..,{powers[-1]} ({len(powers)} nodes per cell; LR-optimal linear)",
        inputs="X: 4 background events at tick 0; X' = X + 1 event of the item at tick 0"
               + ("" if round_ticks is None else " (both in round 1)"),
        run=run, claim=(spec.eps, spec.delta),
        parametric=Parametric(
            mu_calibrated=math.sqrt(spec.depth * len(powers))
            / cls(spec, SecureNoise()).calibration.sigma,
            claim=(spec.eps, spec.delta), claim_note="release", mean0=_mean0(run)))


def _lazy_factorized(counter: str, observed: int = 128, round_ticks: int | None = None) -> Case:
    """LazyCMS over a factorized counter (docs/PRIVACY.md 13): the event at tick 0 shifts
    every release of its ``d`` cells by +1; the releases' noise is ``round(B z)``, so the
    likelihood-ratio-optimal linear statistic over rounds ``1..R`` weighs the per-round
    cell sums by ``w = (B_R B_R^T)^-1 1 = B_R^-T c_R`` (``c`` the first column of
    ``C = B^-1 A``): shift ``d ||c_R||^2``, standard deviation ``sigma sqrt(d) ||c_R||``,
    i.e. ``mu = sqrt(d sum_{j<R} c_j^2) / sigma`` (``R = observed``; the full epoch's
    ``sum_{j<n} c_j^2`` is the calibrated sensitivity, so the audit sees ``R``'s share).
    ``round_ticks``: aligned rounds (docs/PRIVACY.md 13.2, the worker's default since issue
    20c): the releases are read at every round boundary, ``r * round_ticks``.
    """
    from sketches.counters.factorization import CounterKind, factorization, sqrt_coeffs

    spec = LazySketchSpec(depth=4, width=16, horizon=3600, eps=1.0, delta=1e-6,
                          hash_seed=20240601, counter=CounterKind(counter),
                          round_ticks=round_ticks)
    step = 1 if round_ticks is None else round_ticks
    lattice = CounterKind(counter) is CounterKind.BLT_INT
    f = factorization(counter, spec.rounds)
    b = f.b_coeffs(observed) if hasattr(f, "b_coeffs") else sqrt_coeffs(observed)
    i, j = np.indices((observed, observed))
    b_mat = np.where(i >= j, b[np.clip(i - j, 0, observed - 1)], 0.0)
    c_r = np.linalg.solve(b_mat, np.ones(observed))  # B_R^-1 1 = first column of C_R
    w = np.linalg.solve(b_mat.T, c_r)
    bg = np.array([11, 12, 13, 14], dtype=np.int64)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        sk = LazyCMS(spec, noise)
        items = np.concatenate([bg, [IP_INT]]) if neighbour else bg
        sk.update_batch(items, ticks=np.zeros(items.size, np.int64))
        sums = np.empty(observed)
        for r in range(1, observed + 1):
            sk.advance_to(r * step)
            sums[r - 1] = _cells_sum(sk.release(), [IP_INT], signed=False)
        return float(w @ sums)

    # blt_int: the releases are round(B y / s), y = f + Z with Z ~ N_Z(0, sigma_L^2): the same
    # weights, noise standard deviation sigma_L / s per unit of B (docs/PRIVACY.md 13)
    sigma = LazyCMS(spec, SecureNoise()).calibration.release_sigma
    sampler = "exact lattice sampler, production path" if lattice else "float sampler"
    aligned = "" if round_ticks is None else f", {spec.rounds} rounds of {round_ticks} ticks"
    return Case(
        name=f"lazy_cms_{counter}" if round_ticks is None else "lazy_cms_aligned",
        mechanism=f"lazy_cms (counter: {counter}, {sampler}{aligned})",
        clock="tick", relation="add_remove",
        source=f"topologies/netmon_prefixes.yaml with counter: {counter} (width 16, d=4)",
        statistic=f"(B_R B_R^T)^-1 1 weighted sum of the item's {spec.depth} cells over the"
                  f" releases at rounds 1..{observed} (LR-optimal linear for round(B z) noise)",
        inputs="X: 4 background events at tick 0; X' = X + 1 event of the item at tick 0"
               + ("" if round_ticks is None else " (both in round 1)"),
        run=run, claim=(spec.eps, spec.delta),
        parametric=Parametric(
            mu_calibrated=math.sqrt(spec.depth * float(c_r @ c_r)) / sigma,
            claim=(spec.eps, spec.delta), claim_note="release", mean0=_mean0(run)))


# ---------------------------------------------------------------- many-event encodings
COLUMNAR_TOPOLOGY = """
name: audit-columnar
production: true
input:
  topic: flows
  partitions: 1
  encoding: columnar
  max_message_bytes: 8192
  max_events_per_message: {m}
  fields: {{shard: router, item: dst}}
shards: {{allowed: [r1]}}
mechanism: {{name: lazy_cms, params: {{depth: 4, width: 16, hash_seed: 20240601}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, epoch_ticks: 3600, time: event}}
release: {{every_ticks: 1, topic: audit-out}}
dead_letter: {{topic: audit-dlq}}
"""


def _columnar(events: int = 300) -> Case:
    """Issue 19 item 1: on a ``columnar`` topology one event must not decide whether the
    other events of its message count. The worker's real path (topology, decoder,
    spec from ``Topology.spec_params``) on the worst case the encoding allows: ``X``
    is one message of ``events`` events of the item; in ``X'`` one more row is an item
    so long that the message exceeds ``max_message_bytes`` (a failure no decoder can
    pin to a row), so the whole message is dead-lettered and the shard counts 0
    instead of ``events``. The noise must be calibrated for that group
    (``max_events_per_message``, docs/PRIVACY.md §2); the statistic is ``_lazy``'s
    (the item's cells at rounds 1, 2, 4, ..), whose shift is now ``events`` nodes."""
    from worker.config.topology import parse_topology
    from worker.ingest.decode import decode_batch

    topo = parse_topology(COLUMNAR_TOPOLOGY.format(m=events + 1), "audit-columnar.yaml")
    spec = LazySketchSpec(**{k: v for k, v in _lazy_spec_params(topo).items()})
    item = "93.184.216.0/24"
    good = [item] * events
    x = json.dumps({"v": 1, "shard": "r1", "item": good}).encode()
    x1 = json.dumps({"v": 1, "shard": "r1", "item": [*good, "y" * 8192]}).encode()
    powers = [1 << j for j in range(spec.horizon.bit_length()) if 1 << j <= spec.horizon]

    def run(noise: NoiseSource, neighbour: bool) -> float:
        out = decode_batch(topo.input, [(0, b"r1", x1 if neighbour else x, 0)])
        sk = LazyCMS(spec, noise)
        sk.update_batch(out.items, ticks=np.zeros(len(out), np.int64))
        total = 0.0
        for r in powers:
            sk.advance_to(r)
            total += _cells_sum(sk.release(), [item], signed=False)
        return -total  # larger = looks like X' (the message dropped)

    sigma = LazyCMS(spec, SecureNoise()).calibration.sigma
    return Case(
        name="columnar_neighbour", mechanism="lazy_cms (encoding: columnar, worker decoder)",
        clock="tick", relation="add_remove",
        source=f"a production columnar topology, max_events_per_message {events + 1} "
               "(decoded by worker.ingest.decode.decode_batch, spec from Topology.spec_params)",
        statistic=f"minus the sum of the item's {spec.depth} cells over the releases at "
                  f"rounds 1,2,4,..,{powers[-1]}",
        inputs=f"X: one message of {events} events of the item; X' = X + one row that makes "
               "the message oversized (the whole message is dead-lettered)",
        run=run, claim=(spec.eps, spec.delta), broken_factor=1 / (events + 1),
        parametric=Parametric(
            mu_calibrated=events * math.sqrt(spec.depth * len(powers)) / sigma,
            claim=(spec.eps, spec.delta), claim_note="release", mean0=_mean0(run)))


def _lazy_spec_params(topo: Any) -> dict[str, Any]:
    """The LazySketchSpec fields the worker builds from ``topo`` (registry entry)."""
    from sketches import lookup

    built = lookup(topo.mechanism).build_spec(topo.spec_params())
    return {f: getattr(built, f) for f in ("depth", "width", "horizon", "eps", "delta",
                                           "hash_seed", "relation", "clock", "unit_cap")}


# ---------------------------------------------------------------- dp_cms / dp_cs
def _dp_linear(kind: str) -> Case:
    spec = DPLinearSpec(kind=kind, depth=5, width=2048, eps=1.0, delta=1e-6, hash_seed=0)
    cls = DPCountMin if kind == "cms" else DPCountSketch
    bg = np.arange(100, 140, dtype=np.int64)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        sk = cls(spec, noise)
        sk.update_batch(np.concatenate([bg, [IP_INT]]) if neighbour else bg)
        return _cells_sum(sk.release(), [IP_INT], signed=kind == "cs")

    return Case(
        name=f"dp_{kind}", mechanism=f"dp_{kind}", clock="window", relation="add_remove",
        source="paper 003 sketch, d=5, w=2048 (windowed_dp_cms_hh_ipv4.yaml sizes)",
        statistic=f"sum of the item's {spec.depth} cells (signed for CS; LR-optimal linear)",
        inputs="X: 40 background items; X' = X + 1 event", run=run,
        claim=(spec.eps, spec.delta),
        parametric=Parametric(
            mu_calibrated=math.sqrt(spec.depth)
            / float(cls(spec, SecureNoise()).release()["sigma"]),
            claim=(spec.eps, spec.delta), claim_note="release", mean0=_mean0(run)))


# ---------------------------------------------------------------- PMG
def _pmg(kind: str) -> Case:
    # windowed_pmg_hourly.yaml: k=256, eps 1, delta 1e-6, geometric noise
    spec = PMGSpec(k=256, eps=1.0, delta=1e-6, item_kind=kind)
    x: Any = IP if kind == "str" else IP_INT
    if kind == "str":
        base = np.array([x] * 200 + [f"10.0.1.{i}" for i in range(20)], dtype=object)
    else:
        base = np.array([x] * 200 + [IP_INT + 256 + i for i in range(20)], dtype=np.int64)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        mg = PMG(spec, noise)
        items = np.concatenate([base, base[:1]]) if neighbour else base
        mg.update_batch(items)
        return _estimate(mg.release(), x)

    return Case(
        name=f"pmg_{kind}", mechanism="pmg", clock="window", relation="add_remove",
        source="topologies/windowed_pmg_hourly.yaml (k=256, geometric)",
        statistic="published estimate of the item (count + shared + own two-sided geometric)",
        inputs=f"X: 200 x {x!r} + 20 other items; X' = X + 1 event of {x!r}", run=run,
        claim=(spec.eps, spec.delta))


def _merged_mg() -> Case:
    k = 8
    spec = PMGSpec(k=k, eps=1.0, delta=1e-6)
    heavy = np.repeat(np.arange(1, k + 1, dtype=np.int64), 400)
    other = np.repeat(np.arange(1, k + 1, dtype=np.int64), 100)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        a, b = PMG(spec, noise), PMG(spec, noise)
        # shard a holds exactly k keys: one new item makes every counter drop by 1
        a.update_batch(np.concatenate([heavy, [999]]) if neighbour else heavy)
        b.update_batch(other)
        rel = merge_mg([a, b], noise).release()
        return -sum(_estimate(rel, i) for i in range(1, k + 1))

    return Case(
        name="merged_mg", mechanism="merge_mg (geometric)", clock="window",
        relation="add_remove", source="paper 000 §7, 2 shards, k=8 (threshold needs counts >> k)",
        statistic="minus the sum of the k published estimates (one event decrements all k)",
        inputs="shard A: k items x 400, shard B: k items x 100; X' adds 1 new item to A",
        run=run, claim=(spec.eps, spec.delta))


def _pamg() -> Case:
    spec = PAMGSpec(k=8, m=4, eps=1.0, delta=1e-6)
    base = np.repeat(np.arange(1, 9, dtype=np.int64), 300)
    units = np.array([f"u{i}" for i in range(base.size)], dtype=object)
    extra = np.array([1, 2, 3, 4], dtype=np.int64)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        pm = PAMG(spec, noise)
        pm.update_batch(base, units=units)
        if neighbour:
            pm.update_batch(extra, units=np.array(["attacker"] * 4, dtype=object))
        rel = pm.release()
        return sum(_estimate(rel, int(i)) for i in extra)

    return Case(
        name="pamg", mechanism="pamg (GSHM, float noise)", clock="window",
        relation="add_remove (one unit)", source="paper 000 §8, k=8, m=4",
        statistic="sum of the published estimates of the unit's m items",
        inputs="X: 8 items x 300 single-event units; X' adds one unit with 4 stored items",
        run=run, claim=(spec.eps, spec.delta))


# ---------------------------------------------------------------- LazyHH
def _lazy_hh_spec(event_horizon: int) -> LazyHHSpec:
    # netmon.yaml: k=10, k~=64, eps 1, delta 1e-6, add/remove, tick clock, output every tick
    # (horizon 64 ticks instead of 3600 to make a trial cheap)
    return LazyHHSpec(k=10, k_tilde=64, horizon=64, eps=1.0, delta=1e-6,
                      event_horizon=event_horizon, output_every=1)


def _length_parametric(spec: LazyHHSpec, shifted: int, run: Callable[[NoiseSource, bool], float],
                       ) -> Parametric:
    """t_estimate reads only the length counter: bound it by the length budget it states."""
    budget = LazyHH(spec, SecureNoise()).privacy()["budget"]["length"]
    return Parametric(
        mu_calibrated=math.sqrt(shifted) / float(budget["sigma"]),
        claim=(float(budget["eps"]), float(budget["delta"])),
        claim_note="the length counter's stated budget (privacy.budget.length)",
        mean0=_mean0(run))


def _lazy_hh() -> Case:
    spec = _lazy_hh_spec(50_000_000)
    c = 2_000
    powers = [1 << j for j in range(7)]
    probe = LazyHH(spec, SecureNoise()).privacy()

    def run(noise: NoiseSource, neighbour: bool) -> float:
        hh = LazyHH(spec, noise)
        n = c + 1 if neighbour else c
        hh.update_batch(np.full(n, IP_INT, np.int64), ticks=np.zeros(n, np.int64))
        total = 0.0
        for r in powers:
            hh.advance_to(r)  # the length counter's prefix at round 2^j is one node [1, 2^j]
            total += float(hh.release()["t_estimate"])
        return total

    return Case(
        name="lazy_hh", mechanism="lazy_hh", clock="tick", relation="add_remove",
        source="topologies/netmon.yaml (horizon 64 ticks)",
        statistic="published t_estimate summed over the outputs at rounds 1,2,4,..,64 (the "
                  "7 length-counter nodes of tick 0; LR-optimal linear)",
        inputs=f"X: {c} events of the item at tick 0; X' = X + 1 event",
        run=run, claim=(float(probe["eps"]), float(probe["delta_tilde"])),
        parametric=_length_parametric(spec, len(powers), run))


def _lazy_hh_truncated() -> Case:
    """The epoch at ``event_horizon``: one early event of X' pushes out the last late one.

    The worker (worker/engine/ingest.py) keeps the first ``event_horizon`` events of an
    epoch and drops later ones one by one; the case applies the same rule to
    the whole epoch's stream before feeding it. X' differs from X by +1 event at
    tick 0 and -1 event at tick 32. The length counter's prefix releases expose
    the +1 in nodes [1, 2^j] (rounds 1..32) and the -1 in the nodes
    [33, 32 + 2^j] (release at round 32 + 2^j minus the release at round 32,
    where the shared node [1, 32] cancels): 11 nodes, statistic
    ``sum_j t(2^j) - sum_j (t(32 + 2^j) - t(32))``.
    """
    c, late = 2_000, 100
    spec = _lazy_hh_spec(c + late)
    early_rounds = [1, 2, 4, 8, 16, 32]
    late_rounds = [33, 34, 36, 40, 48]
    probe = LazyHH(spec, SecureNoise()).privacy()
    assert probe["event_bound"]["covered"]

    def run(noise: NoiseSource, neighbour: bool) -> float:
        n = c + 1 if neighbour else c
        items = np.concatenate([np.full(n, IP_INT, np.int64), np.full(late, IP_INT + 1, np.int64)])
        ticks = np.concatenate([np.zeros(n, np.int64), np.full(late, 32, np.int64)])
        items, ticks = items[:spec.event_horizon], ticks[:spec.event_horizon]  # engine's rule
        hh = LazyHH(spec, noise)
        early = ticks == 0
        hh.update_batch(items[early], ticks=ticks[early])
        total = 0.0
        for r in early_rounds:
            hh.advance_to(r)
            total += float(hh.release()["t_estimate"])
        t32 = float(hh.release()["t_estimate"])
        hh.update_batch(items[~early], ticks=ticks[~early])
        for r in late_rounds:
            hh.advance_to(r)
            total -= float(hh.release()["t_estimate"]) - t32
        return total

    return Case(
        name="lazy_hh_truncated", mechanism="lazy_hh (event_horizon reached)", clock="tick",
        relation="add_remove (+1 early, -1 pushed out)",
        source=f"topologies/netmon.yaml (horizon 64 ticks, event_horizon {spec.event_horizon})",
        statistic="sum of t_estimate at rounds 1..32 (powers of 2) minus the increments "
                  "t(32+2^j) - t(32), j=0..4 (11 length-counter nodes; LR-optimal linear)",
        inputs=f"X: {c} events of the item at tick 0 + {late} of another at tick 32 "
               f"(= event_horizon); X' = X + 1 event at tick 0, the last late event dropped",
        run=run, claim=(float(probe["eps"]), float(probe["delta_tilde"])),
        parametric=_length_parametric(spec, len(early_rounds) + len(late_rounds), run))


# ---------------------------------------------------------------- TrieHH
def _triehh(accountant: str) -> Case:
    spec = TrieHHSpec(levels=4, bits=8, eps=1.0, delta=1e-6, mode="subwindow",
                      window_ticks=4, accountant=accountant)
    c = round(spec.theta / spec.sampling_rate)
    level_ticks = np.repeat(np.arange(4, dtype=np.int64), c)
    items = np.full(level_ticks.size, IP_INT, np.int64)
    x0 = IP_INT >> 24

    def run(noise: NoiseSource, neighbour: bool) -> float:
        tr = TrieHH(spec, noise)
        if neighbour:
            tr.update_batch(np.concatenate([[IP_INT], items]),
                            ticks=np.concatenate([[0], level_ticks]))
        else:
            tr.update_batch(items, ticks=level_ticks)
        tr.advance_to(4)
        lvl0 = tr.release()["trie"]["nodes"][0]
        counts = dict(zip(lvl0["prefix"], lvl0["count"], strict=True))
        return float(counts.get(x0, 0))

    return Case(
        name=f"triehh_{accountant}", mechanism=f"triehh ({accountant} accountant)",
        clock="window (4 sub-windows)", relation="add_remove",
        source=f"paper 001, L=4 x 8 bits, theta={spec.theta}, p={spec.sampling_rate:.4g}",
        statistic="published sampled count of the item's level-0 node (0 when pruned)",
        inputs=f"X: {c} (~theta/p) events of the item per sub-window; X' adds 1 in level 0",
        run=run, claim=(spec.eps, spec.delta))


# ---------------------------------------------------------------- dyadic mechanisms
def _dp_cms_hh() -> Case:
    spec = DPCMSHeavyHittersSpec.from_params({
        "bits": 32, "branch_bits": 4, "depth": 5, "width": 2048, "phi": 0.01, "top_k": 20,
        "eps": 1.0, "delta": 1e-6})
    base = np.full(2000, IP_INT, np.int64)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        hh = DPCMSHeavyHitters(spec, noise)
        hh.update_batch(np.concatenate([base, [IP_INT]]) if neighbour else base)
        rel = hh.release()
        return _estimate(rel, IP_INT) + float(rel["n_estimate"])

    return Case(
        name="dp_cms_hh", mechanism="dp_cms_hh", clock="window", relation="add_remove",
        source="topologies/windowed_dp_cms_hh_ipv4.yaml",
        statistic="published estimate of the item + published n_estimate",
        inputs="X: 2000 events of 10.0.0.1; X' = X + 1 event", run=run,
        claim=(spec.eps, spec.delta))


def _dyadic_quantiles() -> Case:
    spec = DyadicQuantilesSpec.from_params({
        "bits": 24, "resolution_bits": 4, "depth": 7, "width": 512, "phis": [0.5, 0.9, 0.99],
        "turnstile": True, "weight_clip": 1, "eps": 1.0, "delta": 1e-6})
    rng = np.random.default_rng(20261123)
    base = rng.integers(0, 1 << 16, 500)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        q = DyadicQuantiles(spec, noise)
        q.update_batch(np.concatenate([base, [1800]]) if neighbour else base)
        return float(q.release()["n_estimate"])

    return Case(
        name="dyadic_quantiles", mechanism="dyadic_quantiles", clock="window",
        relation="add_remove", source="topologies/windowed_flow_quantiles.yaml",
        statistic="published n_estimate (noisy root count)",
        inputs="X: 500 seeded flow sizes; X' = X + 1 event", run=run,
        claim=(spec.eps, spec.delta),
        parametric=Parametric(
            mu_calibrated=1.0 / float(DyadicQuantiles(spec, SecureNoise()).release()["sigma"]),
            claim=(spec.eps, spec.delta), claim_note="release (root node only: weak)",
            mean0=_mean0(run)))


def _fp_sketch() -> Case:
    spec = FpSketchSpec.from_params({"p": 0.5, "rows": 50, "max_value": 1.0, "eps": 1.0})
    # enough mass that the released estimate (F_p minus the public padding, floored at 0)
    # is positive (the floor would hide the difference), and little enough that the
    # release's 4-significant-digit grid (fp_sketch.quantize) still resolves one item
    base = np.array([f"93.184.{i % 256}.{i // 256}" for i in range(200)], dtype=object)

    def run(noise: NoiseSource, neighbour: bool) -> float:
        fp = FpSketch(spec, noise)
        fp.update_batch(np.concatenate([base, np.array([IP], dtype=object)]) if neighbour
                        else base)
        return float(fp.release()["estimate"])

    return Case(
        name="fp_sketch", mechanism="fp_sketch", clock="window", relation="add_remove",
        source="topologies/windowed_fp_moment.yaml (p=0.5, rows=50)",
        statistic="published F_p estimate", inputs="X: 200 distinct items; X' = X + 1 new item",
        run=run, claim=(spec.eps, 0.0))


CASES: dict[str, Callable[[], Case]] = {
    "lazy_cms": lambda: _lazy("cms"),
    "lazy_cs": lambda: _lazy("cs"),
    "lazy_cms_blt": lambda: _lazy_factorized("blt"),
    # the lattice BLT at the production noise path (SecureNoise's exact table sampler)
    "lazy_cms_blt_int": lambda: _lazy_factorized("blt_int", observed=512),
    # the production default since issue 20c: blt_int on rounds aligned to the releases
    # (3600 ticks released every 60: all 60 rounds of the epoch observed)
    "lazy_cms_aligned": lambda: _lazy_factorized("blt_int", observed=60, round_ticks=60),
    # the tree on aligned rounds (the default where blt_int does not win: short epochs)
    "lazy_cms_tree_aligned": lambda: _lazy("cms", round_ticks=60),
    "columnar_neighbour": _columnar,
    "dp_cms": lambda: _dp_linear("cms"),
    "dp_cs": lambda: _dp_linear("cs"),
    "pmg_int": lambda: _pmg("int"),
    "pmg_str": lambda: _pmg("str"),
    "merged_mg": _merged_mg,
    "pamg": _pamg,
    "lazy_hh": _lazy_hh,
    "lazy_hh_truncated": _lazy_hh_truncated,
    "triehh_note": lambda: _triehh("note"),
    "triehh_exact": lambda: _triehh("exact"),
    "dp_cms_hh": _dp_cms_hh,
    "dyadic_quantiles": _dyadic_quantiles,
    "fp_sketch": _fp_sketch,
}


def case(name: str) -> Case:
    """Build the case ``name`` (a key of :data:`CASES`)."""
    try:
        return CASES[name]()
    except KeyError:
        raise KeyError(f"case: unknown {name!r}; use one of {', '.join(CASES)}") from None


def all_cases() -> list[Case]:
    return [f() for f in CASES.values()]
