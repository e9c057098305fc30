"""LazyHH spec and the constants of Lemma 6 / Algorithm 6 (paper 002).

:class:`LazyHHSpec` holds every parameter; :func:`derive_params` turns it
into the sketch depth, the noise bound ``gamma``, the thresholds and the
length-counter calibration. Formulas live in :mod:`sketches.privacy`
(``lazyhh_depth``, ``lazyhh_gamma``, ``alg6_gamma``, ``lazyhh_thresholds``,
``length_counter_calibration``); this module only decides which apply:

- depth ``d = ceil(log2(2 N / beta))`` (the paper's text says ``ln``, but the
  Markov halving per row needs ``log2``), ``N`` = :func:`item_output_pairs`, a
  bound on the (item, output) pairs fixed by the stream: ``~T^2 / (2 k~)`` on
  the arrival clock, ``|I| * event_horizon`` on the tick clock. The paper's
  ``N = 2T`` (``d = ceil(log2(4T/beta))``) counts candidate pairs, a set chosen
  by the noisy estimates, so its union bound does not hold; it is kept only
  with ``calibrator="paper"`` on the arrival clock, to reproduce Fig. 4;
- ``gamma``: exact-sigma noise bound over ``d k~`` counters at ``|I|`` outputs
  with failure ``beta/2``; with ``calibrator="paper"`` on the arrival clock the
  printed Alg. 6 line 4 value when larger (reproduction);
- ``lag``: ``k~`` (arrival clock) or 0 (tick clock: all columns pushed per tick).

Guarantee (:func:`guarantee`, reported in every release): ``replace``:
``(eps, delta_tilde(eps, delta))`` (Theorem 3). ``add_remove``: the length
counter gets ``(eps_l, delta_l)``, the sketch ``(eps_s, delta_s)`` and the
release is ``(eps_s + eps_l, delta_tilde(eps_s, delta_s) + e^eps_s delta_l +
beta)``-DP. Derivation [D]: condition on the counter's outputs ``t_hat``; when
``t_up = t_hat + E + c >= t`` for both neighbours (fails with probability
``<= beta``, ``E`` = its error bound) Theorem 3's proof applies with these
fixed thresholds, giving ``e^eps_s P'[H in S | t_hat] + delta_tilde``; the
conditional probability is a [0, 1] post-processing of the ``(eps_l,
delta_l)``-DP counter, which adds ``eps_l`` and ``e^eps_s delta_l``.

Examples
--------
>>> spec = LazyHHSpec(k=128, k_tilde=512, horizon=22_995_712, eps=0.5, delta=1e-3,
...                   relation="replace", clock="arrival", calibrator="paper")
>>> derive_params(spec, None, None).depth
38
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketches.core.noise_compose import discrete_gaussian_tv
from sketches.counters.factorization import SQRT_MAX_VALUES, CounterKind
from sketches.errors import SpecError
from sketches.privacy import (
    Calibration,
    Calibrator,
    Clock,
    LazyHHThresholds,
    Relation,
    alg6_gamma,
    check_clock,
    check_lemma6_delta,
    counter_error_bound,
    delta_tilde,
    lazyhh_depth,
    lazyhh_gamma,
    lazyhh_thresholds,
    length_counter_calibration,
    neighbouring_cells,
    split_budget,
)

__all__ = ["SAMPLER_TV_PER_DRAW", "HHParams", "LazyHHSpec", "derive_params", "guarantee",
           "item_key_collision_delta", "item_output_pairs", "sampler_delta",
           "sampler_tv_per_draw"]


@dataclass(frozen=True)
class LazyHHSpec:
    """Every parameter of a LazyHH (frozen; JSON-able via ``spec_to_dict``).

    Parameters
    ----------
    k, k_tilde : int
        Heavy-hitter parameter ``k`` (report ``f > t/k``) and candidate-set size /
        sketch width ``k~ > k``.
    horizon : int
        Arrival clock: events ``T``; tick clock: ticks per epoch.
    eps, delta : float
        Total epsilon; ``delta`` of the sketch (the paper's ``delta``; the release
        reports the resulting ``delta_tilde``).
    beta : float or None
        Utility failure probability, ``0 < beta < delta`` of the sketch; ``None``:
        ``delta / 2``.
    relation, clock, calibrator : as in :class:`sketches.continual.lazy.LazySketchSpec`.
    hash_seed : int or None
        ``None`` (required with private noise): a secret hash is drawn from the
        noise source at construction (paper 002 Lemma 6 needs a hash unknown to
        the adversary). An int is for tests/benchmarks with ``fast``/``zero``
        noise only; :class:`~sketches.continual.lazy_hh.sketch.LazyHH` refuses it otherwise.
    event_horizon : int
        Tick clock only (required): public upper bound on events per epoch
        (enters the depth); more events raise HorizonExceededError.
    output_every : int
        Tick clock: publish a new set every ``output_every`` ticks.
    count_fraction : float
        ``add_remove``: share of eps and delta spent on the length counter.
    unit_cap : int
        Exact per-unit contribution cap ``c`` (1 = event-level).
    """

    k: int
    k_tilde: int
    horizon: int
    eps: float
    delta: float
    beta: float | None = None
    relation: Relation = Relation.ADD_REMOVE
    clock: Clock = Clock.TICK
    calibrator: Calibrator = Calibrator.DISCRETE
    hash_seed: int | None = None
    event_horizon: int = 0
    output_every: int = 1
    count_fraction: float = 0.1
    unit_cap: int = 1
    #: the sketch cells' continual counter (``tree`` | ``blt`` | ``sqrt`` | ``blt_int``;
    #: docs/PRIVACY.md 13); the length counter stays a tree (one counter). The dataclass
    #: default is ``tree`` (stored specs without the field); a spec built from topology
    #: parameters without ``counter`` gets ``blt_int`` where it wins
    #: (:func:`sketches.continual.lazy_hh.sketch.default_counter`)
    counter: CounterKind = field(default=CounterKind.TREE,
                                 metadata={"omit_if_default": True})

    def __post_init__(self) -> None:
        for name, enum in (("relation", Relation), ("clock", Clock), ("calibrator", Calibrator),
                           ("counter", CounterKind)):
            try:
                object.__setattr__(self, name, enum(getattr(self, name)))
            except ValueError:
                allowed = ", ".join(e.value for e in enum)
                raise SpecError(f"{name}: unknown value {getattr(self, name)!r}; use one of"
                                f" {allowed}") from None
        for name in ("k", "k_tilde", "horizon", "output_every", "unit_cap"):
            _positive_int(name, getattr(self, name))
        if self.k_tilde <= self.k:
            raise SpecError(f"k_tilde: must exceed k={self.k} (Theorem 4), got {self.k_tilde};"
                            " use e.g. k_tilde = 4 k")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise SpecError(f"eps: must be a finite number > 0, got {self.eps!r}")
        if not 0 < self.delta < 1:
            raise SpecError(f"delta: must be in (0, 1), got {self.delta!r}")
        if not 0 < self.count_fraction < 1:
            raise SpecError(f"count_fraction: must be in (0, 1), got {self.count_fraction!r}")
        check_clock(self.relation, self.clock)
        if self.clock is Clock.TICK and self.relation is Relation.REPLACE:
            raise SpecError(
                "relation: 'replace' on the tick clock is refused for lazy_hh: 'replace' keeps "
                "the stream length public, but on the tick clock a replace neighbour whose "
                "event lands in another tick changes the per-output length LazyHH publishes "
                "exactly (t_estimate), so no finite delta holds; use relation: add_remove "
                "(tick clock, the length is a DP count) or clock: arrival (the paper's model)")
        if self.clock is Clock.TICK:
            if isinstance(self.event_horizon, bool) or self.event_horizon < 1:
                raise SpecError("event_horizon: the tick clock needs a public upper bound on"
                                " events per epoch; set event_horizon (e.g. 10 x expected)")
        elif self.event_horizon not in (0, self.horizon) or self.output_every != 1:
            raise SpecError("event_horizon/output_every: the arrival clock outputs every k_tilde"
                            " events of a horizon of `horizon` events; leave both unset")
        sketch_delta = self.sketch_budget[1]
        check_lemma6_delta(sketch_delta, name="delta")
        if self.counter is CounterKind.BLT_INT and self.calibrator is not Calibrator.DISCRETE:
            raise SpecError("counter: 'blt_int' adds exact discrete Gaussian noise on a lattice;"
                            f" it needs calibrator 'discrete', got {self.calibrator.value!r}")
        if self.counter is not CounterKind.TREE and self.calibrator is Calibrator.PAPER:
            raise SpecError(f"counter: {self.counter.value!r} needs calibrator 'discrete' (or"
                            " 'analytic'); 'paper' reproduces paper 002's tree: use counter: tree")
        if not 0 < self.beta_value < sketch_delta:
            raise SpecError(f"beta: must be in (0, {sketch_delta:g}) (sketch delta, Lemma 11),"
                            f" got {self.beta}; leave it unset for delta/2")
        if self.counter is CounterKind.SQRT:
            cells = derive_params(self, None, None).depth * self.k_tilde
            if cells * self.horizon > SQRT_MAX_VALUES:
                raise SpecError(
                    f"counter: 'sqrt' keeps every round's noise of every cell: up to"
                    f" {self.horizon} rounds x {cells} cells exceed the limit of"
                    f" {SQRT_MAX_VALUES} values; use counter: blt (same error within about 1%,"
                    " 7 values per cell) or counter: tree")

    @property
    def beta_value(self) -> float:
        """``beta`` with its default ``delta_sketch / 2``."""
        return self.sketch_budget[1] / 2 if self.beta is None else float(self.beta)

    @property
    def sketch_budget(self) -> tuple[float, float]:
        """``(eps_s, delta_s)`` of the LazyCMS (everything under replace)."""
        if self.relation is Relation.REPLACE:
            return float(self.eps), float(self.delta)
        s = split_budget(self.eps, self.delta, length_fraction=self.count_fraction)
        return s.sketch_eps, s.sketch_delta

    @property
    def count_budget(self) -> tuple[float, float]:
        """``(eps_l, delta_l)`` of the length counter (``(0, 0)`` under replace)."""
        if self.relation is Relation.REPLACE:
            return 0.0, 0.0
        s = split_budget(self.eps, self.delta, length_fraction=self.count_fraction)
        return s.length_eps, s.length_delta

    @property
    def truncated(self) -> bool:
        """True when the calibration covers truncation at ``event_horizon`` (issue 8 item 4).

        On the tick clock under ``add_remove`` the epoch admits at most
        ``event_horizon`` events and drops later ones, so one added unit can push
        up to ``c`` later events out: neighbours then differ by up to ``c`` added
        *and* ``c`` removed events. The sketch is calibrated for ``m = 2d`` changed
        cells and the length counter for two changed ticks (``x sqrt 2``); the
        ``+c`` threshold still holds (every item's count differs by at most ``c``).
        Always on there, whether or not an epoch reaches the bound (that depends on
        the data). Derivation [D]: docs/PRIVACY.md 10.5.
        """
        return self.clock is Clock.TICK and self.relation is Relation.ADD_REMOVE

    @property
    def outputs(self) -> int:
        """``|I|``: number of output times per epoch."""
        if self.clock is Clock.ARRIVAL:
            return self.horizon // self.k_tilde
        return self.horizon // self.output_every

    # ------------------------------------------------- planning (no sketch built)
    def sketch_rounds(self) -> int:
        """Rounds of the sketch counters (tick clock: one per tick; arrival: per ``k~``)."""
        return -(-self.horizon // self.k_tilde) if self.clock is Clock.ARRIVAL \
            else self.horizon

    def sketch_calibration(self, depth: int | None = None) -> Calibration:
        """The sketch cells' calibration (``LazyHH`` uses exactly this): budget
        ``sketch_budget``, ``m = 2d`` under truncation else ``neighbouring_cells``."""
        from sketches.counters.family import calibrate_counter

        d = derive_params(self, None, None).depth if depth is None else int(depth)
        eps_s, delta_s = self.sketch_budget
        cells = 2 * d if self.truncated else neighbouring_cells(self.relation, d)
        return calibrate_counter(self.counter, eps_s, delta_s, m=cells,
                                 rounds=self.sketch_rounds(), calibrator=self.calibrator,
                                 unit_cap=self.unit_cap, cells=d * self.k_tilde,
                                 **({"max_count": self.cell_count_bound}
                                    if self.cell_count_bound else {}))

    @property
    def cell_count_bound(self) -> int | None:
        """Public bound on the events one sketch cell receives in an epoch (``blt_int``'s
        float error bound uses it): ``event_horizon`` when truncated, the horizon on the
        arrival clock (events), else None (the counter's default bound)."""
        if self.truncated:
            return int(self.event_horizon)
        if self.clock is Clock.ARRIVAL:
            return int(self.horizon)
        return None

    def error_bound_per_release(self, beta: float) -> float:
        """Noise of one output: w.p. ``>= 1 - beta`` every read sketch cell (``d k~``) of one
        output is within this of its exact pushed count (an estimate: min over rows)."""
        d = derive_params(self, None, None).depth
        return self.sketch_calibration(d).error_bound(n=d * self.k_tilde, steps=1, beta=beta)

    def error_bound_epoch(self, beta: float) -> float:
        """Noise over the epoch: every cell at every output time (``gamma`` uses this at
        ``beta/2``: ``derive_params(...).gamma``)."""
        d = derive_params(self, None, None).depth
        return self.sketch_calibration(d).error_bound(
            n=d * self.k_tilde, steps=max(self.outputs, 1), beta=beta)

    def memory_bytes(self) -> int:
        """Bytes of the sketch counters and the carry (candidates: ``O(k~)`` more): tree
        (lazy draws) ``(levels + 1) * 8 + levels + 25`` per cell, ``blt`` ``7 * 8``,
        ``sqrt`` ``(rounds + 3) * 8``, ``blt_int`` ``12 * 8``; carry ``16`` per cell; a
        factorized sketch adds the length counter (one tree counter: ``(levels + 2) * 8``),
        which the tree's per-cell slack covers."""
        from sketches.counters.family import counter_memory_bytes

        cells = derive_params(self, None, None).depth * self.k_tilde
        rounds = self.sketch_rounds()
        if self.counter is CounterKind.TREE:
            levels = int(rounds).bit_length()
            per = (levels + 1) * 8 + levels + 25
            return cells * (per + 16)
        return counter_memory_bytes(self.counter, cells, rounds) + 16 * cells \
            + counter_memory_bytes(CounterKind.TREE, 1, self.horizon)


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise SpecError(f"{name}: must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class HHParams:
    """Derived constants (Lemma 6 / Alg. 6) of one LazyHH epoch."""

    depth: int
    gamma: float
    thresholds: LazyHHThresholds
    count: Calibration | None
    count_error: float


def item_output_pairs(spec: LazyHHSpec) -> int:
    """``N``: a data- and hash-independent bound on the (item, output) pairs of Lemma 6.

    The candidate set ``C_t`` keeps the top ``k~`` *noisy estimates*, which favours
    items with a large collision error, so a union bound over the pairs
    ``(a, t), a in C_t`` (the paper's ``sum |C_t| <= 2T``) is over a set chosen by
    the bad events themselves and is not valid. Every candidate at output ``t`` has
    arrived by ``t``, so we bound over ``{(a, t) : a arrived by t}``, a set fixed by
    the stream: ``sum_{t in I} #distinct items by t``. Arrival clock, outputs at
    ``t = j k~``: ``N = k~ J (J + 1) / 2`` with ``J = T // k~``; tick clock:
    ``N = |I| * event_horizon``. [D] (privacy review 2, F2; PRIVACY.md 10.2.)

    Examples
    --------
    >>> spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3,
    ...                   relation="replace", clock="arrival")
    >>> item_output_pairs(spec)  # outputs at 4, 8, ..., 64
    544
    """
    if spec.clock is Clock.ARRIVAL:
        outputs = spec.horizon // spec.k_tilde
        return spec.k_tilde * outputs * (outputs + 1) // 2
    return max(spec.outputs, 1) * spec.event_horizon


def derive_params(spec: LazyHHSpec, sketch_cal: Calibration | None, depth: int | None) -> HHParams:
    """Depth (first call) or gamma/thresholds (second call, once the sketch is calibrated)."""
    beta, kt = spec.beta_value, spec.k_tilde
    if spec.calibrator is Calibrator.PAPER and spec.clock is Clock.ARRIVAL:
        d = lazyhh_depth(spec.horizon, beta)  # the paper's N = 2T (reproduction only)
    else:
        d = lazyhh_depth(-(-item_output_pairs(spec) // 2), beta)  # ceil(log2(2N / beta))
    if sketch_cal is None:
        return HHParams(d, 0.0, lazyhh_thresholds(0.0, k=spec.k, k_tilde=kt), None, 0.0)
    d = int(depth or d)
    if sketch_cal.row_norm_sq is None:
        gamma = lazyhh_gamma(sketch_cal.sigma, levels=sketch_cal.levels, depth=d, k_tilde=kt,
                             outputs=max(spec.outputs, 1), beta=beta)
    else:  # factorized counter [D] (docs/PRIVACY.md "Factorized counters", LazyHH)
        gamma = sketch_cal.error_bound(n=d * kt, steps=max(spec.outputs, 1), beta=beta / 2)
    if spec.calibrator is Calibrator.PAPER and spec.clock is Clock.ARRIVAL:
        # the paper's printed gamma (Alg. 6 line 4); never below the exact-sigma bound
        gamma = max(gamma, alg6_gamma(spec.eps, spec.delta, horizon=spec.horizon,
                                      k_tilde=kt, beta=beta))
    lag = kt if spec.clock is Clock.ARRIVAL else 0
    th = lazyhh_thresholds(gamma, k=spec.k, k_tilde=kt, lag=lag, unit_cap=spec.unit_cap)
    count, err = None, 0.0
    if spec.relation is Relation.ADD_REMOVE:
        le, ld = spec.count_budget
        count = length_counter_calibration(le, ld, rounds=spec.horizon,
                                           calibrator=spec.calibrator, unit_cap=spec.unit_cap,
                                           m=2 if spec.truncated else 1)
        err = counter_error_bound(count.sigma, levels=count.levels, n=1,
                                  steps=max(spec.outputs, 1), beta=beta)
    return HHParams(d, gamma, th, count, err)


def _distinct_items_bound(spec: LazyHHSpec) -> int:
    """Public bound ``N`` on the distinct items of an epoch (events: horizon / event_horizon)."""
    return spec.horizon if spec.clock is Clock.ARRIVAL else spec.event_horizon


def item_key_collision_delta(spec: LazyHHSpec) -> float:
    """``(N + 2c)^2 / 2^129``: the key-collision term of ``delta_tilde`` [D] (docs/PRIVACY.md 10.4).

    LazyHH identifies an item by its key: ints by a 64-bit bijection (never a
    collision); str/bytes by the 128-bit pair of two SipHash-2-4 words under
    two independent secret per-(shard, epoch) keys (the first word alone also
    picks the sketch cells). A published label is the item that first entered
    the candidate set since its identity was last evicted, and the eviction
    history depends on the differing events, so a collision of identities
    between ANY two items of ``X u X'`` could change a label. Conditioned on the
    128-bit identities being injective on the at most ``N + 2c`` distinct items
    of ``X u X'``, labels are a function of identities and Theorem 3 applies; the
    keys are independent of all other randomness, so ``P[some collision] <=
    (N + 2c)^2 / 2^129`` (birthday bound, PRF) adds to delta. The item kind is
    not part of the spec, so the term is always included (slack for int items).
    A collision of first words only is a sketch-row collision (Lemma 6's hash
    analysis), not a label change: such items are distinct candidates.

    Examples
    --------
    >>> spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3, event_horizon=10**8)
    >>> item_key_collision_delta(spec) == (10**8 + 2) ** 2 / 2**129
    True
    """
    n = _distinct_items_bound(spec) + 2 * spec.unit_cap
    return min(1.0, float(n) * float(n) / 2.0**129)


SAMPLER_TV_PER_DRAW = 2.0**-104


def sampler_tv_per_draw(params: HHParams, sketch_sigma: float | None = None, *,
                        lattice: bool = False) -> float:
    """Per-draw TV of the discrete-Gaussian sampler: the larger of the sketch's and the
    length counter's :func:`~sketches.core.noise_compose.discrete_gaussian_tv`
    (``2^-104`` for one table; ``< 2^-102.99`` for a sigma above about ``1.56e5``,
    two composed tables); with ``lattice`` (``counter: blt_int``) the sketch's is
    :func:`~sketches.counters.lattice.lattice_sampler_tv` (composed from ``COMPOSE32_MIN``).
    An unknown sigma counts as one table."""
    from sketches.counters.lattice import lattice_sampler_tv

    tvs = [SAMPLER_TV_PER_DRAW]
    if sketch_sigma is not None and sketch_sigma > 0:
        tvs.append((lattice_sampler_tv if lattice else discrete_gaussian_tv)(sketch_sigma))
    if params.count is not None and params.count.sigma > 0:
        tvs.append(discrete_gaussian_tv(params.count.sigma))
    return max(tvs)


def sampler_delta(spec: LazyHHSpec, params: HHParams, sketch_sigma: float | None = None) -> float:
    """``(1 + e^eps) D t``: the discrete-Gaussian sampler's share of delta.

    Each draw is within total variation ``t`` of the exact ``N_Z(0, sigma^2)``
    (docs/PRIVACY.md 9; ``t = 2^-104`` for sigma up to about ``1.56e5``,
    :func:`sampler_tv_per_draw`), so the epoch's ``D`` draws are within ``D t`` of the
    ideal mechanism; a mechanism within TV ``t`` of an ``(eps, delta)``-DP one is
    ``(eps, delta + (1 + e^eps) t)``-DP. ``D <= d k~ 2H + 2H`` with ``H = horizon``
    rounds (every tree node of every counter, sketch and length counter). With
    ``counter: blt_int`` the sketch's ``t`` is the lattice sampler's at ``sigma_L``
    (:func:`~sketches.counters.lattice.lattice_sampler_tv`; two composed tables from
    ``COMPOSE32_MIN``); ``sketch_sigma=None`` takes ``sigma_L`` from the spec's calibration.

    Examples
    --------
    >>> spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3, event_horizon=99)
    >>> 0 < sampler_delta(spec, derive_params(spec, None, None)) < 1e-25
    True
    """
    if spec.calibrator is not Calibrator.DISCRETE:
        return 0.0
    # a float factorized sketch counter draws no table samples (its caveat: docs/PRIVACY.md
    # "Factorized counters"); blt_int draws one per cell and round; the length counter is a
    # tree
    if spec.counter is CounterKind.TREE:
        sketch_draws = params.depth * spec.k_tilde * 2 * spec.horizon
    elif spec.counter is CounterKind.BLT_INT:
        sketch_draws = params.depth * spec.k_tilde * spec.sketch_rounds()
    else:
        sketch_draws = 0
    draws = sketch_draws + 2 * spec.horizon
    if sketch_sigma is None and spec.counter is CounterKind.BLT_INT:
        # the lattice's per-draw TV depends on sigma_L (two composed tables from
        # COMPOSE32_MIN: 2 * 2^-104 + the smoothing term): never assume one table
        sketch_sigma = spec.sketch_calibration(params.depth).sigma
    return (1.0 + math.exp(spec.eps)) * draws * sampler_tv_per_draw(
        params, sketch_sigma, lattice=spec.counter is CounterKind.BLT_INT)


def guarantee(spec: LazyHHSpec, params: HHParams, sketch_sigma: float,
              lattice_scale: int | None = None) -> dict[str, Any]:
    """The ``(eps, delta_tilde)`` guarantee of a LazyHH epoch and its budget split.

    Examples
    --------
    >>> spec = LazyHHSpec(k=1, k_tilde=4, horizon=64, eps=0.5, delta=1e-3,
    ...                   relation="replace", clock="arrival")
    >>> g = guarantee(spec, derive_params(spec, None, None), sketch_sigma=1.0)
    >>> round(g["delta_tilde"], 7), g["budget"]["length"]
    (0.0062994, None)
    """
    (eps_s, delta_s), (eps_l, delta_l) = spec.sketch_budget, spec.count_budget
    beta, dt_sketch = spec.beta_value, delta_tilde(eps_s, delta_s)
    count = params.count
    collide = item_key_collision_delta(spec)
    sampler = sampler_delta(spec, params, sketch_sigma)
    tv = sampler_tv_per_draw(params, sketch_sigma, lattice=spec.counter is CounterKind.BLT_INT) \
        if spec.calibrator is Calibrator.DISCRETE else SAMPLER_TV_PER_DRAW
    total = dt_sketch if count is None else dt_sketch + math.exp(eps_s) * delta_l + beta
    total += collide + sampler
    return {
        "eps": eps_s + eps_l, "delta": total, "delta_tilde": total, "delta_parameter": spec.delta,
        "relation": spec.relation.value, "unit_cap": spec.unit_cap,
        "event_bound": {
            "event_horizon": spec.event_horizon, "covered": spec.truncated,
            "statement": "events past event_horizon in a (shard, epoch) are dropped; the "
                         "calibration covers one unit's events added plus as many pushed out "
                         "(sketch m = 2d, length counter x sqrt 2), so this guarantee holds in "
                         "every release, whether or not the bound is reached (docs/PRIVACY.md "
                         "10.5)"} if spec.truncated else None,
        "budget": {
            "sketch": {"eps": eps_s, "delta": delta_s, "delta_tilde": dt_sketch, "beta": beta,
                       "calibrator": spec.calibrator.value, "sigma": sketch_sigma,
                       **({} if spec.counter is CounterKind.TREE else {
                           "counter": spec.counter.value, "lattice_scale": lattice_scale,
                           "noise": "exact discrete Gaussian on the lattice (scale s); sigma "
                                    "is sigma_L, in lattice units; certified (docs/PRIVACY.md"
                                    " 13.1, Lattice BLT)"}
                          if spec.counter is CounterKind.BLT_INT else {
                           "counter": spec.counter.value,
                           "noise_caveat": "Gaussian z from a float64 sampler, rounded "
                                           "integer noise (docs/PRIVACY.md Factorized "
                                           "counters)"})},
            "length": None if count is None else {
                "eps": eps_l, "delta": delta_l, "beta": beta, "sigma": count.sigma,
                "error_bound": params.count_error},
            "sampler": {
                "delta": sampler, "tv_per_draw": tv,
                # one table: the figure 2^-104 (the frozen wording); composed: t as stated
                "statement": "table sampler's total-variation distance to the exact discrete "
                             "Gaussian, (1 + e^eps) x draws x "
                             + ("2^-104 (docs/PRIVACY.md 9)" if tv == SAMPLER_TV_PER_DRAW else
                                "tv_per_draw (2 x 2^-104 + the smoothing term: two composed "
                                "tables, docs/PRIVACY.md 9.1)")
                             + "; 0 for the float calibrators (their guarantee is for ideal "
                               "noise)"},
            "item_key_collisions": {
                "delta": collide, "distinct_items_bound": _distinct_items_bound(spec),
                "statement": "P[any two of the <= N + 2c distinct str/bytes items of X and "
                             "X' share a 128-bit identity] <= (N + 2c)^2 2^-129 (two SipHash-2-4 "
                             "words under independent secret keys per shard and epoch; int "
                             "items are keyed one-to-one; docs/PRIVACY.md 10.4)"},
        },
        "reference": "paper 002 Theorem 3; stream length per SEMANTICS.md §6 [D]",
    }
