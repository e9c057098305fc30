"""Noisy dyadic prefix counts over an integer domain ``[0, 2^bits)`` (paper 003, sec. 4).

Level ``s`` counts the prefixes ``x >> s`` (``2^(bits-s)`` nodes). A level is
kept **exact** (one counter per node) when it has at most ``depth * width``
nodes (Wang et al.'s DCS keeps its top levels exact too), otherwise it is a
Count-Min (``kind="cms"``) or Count Sketch (``kind="cs"``) of the prefixes with
its own public hash seed. Every counter of every level gets one Gaussian noise
value drawn at construction (paper 003: noise once, at initialisation); the
levels are released together, once.

Joint L2 sensitivity (one event touches one node per level; see
:func:`sketches.windowed.linear.dp_linear.linear_l2_sensitivity` for the per-level value, an
exact level counting as a 1-row Count-Min)::

    Delta_2^2 = sum over levels of Delta_level^2

Equivalent to paper 003's split ``rho_0 = rho / log U`` per level, but with
one exact calibration for the whole release (no slack from composing).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> lv = DyadicLevels(bits=4, shifts=(0, 2, 4), kind="cs", depth=1, width=4, hash_seed=0)
>>> [lv.is_exact(i) for i in range(3)]
[False, True, True]
>>> lv.draw_noise(make_noise("zero", allow_insecure=True), 1.0, True)
>>> lv.update(np.array([1, 2, 2, 15]), np.ones(4))
>>> lv.estimate(2, np.array([0])).tolist()          # the root holds N
[4.0]
>>> lv.estimate(1, np.array([0, 3])).tolist()       # prefixes x >> 2
[3.0, 1.0]
"""

from __future__ import annotations

import math

import numpy as np

from sketches.core.hashing import HashSpec
from sketches.errors import SpecError
from sketches.windowed.linear.dp_linear import accumulate, linear_l2_sensitivity

__all__ = ["DyadicLevels", "check_domain"]


def check_domain(items: np.ndarray, bits: int) -> np.ndarray:
    """Items as int64 in ``[0, 2^bits)``; raises SpecError naming the fix otherwise.

    >>> check_domain(np.array([0, 7]), 3).tolist()
    [0, 7]
    """
    x = np.asarray(items)
    if x.shape[0] and x.dtype.kind not in "iu":
        raise SpecError("items: the dyadic mechanisms need integer items in [0, 2**bits); "
                        "map them to integers (e.g. IPv4 -> uint32) before the sketch")
    x = x.astype(np.int64)
    if x.shape[0] and (int(x.min()) < 0 or int(x.max()) >= 1 << bits):
        raise SpecError(f"items: outside [0, 2**{bits}); raise 'bits' or clip the items")
    return x


