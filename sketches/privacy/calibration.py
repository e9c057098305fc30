"""Privacy semantics and noise calibration of GaussBM-based sketches (re-exported by privacy).

Paper references are to ``002`` (Holland, "Scalable DP Sketches under Continual
Observation") unless stated otherwise. ``log`` is base 2 (tree heights), ``ln``
is natural.

Sensitivity of the whole binary-tree release (Theorem 1, generalised)
--------------------------------------------------------------------
A sketch is ``n`` GaussBM counters; each counter's tree has ``h = levels =
ceil(log2(rounds + 1))`` levels (Alg. 1 line 4). The mechanism releases every
node of every tree plus independent noise, so its L2 sensitivity is over the
vector of all node counts. Let one privacy unit (an event, or a user with at
most ``c = unit_cap`` events per shard and epoch) change the inputs.

*Per tree level.* The nodes of one level partition time, so a level's node
changes ``Δ_node`` satisfy ``sum |Δ_node| <= sum over rounds of |that round's
change of the counter|`` (the per-round changes, not their possibly cancelling
total).

*Add/remove, CMS (unsigned).* The unit adds (or removes) ``c`` events; in row
``i`` they add ``a_j >= 0`` to cell ``j`` with ``sum_j a_j = c``. Per (row,
level): ``sum_nodes Δ^2 <= sum_j a_j^2 <= (sum_j a_j)^2 = c^2``. Over ``d`` rows
and ``h`` levels: ``Δ_2^2 <= d h c^2``. Equality when all ``c`` events hit the
same cells in the same round, so the bound is tight. ``m = d``.

*Replace, CMS.* Removed events give ``b_j >= 0`` (``sum = c``), added ones
``a_j >= 0``; since ``(a-b)^2 <= a^2 + b^2`` for ``a, b >= 0``, per (row, level)
``<= 2 c^2``: ``Δ_2^2 <= 2 d h c^2``, ``m = 2d`` (paper Theorem 2).

*Signed sketches (Count Sketch) under replace.* With signs, ``a_j, b_j`` may
have either sign. ``sum (a_j - b_j)^2`` under ``sum|a| <= c, sum|b| <= c`` is
convex, so it is maximised at ``a = ±c e_j, b = ∓c e_j``: ``(2c)^2 = 4 c^2``
(one event replaced by another with the same bucket and the opposite sign:
the cell moves by 2). So ``m = 4d`` for signed sketches under replace. **The
paper's Theorem 2 (|A| <= 2d cells changing by 1) misses this case for
LazyCS**; its ``m = 2d`` under-calibrates LazyCS by a factor ``sqrt 2`` in
sigma. Under add/remove signs do not matter (``m = d``).

In every case ``Δ_2 = c * sqrt(m * h)`` with ``m = neighbouring_cells(...)``.

Calibrators (:func:`calibrate`)
-------------------------------
- ``paper``: Alg. 1 line 5, ``sigma = c * sqrt(2 h m ln(1.25/δ)) / ε`` (Lemma 1,
  Dwork & Roth 2014 Thm A.1). Only valid for ``ε < 1``: refused otherwise.
- ``analytic``: Balle & Wang 2018 (ICML), Theorem 8: the smallest ``σ`` with
  ``Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ``, exact for any ``ε > 0``.
- ``discrete``: integer noise ``N_Z(0, σ^2)``, which is ``ρ = Δ^2/(2σ^2)``-zCDP
  (Canonne, Kamath & Steinke 2020, Sec. 3), converted to ``(ε, δ)`` with their
  tight bound (CKS20 Sec. 2.3, Corollary 13).

Both are computed for the ``Δ`` above by :mod:`sketches.privacy.gaussian_mechanism`
(the Gaussian mechanism's accounting on its own, formulas and proofs cited there).

Examples
--------
>>> cal = calibrate(1.0, 1e-6, m=8, rounds=1024, calibrator=Calibrator.DISCRETE)
>>> cal.levels, cal.integer_noise
(11, True)
>>> round(cal.sensitivity, 3)
9.381
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sketches.core.noise_compose import validate_discrete_sigma
from sketches.errors import PrivacyError, SpecError
from sketches.privacy.bounds import counter_error_bound
from sketches.privacy.gaussian_mechanism import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    check_eps_delta,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    zcdp_delta,
)

# The Gaussian mechanism's accounting (classic, analytic, discrete via zCDP) lives
# in sketches.privacy.gaussian_mechanism; its public names are re-exported here.
__all__ = [
    "Calibration",
    "Calibrator",
    "Clock",
    "Relation",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "calibrate",
    "check_clock",
    "classic_gaussian_sigma",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "l2_sensitivity",
    "neighbouring_cells",
    "paper_sigma",
    "tree_levels",
    "zcdp_delta",
]


class Relation(StrEnum):
    """Neighbouring relation (SEMANTICS.md §1). ``replace`` is the paper's model."""

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"


