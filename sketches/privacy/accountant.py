"""Budget accounting (the package :mod:`sketches.privacy` re-exports it with
:mod:`~sketches.privacy.calibration` and :mod:`~sketches.privacy.bounds`):

- the DP stream-length counter of LazyHH under add/remove (SEMANTICS.md §6) and the
  split of a total budget between sketch and counter (basic composition);
- :class:`BudgetAccountant`: the guarantee per event and per unit across epochs
  and shards (SEMANTICS.md §3, 4, 5).

Examples
--------
>>> acc = BudgetAccountant(eps=1.0, delta=1e-6, relation=Relation.ADD_REMOVE)
>>> acc.per_event().eps
1.0
>>> acc.per_unit(shards=2, epochs=3).eps
6.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sketches.errors import SpecError
from sketches.privacy.calibration import Calibration, Calibrator, Relation, calibrate, zcdp_delta

__all__ = ["BudgetAccountant", "BudgetSplit", "Guarantee", "length_counter_calibration",
           "split_budget", "zcdp_eps"]


def zcdp_eps(rho: float, delta: float) -> float:
    """Smallest ``ε`` with ``zcdp_delta(ρ, ε) <= δ`` (bisection; CKS20 Sec. 2.3).

    Starts from the standard bound ``ε = ρ + 2 sqrt(ρ ln(1/δ))`` (Bun & Steinke
    2016, Prop. 1.3), which always satisfies the target.

    Examples
    --------
    >>> e = zcdp_eps(0.025, 1e-6)
    >>> e < 0.025 + 2 * math.sqrt(0.025 * math.log(1e6))
    True
    """
    if rho <= 0:
        return 0.0
    lo, hi = 0.0, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if zcdp_delta(rho, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def length_counter_calibration(
    eps: float,
    delta: float,
    *,
    rounds: int,
    calibrator: Calibrator = Calibrator.DISCRETE,
    unit_cap: int = 1,
    m: int = 1,
) -> Calibration:
    """Calibration of the DP stream-length counter (one GaussBM counter, ``m = 1``).

    Under add/remove one event changes the per-tick count of exactly one counter
    by 1 (``c`` with a unit cap): Theorem 1 with ``m = 1``, ``Δ_2 = c sqrt(h)``.
    ``m = 2``: neighbours that also differ by up to ``c`` events pushed out by a
    truncation at a public event bound (two ticks change, ``Δ_2 = c sqrt(2h)``;
    LazyHH on the tick clock, docs/PRIVACY.md 10.5).
    Its noise error at ``|I|`` query times is :func:`counter_error_bound` with
    ``n = 1``.

    Examples
    --------
    >>> cal = length_counter_calibration(0.1, 1e-7, rounds=4096)
    >>> cal.m, cal.levels, cal.integer_noise
    (1, 13, True)
    """
    return calibrate(eps, delta, m=m, rounds=rounds, calibrator=calibrator, unit_cap=unit_cap)


@dataclass(frozen=True)
class BudgetSplit:
    """A total ``(ε, δ)`` split between a sketch and the length counter (basic composition).

    Basic (sequential) composition: the pair of releases is ``(ε_s + ε_l, δ_s +
    δ_l)``-DP (Dwork & Roth 2014, Thm. 3.16); valid for any two mechanisms.
    LazyHH uses this split (``sketches.continual.lazy_hh.spec.LazyHHSpec.sketch_budget``)
    but its total is not ``δ_s + δ_l``: it reports ``δ~(ε_s, δ_s) + e^{ε_s} δ_l +
    β`` (``lazy_hh_spec.guarantee``; derivation [D] in docs/PRIVACY.md §8).
    """

    eps: float
    delta: float
    sketch_eps: float
    sketch_delta: float
    length_eps: float
    length_delta: float
    composition: str = "basic"


def split_budget(eps: float, delta: float, *, length_fraction: float = 0.1) -> BudgetSplit:
    """Give ``length_fraction`` of ``ε`` and of ``δ`` to the length counter, the rest to the sketch.

    Examples
    --------
    >>> s = split_budget(1.0, 1e-6, length_fraction=0.2)
    >>> s.sketch_eps + s.length_eps == 1.0, s.length_delta
    (True, 2e-07)
    """
    if not (0 < length_fraction < 1):
        raise SpecError(f"length_fraction: must be in (0, 1), got {length_fraction!r}")
    le, ld = eps * length_fraction, delta * length_fraction
    return BudgetSplit(eps, delta, eps - le, delta - ld, le, ld)


@dataclass(frozen=True)
class Guarantee:
    """A stated DP guarantee: ``(eps, delta)`` for ``unit`` under ``relation``, with its reason."""

    eps: float
    delta: float
    unit: str
    relation: Relation
    statement: str


@dataclass(frozen=True)
class BudgetAccountant:
    """What a per-(shard, epoch) ``(ε, δ)`` means for an event and for a unit (SEMANTICS.md §3-5).

    Parameters
    ----------
    eps, delta:
        Guarantee of one sketch for one epoch of one shard (all its continual
        releases included). For LazyHH pass ``delta = δ~``.
    relation:
        Neighbouring relation the calibration assumed.
    unit:
        ``"event"`` (default) or the name of the unit field (user-level).
    unit_cap:
        Exact per-unit cap per (shard, epoch) the noise was calibrated to.
    rho:
        zCDP ``ρ`` of the per-(shard, epoch) mechanism when it is a Gaussian
        mechanism (``Calibration.rho``); enables the tighter zCDP composition.
    """

    eps: float
    delta: float
    relation: Relation
    unit: str = "event"
    unit_cap: int = 1
    rho: float | None = None

    def per_event(self) -> Guarantee:
        """Event level: each event is in one shard and one epoch -> parallel composition.

        Examples
        --------
        >>> BudgetAccountant(0.5, 1e-6, Relation.REPLACE).per_event().delta
        1e-06
        """
        return Guarantee(
            self.eps, self.delta, "event", self.relation,
            f"({self.eps:g}, {self.delta:g})-DP for every single event over the whole stream "
            f"({self.relation.value} neighbours): an event changes one shard's sketch in one "
            "epoch only, and every epoch/shard uses fresh noise (parallel composition).",
        )

    def per_unit(self, *, shards: int = 1, epochs: int = 1) -> Guarantee:
        """A unit contributing to ``shards`` shards in each of ``epochs`` epochs.

        The ``k = shards * epochs`` sketches it touches compose: basic composition
        gives ``(k ε, k δ)``; with ``rho`` set, zCDP gives ``k ρ``, converted at the
        same ``k δ``; the smaller ``ε`` is reported (both are valid).

        Examples
        --------
        >>> acc = BudgetAccountant(1.0, 1e-6, Relation.ADD_REMOVE, unit="user", rho=0.02)
        >>> g = acc.per_unit(shards=4, epochs=4)
        >>> g.eps < 16.0, g.delta
        (True, 1.6e-05)
        """
        if shards < 1 or epochs < 1:
            raise SpecError("shards, epochs: must be >= 1 (the unit's footprint)")
        k = shards * epochs
        eps, how = k * self.eps, "basic composition"
        if self.rho is not None:
            alt = zcdp_eps(k * self.rho, k * self.delta)
            if alt < eps:
                eps, how = alt, f"zCDP composition (rho = {k * self.rho:.4g})"
        unit = self.unit if self.unit != "event" else "event (no unit field)"
        cap = f", each capped at {self.unit_cap} contributions per shard and epoch"
        return Guarantee(
            eps, k * self.delta, unit, self.relation,
            f"({eps:.4g}, {k * self.delta:.3g})-DP for one {unit}{cap}, contributing to "
            f"{shards} shard(s) in each of {epochs} epoch(s): its {k} (shard, epoch) "
            f"sketches compose ({how}). A unit in one shard and one epoch gets "
            f"({self.eps:g}, {self.delta:g}).",
        )
