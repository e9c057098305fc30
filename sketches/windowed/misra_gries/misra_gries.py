"""PMG: the private Misra-Gries sketch of Lebeda & Tětek (paper 000), single release.

Algorithm 1 (paper 000, §5): a Misra-Gries sketch of ``k`` counters that keeps
zero counters and, when a new item arrives and some counter is zero, replaces
the *smallest* zero key under a fixed, data-independent total order (dummy
keys first, then real keys by their unsigned 64-bit key). Estimates equal
standard MG's: ``f(x) - n/(k+1) <= c(x) <= f(x)`` (Fact 1).

Releases (one per window; a second ``release()`` raises ``PrivacyError``):

- ``release_mode="approx"`` -- Algorithm 2, (eps, delta)-DP: one *shared*
  noise draw ``eta`` added to every counter plus an independent per-counter
  draw, both of scale ``1/eps``; keys with ``c + eta + z >= tau`` are
  released, dummies never. Laplace: ``tau = 1 + 2 ln(3/delta)/eps``
  (Lemma 5); two-sided geometric (integer, default):
  ``tau = 1 + 2 ln(6 e^eps / ((e^eps + 1) delta))/eps`` (§5.2), see
  :func:`pmg_threshold`.
- ``release_mode="pure"`` -- Algorithm 3 (§6), eps-DP: subtract
  ``gamma = sum(c)/(k+1)`` (kept exact: values are scaled by ``k+1``),
  add noise of scale ``2/eps`` to *every* item of the declared universe
  ``[0, universe)`` and release the top-k.

Neighbouring relation: add/remove one event, order of the others unchanged
(paper 000, Definition 1). Merging shards: see :func:`sketches.windowed.misra_gries.pamg.merge_mg`
(Algorithm 2 must not be run on a merged sketch, §7).

Misra-Gries is order dependent and inherently sequential: a batch is
processed event by event by a tight CPython loop over a dict index (no numpy
pre-aggregation: aggregating a batch with ``np.unique`` is *not* equivalent,
because decrements between two copies of an item change the result).
Decrements cost O(k) but happen at most ``n/(k+1)`` times, so the total work
is O(n + n/(k+1) * k) = O(n).

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = PMGSpec(k=2, eps=1.0, delta=1e-6)
>>> mg = PMG(spec, make_noise("zero", allow_insecure=True))
>>> mg.update_batch(np.array([5, 5, 7, 5, 9, 5]))
>>> mg.counts()
{5: 3, 7: 0}
>>> pmg_threshold(1.0, 1e-6, "laplace") == 1 + 2 * math.log(3 / 1e-6)
True
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register
from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.windowed.misra_gries.mg_state import ItemCodec, MGState, worker_params
from sketches.windowed.misra_gries.pmg_spec import PMGSpec, pmg_error_bound, pmg_threshold

# ItemCodec, MGState and worker_params live in sketches.windowed.misra_gries.mg_state, PMGSpec,
# pmg_error_bound and pmg_threshold in sketches.windowed.misra_gries.pmg_spec (re-exported here).
__all__ = [
    "PMG", "ItemCodec", "MGState", "PMGSpec", "pmg_error_bound", "pmg_threshold",
    "worker_params",
]


class PMG:
    """Private Misra-Gries (paper 000): Algorithm 1 state, Algorithm 2/3 release.

    Parameters
    ----------
    spec : PMGSpec
    noise : NoiseSource
        Injected noise (``sketches.core.noise``); used only by :meth:`release`.
    """

    name: ClassVar[str] = "pmg"
    # 2: str items keyed by their exact bytes; 1 (int items only): same layout for ints
    FORMAT_VERSION: ClassVar[int] = 2

    def __init__(self, spec: PMGSpec, noise: Any) -> None:
        self.spec = spec
        self._noise = noise
        self._codec = ItemCodec(spec.item_kind, spec.hash_seed)
        self._mg = MGState(spec.k)
        self._released = False

    # ---------------------------------------------------------------- updates
    def update_batch(
        self,
        items: np.ndarray,
        ticks: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Feed a batch of events, in stream order (Algorithm 1, sequential).

        ``ticks`` are accepted and ignored (a window-scoped sketch has no clock).
        ``weights`` (non-negative ints) mean "this many consecutive copies";
        each copy is one event of the neighbouring relation.
        """
        if self._released:
            raise PrivacyError(
                "update_batch: this PMG window was already released; start a fresh "
                "instance for the next window (a re-release needs a fresh budget)"
            )
        keys = self._codec.keys(items)
        if self.spec.release_mode == "pure" and keys.size:
            signed = keys.view(np.int64)
            if int(signed.min()) < 0 or int(signed.max()) >= int(self.spec.universe or 0):
                raise SpecError(
                    f"items: release_mode='pure' needs items in [0, {self.spec.universe}) "
                    "(the declared universe); drop or remap out-of-range items first"
                )
        if weights is None:
            self._mg.update(keys)
        else:
            w = np.asarray(weights)
            if w.shape != keys.shape or w.dtype.kind not in "iu" or (w.size and w.min() < 0):
                raise SpecError("weights: need non-negative integers, one per item")
            self._mg.update_weighted(keys, w.astype(np.int64))

    def advance_to(self, tick: int) -> None:
        """No-op: a window-scoped MG has no clock (the worker's tick clock may call it)."""

    # ---------------------------------------------------------------- queries
    def counts(self) -> dict[Any, int]:
        """Exact (private!) MG counters of the stored real keys, by key order."""
        keys, counts = self._mg.real_items()
        return dict(zip(self._codec.labels(keys), counts.tolist(), strict=True))

    @property
    def events(self) -> int:
        """Number of events processed (private)."""
        return self._mg.n

    def take_for_merge(self) -> tuple[np.ndarray, np.ndarray]:
        """Hand this shard's exact summary (real keys, counts) to a merge; consumes the sketch.

        Used by :func:`sketches.windowed.misra_gries.pamg.merge_mg`: the merged
        release spends this window's budget, so the shard is marked released and
        may not be released (or merged) again.

        Raises
        ------
        PrivacyError
            The sketch was already released or merged.
        """
        if self._released:
            raise PrivacyError("sketches: a shard sketch was already released or merged; "
                               "merging it would spend its budget twice")
        keys, counts = self._mg.real_items()
        self._released = True
        return keys, counts

    # ---------------------------------------------------------------- release
    def release(self) -> dict[str, Any]:
        """Single DP release of this window; a second call raises PrivacyError."""
        if self._released:
            raise PrivacyError(
                "release: PMG is single-release and this window was already released; "
                "start a fresh instance (a second release would need a fresh budget)"
            )
        self._released = True
        if self.spec.release_mode == "pure":
            return _pure_release(self.spec, self._mg, self._noise)
        return self._approx_release()

    def _approx_release(self) -> dict[str, Any]:
        s = self.spec
        eps, delta = s.event_budget()
        keys, counts = self._mg.real_items()  # sorted by key: output order is data-independent
        scale = 1.0 / eps
        if s.noise == "geometric":
            shared = int(self._noise.discrete_laplace(scale, 1)[0])
            vals: np.ndarray = counts + shared + self._noise.discrete_laplace(scale, keys.size)
        else:
            shared_f = float(self._noise.laplace(scale, 1)[0])
            vals = counts + shared_f + self._noise.laplace(scale, keys.size)
        tau = pmg_threshold(eps, delta, s.noise)
        keep = vals >= tau
        return _payload(
            "approx", self._codec.entries(keys[keep], vals[keep].tolist()),
            threshold=tau, k=s.k, eps=s.eps, delta=s.delta, noise=s.noise,
            relation="add_remove", unit_cap=s.unit_cap,
            error_bound={
                "vs_sketch": pmg_error_bound(s.k, eps, delta, s.noise, s.beta),
                "beta": s.beta,
                "sketch_error": "n/(k+1) (one-sided, Fact 1)",
                "source": "paper 000, Lemma 7 / Theorem 8",
            },
        )

    # ---------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of sketch state: k keys + k counters (str keys: their bytes)."""
        return self._mg.memory_bytes()

    def to_bytes(self) -> bytes:
        """Versioned binary state (:mod:`sketches.core.serialization`).

        Arrays ``dummy``, ``counts`` and the slot keys: ``keys`` (uint64, int
        items) or ``key_blob``/``key_lengths`` (exact bytes of str items, dummies
        empty).
        """
        keys, dummy, counts = self._mg.arrays()
        state = {"n": self._mg.n, "decrements": self._mg.decrements,
                 "released": self._released, "format": self.FORMAT_VERSION}
        if self.spec.item_kind == "str" and keys.dtype != object:  # no real key yet
            keys = self._codec.key_array([b""] * keys.size)
        return pack(self.name, asdict(self.spec), state,
                    {"dummy": dummy, "counts": counts, **self._codec.encode(keys, "")})

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> PMG:
        """Restore a sketch written by :meth:`to_bytes` (noise is injected again)."""
        head, arrays = unpack(data)
        check_header(head, cls.name, None)
        st = head["state"]
        spec = PMGSpec(**head["spec"])
        fmt = st.get("format")
        if fmt == 1 and spec.item_kind == "str":
            raise SerializationError(
                "pmg: state format 1 keyed str items by a public-seed 64-bit hash, under which "
                "a forged item can take another item's published label (issue 8); it cannot be "
                "converted exactly. Release or discard this window with the dpstream that wrote "
                "it, or delete the window's checkpoint (docs/OPERATIONS.md, checkpoint formats)")
        if fmt not in (1, cls.FORMAT_VERSION):
            raise SerializationError(f"pmg: state format {fmt} is not {cls.FORMAT_VERSION}; "
                                     "restore with a matching dpstream")
        obj = cls(spec, noise)
        obj._mg = MGState.from_arrays(obj.spec.k, obj._codec.decode(arrays, ""), arrays["dummy"],
                                      arrays["counts"], int(st["n"]), int(st["decrements"]))
        obj._released = bool(st["released"])
        return obj


