"""The discrete Gaussian sampler for every supported sigma: one table, or two composed.

Up to ``COMPOSE_THRESHOLD`` (the largest single table, ``MAX_TABLE_SIGMA`` about
``1.56e5``) ``N_Z(0, sigma^2)`` is one inverse-CDF table
(:mod:`sketches.core.noise_tables`), unchanged. Above it, up to
``MAX_DISCRETE_SIGMA = 1e8``, a sample is ``X = m Y + Z`` with ``Y ~ N_Z(0,
sigma_c^2)`` and ``Z ~ N_Z(0, sigma_f^2)`` drawn independently from two tables
and ``sigma^2 = m^2 sigma_c^2 + sigma_f^2`` *exactly* (Peikert 2010, "An
efficient and parallel Gaussian sampler for lattices", Theorem 3.1, with the
coarse lattice ``mZ`` and the fine lattice ``Z``; Micciancio & Walter, CRYPTO
2017, "Gaussian sampling over the integers: efficient, generic, constant-time").

Parameter rule (deterministic, public; :func:`composed_params`)
---------------------------------------------------------------
``sigma`` means the decimal ``S = repr(sigma)`` (as for a table), ``V = S^2``:

1. ``m = isqrt(floor(sigma) // 3)`` (about ``sqrt(sigma / 3)``; 228 at the
   threshold, 1825 at ``1e7``);
2. ``sigma_c = sqrt((V - 9 m^2) / m^2)`` rounded *down* to 6 decimals (a short
   decimal: its table is ``discrete_gaussian_table(sigma_c)``);
3. ``sigma_f^2 = V - m^2 sigma_c^2``, exact (Decimal, ``Inexact`` trapped), so
   ``sigma_f >= 3m``; its table is built from this exact variance.

Both table sigmas are about ``sqrt(3 sigma)`` (5,477 at ``1e7``, 17,320 at
``1e8``): far inside the table range, built in well under a second at ``1e7``
(cached, like every table).

Distance (proof: docs/PRIVACY.md §9, "Large σ: composed table sampler [D]")
---------------------------------------------------------------------------
With exact ``Y, Z``, completing the square gives ``P[X = x] = C rho_sigma(x)
theta(mu(x))`` with ``theta(mu) = sum_y exp(-(y - mu)^2 / (2 tau^2))``, ``tau^2
= sigma_c^2 sigma_f^2 / sigma^2``; by Poisson summation ``theta(mu) =
sqrt(2 pi) tau (1 + d(mu))`` with ``|d| <= e = 2 sum_{k>=1} exp(-2 pi^2 tau^2
k^2) <= 2 exp(-a) / (1 - exp(-3a))``, ``a = 2 pi^2 tau^2`` (``e`` is the
``epsilon`` at which Peikert's condition ``s_3 >= eta_eps(mZ)`` holds with
equality). Hence ``P / N_Z(0, sigma^2)`` lies in ``[(1-e)/(1+e), (1+e)/(1-e)]``
pointwise and ``TV <= e / (1 - e)`` (:func:`smoothing_tv`; tighter than the
``8 eps`` of the paper's statement as we recall it, not re-checked and not
used; the fine-lattice condition ``s_f >= eta_eps(Z)`` is not needed because
``mY`` is an integer, so the fine coset is always ``Z``). The
rule gives ``tau > 2.99``, ``e < 2**-250``. Each table draw adds its own
``2**-104`` (independent draws, and ``(y, z) -> m y + z`` does not increase
TV), so one composed sample is within ``2 * 2**-104 + 2**-250 < 2**-102.99`` of
``N_Z(0, sigma^2)``: :func:`discrete_gaussian_tv`.

Examples
--------
>>> p = composed_params(1e7)
>>> p.m, p.coarse_sigma
(1825, 5479.451233)
>>> discrete_gaussian_tv(1e7) < 2.0**-102.9 and discrete_gaussian_tv(100.0) == 2.0**-104
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, Inexact, localcontext
from functools import lru_cache

import numpy as np

from sketches.core.noise_tables import (
    MAX_TABLE_SIGMA,
    TABLE_TV_BOUND,
    IntegerTable,
    U64Source,
    check_noise_range,
    discrete_gaussian_table,
    discrete_gaussian_variance_table,
)
from sketches.errors import SpecError

__all__ = [
    "COMPOSE32_MIN",
    "COMPOSE_THRESHOLD",
    "FINE_RATIO",
    "MAX_DISCRETE_SIGMA",
    "ComposedParams",
    "ComposedSampler",
    "composed_params",
    "composed_sampler",
    "discrete_gaussian32_sampler",
    "discrete_gaussian32_support",
    "discrete_gaussian32_tv",
    "discrete_gaussian_sampler",
    "discrete_gaussian_tv",
    "smoothing_tv",
    "split_sigma",
    "validate_discrete_sigma",
]

#: Largest sigma sampled by one table; above it (strictly), two composed tables.
COMPOSE_THRESHOLD = MAX_TABLE_SIGMA
#: Largest supported discrete-Gaussian sigma (both composed tables about ``sqrt(3e8)``).
MAX_DISCRETE_SIGMA = 1e8
#: The fine table's sigma is at least ``FINE_RATIO * m`` (so ``tau > FINE_RATIO - 0.01``).
FINE_RATIO = 3
_QUANTUM = Decimal("1e-6")  # the coarse sigma is a 6-decimal number
_PREC = 100  # exact arithmetic of the rule (every value has < 60 digits; Inexact trapped)
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")
#: Upper bound on the smoothing term that the rule guarantees (checked per sigma).
SMOOTHING_TV_LIMIT = 2.0**-250


def smoothing_tv(m: int, coarse_variance: Decimal, fine_variance: Decimal) -> float:
    """``TV(m Y + Z, N_Z(0, m^2 vc + vf))`` bound for exact ``Y ~ N_Z(0, vc)``, ``Z ~ N_Z(0, vf)``.

    ``e / (1 - e)`` with ``e = 2 exp(-a) / (1 - exp(-3a))``, ``a = 2 pi^2 tau^2``,
    ``1 / tau^2 = m^2 / vf + 1 / vc`` (module docstring). Computed in 60-digit
    decimal and rounded up to a float. Meaningful (``< 1``) once ``tau`` is above
    about 0.35.

    Examples
    --------
    >>> smoothing_tv(10, Decimal(400), Decimal(900)) < 2.0**-240
    True
    >>> 0.01 < smoothing_tv(2, Decimal(4), Decimal(1)) < 0.03
    True
    """
    with localcontext() as ctx:
        ctx.prec = 60
        inv_tau2 = Decimal(m) ** 2 / fine_variance + 1 / coarse_variance
        a = 2 * _PI**2 / inv_tau2
        e = 2 * (-a).exp() / (1 - (-3 * a).exp())
        if e >= 1:
            return 1.0
        tv = e / (1 - e)
    return min(1.0, math.nextafter(float(tv), math.inf))


@dataclass(frozen=True)
class ComposedParams:
    """The composition rule's output for one sigma (module docstring).

    Attributes
    ----------
    sigma:
        The target sigma (``repr(sigma)`` is the exact decimal).
    m:
        The coarse multiplier.
    coarse_sigma:
        ``sigma_c``, a 6-decimal number (``repr`` is exact).
    fine_variance:
        ``sigma_f^2 = sigma^2 - m^2 sigma_c^2``, an exact decimal string.
    smoothing_tv:
        :func:`smoothing_tv` of these parameters (exact tables).
    """

    sigma: float
    m: int
    coarse_sigma: float
    fine_variance: str
    smoothing_tv: float


def composed_params(sigma: float) -> ComposedParams:
    """The public parameter rule for ``COMPOSE_THRESHOLD < sigma <= MAX_DISCRETE_SIGMA``.

    Raises
    ------
    SpecError
        Outside that range (below it one table is used, above it nothing).

    Examples
    --------
    >>> p = composed_params(2e5)
    >>> p.m, p.coarse_sigma, p.fine_variance
    (258, 775.187993, '599120.156577186364')
    """
    s = check_noise_range("sigma", sigma, MAX_DISCRETE_SIGMA,
                          f"composed-sampler limit {MAX_DISCRETE_SIGMA:g}")
    if not s > COMPOSE_THRESHOLD:
        raise SpecError(f"sigma: {s:g} is sampled by one table (composition starts above "
                        f"{COMPOSE_THRESHOLD:.6g})")
    return _rule(s)


def _rule(s: float) -> ComposedParams:
    """Steps 1-3 of the rule at ``s`` (checked: smoothing term and table ranges)."""
    m = math.isqrt(math.floor(s) // FINE_RATIO)
    p = split_sigma(s, m, FINE_RATIO * m)
    if not (p.smoothing_tv <= SMOOTHING_TV_LIMIT and p.coarse_sigma <= MAX_TABLE_SIGMA
            and float(p.fine_variance) <= MAX_TABLE_SIGMA**2):  # pragma: no cover
        raise RuntimeError(f"composed sampler: rule out of bounds at sigma={s!r}")
    return p


def split_sigma(sigma: float, m: int, fine_floor: int | str) -> ComposedParams:
    """``sigma^2 = m^2 sigma_c^2 + sigma_f^2`` exactly, with ``sigma_f >= fine_floor`` (steps 2-3).

    ``sigma_c = sqrt((S^2 - fine_floor^2) / m^2)`` rounded down to 6 decimals and
    ``sigma_f^2`` the exact remainder. The rule uses ``fine_floor = 3m``; other
    values (tests, or a deliberately broken sampler) get their
    :func:`smoothing_tv` computed the same way, however large.

    Examples
    --------
    >>> p = split_sigma(40.0, 8, 8)
    >>> p.coarse_sigma, p.fine_variance
    (4.898979, '64.000304483776')
    """
    if not (isinstance(m, int) and m >= 1):
        raise SpecError(f"m: must be an int >= 1, got {m!r}")
    with localcontext() as ctx:
        ctx.prec = _PREC
        ctx.traps[Inexact] = True
        v = Decimal(repr(float(sigma))) ** 2
        floor_f2 = Decimal(fine_floor) ** 2
        if not v > floor_f2:
            raise SpecError(f"fine_floor: {fine_floor} must be below sigma {sigma!r}")
        ctx.traps[Inexact] = False  # the target coarse sigma is only a target
        target = ((v - floor_f2) / Decimal(m) ** 2).sqrt()
        sc = target.quantize(_QUANTUM, rounding=ROUND_FLOOR)
        ctx.traps[Inexact] = True  # from here on exact: sigma^2 = m^2 sc^2 + vf
        vc = sc**2
        vf = v - Decimal(m) ** 2 * vc
    coarse = float(sc)
    if not (sc > 0 and vf > 0 and Decimal(repr(coarse)) == sc):
        raise SpecError(f"split_sigma: no valid split of sigma={sigma!r} with m={m}")
    return ComposedParams(sigma=float(sigma), m=m, coarse_sigma=coarse,
                          fine_variance=str(vf), smoothing_tv=smoothing_tv(m, vc, vf))


@dataclass(frozen=True, eq=False)
class ComposedSampler:
    """``X = m Y + Z`` from two table samplers (module docstring).

    Attributes
    ----------
    params:
        The rule's parameters.
    coarse, fine:
        The tables of ``Y ~ N_Z(0, sigma_c^2)`` and ``Z ~ N_Z(0, sigma_f^2)``.
    tv_bound:
        Per-sample TV bound to ``N_Z(0, sigma^2)``: ``2 * 2**-104 +`` the smoothing term.
    """

    params: ComposedParams
    coarse: IntegerTable
    fine: IntegerTable

    @property
    def tv_bound(self) -> float:
        return _composed_tv(self.params)

    def draw(self, draw_u64: U64Source, n: int) -> np.ndarray:
        """``n`` int64 samples: ``n`` coarse words, then ``n`` fine words (ties draw more)."""
        out = self.coarse.draw(draw_u64, n)
        out *= self.params.m
        out += self.fine.draw(draw_u64, n)
        return out

    def draw_lazy(self, draw_u64: U64Source, n: int) -> np.ndarray:
        """:meth:`draw`'s law with both tables' bits read lazily, 16 first
        (:meth:`~sketches.core.noise_tables.IntegerTable.draw_lazy`; a table of more than
        ``2^16`` entries reads 32 first): about half a word per sample."""
        out = self.coarse.draw_lazy(draw_u64, n, 16)
        out *= self.params.m
        out += self.fine.draw_lazy(draw_u64, n, 16)
        return out


def _composed_tv(params: ComposedParams) -> float:
    return math.nextafter(2 * TABLE_TV_BOUND + params.smoothing_tv, math.inf)


@lru_cache(maxsize=32)
def composed_sampler(sigma: float) -> ComposedSampler:
    """The composed sampler of ``sigma`` (builds and caches both tables).

    Examples
    --------
    >>> c = composed_sampler(3e5)
    >>> c.params.m, -c.coarse.offset, -c.fine.offset
    (316, 12746, 12729)
    """
    p = composed_params(sigma)
    coarse = discrete_gaussian_table(p.coarse_sigma)
    fine = discrete_gaussian_variance_table(p.fine_variance)
    if max(coarse.tv_bound, fine.tv_bound) > TABLE_TV_BOUND:  # pragma: no cover
        raise RuntimeError(f"composed sampler: a table misses its TV bound at sigma={sigma!r}")
    return ComposedSampler(params=p, coarse=coarse, fine=fine)


def discrete_gaussian_sampler(sigma: float) -> IntegerTable | ComposedSampler:
    """The sampler of ``N_Z(0, sigma^2)``: one table up to ``COMPOSE_THRESHOLD``, else composed.

    Both have ``draw(draw_u64, n)``. Raises :class:`SpecError` outside the
    supported range (:func:`validate_discrete_sigma`).

    Examples
    --------
    >>> type(discrete_gaussian_sampler(10.0)).__name__
    'IntegerTable'
    """
    s = validate_discrete_sigma(sigma)
    if s <= COMPOSE_THRESHOLD:
        return discrete_gaussian_table(s)
    return composed_sampler(s)


def discrete_gaussian_tv(sigma: float) -> float:
    """Proven per-sample TV bound of ``discrete_gaussian_sampler(sigma)`` to ``N_Z(0, sigma^2)``.

    ``2**-104`` for one table (``sigma <= COMPOSE_THRESHOLD``; docs/PRIVACY.md §9),
    ``2 * 2**-104 + smoothing_tv`` (rounded up, ``< 2**-102.99``) composed.
    Builds nothing.

    Examples
    --------
    >>> discrete_gaussian_tv(1e5) == 2.0**-104
    True
    >>> 2.0**-103 < discrete_gaussian_tv(1e6) < 2.0**-102.99
    True
    """
    s = validate_discrete_sigma(sigma)
    if s <= COMPOSE_THRESHOLD:
        return TABLE_TV_BOUND
    return _composed_tv(composed_params(s))


def validate_discrete_sigma(sigma: float, *, build: bool = False) -> float:
    """Check that ``N_Z(0, sigma^2)`` is supported; optionally build its sampler.

    Supported: ``MIN_DISCRETE_SCALE <= sigma <= MAX_DISCRETE_SIGMA`` (``1e-3 ..
    1e8``): one table up to ``COMPOSE_THRESHOLD`` (about ``1.56e5``), two composed
    tables above. Sketch constructors call this with their calibrated sigma (and
    ``build=True``) so that an unsupported sigma fails at start-up, not at the
    first draw; :func:`sketches.privacy.calibration.calibrate` checks the range too.

    Returns
    -------
    float
        ``sigma`` as a float.

    Raises
    ------
    SpecError
        For a sigma outside the range (the message names the fix).

    Examples
    --------
    >>> validate_discrete_sigma(2.5), validate_discrete_sigma(1e7)
    (2.5, 10000000.0)
    >>> try:
    ...     validate_discrete_sigma(1e9)
    ... except SpecError as err:
    ...     print("raise eps" in str(err))
    True
    """
    s = check_noise_range("sigma", sigma, MAX_DISCRETE_SIGMA,
                          f"composed-sampler limit {MAX_DISCRETE_SIGMA:g}")
    if build:
        if s <= COMPOSE_THRESHOLD:
            discrete_gaussian_table(s)
        else:
            composed_sampler(s)
    return s


#: From this sigma :func:`discrete_gaussian32_sampler` composes two small tables (the rule
#: above, below ``COMPOSE_THRESHOLD`` too): both fit in a core's cache (about 150 KB each
#: at 1.56e5), where one table of that sigma is 64 MB and every draw a cache miss.
COMPOSE32_MIN = 16384.0


@lru_cache(maxsize=32)
def _composed32(sigma: float) -> ComposedSampler:
    p = _rule(sigma)
    coarse = discrete_gaussian_table(p.coarse_sigma)
    fine = discrete_gaussian_variance_table(p.fine_variance)
    if max(coarse.tv_bound, fine.tv_bound) > TABLE_TV_BOUND:  # pragma: no cover
        raise RuntimeError(f"composed sampler: a table misses its TV bound at sigma={sigma!r}")
    return ComposedSampler(params=p, coarse=coarse, fine=fine)


def discrete_gaussian32_sampler(sigma: float) -> IntegerTable | ComposedSampler:
    """The sampler of :meth:`~sketches.core.noise.SecureNoise.discrete_gaussian32` (the
    lattice counter's): the composed rule from ``COMPOSE32_MIN``, one table below.

    Both have ``draw_lazy(draw_u64, n)``; per-draw TV :func:`discrete_gaussian32_tv`.

    Examples
    --------
    >>> type(discrete_gaussian32_sampler(1e3)).__name__
    'IntegerTable'
    >>> discrete_gaussian32_sampler(156_000.0).params.m
    228
    """
    s = validate_discrete_sigma(sigma)
    if s < COMPOSE32_MIN:
        return discrete_gaussian_table(s)
    return _composed32(s)


def discrete_gaussian32_tv(sigma: float) -> float:
    """Per-draw TV bound of :func:`discrete_gaussian32_sampler` to ``N_Z(0, sigma^2)``:
    ``2**-104`` below ``COMPOSE32_MIN``, else ``2 * 2**-104 +`` the rule's smoothing term
    (``< 2**-102.99``; docs/PRIVACY.md 9.1). Builds nothing.

    >>> discrete_gaussian32_tv(1e3) == 2.0**-104 < discrete_gaussian32_tv(7e4) < 2.0**-102.99
    True
    """
    s = validate_discrete_sigma(sigma)
    if s < COMPOSE32_MIN:
        return TABLE_TV_BOUND
    return _composed_tv(_rule(s))


def discrete_gaussian32_support(sigma: float) -> int:
    """Largest ``|X|`` :func:`discrete_gaussian32_sampler` can return: ``K`` of the table,
    ``m K_c + K_f`` composed (builds the tables).

    >>> discrete_gaussian32_support(1e5) <= 14 * 1e5 + 2
    True
    """
    smp = discrete_gaussian32_sampler(sigma)
    if isinstance(smp, IntegerTable):
        return -int(smp.offset)
    return smp.params.m * -int(smp.coarse.offset) - int(smp.fine.offset)
