"""The F_p sketch (p in (0, 1]) as a single-release DP mechanism (paper 004).

Wang, Pinelis and Song (paper 004, Theorem 3) show that Indyk's stable
projection ``a = P f`` with a **secret** ``P ~ D_{p,1}^{r x m}`` is pure
DP without added noise: if neighbouring streams satisfy
``F_p(S') / F_p(S) in [1/rho, rho]`` then each coordinate is
``(1/p) ln rho``-DP, and the ``r`` i.i.d. coordinates compose to

    eps = (r / p) * ln(rho)                                   (Theorem 3 + basic composition)

Multiplicative sensitivity used here (our derivation, checked in
docs/MECHANISMS_003_004.md, tighter than the paper's Theorem 1 and
data-independent): the sketch is fed a public padding mass ``n_pad`` on a
secret key of its own (an independent column family), so ``F_p >= n_pad^p``
for every input. For ``p <= 1``, ``t -> t^p`` is subadditive, so one unit
(at most ``c`` events, each of weight in ``[0, M]``) changes ``F_p`` by at
most ``c M^p``, under add/remove **and** replace::

    rho = 1 + c * (M / n_pad)^p
    eps = (r / p) * ln(1 + c * (M / n_pad)^p)

``eps`` is an *output* of ``(p, r, M, n_pad, c)``; :func:`pad_for_eps`
inverts it. The release is the estimate ``F_hat(total) - n_pad^p`` (the
projection, its key and the sketch vector are never released).

One release per projection: releasing ``a(t1)`` and ``a(t2)`` with the same
``P`` reveals ``P (f(t2) - f(t1))``, a sketch of a tiny increment stream
whose multiplicative sensitivity is unbounded. Each window therefore uses a
fresh instance with a fresh 256-bit key (``noise.random_bytes(32)``); windows
compose in parallel under event-level privacy.

Estimator: geometric mean (Li 2008), unbiased for ``r >= 2``::

    F_hat = exp((p/r) sum_j ln|a_j| - r ln c1),
    c1 = (2/pi) Gamma(p/r) Gamma(1 - 1/r) sin(pi p / (2 r))

Error bound (Chebyshev on the log scale, exact moments of symmetric stable
laws: ``E ln|Z| = gamma_E (1/p - 1)``, ``Var ln|Z| = pi^2 (1 + 2/p^2) / 12``)::

    P(|ln(F_hat/F) - mu| >= t) <= v / t^2,
    mu = p gamma_E (1/p - 1) - r ln c1,  v = pi^2 (p^2 + 2) / (12 r)

Examples
--------
>>> import numpy as np
>>> from sketches.windowed.fp.fp_sketch import FpSketch, FpSketchSpec, fp_eps
>>> spec = FpSketchSpec(p=0.5, rows=50, max_value=1.0, pad_mass=1e6)
>>> round(spec.eps, 3)
0.1
>>> class _Key:                      # a stand-in NoiseSource: only random_bytes is used
...     kind = "fast"
...     def random_bytes(self, n): return bytes(range(n))
>>> sk = FpSketch(spec, _Key())
>>> sk.update_batch(np.repeat(np.arange(100), 100))   # 100 keys x 100 -> F_0.5 = 1000
>>> out = sk.release()
>>> out["kind"], 500 < out["estimate"] < 2000
('fp_moment', True)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import MechanismEntry, register
from sketches.core.hashing import HashSpec
from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.windowed.fp.fp_projection import DATA_TAG, PAD_TAG, stable_columns

__all__ = ["FpSketch", "FpSketchSpec", "fp_eps", "fp_log_moments", "fp_rho",
           "gm_estimate", "pad_for_eps", "paper_rho_bound"]

def fp_rho(p: float, max_value: float, pad_mass: float, unit_cap: int = 1) -> float:
    """Multiplicative sensitivity ``rho = 1 + c (M / n_pad)^p`` (see module docstring).

    >>> fp_rho(0.5, 1.0, 100.0)
    1.1
    """
    return 1.0 + unit_cap * (max_value / pad_mass) ** p


def fp_eps(p: float, rows: int, max_value: float, pad_mass: float, unit_cap: int = 1) -> float:
    """Pure-DP epsilon ``(r/p) ln rho`` of one release (paper 004, Theorem 3).

    >>> round(fp_eps(1.0, 50, 1.0, 1e5), 6)
    0.0005
    """
    return rows / p * math.log1p(unit_cap * (max_value / pad_mass) ** p)


def pad_for_eps(eps: float, p: float, rows: int, max_value: float, unit_cap: int = 1) -> float:
    """Smallest padding mass whose release costs at most ``eps`` (inverse of :func:`fp_eps`).

    >>> n = pad_for_eps(0.5, 0.5, 50, 1.0)
    >>> round(fp_eps(0.5, 50, 1.0, n), 9)
    0.5
    """
    if eps <= 0:
        raise SpecError(f"eps: must be > 0, got {eps}")
    return max_value * (unit_cap / math.expm1(eps * p / rows)) ** (1.0 / p)


def paper_rho_bound(p: float, n: int, m: int, max_value: float) -> float:
    """Paper 004 Theorem 1 bound, for reproduction only (needs a public stream length n).

    >>> round(paper_rho_bound(0.5, 2**15, 2**20, 16), 4)
    2.0005
    """
    return 2.0 ** (2 - 2 * p) * ((n - 1 + max_value) / (n - 1 + (m - 1) ** ((p - 1) / p))) ** p


def _log_c1(p: float, rows: int) -> float:
    return (math.log(2 / math.pi) + math.lgamma(p / rows) + math.lgamma(1 - 1 / rows)
            + math.log(math.sin(math.pi * p / (2 * rows))))


def gm_estimate(a: np.ndarray, p: float) -> float:
    """Geometric-mean estimate of ``F_p`` from the sketch vector ``a`` (Li 2008), log domain.

    >>> gm_estimate(np.ones(10), 1.0) > 0
    True
    """
    r = int(a.shape[0])
    with np.errstate(divide="ignore"):
        s = float(np.sum(np.log(np.abs(a))))
    return math.exp(p / r * s - r * _log_c1(p, r))


def fp_log_moments(p: float, rows: int) -> tuple[float, float]:
    """``(mu, v)``: mean and variance of ``ln(F_hat / F)`` for the GM estimator.

    >>> mu, v = fp_log_moments(1.0, 50)
    >>> abs(mu) < 0.05, round(v, 4)
    (True, 0.0493)
    """
    mu = p * np.euler_gamma * (1 / p - 1) - rows * _log_c1(p, rows)
    v = math.pi ** 2 * (p * p + 2) / (12 * rows)
    return float(mu), v


@dataclass(frozen=True)
class FpSketchSpec:
    """Parameters of one F_p sketch window (all public).

    Parameters
    ----------
    p : float
        Moment order in [0.1, 1].
    rows : int
        Sketch length ``r`` (>= 2); relative error shrinks like ``1/sqrt(r)``, eps grows like ``r``.
    max_value : float
        Clip ``M``: each event's weight is clipped to ``[0, M]`` (cash-register model).
    pad_mass : float
        Public padding mass ``n_pad`` (> 0): larger means smaller eps, larger error on tiny streams.
    hash_seed : int
        Public seed mapping items to 64-bit keys (the projection itself is secret).
    unit_cap : int
        Events per privacy unit (1 = event level).
    confidence : float
        Coverage of the released interval (Chebyshev), in (0, 1).
    """

    p: float
    rows: int = 50
    max_value: float = 1.0
    pad_mass: float = 1e6
    hash_seed: int = 0
    unit_cap: int = 1
    confidence: float = 0.9

    def __post_init__(self) -> None:
        if not 0.1 <= self.p <= 1.0:
            raise SpecError(f"p: {self.p} is outside [0.1, 1]; the F_p sketch is DP only "
                            "for p <= 1 (paper 004) and sampled reliably for p >= 0.1")
        if int(self.rows) != self.rows or self.rows < 2:
            raise SpecError(f"rows: must be an integer >= 2, got {self.rows!r}")
        if not self.max_value > 0:
            raise SpecError(f"max_value: must be > 0, got {self.max_value!r}")
        if not self.pad_mass > 0:
            raise SpecError(f"pad_mass: must be > 0, got {self.pad_mass!r}; use pad_for_eps()")
        if int(self.unit_cap) != self.unit_cap or self.unit_cap < 1:
            raise SpecError(f"unit_cap: must be an integer >= 1, got {self.unit_cap!r}")
        if not 0 < self.confidence < 1:
            raise SpecError(f"confidence: must be in (0, 1), got {self.confidence!r}")

    @property
    def eps(self) -> float:
        """Pure-DP epsilon of the single release (derived, not chosen)."""
        return fp_eps(self.p, self.rows, self.max_value, self.pad_mass, self.unit_cap)

    @classmethod
    def from_params(cls, params: Any) -> FpSketchSpec:
        """Build from topology params; ``eps`` (without ``pad_mass``) selects the padding.

        >>> round(FpSketchSpec.from_params({"p": 0.5, "eps": 1.0}).eps, 9)
        1.0
        """
        known = {"p", "rows", "max_value", "pad_mass", "hash_seed", "unit_cap", "confidence"}
        kw = {k: params[k] for k in known if k in params}
        if "eps" in params and "pad_mass" not in params:
            kw["pad_mass"] = pad_for_eps(float(params["eps"]), float(params["p"]),
                                         int(params.get("rows", 50)),
                                         float(params.get("max_value", 1.0)),
                                         int(params.get("unit_cap", 1)))
        spec = cls(**kw)
        if "eps" in params and spec.eps > float(params["eps"]) * (1 + 1e-9):
            raise SpecError(f"pad_mass: gives eps = {spec.eps:.4g} > the requested eps = "
                            f"{params['eps']}; raise pad_mass or drop it to derive it from eps")
        return spec


QUANT_DIGITS = 4


def quantize(x: float) -> float:
    """``x`` rounded to :data:`QUANT_DIGITS` significant decimal digits (issue 8 item 8).

    The F_p release is a float function of a float projection, so its low-order
    bits depend on the floating-point path, not only on the ideal real-valued
    output the privacy proof covers (the Mironov 2012 concern, docs/PRIVACY.md
    9). Rounding to a fixed relative grid (step ``<= 10^-3`` relative) is
    post-processing and publishes only which grid cell holds the output; the
    float output and the ideal output fall in different cells only when they
    straddle a cell boundary, i.e. when they differ by more than their distance
    to it (relative float error ~1e-12 against a cell of ~1e-3). The grid is
    far finer than the estimator's own error (the Chebyshev band is tens of
    percent for typical ``rows``), so accuracy is unchanged.

    Examples
    --------
    >>> quantize(1234.56789), quantize(0.0), quantize(-0.000123456)
    (1235.0, 0.0, -0.0001235)
    """
    return float(f"{x:.{QUANT_DIGITS}g}") if math.isfinite(x) else x


class FpSketch:
    """Single-release DP F_p sketch with a secret projection (paper 004).

    Parameters
    ----------
    spec : FpSketchSpec
    noise : NoiseSource
        Only ``noise.random_bytes(32)`` is used: the secret projection key.
    """

    name: ClassVar[str] = "fp_sketch"

    def __init__(self, spec: FpSketchSpec, noise: Any, *, _state: tuple[bytes, np.ndarray,
                 bool] | None = None) -> None:
        self.spec = spec
        self._hash = HashSpec(seed=spec.hash_seed, depth=1, width=1)
        if _state is None:
            key = bytes(noise.random_bytes(32))
            if len(key) != 32:
                raise PrivacyError("noise.random_bytes(32) returned the wrong length")
            self._key = key
            pad = stable_columns(key, np.zeros(1, np.uint64), spec.p, spec.rows, PAD_TAG)[:, 0]
            self._a = pad * float(spec.pad_mass)
            self._released = False
        else:
            self._key, self._a, self._released = _state

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        """Add events; weights are clipped to ``[0, max_value]`` (default 1 each)."""
        if self._released:
            raise PrivacyError("update_batch: this F_p window was already released; "
                               "start a fresh FpSketch (fresh secret key) for the next window")
        items = np.asarray(items)
        if items.shape[0] == 0:
            return
        w = (np.ones(items.shape[0]) if weights is None
             else np.clip(np.asarray(weights, dtype=np.float64), 0.0, self.spec.max_value))
        if w.shape[0] != items.shape[0]:
            raise SpecError("weights: must have one entry per item")
        keys = self._hash.item_keys(items)
        uniq, inv = np.unique(keys, return_inverse=True)
        mass = np.bincount(inv, weights=w, minlength=uniq.shape[0])
        cols = stable_columns(self._key, uniq, self.spec.p, self.spec.rows, DATA_TAG)
        self._a += cols @ mass

    def release(self) -> dict[str, Any]:
        """The ``fp_moment`` payload (once per instance; a second call raises PrivacyError)."""
        if self._released:
            raise PrivacyError("release: this F_p sketch was already released once; a second "
                               "release with the same secret projection is not private")
        self._released = True
        s = self.spec
        est_total = gm_estimate(self._a, s.p)
        pad_fp = float(s.pad_mass) ** s.p
        mu, v = fp_log_moments(s.p, s.rows)
        t = math.sqrt(v / (1 - s.confidence))
        return {
            "kind": "fp_moment", "p": s.p, "rows": s.rows, "estimator": "geometric_mean",
            "estimate": quantize(max(est_total - pad_fp, 0.0)), "pad_mass": float(s.pad_mass),
            "eps": s.eps, "delta": 0.0, "max_value": s.max_value, "unit_cap": s.unit_cap,
            "quantization": f"{QUANT_DIGITS} significant decimal digits (post-processing)",
            "error_bound": {"confidence": s.confidence, "method": "chebyshev_log",
                            "low": quantize(max(est_total * math.exp(-mu - t) - pad_fp, 0.0)),
                            "high": quantize(est_total * math.exp(-mu + t) - pad_fp)},
        }

    def memory_bytes(self) -> int:
        """Bytes of state (sketch vector and key)."""
        return int(self._a.nbytes) + len(self._key)

    def to_bytes(self) -> bytes:
        """Private checkpoint via :mod:`sketches.core.serialization`.

        Operator-only, never published.

        Arrays: ``a`` (float64[rows], padding included) and ``key`` (uint8[32], the secret);
        state: ``released``.
        """
        return pack(self.name, asdict(self.spec), {"released": self._released},
                    {"a": self._a, "key": np.frombuffer(self._key, dtype=np.uint8)})

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> FpSketch:
        """Restore a checkpoint written by :meth:`to_bytes`."""
        header, arrays = unpack(data)
        check_header(header, cls.name, None)
        try:
            spec = FpSketchSpec(**header["spec"])
            key, a = arrays["key"].tobytes(), arrays["a"].astype(np.float64)
            released = bool(header["state"]["released"])
        except (KeyError, TypeError) as exc:
            raise SerializationError(f"fp_sketch state: missing field ({exc})") from None
        if len(key) != 32 or a.shape != (spec.rows,):
            raise SerializationError("fp_sketch state: key or sketch vector has the wrong size")
        return cls(spec, noise, _state=(key, a, released))


register(MechanismEntry(name=FpSketch.name, build_spec=FpSketchSpec.from_params,
                        build=FpSketch, from_bytes=FpSketch.from_bytes, continual=False))
