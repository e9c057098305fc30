"""Permanent regression test: one event must never change the label another item is published under.

SEMANTICS.md §11 / issue 8 item 1. For every mechanism that publishes item
labels, X = many events of ``10.0.0.1`` (or its int), X' = X + ONE event of an
item constructed to share the mechanism's item key with it
(:mod:`privacy_audit.collisions` inverts the public str key chain; for ints
and truncating encodings we try the values that share a key or a prefix).
The constructed item has count 1 in X', so a correct mechanism publishes its
label with probability at most delta per run (it never appears under X, and
(eps, delta)-DP bounds P[label in release(X')] <= e^eps * 0 + delta).

False-failure probability: ``runs * delta`` per test (at most 200 * 1e-6 =
2e-4), well below 1e-3 for the whole file.

On the code before the fix of issue 8 item 1 the str tests of PMG, PAMG and
the merged MG sketches fail on every run (the collider is published with the
target's count). They are deliberately not marked xfail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from privacy_audit.collisions import colliding_string
from sketches import (
    PAMG,
    PMG,
    DPCMSHeavyHitters,
    DPCMSHeavyHittersSpec,
    HashSpec,
    LazyHH,
    LazyHHSpec,
    PAMGSpec,
    PMGSpec,
    SecureNoise,
    SpecError,
    TrieHH,
    TrieHHSpec,
    merge_mg,
    merge_pamg,
)

TARGET = "10.0.0.1"
TARGET_INT = 167772161
NOISE = SecureNoise()
SEED = 0  # the public hash seed of the production topologies (PMG/PAMG default)


def public_chain_collider(seed: int = SEED) -> str:
    return colliding_string(HashSpec(seed=seed, depth=1, width=1).item_keys, TARGET)


def str_colliders(seed: int = SEED) -> list[str]:
    """Strings that share a key with TARGET under today's public chain, or a prefix of it."""
    return [public_chain_collider(seed), TARGET + "\x00", TARGET + "!!!!!!!!"]


INT_COLLIDERS = [TARGET_INT | (1 << 32), TARGET_INT - (1 << 63), TARGET_INT + 1]


def labels(release: dict[str, Any]) -> list[Any]:
    return [e["item"] for e in release["items"]]


def assert_never_published(run: Callable[[Any], dict[str, Any]], colliders: list[Any],
                           runs: int) -> None:
    """``run(collider)`` returns the release of X' (collider first); no foreign label may show."""
    for c in colliders:
        published = 0
        for _ in range(runs):
            try:
                rel = run(c)
            except SpecError:  # the mechanism refuses the constructed item outright: safe
                break
            if c in labels(rel):
                published += 1
        assert published == 0, (
            f"the label {c!r} (1 event, sharing an item key or prefix with {TARGET!r} x many)"
            f" was published in {published}/{runs} runs of X': one event changed the label "
            "another item is published under (SEMANTICS.md §11)")


def _stream(c: Any, n: int, kind: str) -> np.ndarray:
    target = TARGET if kind == "str" else TARGET_INT
    if kind == "str":
        return np.array([c] + [target] * n, dtype=object)
    return np.array([c] + [target] * n, dtype=np.int64)


# ------------------------------------------------------------------ PMG
PMG_SPEC = dict(k=256, eps=1.0, delta=1e-6)  # topologies/windowed_pmg_hourly.yaml


@pytest.mark.parametrize("kind", ["str", "int"])
def test_pmg_collision(kind: str) -> None:
    spec = PMGSpec(**PMG_SPEC, item_kind=kind)

    def run(c: Any) -> dict[str, Any]:
        mg = PMG(spec, NOISE)
        mg.update_batch(_stream(c, 200, kind))
        return mg.release()

    assert_never_published(run, str_colliders() if kind == "str" else INT_COLLIDERS, 200)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_merged_mg_collision(kind: str) -> None:
    """Shard A holds the target 200 times, shard B the collider once (merged, fixed order)."""
    spec = PMGSpec(k=8, eps=1.0, delta=1e-6, item_kind=kind)
    target = TARGET if kind == "str" else TARGET_INT

    def run(c: Any) -> dict[str, Any]:
        a, b = PMG(spec, NOISE), PMG(spec, NOISE)
        a.update_batch(_stream(target, 1999, kind))
        b.update_batch(_stream(c, 0, kind))
        return merge_mg([a, b], NOISE).release()

    assert_never_published(run, str_colliders() if kind == "str" else INT_COLLIDERS, 50)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_pamg_collision(kind: str) -> None:
    spec = PAMGSpec(k=8, m=1, eps=1.0, delta=1e-6, item_kind=kind)

    def run(c: Any) -> dict[str, Any]:
        pm = PAMG(spec, NOISE)
        pm.update_batch(_stream(c, 2000, kind))  # event-level units
        return pm.release()

    assert_never_published(run, str_colliders() if kind == "str" else INT_COLLIDERS, 50)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_merged_pamg_collision(kind: str) -> None:
    spec = PAMGSpec(k=8, m=1, eps=1.0, delta=1e-6, item_kind=kind)
    target = TARGET if kind == "str" else TARGET_INT

    def run(c: Any) -> dict[str, Any]:
        a, b = PAMG(spec, NOISE), PAMG(spec, NOISE)
        a.update_batch(_stream(target, 1999, kind))
        b.update_batch(_stream(c, 0, kind))
        return merge_pamg([a, b], NOISE).release()

    assert_never_published(run, str_colliders() if kind == "str" else INT_COLLIDERS, 50)