class DyadicLevels:
    """Dyadic prefix counters (exact or hashed per level) with noise drawn once.

    Parameters
    ----------
    bits : int
        Domain ``[0, 2^bits)``.
    shifts : tuple of int
        Level shifts, increasing; the last is the root when it equals ``bits``.
    kind : str
        Hashed levels: ``"cms"`` (min) or ``"cs"`` (median).
    depth, width : int
        Hashed level size; a level with ``<= depth * width`` nodes is exact.
    hash_seed : int
        Public seed; level ``i`` uses ``hash_seed * 1009 + shift + 1``.
    """

    def __init__(self, bits: int, shifts: tuple[int, ...], kind: str, depth: int, width: int,
                 hash_seed: int) -> None:
        if not 1 <= bits <= 62:
            raise SpecError(f"bits: must be in [1, 62], got {bits}")
        if list(shifts) != sorted(set(shifts)) or shifts[0] < 0 or shifts[-1] > bits:
            raise SpecError(f"shifts: must be increasing within [0, bits], got {shifts}")
        self.bits, self.shifts, self.kind = bits, tuple(shifts), kind
        self.depth, self.width = depth, width
        self.hashes: list[HashSpec | None] = []
        self.counts: list[np.ndarray] = []
        for s in self.shifts:
            nodes = 1 << (bits - s)
            if nodes <= depth * width:
                self.hashes.append(None)
                self.counts.append(np.zeros((1, nodes), dtype=np.int64))
            else:
                self.hashes.append(HashSpec(seed=hash_seed * 1009 + s + 1, depth=depth,
                                            width=width))
                self.counts.append(np.zeros((depth, width), dtype=np.int64))
        self.noise: list[np.ndarray] = [np.zeros(c.shape) for c in self.counts]

    def is_exact(self, level: int) -> bool:
        """Whether level ``level`` (index into ``shifts``) holds one counter per node."""
        return self.hashes[level] is None

    def l2_sensitivity(self, relation: str, weight_clip: int, turnstile: bool,
                       unit_cap: int = 1) -> float:
        """Joint L2 sensitivity of all levels (module docstring)."""
        total = 0.0
        for i in range(len(self.shifts)):
            kind, d = ("cms", 1) if self.is_exact(i) else (self.kind, self.depth)
            total += linear_l2_sensitivity(kind, d, relation, weight_clip, turnstile,
                                           unit_cap) ** 2
        return math.sqrt(total)

    def cells(self) -> int:
        """Number of noisy counters."""
        return sum(int(c.size) for c in self.counts)

    def draw_noise(self, noise: object, sigma: float, discrete: bool) -> None:
        """Draw the noise of every counter once (from the injected NoiseSource)."""
        draw = noise.discrete_gaussian if discrete else noise.gaussian  # type: ignore[attr-defined]
        self.noise = [np.asarray(draw(sigma, c.shape), dtype=np.float64) for c in self.counts]

    def update(self, items: np.ndarray, weights: np.ndarray) -> None:
        """Add weighted items (int64 in the domain) to every level, vectorised per level."""
        for i, s in enumerate(self.shifts):
            prefix = items >> s
            h = self.hashes[i]
            if h is None:
                c = self.counts[i]
                c[0] += np.rint(np.bincount(prefix, weights=weights,
                                            minlength=c.shape[1])).astype(np.int64)
            else:
                accumulate(self.counts[i], h, h.item_keys(prefix), weights, self.kind == "cs")

    def noisy(self, level: int) -> np.ndarray:
        """Noisy counters of one level, rounded to integers (what a release contains)."""
        return np.rint(self.counts[level] + self.noise[level])

    def estimate(self, level: int, prefixes: np.ndarray) -> np.ndarray:
        """Noisy count of each prefix node at ``level`` (min for CMS, median for CS)."""
        m = self.noisy(level)
        h = self.hashes[level]
        if h is None:
            return m[0, prefixes]
        keys = h.item_keys(np.asarray(prefixes, dtype=np.int64))
        cells = m[np.arange(self.depth)[:, None], h.buckets(keys)]
        if self.kind == "cms":
            return cells.min(axis=0)
        return np.median(cells * h.signs(keys), axis=0)

    def arrays(self) -> dict[str, np.ndarray]:
        """State arrays for serialization (``counts_i``, ``noise_i``)."""
        out: dict[str, np.ndarray] = {}
        for i in range(len(self.shifts)):
            out[f"counts_{i}"] = self.counts[i]
            out[f"noise_{i}"] = self.noise[i]
        return out

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore arrays written by :meth:`arrays` (shapes checked)."""
        for i in range(len(self.shifts)):
            c = arrays[f"counts_{i}"].astype(np.int64)
            n = arrays[f"noise_{i}"].astype(np.float64)
            if c.shape != self.counts[i].shape or n.shape != c.shape:
                raise SpecError(f"state: level {i} has shape {c.shape}, expected "
                                f"{self.counts[i].shape}; restore with the original spec")
            self.counts[i], self.noise[i] = c, n

    def memory_bytes(self) -> int:
        """Bytes of counters and noise."""
        return sum(int(c.nbytes + n.nbytes) for c, n in zip(self.counts, self.noise, strict=True))
