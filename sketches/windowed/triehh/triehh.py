"""TrieHH with counts (Cormode 2021, paper 001) over a stream window, single release.

Items are strings of ``levels`` digits of ``bits`` bits (alphabet
``a = 2**bits``): ints in ``[0, a**levels)``, or str/bytes cut/NUL-padded to
``levels`` bytes (``bits=8``). Level ``l`` (1..L) is a histogram of the
length-``l`` prefixes of the *sampled* events whose length-``(l-1)`` prefix is
in the trie; prefixes with sampled count ``X >= theta`` join the trie and are
released **with their exact sampled count** (no additive noise: privacy comes
from Poisson sampling with a public rate ``p`` plus the threshold).

Per level (paper 001, Lemmas 1-3, exact form): (eps_l, delta_l)-DP for
add/remove one event with ``eps_l = -ln(1 - theta p)`` (needs theta p < 1) and
``delta_l = exp(-(theta-1)^2/(theta+1))`` -- see :func:`level_privacy`.

Stream adaptation (``mode``):

- ``"subwindow"`` (default): the window of ``window_ticks`` ticks is cut into
  L equal sub-windows by the (public) tick; events of sub-window ``l`` vote
  only at level ``l``, and level ``l-1`` is thresholded when sub-window ``l``
  starts (the interactive protocol, run over time). Each event is used once,
  and later levels only read earlier *outputs*, so the window release is
  (eps_l, delta_l)-DP (adaptive parallel composition). Estimates extrapolate
  a sub-window to the window (``X * L / p``): exact in expectation only if the
  stream is stationary over the window.
- ``"all"``: every event votes at every level with fresh independent sampling;
  the trie is pruned at release (post-processing). Basic composition:
  (L eps_l, L delta_l). Memory: all sampled prefixes of all levels.

Examples
--------
>>> import numpy as np
>>> from sketches.core.noise import make_noise
>>> spec = TrieHHSpec(levels=2, bits=2, eps=1.0, delta=1e-3, mode="all")
>>> t = TrieHH(spec, make_noise("zero", allow_insecure=True))   # zero noise: p -> sample all
>>> t.update_batch(np.array([5] * 40 + [6] * 3))
>>> [d["item"] for d in t.release()["items"]]
[5]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from sketches.core.base import Capabilities, MechanismEntry, register
from sketches.core.serialization import check_header, pack, unpack
from sketches.errors import PrivacyError, SerializationError, SpecError
from sketches.windowed.misra_gries.mg_state import worker_params
from sketches.windowed.triehh.accounting import (
    exact_calibration,
    exact_level_delta,
    level_privacy,
    theta_for_delta,
)

# The accountant (level_privacy, theta_for_delta, exact_*) lives in
# sketches.windowed.triehh.accounting (re-exported here).
__all__ = ["TrieHH", "TrieHHSpec", "exact_calibration", "exact_level_delta", "level_privacy",
           "range_count", "rank_quantiles", "theta_for_delta"]


@dataclass(frozen=True)
class TrieHHSpec:
    """Every parameter of a windowed TrieHH.

    Parameters
    ----------
    levels, bits : int
        Trie depth L and bits per digit (``bits * levels <= 64``).
    eps, delta : float
        Budget of the window release; ``theta`` and ``p`` are derived
        (:attr:`theta`, :attr:`sampling_rate`).
    mode : {"subwindow", "all"}
        Stream adaptation (module docstring).
    window_ticks, start_tick : int
        ``"subwindow"``: tick ``t`` is in level ``(t - start_tick) * L // window_ticks``.
    item_kind : {"int", "str"}
        ``"str"`` needs ``bits == 8``; items are UTF-8 bytes cut/padded to L bytes.
    unit_cap : int
        User-level by group privacy: units of at most ``unit_cap`` events (capped
        exactly upstream) get (eps, delta); each event gets ``eps/m`` and
        ``delta/(m e^eps)``.
    accountant : {"note", "exact"}
        ``"note"``: theta, p from paper 001's (corrected) Lemmas 1-3. ``"exact"``:
        from :func:`exact_calibration` (our exact per-level divergence; much
        smaller detection limit theta/p).
    """

    #: What the state holds beyond its start-of-window size (no fixed worst case: a
    #: memory limit cannot be checked against it; worker/engine/memory_model.py refuses).
    state_growth: ClassVar[str] = "the distinct item prefixes of the window"

    levels: int
    bits: int
    eps: float
    delta: float
    mode: str = "subwindow"
    window_ticks: int = 1
    start_tick: int = 0
    item_kind: str = "int"
    unit_cap: int = 1
    accountant: str = "note"

    def __post_init__(self) -> None:
        if not (1 <= self.levels and 1 <= self.bits and self.bits * self.levels <= 64):
            raise SpecError("levels, bits: need levels >= 1, bits >= 1, bits*levels <= 64")
        if self.mode not in ("subwindow", "all"):
            raise SpecError(f"mode: use 'subwindow' or 'all', got {self.mode!r}")
        if not (self.eps > 0 and 0 < self.delta < 1):
            raise SpecError("eps, delta: need eps > 0 and 0 < delta < 1")
        if self.mode == "subwindow" and self.window_ticks < self.levels:
            raise SpecError(f"window_ticks: need >= levels={self.levels} ticks per window "
                            "(one sub-window per level)")
        if self.item_kind not in ("int", "str") or (self.item_kind == "str" and self.bits != 8):
            raise SpecError("item_kind: use 'int', or 'str' with bits=8")
        if not (isinstance(self.unit_cap, int) and self.unit_cap >= 1):
            raise SpecError(f"unit_cap: need an int >= 1, got {self.unit_cap!r}")
        if self.accountant not in ("note", "exact"):
            raise SpecError(f"accountant: use 'note' or 'exact', got {self.accountant!r}")

    def level_budget(self) -> tuple[float, float]:
        """(eps_l, delta_l) each level may spend (per event)."""
        e, d = self._event_budget()
        return e / self._share, d / self._share

    def _event_budget(self) -> tuple[float, float]:
        m = self.unit_cap
        return self.eps / m, self.delta / (m * math.exp(self.eps)) if m > 1 else self.delta

    @property
    def _share(self) -> int:
        return 1 if self.mode == "subwindow" else self.levels

    @property
    def theta(self) -> int:
        """Sampled-count threshold (per level delta = delta / share)."""
        if self.accountant == "exact":
            return exact_calibration(*self.level_budget())[0]
        return theta_for_delta(self.level_budget()[1])

    @property
    def sampling_rate(self) -> float:
        """Public Poisson sampling rate p (note: ``-ln(1 - theta p) = eps / share``).

        Rounded *down* to the ``2**-53`` grid of the noise sources' uniforms
        (``u = j 2**-53``), so that ``P[u < p] = p`` exactly: unrounded, the
        realised rate is ``ceil(p 2**53) 2**-53``, up to ``2**-53`` above the rate
        the accountant used (issue 8 item 9). Rounding down only lowers the
        privacy loss (eps_l is increasing in p), and the release states the
        (eps, delta) of this exact rate.
        """
        if self.accountant == "exact":
            p = exact_calibration(*self.level_budget())[1]
        else:
            p = -math.expm1(-self.level_budget()[0]) / self.theta
        return math.floor(p * 2.0**53) * 2.0**-53


class TrieHH:
    """Windowed TrieHH with counts (paper 001); see the module docstring."""

    name: ClassVar[str] = "triehh"
    FORMAT_VERSION: ClassVar[int] = 1

    def __init__(self, spec: TrieHHSpec, noise: Any) -> None:
        self.spec = spec
        self._noise = noise
        L = spec.levels
        self._acc: list[tuple[np.ndarray, np.ndarray]] = [
            (np.zeros(0, np.uint64), np.zeros(0, np.int64)) for _ in range(L)]
        self._closed = 0  # subwindow: levels thresholded so far
        self._released = False

    # ----------------------------------------------------------------- items
    def _keys(self, items: Any) -> np.ndarray:
        arr = np.asarray(items).reshape(-1)
        s = self.spec
        if s.item_kind == "int":
            if arr.size and arr.dtype.kind not in "iu":
                raise SpecError("items: item_kind='int' needs integers")
            keys = arr.astype(np.int64, copy=False).view(np.uint64)
            if s.bits * s.levels < 64 and arr.size and (
                    arr.min() < 0 or int(keys.max()) >> (s.bits * s.levels)):
                raise SpecError(f"items: need ints in [0, 2**{s.bits * s.levels})")
            return keys
        raw = np.char.encode(arr.astype(str), "utf-8") if arr.dtype.kind != "S" else arr
        fixed = raw.astype(f"S{s.levels}")  # cut to L bytes, NUL-padded
        mat = np.zeros((arr.size, 8), np.uint8)
        mat[:, 8 - s.levels:] = fixed.view(np.uint8).reshape(arr.size, s.levels)
        return mat.view(">u8").reshape(-1).astype(np.uint64)

    def _label(self, key: int) -> Any:
        if self.spec.item_kind == "int":
            return key
        return key.to_bytes(8, "big")[8 - self.spec.levels:].rstrip(b"\0").decode(
            "utf-8", "backslashreplace")

    # --------------------------------------------------------------- updates
    def _vote(self, level: int, keys: np.ndarray) -> None:
        s = self.spec
        keys = keys[self._noise.uniform(keys.size) < self.sampling_rate]
        shift = np.uint64(s.bits * (s.levels - level - 1))
        pref = keys >> shift
        if level > 0 and s.mode == "subwindow":
            parents = self._acc[level - 1][0]
            pref = pref[np.isin(pref >> np.uint64(s.bits), parents)]
        ka, ca = self._acc[level]
        u, inv = np.unique(np.concatenate([ka, pref]), return_inverse=True)
        w = np.concatenate([ca, np.ones(pref.size, np.int64)])
        self._acc[level] = (u, np.bincount(inv, weights=w, minlength=u.size).astype(np.int64))

    def _close(self, level: int) -> None:
        """Threshold level ``level`` (its counts become final trie nodes)."""
        keys, counts = self._acc[level]
        keep = counts >= self.spec.theta
        self._acc[level] = (keys[keep], counts[keep])

    def advance_to(self, tick: int) -> None:
        """Subwindow mode: close every level whose sub-window ends at or before ``tick``."""
        if self.spec.mode != "subwindow":
            return
        lvl = self._level_of(np.array([tick], np.int64))[0]
        while self._closed < lvl:
            self._close(self._closed)
            self._closed += 1

    def _level_of(self, ticks: np.ndarray) -> np.ndarray:
        s = self.spec
        rel = (ticks - s.start_tick) * s.levels // s.window_ticks
        return np.clip(rel, 0, s.levels)

    def update_batch(self, items: np.ndarray, ticks: np.ndarray | None = None,
                     weights: np.ndarray | None = None) -> None:
        """Add a batch. ``"subwindow"`` needs ``ticks`` (non-decreasing, public time)."""
        if self._released:
            raise PrivacyError("update_batch: TrieHH window already released; start a fresh one")
        keys = self._keys(items)
        if weights is not None:
            w = np.asarray(weights)
            if w.dtype.kind not in "iu" or (w.size and w.min() < 0):
                raise SpecError("weights: need non-negative integer multiplicities")
            keys = np.repeat(keys, w)
            ticks = None if ticks is None else np.repeat(np.asarray(ticks), w)
        if self.spec.mode == "all":
            for level in range(self.spec.levels):
                self._vote(level, keys)
            return
        if ticks is None:
            raise SpecError("ticks: mode='subwindow' assigns events to levels by their tick; "
                            "pass ticks or use mode='all'")
        lv = self._level_of(np.asarray(ticks, np.int64))
        if lv.size and (np.any(np.diff(lv) < 0) or lv[0] < self._closed):
            raise SpecError("ticks: must be non-decreasing across batches of one window")
        for level in np.unique(lv).tolist():
            while self._closed < level:
                self._close(self._closed)
                self._closed += 1
            if level < self.spec.levels:  # ticks past the window are ignored
                self._vote(level, keys[lv == level])

    @property
    def sampling_rate(self) -> float:
        """Public sampling rate p."""
        return self.spec.sampling_rate

    # --------------------------------------------------------------- release
    def release(self) -> dict[str, Any]:
        """Single release of the window: the pruned trie with sampled counts."""
        if self._released:
            raise PrivacyError("release: TrieHH is single-release; start a fresh instance")
        self._released = True
        s = self.spec
        nodes: list[dict[str, list[int]]] = []
        parents = None
        for level in range(s.levels):
            keys, counts = self._acc[level]
            keep = counts >= s.theta
            if parents is not None:  # post-processing: children of released nodes only
                keep &= np.isin(keys >> np.uint64(s.bits), parents)
            parents = keys[keep]
            nodes.append({"prefix": parents.tolist(), "count": counts[keep].tolist()})
        scale = (s.levels if s.mode == "subwindow" else 1) / s.sampling_rate
        leaves = nodes[-1]
        if s.accountant == "exact":
            eps_l = s.level_budget()[0]
            delta_l = exact_level_delta(eps_l, s.sampling_rate, s.theta)
        else:
            eps_l, delta_l = level_privacy(s.sampling_rate, s.theta)
        share, m = (1 if s.mode == "subwindow" else s.levels), s.unit_cap
        eps_e, delta_e = share * eps_l, share * delta_l  # per event
        eps_u, delta_u = m * eps_e, m * math.exp((m - 1) * eps_e) * delta_e  # group privacy
        return {
            "kind": "heavy_hitters", "mechanism": self.name,
            "items": [{"item": self._label(x), "estimate": c * scale, "sampled_count": c}
                      for x, c in zip(leaves["prefix"], leaves["count"], strict=True)],
            "threshold": s.theta, "min_detectable": s.theta * scale,
            "trie": {"levels": s.levels, "bits": s.bits, "nodes": nodes, "scale": scale,
                     "mode": s.mode},
            "sampling_rate": s.sampling_rate,
            "eps": eps_u, "delta": delta_u, "unit_cap": m, "relation": "add_remove",
            "error_bound": {
                "pruned_mass_per_level": (2 ** s.bits - 1) * (s.theta - 1) * scale,
                "relative_error": "sampled count X ~ Bin(f_l, p): sd sqrt(f_l p (1-p))/p",
                "source": "paper 001 §3-4",
            },
        }

    # ----------------------------------------------------------------- state
    def memory_bytes(self) -> int:
        """Bytes of the per-level prefix histograms."""
        return sum(k.nbytes + c.nbytes for k, c in self._acc)

    def to_bytes(self) -> bytes:
        """Versioned binary state (:mod:`sketches.core.serialization`)."""
        arrays: dict[str, np.ndarray] = {}
        for i, (k, c) in enumerate(self._acc):
            arrays[f"k{i}"], arrays[f"c{i}"] = k, c
        state = {"format": self.FORMAT_VERSION, "closed": self._closed,
                 "released": self._released}
        return pack(self.name, asdict(self.spec), state, arrays)

    @classmethod
    def from_bytes(cls, data: bytes, noise: Any) -> TrieHH:
        """Restore a sketch written by :meth:`to_bytes`."""
        head, arrays = unpack(data)
        check_header(head, cls.name, None)
        st = head["state"]
        if st.get("format") != cls.FORMAT_VERSION:
            raise SerializationError(f"triehh: state format {st.get('format')} unsupported")
        obj = cls(TrieHHSpec(**head["spec"]), noise)
        obj._acc = [(arrays[f"k{i}"], arrays[f"c{i}"]) for i in range(obj.spec.levels)]
        obj._closed, obj._released = int(st["closed"]), bool(st["released"])
        return obj


# ---------------------------------------------------------------------------
# Reading a release: ranges and quantiles (paper 001 §4), pure post-processing
# ---------------------------------------------------------------------------
def range_count(payload: dict[str, Any], lo: int, hi: int) -> float:
    """Estimated number of window events with item in ``[lo, hi)`` (ints, ``hi <= a**L``).

    ``[0, r)`` is decomposed greedily: at each level the left siblings of
    ``r``'s path node (<= a-1 nodes); absent nodes count 0 (pruned mass).
    """
    return _rank(payload, hi) - _rank(payload, lo)


def _rank(payload: dict[str, Any], r: int) -> float:
    trie = payload["trie"]
    L, b = trie["levels"], trie["bits"]
    if r >= 1 << (b * L):  # everything: the whole first level
        return sum(trie["nodes"][0]["count"]) * float(trie["scale"])
    total = 0
    for level in range(L):
        node = r >> (b * (L - level - 1))
        first = (node >> b) << b
        nodes = trie["nodes"][level]
        pref = np.asarray(nodes["prefix"], dtype=np.uint64)
        cnt = np.asarray(nodes["count"], dtype=np.int64)
        total += int(cnt[(pref >= first) & (pref < node)].sum())
    return total * float(trie["scale"])


def rank_quantiles(payload: dict[str, Any], probs: list[float]) -> list[int]:
    """Smallest ``r`` with ``rank([0, r]) >= q * total`` for each q (bisection on r).

    ``total`` is the released level-1 mass (scaled), the normaliser the note
    uses (``m``) made private-safe: only released counts are read.
    """
    trie = payload["trie"]
    top = 1 << (trie["bits"] * trie["levels"])
    total = _rank(payload, top)
    out = []
    for q in probs:
        lo, hi = 0, top
        while lo < hi:
            mid = (lo + hi) // 2
            if _rank(payload, mid + 1) >= q * total:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return out


def _build_spec(params: Any) -> TrieHHSpec:
    """Worker params -> spec; ``window_ticks`` defaults to the epoch length (horizon)."""
    p, horizon = worker_params(params, TrieHH.name)
    if horizon is not None:
        p.setdefault("window_ticks", horizon)
    return TrieHHSpec(**p)


register(MechanismEntry(name=TrieHH.name, build_spec=_build_spec,
                        build=TrieHH, from_bytes=TrieHH.from_bytes, continual=False,
                        capabilities=Capabilities(
                            tick_clock=True, item_kind=lambda spec: spec.item_kind,
                            state_growth=TrieHHSpec.state_growth)))
