"""ContinualCounters: ``n`` Gaussian binary-mechanism counters sharing one clock.

This is Algorithm 2 of Holland, *Scalable DP Sketches under Continual
Observation* (paper 002): ``n`` GaussBM counters (Algorithm 1) that all receive
one increment per *round*. It is the output array ``O`` of the Punctual and
Lazy sketches (Algorithms 3 and 5).

Layout ("one node per level")
-----------------------------
The binary mechanism answers the prefix sum at round ``r`` (1-based) as the
sum of the noisy dyadic nodes that partition ``[1, r]``: one node of level
``k`` for every set bit ``k`` of ``r``. Every node's noisy value is
``exact node sum + gamma`` and the node sums of a partition add up to the
exact prefix, so the release is::

    query(r) = prefix(r) + sum_{k : bit k of r is 1} gamma_k

Hence the state is, per counter, the exact prefix (private, never released on
its own) plus, per level ``k``, the noise ``gamma_k`` of the most recently
completed level-``k`` node. At round ``r`` exactly one surviving node
completes, at level ``ctz(r)`` (count of trailing zeros); its noise is drawn
**once**, at that round, and stored (crash consistency: a node's noise is
never redrawn). Algorithm 1 also draws noise for the leaves that it merges
away in the same step; those values are never part of any output, so not
drawing them leaves the distribution of every release unchanged.

Noise draws (canonical rule): one :meth:`ContinualCounters.advance` call
opens ``k >= 1`` rounds; at its end, for every level ``l`` (ascending) whose
node completed during the call, exactly one call
``noise.discrete_gaussian(sigma, n)`` (integer calibration) or
``noise.gaussian(sigma, n)`` draws the noise of the *last* level-``l`` node
completed in the call. A node that completes and is superseded inside the
same call is never part of any observable state (no query, release or
checkpoint can happen in between), so it needs no noise: the distribution of
every observable state is exactly that of Algorithm 1. This caps the noise
cost of a call at ``levels * n`` draws instead of ``k * n``. The rule depends
only on the call boundaries, so a sequential reference that uses the same
boundaries consumes a deterministic noise source identically.

Atomicity: a call that opens rounds draws all its noise into temporaries
before changing any state, so a failing noise source leaves the counters
exactly as before the call (never exact counts behind stale noise).

Query cache: ``noise_sum(rounds)`` is kept per counter and updated when a
round opens (integer noise: incrementally, ``O(ctz(r) + 1)`` vector
operations, exact; float noise: recomputed in the same order as
:meth:`ContinualCounters.noise_sum`, bit-identical), so :meth:`ContinualCounters.query`
is one vector addition. It is derived state: recomputed on restore, not serialized.

Catch-up: :meth:`ContinualCounters.advance_empty` opens many empty rounds in
given calls and returns the query after each, vectorised, drawing the nodes the
canonical rule draws, in its order, in one noise call
(:mod:`sketches.counters.gauss_bm_catchup`).

Rounds and horizon: the horizon ``T`` (max rounds) is fixed at construction;
the tree has ``levels = ceil(log2(T + 1))`` levels (paper: ``h``). Opening a
round past ``T`` raises :class:`~sketches.errors.HorizonExceededError`.

Partially pushed rounds (LazySketch pushes one column at a time): after
round ``r`` was opened, some counters may not have received their round-``r``
increment yet. :meth:`ContinualCounters.query` takes a ``behind`` mask; those
counters are answered at round ``r - 1``. This is consistent because
``gamma_{ctz(r)}`` is not used by round ``r - 1`` (bit ``ctz(r)`` of ``r - 1``
is zero), so overwriting it when round ``r`` opens does not disturb them.

Examples
--------
>>> import numpy as np
>>> class Zero:
...     kind = "zero"
...     def gaussian(self, sigma, size): return np.zeros(size)
...     def discrete_gaussian(self, sigma, size): return np.zeros(size, np.int64)
>>> c = ContinualCounters(n=2, horizon=8, sigma=1.0, integer_noise=True, noise=Zero())
>>> c.advance(np.array([[1, 0], [2, 5]]))
>>> c.query().tolist(), c.rounds
([3, 5], 2)
>>> c.add_to_current(np.array([0, 1]))
>>> c.query().tolist()
[3, 6]
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from sketches.core.noise_compose import validate_discrete_sigma
from sketches.core.serialization import pack, unpack
from sketches.counters.gauss_bm_catchup import empty_rounds_noise
from sketches.counters.prefix import PrefixCounters
from sketches.errors import (
    IncompatibleSpecError,
    SerializationError,
    SpecError,
)
from sketches.privacy import counter_error_bound


class GaussianNoise(Protocol):
    """The part of :class:`sketches.core.noise.NoiseSource` the counters use."""

    def gaussian(self, sigma: float, size: Any) -> np.ndarray: ...

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray: ...

__all__ = ["ContinualCounters", "completed_levels", "levels_for_horizon", "set_bits",
           "trailing_zeros"]


def levels_for_horizon(horizon: int) -> int:
    """Tree height ``h = ceil(log2(T + 1))`` (nodes on a root-to-leaf path).

    Examples
    --------
    >>> [levels_for_horizon(t) for t in (1, 2, 3, 4, 7, 8)]
    [1, 2, 2, 3, 3, 4]
    """
    if horizon < 1:
        raise SpecError(f"horizon: must be >= 1 round, got {horizon}")
    return int(horizon).bit_length()


def trailing_zeros(r: int) -> int:
    """Number of trailing zero bits of ``r >= 1`` (the level completed at round r).

    Examples
    --------
    >>> [trailing_zeros(r) for r in (1, 2, 3, 4, 12)]
    [0, 1, 0, 2, 2]
    """
    return (r & -r).bit_length() - 1


def completed_levels(r0: int, r1: int) -> list[int]:
    """Levels (ascending) of the nodes completed by rounds ``r0+1 .. r1``.

    Level ``l`` completes at rounds ``r`` with ``ctz(r) == l``, i.e. odd multiples
    of ``2**l``.

    Examples
    --------
    >>> completed_levels(0, 1), completed_levels(0, 4), completed_levels(4, 5)
    ([0], [0, 1, 2], [0])
    """
    out = []
    for level in range(max(r1, 1).bit_length()):
        step = 1 << level
        first = ((r0 >> level) + 1) << level  # first multiple of 2**l above r0
        if not (first >> level) & 1:
            first += step  # need an odd multiple
        if first <= r1:
            out.append(level)
    return out


def set_bits(r: int) -> list[int]:
    """Set bits of ``r`` ascending: the levels of the nodes partitioning ``[1, r]``."""
    return [k for k in range(max(r, 0).bit_length()) if (r >> k) & 1]


class ContinualCounters(PrefixCounters):
    """An array of ``n`` GaussBM counters with a shared round clock.

    Parameters
    ----------
    n : int
        Number of counters.
    horizon : int
        Maximum number of rounds ``T``.
    sigma : float
        Per-node noise standard deviation (from :func:`sketches.privacy.calibrate`).
    integer_noise : bool
        Draw discrete Gaussian (int64) noise instead of continuous Gaussian.
    noise : NoiseSource
        Injected noise source (only ``gaussian``/``discrete_gaussian`` are used).

    Notes
    -----
    Subclass interface (used by
    :class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`, which changes
    *when* a node's noise is drawn, not the counters): ``_prefix`` (exact
    prefix sums), ``_node_noise`` (latest node per level), ``_noise_now`` (the
    query cache) and ``_draw_values``. They are read and written through
    ``self`` only; no other module touches them.
    """

    def __init__(
        self, n: int, horizon: int, sigma: float, integer_noise: bool, noise: GaussianNoise
    ) -> None:
        if n < 1:
            raise SpecError(f"n: number of counters must be >= 1, got {n}")
        if not sigma >= 0.0 or not np.isfinite(sigma):
            raise SpecError(f"sigma: must be a finite number >= 0, got {sigma}")
        self.n = int(n)
        self.horizon = int(horizon)
        self.levels = levels_for_horizon(horizon)
        self.sigma = float(sigma)
        self.integer_noise = bool(integer_noise)
        if self.integer_noise and self.sigma > 0:
            # fail at construction, not at the first draw (builds the exact table)
            validate_discrete_sigma(self.sigma, build=True)
        self._noise_src = noise
        self.rounds = 0
        self._prefix = np.zeros(self.n, dtype=np.int64)
        dtype = np.int64 if self.integer_noise else np.float64
        self._node_noise = np.zeros((self.levels, self.n), dtype=dtype)
        self._noise_now = np.zeros(self.n, dtype=dtype)  # cache: noise_sum(rounds)

    # ------------------------------------------------------------ updates
    def _draw(self) -> np.ndarray:
        return self._draw_values(self.n)

    def _draw_values(self, m: int) -> np.ndarray:
        if self.integer_noise:
            return np.asarray(self._noise_src.discrete_gaussian(self.sigma, m), dtype=np.int64)
        return np.asarray(self._noise_src.gaussian(self.sigma, m), dtype=np.float64)

    def push(self, total: np.ndarray, new_rounds: int) -> None:
        """Add ``total`` (shape ``(n,)``) to the prefix and open ``new_rounds`` rounds.

        Equivalent to :meth:`advance` with per-round rows summing to ``total``
        (plus :meth:`add_to_current` for a part belonging to the open round):
        the state keeps only the exact prefix, node sums are implicit. Noise
        follows the canonical per-call rule.
        """
        inc, k = self._push_args(total, new_rounds)
        if self.rounds + k == 0:
            if np.any(inc):
                raise SpecError("total: no round is open yet; open at least one round")
            return
        self._commit(inc.astype(np.int64, copy=False), k)

    def _commit(self, total: np.ndarray | None, k: int) -> None:
        """Draw the noise of the nodes completed by ``k`` new rounds, then commit.

        Atomic w.r.t. noise failure: every draw goes to a temporary first; the
        prefix, the node noise and the round count change only after all
        draws succeeded. (Updating the prefix first and then failing a draw
        would leave exact counts behind stale noise, and a later query would
        release them.)
        """
        drawn = [(level, self._draw())
                 for level in completed_levels(self.rounds, self.rounds + k)]
        now = self._next_noise_sum(drawn, k)  # a temporary too: computed before committing
        if total is not None:
            self._prefix += total
        for level, value in drawn:
            self._node_noise[level] = value
        self._noise_now = now
        self.rounds += k

    def _next_noise_sum(self, drawn: list[tuple[int, np.ndarray]], k: int) -> np.ndarray:
        """``noise_sum(rounds + k)`` once ``drawn`` is committed (the query cache).

        Integer noise, one round (the hot path): round ``r + 1`` with
        ``l = ctz(r + 1)`` drops levels ``0..l-1`` (all set in ``r``) and adds the
        new level-``l`` node: ``O(l + 1)`` vector operations, exact in int64.
        Otherwise the partition sum is recomputed in :meth:`noise_sum`'s order,
        so float results are bit-identical to a fresh computation (and to a
        restored checkpoint).
        """
        if self.integer_noise and k == 1 and len(drawn) == 1:
            level, value = drawn[0]
            out = self._noise_now - self._node_noise[:level].sum(axis=0) if level else \
                self._noise_now.copy()
            out += value
            return out
        new = dict(drawn)
        out = np.zeros(self.n, dtype=self._node_noise.dtype)
        for b in set_bits(self.rounds + k):
            out += new[b] if b in new else self._node_noise[b]
        return out

    def advance_empty(self, ends: np.ndarray) -> np.ndarray:
        """``advance`` empty rounds in calls ending at ``ends``; the query after each call.

        Same state, releases and noise law as ``for e in ends: advance(zeros
        (e - rounds, n)); query()``, vectorised with one noise call
        (:mod:`sketches.counters.gauss_bm_catchup`). ``ends``: strictly increasing, all
        ``> rounds``. Returns shape ``(len(ends), n)``. Atomic (state unchanged
        on error); HorizonExceededError past the horizon.
        """
        e = np.asarray(ends, dtype=np.int64).reshape(-1)
        if not e.size:
            return np.zeros((0, self.n), dtype=self._node_noise.dtype)
        if int(e[0]) <= self.rounds or np.any(np.diff(e) <= 0):
            raise SpecError(f"ends: must be strictly increasing and > rounds={self.rounds}")
        self._check_horizon(int(e[-1]))
        sums, nodes = empty_rounds_noise(self.rounds, e, self._node_noise, self._draw_values)
        out = self._prefix + sums
        self._node_noise, self._noise_now = nodes, sums[-1].copy()
        self.rounds = int(e[-1])
        return out

    # ------------------------------------------------------------- queries
    def noise_sum(self, r: int) -> np.ndarray:
        """Sum of the noise of the nodes partitioning ``[1, r]`` (``r <= rounds``)."""
        out = np.zeros(self.n, dtype=self._node_noise.dtype)
        for k in set_bits(r):
            out += self._node_noise[k]
        return out

    def query(self, behind: np.ndarray | None = None) -> np.ndarray:
        """Noisy prefix sums (GaussBM release) of every counter.

        Parameters
        ----------
        behind : bool array of shape (n,), optional
            Counters whose current-round increment is not pushed yet; they are
            answered at round ``rounds - 1``.

        Returns
        -------
        numpy.ndarray
            int64 (integer noise) or float64, shape (n,). Noisy values only.
        """
        now = self._noise_now
        if behind is not None and self.rounds > 0 and bool(np.any(behind)):
            prev = self.noise_sum(self.rounds - 1)
            now = np.where(behind, prev, now)
        return self._prefix + now

    # --------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of numpy state (exact prefix + one noise value per level)."""
        return int(self._prefix.nbytes + self._node_noise.nbytes)

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for serialization (private: contain exact counts)."""
        return {"prefix": self._prefix, "node_noise": self._node_noise}

    def state_header(self) -> dict[str, Any]:
        """JSON-able scalars needed to restore the clock."""
        return {"rounds": self.rounds, "sigma": self.sigma,
                "integer_noise": self.integer_noise, "horizon": self.horizon}

    def restore(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Load state written by :meth:`state_arrays` / :meth:`state_header`.

        Refuses (IncompatibleSpecError) a checkpoint whose noise scale differs
        from this object's calibration: continuing an epoch with another sigma
        would silently change the guarantee; start a new epoch instead.
        """
        stored = float(header.get("sigma", float("nan")))
        if not math.isclose(stored, self.sigma, rel_tol=1e-9) or bool(
            header.get("integer_noise")) != self.integer_noise:
            raise IncompatibleSpecError(
                f"calibration: checkpoint sigma={stored} (integer={header.get('integer_noise')})"
                f" differs from the current calibration sigma={self.sigma}"
                f" (integer={self.integer_noise}); start a new epoch instead of restoring"
            )
        if "rounds" not in header:
            raise SerializationError("state.rounds: missing from the checkpoint header")
        prefix, node_noise = arrays.get("prefix"), arrays.get("node_noise")
        if prefix is None or node_noise is None:
            raise SerializationError("counters: missing 'prefix' or 'node_noise' array")
        if prefix.shape != self._prefix.shape or node_noise.shape != self._node_noise.shape:
            raise SerializationError(
                f"counters: array shapes {prefix.shape}/{node_noise.shape} do not match the"
                f" spec ({self._prefix.shape}/{self._node_noise.shape})"
            )
        if node_noise.dtype != self._node_noise.dtype:
            raise SerializationError(f"counters: node_noise dtype {node_noise.dtype} unexpected")
        rounds = int(header["rounds"])
        if not 0 <= rounds <= self.horizon:
            raise SerializationError(f"counters: rounds {rounds} outside [0, {self.horizon}]")
        self.rounds = rounds
        self._prefix = prefix.astype(np.int64, copy=True)
        self._node_noise = node_noise.copy()
        self._reset_query_cache()

    def _reset_query_cache(self) -> None:
        """Rebuild the derived ``noise_sum(rounds)`` cache after a restore."""
        self._noise_now = self.noise_sum(self.rounds)

    # ------------------------------------------- the counter family's common interface
    def error_bound(self, *, beta: float, steps: int = 1, counters: int | None = None,
                    at_round: int | None = None) -> float:
        """Max |release - prefix| of ``counters`` counters at ``steps`` releases, w.p. >= 1 - beta.

        ``sigma sqrt(2 h ln(2 steps counters / beta))`` (Lemma 4 with this sigma;
        ``at_round`` is accepted for the family's interface: the tree's bound uses
        ``h`` nodes at every round).
        """
        return counter_error_bound(self.sigma, levels=self.levels,
                                   n=self.n if counters is None else counters,
                                   steps=steps, beta=beta)

    def to_bytes(self) -> bytes:
        """Versioned binary state of this counter array alone (no pickle)."""
        return pack("counter_tree", {"n": self.n, "horizon": self.horizon},
                    {**self.state_header(), "counter": "tree",
                     "lazy": type(self).__name__ != "ContinualCounters"},
                    self.state_arrays())

    @classmethod
    def from_bytes(cls, data: bytes, noise: GaussianNoise) -> ContinualCounters:
        """Restore :meth:`to_bytes` output (the noise source continues the draws)."""
        header, arrays = unpack(data)
        if header.get("mechanism") != "counter_tree":
            raise SerializationError(f"mechanism: {header.get('mechanism')!r} is not a tree"
                                     " counter state")
        st, spec = header.get("state"), header.get("spec")
        for name, part in (("state", st), ("spec", spec)):
            if not isinstance(part, dict):
                raise SerializationError(f"counter state: header field {name!r} missing or"
                                         f" not a mapping ({type(part).__name__})")
        assert isinstance(st, dict) and isinstance(spec, dict)  # narrowed above
        try:
            c = cls(int(spec["n"]), int(spec["horizon"]), float(st["sigma"]),
                    bool(st["integer_noise"]), noise)
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"counter state: malformed header ({exc!r})") from None
        c.restore(st, arrays)
        return c
