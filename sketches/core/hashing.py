"""Vectorised hashing of stream items into sketch rows (strongly universal rows).

Every sketch row ``i`` needs a bucket function ``h_i: items -> [0, width)`` and,
for Count Sketch, a sign function ``g_i: items -> {-1, +1}``. Items are first
mapped *injectively* (ints) or by a seeded 64-bit hash (str/bytes) to a 64-bit
*key*; every row then applies its own hash, drawn from a **strongly universal
(pairwise-independent) family with independent parameters per row**, which is
what the analyses of paper 002 assume (Lemma 5 for CMS/CS and Lemma 6, the
LazyHH privacy argument: rows pairwise independent and mutually independent).
It is never Python's ``hash()`` (salted per process).

Family (defined normatively in :mod:`sketches.core.hash_family`): vector
multiply-add-shift over the two 32-bit limbs of the key (Dietzfelbinger 1996;
Thorup, arXiv:1504.06804, Section 3.3), strongly universal onto ``[2**l]`` for
``l <= 33``; bucket ``(H(x) * width) >> 32`` with ``l = 32`` (bias at most
``2**-32`` per ``1/width`` for widths that are not powers of two), sign from
the top bit of a second, independent row hash.

Item keys (the hash family is over keys; distinct items must have distinct
keys, see below)::

    fmix64(z): z ^= z >> 33; z *= 0xFF51AFD7ED558CCD; z ^= z >> 33
               z *= 0xC4CEB9FE1A85EC53; z ^= z >> 33      (all mod 2**64)

- integer ``x`` (two's-complement uint64): ``key = fmix64(x ^ int_salt)`` --
  a bijection, so distinct ints never share a key.
- str (UTF-8) / bytes ``s`` of *true* byte length ``L`` (trailing NULs count:
  ``"a"`` and ``"a\\x00"`` differ), zero-padded to ``k = ceil(L/8)``
  little-endian uint64 words: ``h = str_salt; h = fmix64(h ^ w_j)`` for each
  word; ``key = fmix64(h ^ L)``. The encoding (words, ``L``) is injective, but
  the chain is unkeyed and invertible: with a known seed anyone can construct
  two strings with the same key. So these keys are fine for sketch rows
  (a collision is part of the sketch's error) and **never** for published
  labels or for a proof that needs unpredictable keys: Misra-Gries sketches key
  str items by their exact bytes (:mod:`sketches.windowed.misra_gries.mg_state`) and LazyHH by a
  secret keyed PRF (:mod:`sketches.core.keyed_prf`; SEMANTICS.md §11).
  Fixed-width numpy ``U``/``S`` arrays cannot hold trailing NULs (numpy
  strips them when the array is built); pass object arrays or lists to hash
  such items exactly (lists are converted to object arrays).

Parameters. ``2 + 6 d`` uint64 words (layout: :mod:`sketches.core.hash_family`):
the two item-key salts, then six words per row. They come either

- from a public integer ``seed`` (SHAKE-256 seed expansion, recomputable
  by any reader, :func:`sketches.core.hash_family.expand_seed`). The hash is then
  public and travels in every release (:meth:`HashSpec.to_public`); the rows
  are then as independent as SHAKE-256 output is from uniform (enough for
  accuracy; a hash a privacy proof needs to be random and unknown uses the
  next option); or
- from secret random bytes (:meth:`HashSpec.random`, ``noise.random_bytes``)
  for mechanisms whose hash must stay secret (LazyHH): ``to_public()`` then
  refuses, and checkpoints use :meth:`HashSpec.to_state`.

Examples
--------
>>> import numpy as np
>>> spec = HashSpec(seed=7, depth=3, width=16)
>>> keys = spec.item_keys(np.array([1, 2, 3]))
>>> keys.dtype
dtype('uint64')
>>> b = spec.buckets(keys)
>>> b.shape, bool(((b >= 0) & (b < 16)).all())
((3, 3), True)
>>> bool((spec.item_keys(np.array(["10.0.0.1"])) ==
...       spec.item_keys(np.array([b"10.0.0.1"], dtype=object))).all())
True
>>> k = spec.item_keys(["10.0.0.1", "10.0.0.1\\x00"])
>>> bool(k[0] != k[1])
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from sketches.core.hash_family import eval_row, expand_seed, limbs, n_params
from sketches.core.hash_keys import fmix64, item_keys
from sketches.errors import PrivacyError, SpecError

# The row family (expand_seed, limbs, n_params) lives in sketches.core.hash_family
# (re-exported here); this module is the spec object around it.
__all__ = ["HASH_ALGORITHM", "HASH_VERSION", "HashSpec", "expand_seed", "fmix64", "limbs",
           "n_params"]

HASH_ALGORITHM = "dpstream-msv-v2"
HASH_VERSION = 2
_MASK64 = (1 << 64) - 1


class RandomBytes(Protocol):
    """The part of :class:`sketches.core.noise.NoiseSource` :meth:`HashSpec.random` uses."""

    def random_bytes(self, n: int) -> bytes: ...


@dataclass(frozen=True)
class HashSpec:
    """Strongly universal row hashes for a ``depth x width`` sketch.

    Parameters
    ----------
    seed : int or None
        Public seed (any integer; used modulo 2**64). ``None`` only together
        with ``params`` (secret random hash, see :meth:`random`).
    depth : int
        Number of rows ``d`` (>= 1).
    width : int
        Number of columns ``w`` (1 <= w < 2**32).
    params : tuple of int, optional
        Explicit ``2 + 6 d`` parameter words (secret; not shown in ``repr``).

    Examples
    --------
    >>> spec = HashSpec(seed=1, depth=2, width=8)
    >>> spec.to_public()["algorithm"], spec.to_public()["version"]
    ('dpstream-msv-v2', 2)
    >>> HashSpec.from_public(spec.to_public()) == spec
    True
    """

    seed: int | None
    depth: int
    width: int
    params: tuple[int, ...] | None = field(default=None, repr=False)
    _p: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.depth, int | np.integer) or isinstance(self.depth, bool) \
                or self.depth < 1:
            raise SpecError(f"depth: must be an integer >= 1, got {self.depth!r}")
        if not isinstance(self.width, int | np.integer) or not 1 <= self.width < 2**32:
            raise SpecError(f"width: must be an integer in [1, 2**32), got {self.width!r}")
        object.__setattr__(self, "depth", int(self.depth))
        object.__setattr__(self, "width", int(self.width))
        n = n_params(self.depth)
        if self.params is None:
            if not isinstance(self.seed, int | np.integer) or isinstance(self.seed, bool):
                raise SpecError(f"hash_seed: must be an integer, got {self.seed!r}; pass an int")
            object.__setattr__(self, "seed", int(self.seed))
            words = expand_seed(self.seed, n)
        else:
            if self.seed is not None:
                raise SpecError("hash.seed: give either a seed or explicit params, not both")
            words = tuple(int(x) for x in self.params)
            if len(words) != n or any(not 0 <= x <= _MASK64 for x in words):
                raise SpecError(
                    f"hash.params: need {n} integers in [0, 2**64) for depth={self.depth},"
                    f" got {len(words)}; build secret hashes with HashSpec.random"
                )
            object.__setattr__(self, "params", words)
        object.__setattr__(self, "_p", np.array(words, dtype=np.uint64))

    @classmethod
    def random(cls, depth: int, width: int, noise: RandomBytes) -> HashSpec:
        """A secret hash with parameters drawn from ``noise.random_bytes`` (uniform words).

        Use :class:`~sketches.core.noise.SecureNoise` in production. The result's
        :meth:`to_public` refuses; persist it with :meth:`to_state` (private).
        The item-key salts are secret too, but the str key chain is not a
        PRF; LazyHH therefore keys str items with :mod:`sketches.core.keyed_prf`.

        Examples
        --------
        >>> from sketches.core.noise import make_noise
        >>> h = HashSpec.random(2, 8, make_noise("fast", seed=1, allow_insecure=True))
        >>> h.secret, h.seed is None, "params" not in repr(h)
        (True, True, True)
        """
        n = n_params(depth)
        raw = noise.random_bytes(8 * n)
        if len(raw) != 8 * n:
            raise SpecError(f"noise: random_bytes returned {len(raw)} bytes, expected {8 * n}")
        words = tuple(int(x) for x in np.frombuffer(raw, dtype="<u8"))
        return cls(None, depth, width, words)

    @property
    def secret(self) -> bool:
        """True for a hash with secret random parameters (never released)."""
        return self.params is not None

    def words(self) -> np.ndarray:
        """The ``2 + 6 d`` uint64 parameter words (read-only view; secret for a random hash).

        For compiled kernels that evaluate :mod:`sketches.core.hash_family` rows themselves.
        """
        view = self._p.view()
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ keys
    def item_keys(self, items: np.ndarray | Sequence[Any]) -> np.ndarray:
        """Map items (ints, str or bytes) to 64-bit keys (injective on ints and encodings).

        Parameters
        ----------
        items : array-like
            Integer array, or array/list of str (UTF-8) / bytes (``U``, ``S`` or
            object dtype). Lists keep trailing NULs (object conversion).

        Returns
        -------
        numpy.ndarray of uint64, shape (n,)

        Examples
        --------
        >>> spec = HashSpec(seed=0, depth=1, width=4)
        >>> bool(spec.item_keys([5])[0] == spec.item_keys(np.array([5], np.int32))[0])
        True
        >>> bool(spec.item_keys([b"ab"])[0] != spec.item_keys([b"ab\\x00"])[0])
        True
        """
        return item_keys(items, int(self._p[0]), int(self._p[1]))

    # --------------------------------------------------------------- per row
    def row_into(
        self, keys: np.ndarray | tuple[np.ndarray, np.ndarray], row: int, out: np.ndarray,
        signs_out: np.ndarray | None = None, scratch: np.ndarray | None = None,
    ) -> None:
        """Write row ``row``'s buckets into ``out`` (int64/uint64, shape (n,)), in place.

        Allocation-light hot-path variant of :meth:`buckets` (and of
        :meth:`signs` into ``signs_out``, any numeric dtype) for one row
        (:func:`sketches.core.hash_family.eval_row`). ``keys`` may be precomputed
        :func:`limbs` (saves two passes per row); ``scratch`` an optional
        uint64 work array of shape (n,).
        """
        lo, hi = limbs(keys) if not isinstance(keys, tuple) else keys
        tmp = np.empty_like(out, dtype=np.uint64) if scratch is None else scratch[: out.shape[0]]
        eval_row(self._p, self.width, lo, hi, row, out, signs_out, tmp)

    def buckets(self, keys: np.ndarray) -> np.ndarray:
        """Bucket of every key in every row, ``int64[depth, n]`` in ``[0, width)``.

        Examples
        --------
        >>> spec = HashSpec(seed=3, depth=2, width=5)
        >>> spec.buckets(spec.item_keys(np.arange(4))).shape
        (2, 4)
        """
        lh = limbs(keys)
        out = np.empty((self.depth, lh[0].shape[0]), dtype=np.int64)
        tmp = np.empty(lh[0].shape[0], dtype=np.uint64)
        for i in range(self.depth):
            self.row_into(lh, i, out[i], scratch=tmp)
        return out

    def cells(self, keys: np.ndarray) -> np.ndarray:
        """Flat cell indices ``row * width + bucket``, ``int64[depth, n]``.

        Examples
        --------
        >>> spec = HashSpec(seed=3, depth=2, width=5)
        >>> keys = spec.item_keys(np.arange(4))
        >>> bool((spec.cells(keys) == spec.buckets(keys) + [[0], [5]]).all())
        True
        """
        out = self.buckets(keys)
        out += (np.arange(self.depth, dtype=np.int64) * self.width)[:, None]
        return out

    def signs(self, keys: np.ndarray) -> np.ndarray:
        """Sign (+1/-1) of every key in every row, ``int8[depth, n]``.

        Examples
        --------
        >>> spec = HashSpec(seed=3, depth=2, width=5)
        >>> s = spec.signs(spec.item_keys(np.arange(1000)))
        >>> bool(np.isin(s, [-1, 1]).all())
        True
        """
        return self.buckets_and_signs(keys)[1]

    def buckets_and_signs(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both :meth:`buckets` and :meth:`signs` (``int64[d, n]``, ``int8[d, n]``)."""
        lh = limbs(keys)
        n = lh[0].shape[0]
        b = np.empty((self.depth, n), dtype=np.int64)
        s = np.empty((self.depth, n), dtype=np.int8)
        tmp = np.empty(n, dtype=np.uint64)
        for i in range(self.depth):
            self.row_into(lh, i, b[i], s[i], scratch=tmp)
        return b, s

    # ---------------------------------------------------------------- public
    def _rows_public(self) -> dict[str, Any]:
        p = [int(x) for x in self._p]
        return {
            "row_params": [p[2 + 6 * i: 5 + 6 * i] for i in range(self.depth)],
            "sign_params": [p[5 + 6 * i: 8 + 6 * i] for i in range(self.depth)],
        }

    def to_public(self) -> dict[str, Any]:
        """Everything a reader needs to recompute buckets and signs (JSON-able).

        Raises
        ------
        PrivacyError
            For a secret hash (:meth:`random`): it must never be released.
        """
        if self.secret:
            raise PrivacyError(
                "hash: this HashSpec has secret random parameters and must not be released;"
                " use a seeded HashSpec for public sketches, or to_state() for checkpoints"
            )
        return {"algorithm": HASH_ALGORITHM, "version": HASH_VERSION, "seed": self.seed,
                "depth": self.depth, "width": self.width, **self._rows_public()}

    @classmethod
    def from_public(cls, data: dict[str, Any]) -> HashSpec:
        """Rebuild a spec from :meth:`to_public` output, checking algorithm and parameters."""
        algo = data.get("algorithm")
        if algo != HASH_ALGORITHM or int(data.get("version", -1)) != HASH_VERSION:
            raise SpecError(
                f"hash.algorithm: unsupported hash {algo!r} version {data.get('version')!r};"
                f" this reader supports {HASH_ALGORITHM!r} version {HASH_VERSION}"
                " (re-publish releases made by older dpstream versions)"
            )
        try:
            spec = cls(seed=int(data["seed"]), depth=int(data["depth"]),
                       width=int(data["width"]))
        except KeyError as exc:
            raise SpecError(f"hash.{exc.args[0]}: missing from hash spec; include it") from None
        mine = spec._rows_public()
        for key in ("row_params", "sign_params"):
            if key in data and [x if isinstance(x, int) else [int(v) for v in x]
                                for x in data[key]] != mine[key]:
                raise SpecError(f"hash.{key}: do not match the seed; the release is corrupt")
        return spec

    def to_state(self) -> dict[str, Any]:
        """Private, JSON-able description (secret params included) for checkpoints."""
        out: dict[str, Any] = {"algorithm": HASH_ALGORITHM, "version": HASH_VERSION,
                               "depth": self.depth, "width": self.width}
        if self.secret:
            out["params"] = [int(x) for x in self._p]
        else:
            out["seed"] = self.seed
        return out

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> HashSpec:
        """Inverse of :meth:`to_state`.

        Examples
        --------
        >>> from sketches.core.noise import make_noise
        >>> h = HashSpec.random(2, 8, make_noise("fast", seed=1, allow_insecure=True))
        >>> HashSpec.from_state(h.to_state()) == h
        True
        """
        if data.get("algorithm") != HASH_ALGORITHM:
            raise SpecError(f"hash.algorithm: unsupported {data.get('algorithm')!r} in state")
        params = data.get("params")
        return cls(None if params is not None else int(data["seed"]), int(data["depth"]),
                   int(data["width"]), None if params is None else tuple(int(x) for x in params))
