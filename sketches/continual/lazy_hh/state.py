"""LazyHH's private state: the secret hash and item key, the epoch state and its checkpoint.

:class:`LazyHHState` holds everything a :class:`~sketches.continual.lazy_hh.sketch.LazyHH`
changes as events arrive (counters, pending increments, candidates, last output);
the sketch owns one and passes it to :func:`state_of`/:func:`restore_state` (checkpoint)
and to :func:`~sketches.continual.lazy_hh.release.release_payload` (release). This
module never imports the sketch.

The hash (privacy review A3)
----------------------------
Theorem 3 of paper 002 suppresses rare items through Lemma 6, which needs a
random hash *unknown to the adversary*: with a known hash an attacker can forge
an item that collides with a heavy one and get it published. So LazyHH draws
its hash parameters from the injected noise source
(:meth:`sketches.core.hashing.HashSpec.random`), keeps them only in the private
checkpoint (:meth:`~sketches.core.hashing.HashSpec.to_state`) and never in a
release. A fixed ``hash_seed`` is accepted only with the insecure noise kinds
(``fast``/``zero``, which already need ``allow_insecure``): tests and
benchmarks.

Checkpoint layout
-----------------
:func:`sketches.core.serialization.state_to_bytes` with header keys ``hash``
(``HashSpec.to_state()``; older states carry ``hash_seed`` instead), ``item_key`` and
``item_key2`` (hex SipHash keys: str/bytes candidates are identified by the 128-bit pair of
words; a state without ``item_key2`` holding str items is refused),
``events``, ``boundary``, ``open``, ``outputs``, ``last``, ``sketch`` and
``counter`` (:meth:`~sketches.counters.gauss_bm.ContinualCounters.state_header`),
``integer_items``; arrays ``carry``, ``tick_counts``, ``hh_est``,
``sketch_*``/``counter_*`` (counter arrays; the sketch's are
``prefix``, ``lazy_node_noise`` and ``drawn`` of
:class:`~sketches.counters.gauss_bm_lazy.LazyNoiseCounters`, older states carry an eager
``node_noise``; an older reader refuses the new key instead of misreading it),
and the candidate and last heavy-hitter items as ``cand_items``/``hh_items`` (int64) or
``cand_blob``/``cand_lengths``/``cand_is_bytes`` (and ``hh_*``) from
:func:`sketches.core.candidates.encode_items`. Never pickle.

Examples
--------
>>> from sketches.continual.lazy_hh.spec import LazyHHSpec
>>> from sketches.core.noise import SecureNoise, make_noise
>>> spec = LazyHHSpec(k=2, k_tilde=8, horizon=100, eps=1.0, delta=1e-3, hash_seed=3,
...                   relation="replace", clock="arrival")
>>> make_hash(spec, make_noise("fast", 1, allow_insecure=True), depth=4).seed
3
>>> try:
...     make_hash(spec, SecureNoise(), depth=4)
... except Exception as err:
...     print(type(err).__name__, str(err).split(":")[0])
PrivacyError hash_seed
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sketches.core.candidates import CandidateSet, decode_items, encode_items
from sketches.core.hashing import HashSpec
from sketches.core.keyed_prf import KEY_BYTES
from sketches.counters.factorized import FactorizedCounters
from sketches.counters.gauss_bm import ContinualCounters
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import PrivacyError, SerializationError

if TYPE_CHECKING:
    from sketches.continual.lazy_hh.spec import LazyHHSpec
    from sketches.core.noise import NoiseSource

__all__ = ["LazyHHState", "check_seed", "hash_from_state", "item_key2_from_state",
           "item_key_from_state", "make_hash", "make_item_key", "make_item_key2", "restore_state",
           "state_of"]


@dataclass(eq=False)
class LazyHHState:
    """The mutable state of one LazyHH epoch (private: exact counts, raw items).

    Everything a checkpoint holds besides the spec, the hash and the item key.
    """

    #: the ``d x k~`` sketch counters (node noise drawn when an output reads it)
    counters: LazyNoiseCounters | FactorizedCounters  # sketch cells (tree: lazy draws)
    #: the DP stream-length counter (``add_remove``); None when the length is public
    counter: ContinualCounters | None
    #: exact increments not pushed yet: [0] current round, [1] the next (arrival clock)
    carry: np.ndarray
    #: tick clock: events per tick since the last output boundary
    tick_counts: np.ndarray
    open: int = 0  # tick clock: the open tick
    events: int = 0  # events ingested
    boundary: int = 0  # tick clock: last output boundary (all ticks < it are closed)
    outputs: int = 0
    cands: CandidateSet | None = None
    #: the last output: its heavy hitters (keys, items, noisy estimates) and thresholds
    hh_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    hh_items: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hh_est: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    last: dict[str, float] = field(default_factory=dict)

    def quiet(self) -> bool:
        """True when no output before the next event can read the sketch counters.

        No candidate, nothing pending (``carry`` and ``tick_counts`` zero): the
        condition of LazyHH's vectorised catch-up over many output boundaries.
        """
        c = self.cands
        return ((c is None or c.size == 0) and not bool(self.carry.any())
                and not bool(self.tick_counts.any()))

INSECURE_KINDS = ("fast", "zero")  # noise kinds that may carry a fixed hash_seed (tests only)


def check_seed(spec: LazyHHSpec, noise: NoiseSource) -> None:
    """Refuse a fixed ``hash_seed`` unless ``noise.kind`` is ``fast`` or ``zero``.

    Raises
    ------
    PrivacyError
        ``spec.hash_seed`` is set and the noise source is (or may be) private.
    """
    if spec.hash_seed is not None and getattr(noise, "kind", "secure") not in INSECURE_KINDS:
        raise PrivacyError(
            "hash_seed: a fixed hash seed makes LazyHH's hash public, which breaks its privacy"
            " proof (paper 002 Lemma 6); leave hash_seed=None (secret hash drawn from the"
            " noise source), or use kind='fast'/'zero' noise with allow_insecure for tests")


def make_hash(spec: LazyHHSpec, noise: NoiseSource, depth: int) -> HashSpec:
    """The ``depth x k~`` sketch hash: secret parameters drawn from ``noise``.

    ``spec.hash_seed`` (insecure noise only, :func:`check_seed`) gives a seeded
    hash; zero noise without a seed gives the seed-0 hash (its random bytes are
    all zero, which would make every hash parameter 0).
    """
    check_seed(spec, noise)
    if spec.hash_seed is not None:
        return HashSpec(int(spec.hash_seed), depth, spec.k_tilde)
    if getattr(noise, "kind", "") == "zero":
        return HashSpec(0, depth, spec.k_tilde)
    return HashSpec.random(depth, spec.k_tilde, noise)


def make_item_key(spec: LazyHHSpec, noise: NoiseSource) -> bytes:
    """The secret 16-byte SipHash key of str/bytes items, drawn from ``noise``.

    Drawn per sketch, i.e. per (shard, epoch), like the hash. ``spec.hash_seed``
    (insecure noise only) and zero noise derive it from the seed instead (tests).
    """
    check_seed(spec, noise)
    if spec.hash_seed is not None or getattr(noise, "kind", "") == "zero":
        return _seeded_item_key(0 if spec.hash_seed is None else int(spec.hash_seed))
    key = noise.random_bytes(KEY_BYTES)
    if len(key) != KEY_BYTES:
        raise SerializationError(f"noise: random_bytes returned {len(key)} bytes, expected "
                                 f"{KEY_BYTES}")
    return key


def make_item_key2(spec: LazyHHSpec, noise: NoiseSource) -> bytes:
    """The second secret SipHash key (the identity's second 64-bit word), drawn after
    :func:`make_item_key` from the same ``noise``, independent of it; seeded like it (tests)."""
    check_seed(spec, noise)
    if spec.hash_seed is not None or getattr(noise, "kind", "") == "zero":
        return _seeded_item_key(0 if spec.hash_seed is None else int(spec.hash_seed), b"2")
    key = noise.random_bytes(KEY_BYTES)
    if len(key) != KEY_BYTES:
        raise SerializationError(f"noise: random_bytes returned {len(key)} bytes, expected "
                                 f"{KEY_BYTES}")
    return key


def _seeded_item_key(seed: int, word: bytes = b"") -> bytes:
    tag = b"dpstream-lazyhh-item-key" + word + b"/" + str(seed).encode()
    return hashlib.blake2b(tag, digest_size=KEY_BYTES).digest()


def item_key2_from_state(state: dict[str, Any], hash_spec: HashSpec) -> bytes:
    """The second item key of a checkpoint header (``item_key2``, hex).

    States written before 128-bit identities (no ``item_key2``) that hold
    str/bytes items are refused: their candidates' labels were decided by 64-bit
    keys; int-item states (or none yet) get a key derived from the secret hash
    (deterministic, as secret as the hash).
    """
    return _key_from_state(
        state, hash_spec, "item_key2", b"dpstream-itemk2",
        "predates 128-bit item identities and holds str/bytes candidates keyed by 64 bits "
        "only")


def item_key_from_state(state: dict[str, Any], hash_spec: HashSpec) -> bytes:
    """The item key of a checkpoint header (``item_key``, hex).

    States written before the keyed PRF (no ``item_key``) keyed str items by the
    hash's salted chain: their sketch cells cannot be re-keyed, so such a state
    with str items is refused; one with int items (or none yet) gets a key
    derived from its secret hash parameters (deterministic, so a restore is
    repeatable, and as secret as the hash).
    """
    return _key_from_state(
        state, hash_spec, "item_key", b"dpstream-itemkey",
        "predates the keyed item PRF and holds str/bytes items keyed by the old salted chain")


def _key_from_state(state: dict[str, Any], hash_spec: HashSpec, field: str, person: bytes,
                    predates: str) -> bytes:
    """A secret key of a checkpoint header (``field``, hex), or, for a state written
    before the field existed, a key derived from the secret hash (int items or none
    yet) or a refusal naming what the state ``predates`` (str/bytes items)."""
    hexkey = state.get(field)
    if hexkey is not None:
        key = bytes.fromhex(hexkey)
        if len(key) != KEY_BYTES:
            raise SerializationError(f"state.{field}: need {KEY_BYTES} bytes, got {len(key)}")
        return key
    if state.get("integer_items") is False:
        raise SerializationError(
            f"state.{field}: this LazyHH checkpoint {predates}, which cannot be converted; "
            "finish the epoch with the dpstream that wrote it, or delete the shard's "
            "checkpoint (docs/OPERATIONS.md, checkpoint formats)")
    words = json.dumps(hash_spec.to_state(), sort_keys=True).encode()
    return hashlib.blake2b(words, digest_size=KEY_BYTES, person=person).digest()


def hash_from_state(state: dict[str, Any], depth: int, width: int) -> HashSpec:
    """The hash of a checkpoint header (``hash``, or the older ``hash_seed``)."""
    data = state.get("hash")
    if data is None:
        return HashSpec(int(state["hash_seed"]), depth, width)
    return HashSpec.from_state(data)


def state_of(st: LazyHHState, hash_spec: HashSpec, item_key: bytes, item_key2: bytes
             ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(header, arrays)`` of a LazyHH (private: exact counts, raw items, secret hash)."""
    c = st.cands
    state: dict[str, Any] = {
        "hash": hash_spec.to_state(), "item_key": item_key.hex(),
        "item_key2": item_key2.hex(), "events": st.events,
        "boundary": st.boundary, "outputs": st.outputs, "last": st.last,
        "open": st.open, "sketch": st.counters.state_header(),
        "integer_items": None if c is None else c.integer_items,
        "counter": None if st.counter is None else st.counter.state_header(),
    }
    arrays: dict[str, np.ndarray] = {
        "carry": st.carry, "tick_counts": st.tick_counts, "hh_est": st.hh_est,
    }
    arrays.update({f"sketch_{k}": v for k, v in st.counters.state_arrays().items()})
    if st.counter is not None:
        arrays.update({f"counter_{k}": v for k, v in st.counter.state_arrays().items()})
    if c is not None:
        for prefix, items in (("cand", c.items), ("hh", st.hh_items)):
            if c.integer_items:
                arrays[f"{prefix}_items"] = items.astype(np.int64)
            else:
                arrays.update({f"{prefix}_{k}": v for k, v in encode_items(items).items()})
    return state, arrays


def restore_state(st: LazyHHState, state: dict[str, Any], arrays: dict[str, np.ndarray],
                  hash_spec: HashSpec, item_keys: Callable[[np.ndarray], np.ndarray],
                  item_keys2: Callable[[np.ndarray], np.ndarray]) -> None:
    """Fill a fresh state (same spec and hash) from :func:`state_of` output.

    ``item_keys``: the sketch's item-to-key map (hash bijection for ints, keyed
    PRF for str/bytes), to rebuild the candidates' keys and cells;
    ``item_keys2``: the second word of str/bytes identities.
    """
    st.counters.restore(state["sketch"], {  # lazy (or older eager) node noise
        k[len("sketch_"):]: v for k, v in arrays.items() if k.startswith("sketch_")})
    if arrays["carry"].shape != st.carry.shape:
        raise SerializationError(f"arrays.carry: expected shape {st.carry.shape}")
    st.carry = arrays["carry"].astype(np.int64)
    st.events, st.boundary = int(state["events"]), int(state["boundary"])
    st.open = int(state["open"])
    st.outputs, st.last = int(state["outputs"]), dict(state["last"])
    st.tick_counts = arrays["tick_counts"].astype(np.int64)
    st.hh_est = arrays["hh_est"]
    if st.counter is not None:
        st.counter.restore(state["counter"], {
            k: arrays[f"counter_{k}"] for k in ("prefix", "node_noise")})
    if state["integer_items"] is not None:
        _restore_items(st, bool(state["integer_items"]), arrays, hash_spec, item_keys,
                       item_keys2)


def _restore_items(st: LazyHHState, integer: bool, arrays: dict[str, np.ndarray],
                   h: HashSpec, item_keys: Callable[[np.ndarray], np.ndarray],
                   item_keys2: Callable[[np.ndarray], np.ndarray]) -> None:
    def items(prefix: str) -> np.ndarray:
        if integer:
            return arrays[f"{prefix}_items"]
        return decode_items({k: arrays[f"{prefix}_{k}"] for k in ("blob", "lengths", "is_bytes")})

    st.cands = CandidateSet(h.depth, integer, wide=not integer)
    cand = items("cand")
    keys = item_keys(cand) if cand.size else np.zeros(0, dtype=np.uint64)
    keys2 = None if integer else (item_keys2(cand) if cand.size else np.zeros(0, np.uint64))
    st.cands.restore(keys, cand, h.cells(keys), keys2)
    st.hh_items = items("hh")
    st.hh_keys = item_keys(st.hh_items) if st.hh_items.size else st.hh_keys
