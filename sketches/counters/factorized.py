"""FactorizedCounters: ``n`` BLT or square-root counters sharing one clock.

Same interface as :class:`~sketches.counters.gauss_bm.ContinualCounters` (the
tree): :meth:`push`, :meth:`advance`, :meth:`add_to_current`, :meth:`query`
(with the ``behind`` mask of LazySketch), :meth:`advance_empty` (catch-up),
``state_header``/``state_arrays``/``restore`` (embedded in a sketch's
checkpoint) and :meth:`to_bytes`/:meth:`from_bytes` (a counter on its own).
The factorization and its norms: :mod:`sketches.counters.factorization`.

Release
-------
Counter ``i`` at round ``t`` releases ``prefix_t + round(N_t)`` where
``N = B z``, ``z_t ~ N(0, sigma^2)`` i.i.d. per (round, counter), drawn from
the injected noise source's ``gaussian``, and ``round`` is to the nearest
integer (``integer_noise=True``; the default calibration) or the identity.
In exact arithmetic this is ``round(B (C x + z))``: a post-processing of the
Gaussian mechanism on ``C x`` (privacy: docs/PRIVACY.md "Factorized
counters" [D]). The noise never depends on the data, and the private prefix
is combined with it only by one exact integer addition: no floating-point
value is computed from private data (Mironov 2012 does not apply). What is
not exact is the noise itself (a float64 Box-Muller sample, a float64
recurrence): the caveat is stated in docs/PRIVACY.md.

BLT noise (``k`` buffers): state ``U`` (``k x n``), ``U_t = omega * U_{t-1} +
z_t``; ``N_t = z_t + theta . U_{t-1}`` (so ``b_0 = 1``, ``b_j = sum_i theta_i
omega_i^(j-1)``). Several rounds at once (catch-up, or a sketch closing many
empty ticks): the buffers jump ``j`` rounds exactly, ``U <- omega^j U + xi``
with ``xi ~ N(0, sigma^2 G_j)``, ``G_j[i, l] = (1 - (omega_i omega_l)^j) /
(1 - omega_i omega_l)`` (the exact marginal of ``j`` recurrence steps); then
the last two rounds run explicitly, so the released ``N`` of the last round
(and of the one before, for ``behind`` counters) have exactly the law of the
round-by-round recurrence. Cost ``O(k^2 n)`` whatever ``j``.

Square root noise: the history ``z_1..z_t`` (``rounds x n``) and ``N_t =
sum_s r_(t-s) z_s``; rounds opened together draw every ``z``. Memory
``rounds x n`` floats: refused above :data:`~sketches.counters.factorization.SQRT_MAX_VALUES`.

Noise draws (canonical rule, deterministic given the call boundaries):
BLT, one call opening ``j`` rounds: ``j >= 3``: one ``gaussian(sigma, k n)``
(the jump), then ``gaussian(sigma, n)`` twice; ``j = 2``: twice; ``j = 1``:
once. Square root: one ``gaussian(sigma, j n)``. A call draws everything into
temporaries first (atomic: a failing source leaves the state unchanged).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> zero = make_noise("zero", allow_insecure=True)
>>> c = FactorizedCounters(2, horizon=8, sigma=1.0, integer_noise=True, noise=zero,
...                        kind="blt")
>>> c.advance(np.array([[1, 0], [2, 5]]))
>>> c.query().tolist(), c.rounds
([3, 5], 2)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sketches.core.serialization import pack, unpack
from sketches.counters.factorization import (
    SQRT_MAX_VALUES,
    BLTFactorization,
    CounterKind,
    Factorization,
    factorization,
    sqrt_coeffs,
)
from sketches.counters.gauss_bm import GaussianNoise
from sketches.counters.prefix import PrefixCounters
from sketches.errors import (
    IncompatibleSpecError,
    SerializationError,
    SpecError,
)
from sketches.privacy import counter_error_bound

__all__ = ["FactorizedCounters", "factorized_error_bound"]

_STATE_VERSION = 1


def _psd_sqrt(g: np.ndarray) -> np.ndarray:
    """A matrix ``L`` with ``L L^T = g`` (symmetric PSD; eigenvalues clipped at 0)."""
    vals, vecs = np.linalg.eigh(g)
    return vecs * np.sqrt(np.clip(vals, 0.0, None))[None, :]


class FactorizedCounters(PrefixCounters):
    """``n`` counters releasing ``prefix + round(B z)`` (module docstring).

    Parameters
    ----------
    n, horizon, sigma, integer_noise, noise :
        As :class:`~sketches.counters.gauss_bm.ContinualCounters`.
    kind : ``"blt"`` or ``"sqrt"``
        The factorization (:mod:`sketches.counters.factorization`).
    """

    def __init__(self, n: int, horizon: int, sigma: float, integer_noise: bool,
                 noise: GaussianNoise, kind: str = "blt") -> None:
        if n < 1:
            raise SpecError(f"n: number of counters must be >= 1, got {n}")
        if not sigma >= 0.0 or not np.isfinite(sigma):
            raise SpecError(f"sigma: must be a finite number >= 0, got {sigma}")
        k = CounterKind(kind)
        if k is CounterKind.TREE:
            raise SpecError("kind: the tree is ContinualCounters; use kind='blt' or 'sqrt'")
        self.n = int(n)
        self.horizon = int(horizon)
        self.kind = k
        self.factorization: Factorization = factorization(k, self.horizon)
        if k is CounterKind.SQRT and self.horizon * self.n > SQRT_MAX_VALUES:
            raise SpecError(
                f"counter: the exact square root keeps rounds x counters = {self.horizon}"
                f" x {self.n} noise values ({8 * self.horizon * self.n / 2**20:.0f} MiB), above"
                f" the limit of {SQRT_MAX_VALUES} values; use counter: blt (4 buffers per"
                " counter, error within 1% of the square root)")
        self.sigma = float(sigma)
        self.integer_noise = bool(integer_noise)
        self._noise_src = noise
        self.rounds = 0
        self._prefix = np.zeros(self.n, dtype=np.int64)
        self._now = np.zeros(self.n, dtype=np.float64)  # N at `rounds`
        self._prev = np.zeros(self.n, dtype=np.float64)  # N at `rounds - 1`
        if isinstance(self.factorization, BLTFactorization):
            self._theta = np.array(self.factorization.theta, dtype=np.float64)
            self._omega = np.array(self.factorization.omega, dtype=np.float64)
            self._buf = np.zeros((self._theta.size, self.n), dtype=np.float64)
        else:
            self._r = sqrt_coeffs(self.horizon)
            self._buf = np.zeros((0, self.n), dtype=np.float64)  # z history, grows

    # ------------------------------------------------------------ updates
    def _gauss(self, m: int) -> np.ndarray:
        return np.asarray(self._noise_src.gaussian(self.sigma, m), dtype=np.float64) \
            if self.sigma > 0 else np.zeros(m, dtype=np.float64)

    def _blt_jump(self, buf: np.ndarray, j: int) -> np.ndarray:
        """Buffers after ``j >= 1`` rounds, exactly (module docstring)."""
        om = self._omega
        prod = om[:, None] * om[None, :]
        g = (1.0 - prod**j) / (1.0 - prod)
        xi = _psd_sqrt(g) @ self._gauss(om.size * self.n).reshape(om.size, self.n)
        return (om**j)[:, None] * buf + xi

    def _blt_step(self, buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = self._gauss(self.n)
        out = z + self._theta @ buf
        return out, self._omega[:, None] * buf + z[None, :]

    def _next(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(N_{r+k-1}, N_{r+k}, buffers)`` after ``k >= 1`` rounds (temporaries)."""
        if isinstance(self.factorization, BLTFactorization):
            buf = self._buf
            prev = self._now
            if k >= 3:
                buf = self._blt_jump(buf, k - 2)
            if k >= 2:
                prev, buf = self._blt_step(buf)
            now, buf = self._blt_step(buf)
            return prev, now, buf
        z = self._gauss(k * self.n).reshape(k, self.n)
        hist = np.concatenate((self._buf, z))
        t = hist.shape[0]
        r = self._r
        now = r[:t][::-1] @ hist
        prev = r[: t - 1][::-1] @ hist[: t - 1] if k >= 2 else self._now
        return prev, now, hist

    def _commit(self, total: np.ndarray | None, k: int) -> None:
        prev, now, buf = self._next(k)  # every draw first: atomic
        if total is not None:
            self._prefix += total
        self._prev, self._now, self._buf = prev, now, buf
        self.rounds += k

    def push(self, total: np.ndarray, new_rounds: int) -> None:
        """Add ``total`` (shape ``(n,)``) to the prefix and open ``new_rounds`` rounds."""
        inc, k = self._push_args(total, new_rounds)
        if k == 0:
            if self.rounds == 0 and np.any(inc):
                raise SpecError("total: no round is open yet; open at least one round")
            self._prefix += inc.astype(np.int64, copy=False)
            return
        self._commit(inc.astype(np.int64, copy=False), k)

    def advance_empty(self, ends: np.ndarray) -> np.ndarray:
        """Open empty rounds in calls ending at ``ends``; the query after each call.

        Same state and release law as ``for e in ends: advance(zeros(e - rounds,
        n)); query()``; each call costs ``O(k^2 n)`` (BLT) whatever its length.
        """
        e = np.asarray(ends, dtype=np.int64).reshape(-1)
        dtype = np.int64 if self.integer_noise else np.float64
        if not e.size:
            return np.zeros((0, self.n), dtype=dtype)
        if int(e[0]) <= self.rounds or np.any(np.diff(e) <= 0):
            raise SpecError(f"ends: must be strictly increasing and > rounds={self.rounds}")
        self._check_horizon(int(e[-1]))
        saved = (self.rounds, self._prev, self._now, self._buf)
        out = np.empty((e.size, self.n), dtype=dtype)
        try:
            for i, end in enumerate(e.tolist()):
                self._commit(None, end - self.rounds)
                out[i] = self.query()
        except BaseException:
            self.rounds, self._prev, self._now, self._buf = saved
            raise
        return out

    # ------------------------------------------------------------- queries
    def _release(self, noise: np.ndarray) -> np.ndarray:
        if self.integer_noise:
            return self._prefix + np.rint(noise).astype(np.int64)
        return self._prefix + noise

    def noise_now(self) -> np.ndarray:
        """The released noise of every counter at the current round (``round(N)`` or ``N``)."""
        return np.rint(self._now).astype(np.int64) if self.integer_noise else self._now.copy()

    def query(self, behind: np.ndarray | None = None) -> np.ndarray:
        """Noisy prefix sums; ``behind`` counters are answered at round ``rounds - 1``."""
        now = self._now
        if behind is not None and self.rounds > 0 and bool(np.any(behind)):
            now = np.where(behind, self._prev, now)
        return self._release(now)

    def query_at(self, cells: np.ndarray) -> np.ndarray:
        """Noisy prefix sums of the counters ``cells`` (any shape)."""
        idx = np.asarray(cells, dtype=np.int64)
        return self.query()[idx]

    def error_bound(self, *, beta: float, steps: int = 1, counters: int | None = None,
                    at_round: int | None = None) -> float:
        """Max |release - prefix| of ``counters`` counters at ``steps`` releases, w.p. >= 1 - beta.

        ``sigma sqrt(2 v ln(2 steps counters / beta)) + 1/2`` (rounding) with
        ``v = ||B row||^2`` at ``at_round`` (default: the horizon, the largest).
        """
        v = self.factorization.row_norm_sq(at_round)
        return factorized_error_bound(self.sigma, v, n=self.n if counters is None else counters,
                                      steps=steps, beta=beta, integer=self.integer_noise)

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of numpy state: prefix, released noise (now, previous) and the buffers.

        BLT: ``(k + 3) * 8`` bytes per counter; square root: grows to
        ``(rounds + 3) * 8``.
        """
        return int(self._prefix.nbytes + self._now.nbytes + self._prev.nbytes
                   + self._buf.nbytes)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for serialization (private: exact counts)."""
        return {"prefix": self._prefix, "fact_now": self._now, "fact_prev": self._prev,
                "fact_buf": self._buf}

    def state_header(self) -> dict[str, Any]:
        """JSON-able scalars needed to restore the clock."""
        return {"rounds": self.rounds, "sigma": self.sigma, "integer_noise": self.integer_noise,
                "horizon": self.horizon, "counter": self.kind.value,
                "counter_version": _STATE_VERSION}

    def restore(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Load :meth:`state_arrays` / :meth:`state_header` output (checks kind and calibration)."""
        if header.get("counter") != self.kind.value:
            raise IncompatibleSpecError(
                f"counter: checkpoint counter {header.get('counter')!r} differs from"
                f" {self.kind.value!r}; start a new epoch instead of restoring")
        if int(header.get("counter_version", -1)) != _STATE_VERSION:
            raise SerializationError(
                f"counter_version: {header.get('counter_version')!r} unsupported"
                f" (this build reads {_STATE_VERSION})")
        stored = float(header.get("sigma", float("nan")))
        if not math.isclose(stored, self.sigma, rel_tol=1e-9) or bool(
                header.get("integer_noise")) != self.integer_noise:
            raise IncompatibleSpecError(
                f"calibration: checkpoint sigma={stored} (integer={header.get('integer_noise')})"
                f" differs from the current calibration sigma={self.sigma}"
                f" (integer={self.integer_noise}); start a new epoch instead of restoring")
        rounds = int(header.get("rounds", -1))
        if not 0 <= rounds <= self.horizon:
            raise SerializationError(f"counters: rounds {rounds} outside [0, {self.horizon}]")
        need = {"prefix": (self.n,), "fact_now": (self.n,), "fact_prev": (self.n,)}
        for name, shape in need.items():
            a = arrays.get(name)
            if a is None or a.shape != shape:
                raise SerializationError(
                    f"counters: array {name!r} missing or not of shape {shape}")
        buf = arrays.get("fact_buf")
        want = (self._buf.shape[0], self.n) if self.kind is CounterKind.BLT else (rounds, self.n)
        if buf is None or buf.shape != want or buf.dtype != np.float64:
            raise SerializationError(f"counters: array 'fact_buf' missing or not float64 {want}")
        self.rounds = rounds
        self._prefix = arrays["prefix"].astype(np.int64, copy=True)
        self._now = arrays["fact_now"].astype(np.float64, copy=True)
        self._prev = arrays["fact_prev"].astype(np.float64, copy=True)
        self._buf = buf.copy()

    def to_bytes(self) -> bytes:
        """Versioned binary state of this counter array alone (no pickle)."""
        return pack(f"counter_{self.kind.value}", {"n": self.n, "horizon": self.horizon},
                    self.state_header(), self.state_arrays())

    @classmethod
    def from_bytes(cls, data: bytes, noise: GaussianNoise) -> FactorizedCounters:
        """Restore :meth:`to_bytes` output (the noise source continues the draws)."""
        header, arrays = unpack(data)
        st, spec = header.get("state", {}), header.get("spec", {})
        kind = st.get("counter")
        if header.get("mechanism") != f"counter_{kind}":
            raise SerializationError(f"mechanism: {header.get('mechanism')!r} is not a counter")
        try:
            c = cls(int(spec["n"]), int(spec["horizon"]), float(st["sigma"]),
                    bool(st["integer_noise"]), noise, kind=str(kind))
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"counter state: malformed header ({exc!r})") from None
        c.restore(st, arrays)
        return c


def factorized_error_bound(sigma: float, row_norm_sq: float, *, n: int, steps: int,
                           beta: float, integer: bool) -> float:
    """``sigma sqrt(2 v ln(2 steps n / beta))`` (+ 1/2 for the rounding when ``integer``).

    ``N_t`` is ``N(0, sigma^2 v_t)`` with ``v_t <= v``; the tail bound and the
    union bound are those of :func:`sketches.privacy.counter_error_bound` with
    ``levels`` replaced by ``v``.
    """
    base = counter_error_bound(sigma, levels=1, n=n, steps=steps, beta=beta)
    return float(base) * math.sqrt(row_norm_sq) + (0.5 if integer else 0.0)