class Clock(StrEnum):
    """Sketch clock (SEMANTICS.md §2): one step per arrival, or fixed processing-time ticks."""

    ARRIVAL = "arrival"
    TICK = "tick"


class Calibrator(StrEnum):
    """How sigma is derived from (eps, delta) and the sensitivity."""

    PAPER = "paper"
    ANALYTIC = "analytic"
    DISCRETE = "discrete"


def _check_positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name}: must be an integer >= 1, got {value!r}")
    return value


def check_clock(relation: Relation, clock: Clock) -> None:
    """Refuse the arrival clock unless the relation is ``replace`` (SEMANTICS.md §2).

    Under add/remove the number of arrivals is private, so a schedule advancing
    per arrival leaks it; the tick clock is data-independent.

    Examples
    --------
    >>> check_clock(Relation.REPLACE, Clock.ARRIVAL)
    >>> try:
    ...     check_clock(Relation.ADD_REMOVE, Clock.ARRIVAL)
    ... except PrivacyError as err:
    ...     print("clock='tick'" in str(err))
    True
    """
    if Clock(clock) is Clock.ARRIVAL and Relation(relation) is not Relation.REPLACE:
        raise PrivacyError(
            "clock: the arrival clock is only private when the stream length is public "
            f"(relation='replace'), got relation={Relation(relation).value!r}; use "
            "clock='tick' (fixed processing-time ticks), or relation='replace' to "
            "reproduce the paper"
        )


def neighbouring_cells(relation: Relation, depth: int, *, signed: bool = False) -> int:
    """``m``: squared-L2 change of one tree level per unit of contribution (Theorem 2).

    ``2d`` for replace, ``d`` for add/remove (paper Theorem 2 proof: ``|A| <= 2d``
    cells change by 1). ``signed=True`` (Count Sketch) under replace gives ``4d``:
    one cell can move by 2 when two items share a bucket with opposite signs (see
    module docstring; an erratum to Theorem 2 for LazyCS).

    Examples
    --------
    >>> neighbouring_cells(Relation.REPLACE, 4), neighbouring_cells(Relation.ADD_REMOVE, 4)
    (8, 4)
    >>> neighbouring_cells(Relation.REPLACE, 4, signed=True)
    16
    """
    d = _check_positive_int("depth", depth)
    if Relation(relation) is Relation.ADD_REMOVE:
        return d
    return 4 * d if signed else 2 * d


def tree_levels(rounds: int) -> int:
    """Nodes per prefix sum and tree height ``h = ceil(log2(rounds + 1))`` (Alg. 1 line 4).

    Examples
    --------
    >>> [tree_levels(r) for r in (1, 2, 3, 4, 1023, 1024)]
    [1, 2, 2, 3, 10, 11]
    """
    return _check_positive_int("rounds", rounds).bit_length()


def l2_sensitivity(m: int, levels: int, unit_cap: int = 1) -> float:
    """``Δ_2 = c * sqrt(m * h)`` of the full tree release (module docstring derivation).

    Examples
    --------
    >>> l2_sensitivity(2, 8, unit_cap=3)
    12.0
    """
    _check_positive_int("m", m)
    _check_positive_int("levels", levels)
    _check_positive_int("unit_cap", unit_cap)
    return unit_cap * math.sqrt(m * levels)


def paper_sigma(eps: float, delta: float, *, m: int, levels: int, unit_cap: int = 1) -> float:
    """Alg. 1 line 5 exactly: ``sigma = c * sqrt(2 h m ln(1.25/δ)) / ε``.

    Classic Gaussian mechanism (Lemma 1), proven only for ``ε < 1``; this raw
    formula does not check ``ε`` (reproduction only; :func:`calibrate` refuses).

    Examples
    --------
    >>> round(paper_sigma(0.5, 1e-3, m=8, levels=10), 4)
    67.5557
    """
    check_eps_delta(eps, delta)
    return unit_cap * math.sqrt(2 * levels * m * math.log(1.25 / delta)) / eps


