"""The continual-counter family behind one interface: calibrate and build by kind.

``kind`` is :class:`~sketches.counters.factorization.CounterKind` (``tree``,
``blt``, ``sqrt``). :func:`calibrate_counter` gives the
:class:`~sketches.privacy.Calibration` of ``n`` counters of that kind
(sensitivity from the factorization's column norm, error from its row norm);
:func:`make_counters` builds them. Both kinds share the interface the
sketches use: ``push(total, new_rounds)``, ``advance(increments)``,
``add_to_current``, ``query(behind=None)``, ``advance_empty(ends)``,
``rounds``, ``memory_bytes()``, ``state_header()``/``state_arrays()``/``restore``.

Examples
--------
>>> from sketches.privacy import Calibrator
>>> tree = calibrate_counter("tree", 1.0, 1e-6, m=4, rounds=3600,
...                          calibrator=Calibrator.DISCRETE)
>>> blt = calibrate_counter("blt", 1.0, 1e-6, m=4, rounds=3600,
...                         calibrator=Calibrator.DISCRETE)
>>> round(tree.rho / blt.rho, 6)   # equal privacy: same zCDP rho, same (eps, delta)
1.0
>>> bool(blt.error_bound(n=4096, steps=3600, beta=0.05)
...      < tree.error_bound(n=4096, steps=3600, beta=0.05) / 3)
True
"""

from __future__ import annotations

from typing import Any

from sketches.counters.factorization import (
    CounterKind,
    check_columns_nonnegative,
    factorization,
)
from sketches.counters.factorized import FactorizedCounters
from sketches.counters.gauss_bm import ContinualCounters, GaussianNoise
from sketches.privacy import Calibration, Calibrator, calibrate

__all__ = ["calibrate_counter", "counter_memory_bytes", "make_counters"]


def calibrate_counter(kind: str | CounterKind, eps: float, delta: float, *, m: int,
                      rounds: int, calibrator: Calibrator, unit_cap: int = 1) -> Calibration:
    """:func:`sketches.privacy.calibrate` for counters of ``kind`` (module docstring)."""
    k = CounterKind(kind)
    if k is CounterKind.TREE:
        return calibrate(eps, delta, m=m, rounds=rounds, calibrator=calibrator,
                         unit_cap=unit_cap)
    f = factorization(k, rounds)
    check_columns_nonnegative(f)  # the sensitivity bound of every relation relies on it
    return calibrate(eps, delta, m=m, rounds=rounds, calibrator=calibrator, unit_cap=unit_cap,
                     counter=k.value, column_norm_sq=f.column_norm_sq(),
                     row_norm_sq=f.row_norm_sq())


def make_counters(kind: str | CounterKind, n: int, rounds: int, cal: Calibration,
                  noise: GaussianNoise) -> Any:
    """``n`` counters of ``kind`` over ``rounds`` rounds with ``cal``'s noise."""
    k = CounterKind(kind)
    if k is CounterKind.TREE:
        return ContinualCounters(n, rounds, cal.sigma, cal.integer_noise, noise)
    return FactorizedCounters(n, rounds, cal.sigma, cal.integer_noise, noise, kind=k.value)


def counter_memory_bytes(kind: str | CounterKind, n: int, rounds: int) -> int:
    """Bytes of counter state for ``n`` counters over ``rounds`` (prefix included):
    tree ``(levels + 2) * 8`` per counter (prefix, nodes, query cache), BLT ``(k + 3) * 8``,
    square root ``(rounds + 3) * 8`` at the epoch's end."""
    k = CounterKind(kind)
    f = factorization(k, rounds)
    if k is CounterKind.TREE:
        return 8 * n * (f.values_per_counter() + 2)
    return 8 * n * (f.values_per_counter() + 1)