def _payload(mode: str, entries: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """The heavy-hitter release of either mode: header, ``items`` list, then ``fields``."""
    return {
        "kind": "heavy_hitters",
        "mechanism": PMG.name,
        "release_mode": mode,
        "items": entries,
        **fields,
    }


def _pure_release(spec: PMGSpec, mg: MGState, noise: Any) -> dict[str, Any]:
    """Algorithm 3 + noise over the whole universe + top-k (paper 000, §6), eps-DP.

    Post-processed counts ``c - gamma`` with ``gamma = sum(c)/(k+1)`` are kept
    exact by scaling by ``k+1``: ``v = (k+1) c - sum(c)`` (integer, zero when
    ``c <= gamma``). Their l1-sensitivity is ``< 2`` (Lemma 2 of §6), i.e.
    ``< 2(k+1)`` scaled, so noise of scale ``2(k+1)/eps`` (geometric: on the
    integer lattice) on every item of ``[0, universe)`` is eps-DP and the top-k
    is post-processing. Cost O(universe) noise draws, in chunks of 2**20.
    """
    keys, counts = mg.real_items()
    k1 = spec.k + 1
    scaled = k1 * counts - int(counts.sum())
    pos = scaled > 0
    sk, sv = keys[pos].view(np.int64), scaled[pos]
    scale = 2.0 * k1 * spec.unit_cap / spec.eps  # group privacy: l1 <= 2 m (§8 Lemma 4)
    d = int(spec.universe or 0)
    best_i = np.zeros(0, np.int64)
    best_v: np.ndarray = np.zeros(0, np.float64 if spec.noise == "laplace" else np.int64)
    chunk = 1 << 20
    for a in range(0, d, chunk):
        b = min(d, a + chunk)
        vals = np.zeros(b - a, best_v.dtype)
        sel = (sk >= a) & (sk < b)
        vals[sk[sel] - a] = sv[sel]
        if spec.noise == "laplace":
            vals = vals + noise.laplace(scale, b - a)
        else:
            vals = vals + noise.discrete_laplace(scale, b - a)
        cat_v = np.concatenate([best_v, vals])
        cat_i = np.concatenate([best_i, np.arange(a, b, dtype=np.int64)])
        if cat_v.size > spec.k:
            top = np.argpartition(-cat_v, spec.k - 1)[: spec.k]
            cat_v, cat_i = cat_v[top], cat_i[top]
        best_v, best_i = cat_v, cat_i
    order = np.lexsort((best_i, -best_v))
    return _payload(
        "pure", [{"item": x, "estimate": e} for x, e in
                 zip(best_i[order].tolist(), (best_v[order] / k1).tolist(), strict=True)],
        threshold=None, k=spec.k, eps=spec.eps, delta=0.0, noise=spec.noise,
        relation="add_remove",
        error_bound={
            "noise_bound": 2.0 * spec.unit_cap * math.log(2.0 * d / spec.beta) / spec.eps,
            "beta": spec.beta,
            "sketch_error": "n/(k+1) (one-sided, paper 000 §6 Lemma 1)",
            "source": "paper 000, §6",
        },
    )


def _build_spec(params: Any) -> PMGSpec:
    return PMGSpec(**worker_params(params, PMG.name)[0])


register(MechanismEntry(name=PMG.name, build_spec=_build_spec, build=PMG,
                        from_bytes=PMG.from_bytes, continual=False,
                        capabilities=Capabilities(
                            tick_clock=True, item_kind=lambda spec: spec.item_kind,
                            memory_for_item_bytes=PMGSpec.memory_bytes_for,
                            sketch_error=PMGSpec.sketch_error)))