@dataclass(frozen=True)
class Calibration:
    """The noise scale of a GaussBM tree release and everything it was derived from.

    ``sigma`` is the per-node standard deviation (of ``N(0, σ²)`` or of the
    discrete ``N_Z(0, σ²)`` when ``integer_noise``). ``sensitivity`` and
    ``rho`` are derived: ``Δ_2 = unit_cap sqrt(m levels)``, ``ρ = Δ²/(2σ²)``.
    """

    sigma: float
    calibrator: Calibrator
    eps: float
    delta: float
    m: int
    levels: int
    unit_cap: int
    integer_noise: bool
    #: ``tree`` (binary mechanism) or a factorized counter (``blt``, ``sqrt``)
    counter: str = "tree"
    #: factorized counters: ``max_col(C)^2`` (sensitivity) and ``max_row(B)^2``
    #: (error); None for the tree (both are ``levels``)
    column_norm_sq: float | None = None
    row_norm_sq: float | None = None
    #: lattice BLT (``counter: blt_int``): its public parameters
    #: (:class:`sketches.counters.lattice.LatticeParams`: scale ``s``, ``eta``, bias terms)
    #: and the sensitivity of ``f`` on the lattice; ``sigma`` is then ``sigma_L``
    lattice: Any = None
    lattice_sensitivity: float | None = None

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity ``Δ_2`` of the full release (tree: ``c sqrt(m h)``; a factorized
        counter: ``c sqrt(m max_col(C)^2)``, docs/PRIVACY.md "Factorized counters" [D];
        lattice BLT: ``s c sqrt(m max_col(C)^2) + (1 + 2 eta) sqrt(rounds changed)``, 13)."""
        if self.lattice_sensitivity is not None:
            return self.lattice_sensitivity
        if self.column_norm_sq is not None:
            return self.unit_cap * math.sqrt(self.m * self.column_norm_sq)
        return l2_sensitivity(self.m, self.levels, self.unit_cap)

    @property
    def release_sigma(self) -> float:
        """Noise standard deviation per unit of ``sqrt(noise_levels)`` in count units
        (``sigma``; lattice BLT: ``sigma_L / s``)."""
        return self.sigma if self.lattice is None else self.sigma / self.lattice.scale

    @property
    def noise_levels(self) -> float:
        """Variance of the worst released prefix noise in units of ``σ²``
        (tree: ``levels``; factorized: ``max_row(B)^2``)."""
        return float(self.levels) if self.row_norm_sq is None else float(self.row_norm_sq)

    @property
    def rho(self) -> float:
        """zCDP parameter ``Δ²/(2σ²)`` (valid for both continuous and discrete noise)."""
        return self.sensitivity**2 / (2.0 * self.sigma**2)

    def error_bound(self, *, n: int, steps: int, beta: float) -> float:
        """``σ sqrt(2 h ln(2 steps n / β))``: max noise error of ``n`` counters at ``steps``
        query times with probability ``>= 1 - β`` (Lemma 4's proof with this ``σ``;
        :func:`sketches.privacy.bounds.counter_error_bound`).

        Examples
        --------
        >>> cal = calibrate(1.0, 1e-6, m=1, rounds=7, calibrator=Calibrator.ANALYTIC)
        >>> cal.error_bound(n=1, steps=7, beta=0.05) > 3 * cal.sigma
        True

        A factorized counter: ``σ sqrt(2 max_row(B)^2 ln(2 steps n / β))``, plus
        ``1/2`` when its noise is rounded to integers.
        """
        if self.row_norm_sq is None:
            return counter_error_bound(self.sigma, levels=self.levels, n=n, steps=steps,
                                       beta=beta)
        if self.lattice is not None:  # (sigma_L / s) ... + bias + float error + rounding
            lat = self.lattice
            return counter_error_bound(self.sigma / lat.scale, levels=1, n=n, steps=steps,
                                       beta=beta) * math.sqrt(self.row_norm_sq) \
                + lat.bias() + lat.zeta + 0.5
        return counter_error_bound(self.sigma, levels=1, n=n, steps=steps, beta=beta) \
            * math.sqrt(self.row_norm_sq) + (0.5 if self.integer_noise else 0.0)


def calibrate(
    eps: float,
    delta: float,
    *,
    m: int,
    rounds: int,
    calibrator: Calibrator,
    unit_cap: int = 1,
    counter: str = "tree",
    column_norm_sq: float | None = None,
    row_norm_sq: float | None = None,
) -> Calibration:
    """Per-node sigma making ``n`` GaussBM counters ``(ε, δ)``-DP on ``m``-neighbouring inputs.

    Parameters
    ----------
    eps, delta:
        Target guarantee of the whole release (all nodes, all rounds, one epoch).
    m:
        :func:`neighbouring_cells` (``2d`` replace, ``d`` add/remove, ``4d`` signed replace).
    rounds:
        Updates each counter receives in the epoch (``T/w`` arrival clock; column
        pushes per epoch on the tick clock). ``levels = tree_levels(rounds)``.
    calibrator:
        ``paper`` (Alg. 1, ``ε < 1`` only), ``analytic`` (Balle & Wang 2018) or
        ``discrete`` (CKS20 zCDP; integer noise).
    unit_cap:
        Exact per-unit contribution cap ``c`` per (shard, epoch); ``Δ_2 = c sqrt(m h)``.
    counter, column_norm_sq, row_norm_sq:
        A factorized counter (``sketches.counters.factorization``): its name and
        norms; ``Δ_2 = c sqrt(m column_norm_sq)``. ``discrete`` then means
        zCDP accounting (CKS20 conversion) of the Gaussian noise ``z`` with
        integer-rounded releases; ``paper`` is refused (it reproduces the tree).

    Raises
    ------
    SpecError
        ``calibrator='discrete'`` and the sigma is outside the range the exact
        integer sampler supports (:func:`sketches.core.noise_compose.validate_discrete_sigma`):
        raised here, at start-up, never at the first noise draw.
    PrivacyError
        ``calibrator='paper'`` with ``eps >= 1``.

    Examples
    --------
    >>> a = calibrate(0.5, 1e-3, m=8, rounds=1023, calibrator=Calibrator.PAPER)
    >>> round(a.sigma, 4), a.integer_noise
    (67.5557, False)
    >>> b = calibrate(0.5, 1e-3, m=8, rounds=1023, calibrator=Calibrator.ANALYTIC)
    >>> b.sigma < a.sigma
    True
    """
    check_eps_delta(eps, delta)
    _check_positive_int("m", m)
    _check_positive_int("unit_cap", unit_cap)
    levels = tree_levels(rounds)
    cal = Calibrator(calibrator)
    if column_norm_sq is not None or counter != "tree":
        if column_norm_sq is None or row_norm_sq is None or not (
                math.isfinite(column_norm_sq) and column_norm_sq >= 1.0
                and math.isfinite(row_norm_sq) and row_norm_sq >= 1.0):
            raise SpecError(f"counter: {counter!r} needs finite column_norm_sq and row_norm_sq"
                            f" >= 1, got {column_norm_sq!r}, {row_norm_sq!r}")
        if cal is Calibrator.PAPER:
            raise SpecError(f"calibrator: 'paper' reproduces the tree counter of paper 002;"
                            f" counter={counter!r} needs 'discrete' or 'analytic'")
        sens = unit_cap * math.sqrt(m * column_norm_sq)
        sigma = analytic_gaussian_sigma(eps, delta, sens) if cal is Calibrator.ANALYTIC \
            else discrete_gaussian_sigma(eps, delta, sens)
        return Calibration(sigma=sigma, calibrator=cal, eps=float(eps), delta=float(delta),
                           m=m, levels=levels, unit_cap=unit_cap,
                           integer_noise=cal is Calibrator.DISCRETE, counter=str(counter),
                           column_norm_sq=float(column_norm_sq),
                           row_norm_sq=float(row_norm_sq))
    sens = l2_sensitivity(m, levels, unit_cap)
    if cal is Calibrator.PAPER:
        if eps >= 1:
            raise PrivacyError(
                f"calibrator: 'paper' (classic Gaussian bound) is only valid for eps < 1, "
                f"got eps={eps}; use calibrator='analytic' or 'discrete'"
            )
        sigma = paper_sigma(eps, delta, m=m, levels=levels, unit_cap=unit_cap)
    elif cal is Calibrator.ANALYTIC:
        sigma = analytic_gaussian_sigma(eps, delta, sens)
    else:
        sigma = discrete_gaussian_sigma(eps, delta, sens)
        validate_discrete_sigma(sigma)  # unsupported sigma: SpecError now, not at a draw
    return Calibration(
        sigma=sigma,
        calibrator=cal,
        eps=float(eps),
        delta=float(delta),
        m=m,
        levels=levels,
        unit_cap=unit_cap,
        integer_noise=cal is Calibrator.DISCRETE,
    )
