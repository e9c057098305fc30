"""The continual-counter family behind one interface: calibrate and build by kind.

``kind`` is :class:`~sketches.counters.factorization.CounterKind` (``tree``,
``blt``, ``sqrt``, ``blt_int``: :mod:`sketches.counters.lattice`).
:func:`calibrate_counter` gives the
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

from sketches.core.noise_compose import validate_discrete_sigma
from sketches.counters.factorization import (
    CounterKind,
    check_columns_nonnegative,
    factorization,
)
from sketches.counters.factorized import FactorizedCounters
from sketches.counters.gauss_bm import ContinualCounters, GaussianNoise
from sketches.counters.lattice import (
    LatticeCounters,
    LatticeParams,
    calibrate_lattice,
)
from sketches.errors import SpecError
from sketches.privacy import Calibration, Calibrator, calibrate

__all__ = ["DEFAULT_LATTICE_MAX_DRAWS", "DEFAULT_TO_LATTICE", "DEFAULT_TO_LATTICE_HH",
           "MEMORY_TOLERANCE",
           "calibrate_counter", "counter_memory_bytes", "lattice_wins", "make_counters"]

#: ``blt_int`` becomes the default counter of a new spec only when its state is at most this
#: many times the tree's ("acceptable memory", issue 20) and its error bound is lower.
MEMORY_TOLERANCE = 1.5

#: Whether LazyCMS/LazyCS specs built from topology parameters without ``counter`` get
#: ``blt_int`` where :func:`lattice_wins`. On (issue 20c): the lattice counter draws one exact
#: discrete Gaussian per cell and round, so its cost is per round, not per event; with
#: rounds aligned to the release interval (``round_ticks``, which the worker sets) a sparse
#: sketch (d=4, w=1024, 1M events over 3,600 one-second ticks, a release every 60) runs
#: within 1.5x of the tree's CPU (results/counters.md). With a round every tick it is 5.9x
#: there (about 0.1 ms of draws per round at w=1024: 0.01% of a core at one-second ticks).
DEFAULT_TO_LATTICE = True
#: ... but only when an epoch's draws, ``depth x width x rounds``, stay within this: a shard
#: state created (or first fed) late in its epoch draws every earlier round's noise of every
#: cell at once (there is no exact jump over empty lattice rounds, docs/PRIVACY.md 13.1), at
#: 35-60M draws/s here, so the cap bounds that catch-up at about 0.1 s a shard. An hourly
#: epoch released every minute (60 aligned rounds) at d=4, w=1024 is 245,760 draws; the same
#: sketch with a round every tick (14.7M draws, 5.9x the tree's CPU) keeps the tree.
DEFAULT_LATTICE_MAX_DRAWS = 1 << 22
#: The same for LazyHH's sketch cells. On (issue 20b): at the issue's production setting
#: ``blt_int`` runs within 1.31x of the tree's CPU (1.16-1.20x at the netmon setting), with a
#: third of its noise (gamma 1718 against 5487) and 0.76x its state.
DEFAULT_TO_LATTICE_HH = True
#: Epochs longer than this many rounds keep the tree by default: the lattice's exact
#: calibration costs ``O(rounds k)`` 40-digit decimal operations (about 20 s at 10M rounds
#: on this machine, paid at every start-up and ``validate``), while an explicit ``counter:
#: blt_int`` still gets it. 1M rounds is 11.6 days of one-second ticks.
DEFAULT_LATTICE_MAX_ROUNDS = 1_000_000


def calibrate_counter(kind: str | CounterKind, eps: float, delta: float, *, m: int,
                      rounds: int, calibrator: Calibrator, unit_cap: int = 1,
                      cells: int | None = None,
                      max_count: int | None = None) -> Calibration:
    """:func:`sketches.privacy.calibrate` for counters of ``kind`` (module docstring).

    ``blt_int`` also uses ``cells`` (counters in the release: bounds the counters one
    unit changes) and ``max_count`` (public bound on ``sum_t |x_t|`` per counter, which
    the caller's data path enforces; ``None``: ``LATTICE_MAX_COUNT``, enforced by the
    counter's per-round clamp at ``LATTICE_MAX_COUNT // rounds``, docs/PRIVACY.md 13.1);
    it needs the ``discrete`` calibrator.
    """
    k = CounterKind(kind)
    if k is CounterKind.BLT_INT:
        if Calibrator(calibrator) is not Calibrator.DISCRETE:
            raise SpecError("counter: 'blt_int' is the exact discrete Gaussian on a lattice;"
                            " it needs calibrator 'discrete', got"
                            f" {Calibrator(calibrator).value!r}")
        lat = calibrate_lattice(rounds, eps=eps, delta=delta, m=m, unit_cap=unit_cap,
                                cells=cells, max_count=max_count)
        validate_discrete_sigma(lat.sigma)
        p = lat.params
        return Calibration(sigma=lat.sigma, calibrator=Calibrator.DISCRETE, eps=float(eps),
                           delta=float(delta), m=m, levels=int(rounds).bit_length(),
                           unit_cap=unit_cap, integer_noise=True, counter=k.value,
                           column_norm_sq=p.column_norm_sq, row_norm_sq=p.row_norm_sq,
                           lattice=p, lattice_sensitivity=lat.sensitivity)
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
    if k is CounterKind.BLT_INT:
        if not isinstance(cal.lattice, LatticeParams):
            raise SpecError("calibration: counter blt_int needs a lattice calibration"
                            " (calibrate_counter('blt_int', ...))")
        return LatticeCounters(n, rounds, cal.lattice, cal.sigma, noise)
    return FactorizedCounters(n, rounds, cal.sigma, cal.integer_noise, noise, kind=k.value)


def counter_memory_bytes(kind: str | CounterKind, n: int, rounds: int) -> int:
    """Bytes of counter state for ``n`` counters over ``rounds`` (prefix included):
    tree ``(levels + 2) * 8`` per counter (prefix, nodes, query cache), BLT ``(k + 3) * 8``,
    lattice BLT ``(2k + 4) * 8``, square root ``(rounds + 3) * 8`` at the epoch's end."""
    k = CounterKind(kind)
    f = factorization(k, rounds)
    if k is CounterKind.TREE:
        return 8 * n * (f.values_per_counter() + 2)
    return 8 * n * (f.values_per_counter() + 1)


def lattice_wins(tree_error: float, lattice_error: float, tree_bytes: int,
                 lattice_bytes: int) -> bool:
    """The default-counter rule of a new spec (issue 20): ``blt_int`` when its stated error
    bound is below the tree's at the same ``(eps, delta)`` and its state is at most
    :data:`MEMORY_TOLERANCE` times the tree's.

    >>> lattice_wins(600.0, 200.0, 1000, 900), lattice_wins(600.0, 200.0, 1000, 1600)
    (True, False)
    """
    return lattice_error < tree_error and lattice_bytes <= MEMORY_TOLERANCE * tree_bytes
