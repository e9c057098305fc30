"""A 64-bit key collision between two items that are NOT the differing event flips a label.

Independent privacy review: the published label of a key is the item that
first entered the candidate set since the key was last evicted; the eviction
history depends on the differing event, so when two other items ``y1, y2``
share a key, ``X`` and ``X' = X + one event`` publish different labels. The
honest term is ``P[any collision among the <= N + 2c distinct items of X u X']``
(docs/PRIVACY.md 10.4), not ``2 c N 2^-64``.

The collision is forced by patching the key function in this test only (a real
64-bit SipHash collision is not findable here). Noise is the seeded ``fast``
source with fixed seeds, so the outcome is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.continual.lazy_hh.spec import item_key_collision_delta
from sketches.core.noise import make_noise

SPEC = LazyHHSpec(k=2, k_tilde=16, horizon=16, eps=4.0, delta=1e-3, event_horizon=10**6)
FILL = [f"f{i}" for i in range(15)]


def _labels(extra: bool, seed: int) -> set[str]:
    hh = LazyHH(SPEC, make_noise("fast", seed, allow_insecure=True))
    t0 = [f for f in FILL for _ in range(400)] + ["y1"] + (["xstar"] if extra else [])
    hh.update_batch(np.array(t0, dtype=object), ticks=np.zeros(len(t0), np.int64))
    hh.advance_to(1)
    t1 = ["y2"] + ["y1", "y2"] * 6000
    hh.update_batch(np.array(t1, dtype=object), ticks=np.ones(len(t1), np.int64))
    hh.advance_to(2)
    return {e["item"] for e in hh.release()["items"]}


def test_collision_between_other_items_flips_the_label(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = LazyHH._item_keys

    def colliding(self: LazyHH, items: np.ndarray) -> np.ndarray:
        # y2 gets y1's key: a collision between two items of X, neither the differing event
        return orig(self, np.asarray(["y1" if x == "y2" else x for x in items.tolist()],
                                     dtype=object))

    monkeypatch.setattr(LazyHH, "_item_keys", colliding)
    x = [_labels(False, seed) for seed in range(12)]
    x_prime = [_labels(True, seed) for seed in range(12)]
    # X (no differing event) publishes y2's label in no run; X' does in some (the
    # reviewer's secure-noise demo: 0/60 vs 31/60, so P[0 of 12] ~ 2^-12 would be a false pass
    # only if the flip were absent; the seeds are fixed, so the outcome is deterministic)
    assert sum("y2" in o for o in x) == 0, x
    assert sum("y2" in o for o in x_prime) >= 1, x_prime


def test_collision_term_covers_any_collision_among_all_items() -> None:
    """The delta term must bound P[any 64-bit collision among N + 2c items] <= (N+2c)^2/2^65."""
    n = SPEC.event_horizon + 2 * SPEC.unit_cap
    assert item_key_collision_delta(SPEC) >= n * n / 2.0**65