# ------------------------------------------------------------------ LazyHH
HH_SPEC = dict(k=10, k_tilde=64, horizon=8, eps=1.0, delta=1e-6, event_horizon=50_000_000)


class KnownKeyNoise:
    """Production noise whose secret bytes are known to the attacker (white-box test).

    LazyHH's hash key comes from ``random_bytes``; an attacker who learns it
    (e.g. from a leaked checkpoint) must still not be able to construct an
    item sharing a key with a heavy one: a keyed PRF has no second preimages
    even for a known key, today's invertible salt chain does.
    """

    kind = "secure"

    def __init__(self) -> None:
        self._inner = SecureNoise()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def random_bytes(self, n: int) -> bytes:
        return np.random.default_rng(7).bytes(int(n))


def _lazy_hh_run(kind: str, noise: Any) -> Callable[[Any], dict[str, Any]]:
    spec = LazyHHSpec(**HH_SPEC)

    def run(c: Any) -> dict[str, Any]:
        hh = LazyHH(spec, noise)
        items = _stream(c, 20_000, kind)
        hh.update_batch(items, ticks=np.zeros(items.size, np.int64))
        hh.advance_to(1)
        return hh.release()

    return run


@pytest.mark.parametrize("kind", ["str", "int"])
def test_lazy_hh_collision_secret_key(kind: str) -> None:
    """Production: secret hash from SecureNoise; the attacker only knows public chains."""
    assert_never_published(_lazy_hh_run(kind, NOISE),
                           str_colliders() if kind == "str" else INT_COLLIDERS, 20)


def test_lazy_hh_collision_known_key() -> None:
    """White-box: the attacker knows the hash key and inverts today's item-key chain."""
    noise = KnownKeyNoise()
    probe = LazyHH(LazyHHSpec(**HH_SPEC), noise)
    key_fn = probe.hash.item_keys  # the sketch's (secret) item-key function, known here
    collider = colliding_string(key_fn, TARGET)
    assert_never_published(_lazy_hh_run("str", noise), [collider], 20)


# ------------------------------------------------------------------ TrieHH
@pytest.mark.parametrize("kind", ["str", "int"])
def test_triehh_collision(kind: str) -> None:
    """TrieHH keys str items by their first L bytes: truncation is its collision."""
    spec = TrieHHSpec(levels=8 if kind == "str" else 4, bits=8, eps=1.0, delta=1e-6,
                      mode="all", item_kind=kind, accountant="exact")

    def run(c: Any) -> dict[str, Any]:
        tr = TrieHH(spec, NOISE)
        tr.update_batch(_stream(c, 4000, kind))
        return tr.release()

    colliders = str_colliders() if kind == "str" else INT_COLLIDERS
    assert_never_published(run, colliders, 5 if kind == "str" else 50)


# ------------------------------------------------------------------ dp_cms_hh
def test_dp_cms_hh_collision() -> None:
    """Integer domain only: labels are the searched prefixes, exact ints."""
    spec = DPCMSHeavyHittersSpec.from_params({
        "bits": 32, "branch_bits": 4, "depth": 5, "width": 2048, "phi": 0.01, "top_k": 20,
        "eps": 1.0, "delta": 1e-6})  # topologies/windowed_dp_cms_hh_ipv4.yaml

    def run(c: Any) -> dict[str, Any]:
        hh = DPCMSHeavyHitters(spec, NOISE)
        hh.update_batch(_stream(c, 2000, "int"))
        return hh.release()

    # Only the colliders that alias the target when reduced to the 32-bit domain test a key
    # collision here: the search publishes exact in-domain ints, so TARGET_INT + 1 is a distinct
    # item, and a noisy false positive on it is a DP-allowed outcome under X as well as X'
    # (observed: 1 of 20 runs), not a label collision.
    aliases = [c for c in INT_COLLIDERS if not 0 <= c < 2**32]
    assert aliases and all(c & 0xFFFFFFFF == TARGET_INT for c in aliases)
    assert_never_published(run, aliases, 20)
