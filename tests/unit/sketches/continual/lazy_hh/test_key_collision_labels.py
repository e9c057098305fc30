"""Labels of str items are keyed by 128-bit identities: a 64-bit (first word) collision
between two items that are NOT the differing event no longer flips a label.

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


def _colliding_first_word(monkeypatch: pytest.MonkeyPatch) -> None:
    orig, orig_words = LazyHH._item_keys, LazyHH._item_key_words

    def colliding(self: LazyHH, items: np.ndarray) -> np.ndarray:
        # y2 gets y1's FIRST key word (same sketch cells); the second word stays its own
        return orig(self, np.asarray(["y1" if x == "y2" else x for x in items.tolist()],
                                     dtype=object))

    def colliding_words(self: LazyHH, items: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        return colliding(self, items), orig_words(self, items)[1]

    monkeypatch.setattr(LazyHH, "_item_keys", colliding)  # restore path
    monkeypatch.setattr(LazyHH, "_item_key_words", colliding_words)  # ingest path


def test_equal_first_word_items_are_distinct_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two items whose first 64-bit words collide are two candidates with their own labels."""
    _colliding_first_word(monkeypatch)
    hh = LazyHH(SPEC, make_noise("fast", 0, allow_insecure=True))
    hh.update_batch(np.array(["y1", "y2", "y1"], dtype=object), ticks=np.zeros(3, np.int64))
    c = hh._st.cands
    assert c is not None and c.keys2 is not None
    assert sorted(c.items.tolist()) == ["y1", "y2"]
    assert c.keys[0] == c.keys[1] and c.keys2[0] != c.keys2[1]
    back = LazyHH.from_bytes(hh.to_bytes(), make_noise("fast", 0, allow_insecure=True))
    assert back._st.cands is not None and sorted(back._st.cands.items.tolist()) == ["y1", "y2"]


def test_first_word_collision_between_other_items_no_longer_flips_the_label(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (64-bit identities): X published y1 only, X' = X + xstar sometimes y2.

    With 128-bit identities y1 and y2 are distinct candidates in both runs, each
    published under its own label (both are heavy), so the differing event changes
    no label through the collision.
    """
    _colliding_first_word(monkeypatch)
    x = [_labels(False, seed) for seed in range(12)]
    x_prime = [_labels(True, seed) for seed in range(12)]
    assert all({"y1", "y2"} <= o for o in x), x
    assert all({"y1", "y2"} <= o for o in x_prime), x_prime


def test_collision_term_covers_any_collision_among_all_items() -> None:
    """The delta term must bound P[any 128-bit collision among N + 2c items] <= (N+2c)^2/2^129."""
    n = SPEC.event_horizon + 2 * SPEC.unit_cap
    assert item_key_collision_delta(SPEC) >= n * n / 2.0**129


@pytest.mark.parametrize("items", [["a", "b"], [1, 2]])
def test_state_without_second_key_refused_for_str_items(items: list[object]) -> None:
    """A checkpoint from before 128-bit identities (no ``item_key2``) is refused with str
    items (64-bit candidate identities cannot be converted); int-item states restore."""
    from sketches.core.serialization import state_from_bytes, state_to_bytes
    from sketches.errors import SerializationError

    hh = LazyHH(SPEC, make_noise("fast", 0, allow_insecure=True))
    arr = np.array(items, dtype=object if isinstance(items[0], str) else np.int64)
    hh.update_batch(arr, ticks=np.zeros(len(items), np.int64))
    spec, state, arrays = state_from_bytes("lazy_hh", LazyHHSpec, hh.to_bytes())
    del state["item_key2"]
    old = state_to_bytes("lazy_hh", spec, state, arrays)
    noise = make_noise("fast", 0, allow_insecure=True)
    if isinstance(items[0], str):
        with pytest.raises(SerializationError, match="item_key2"):
            LazyHH.from_bytes(old, noise)
    else:
        assert sorted(LazyHH.from_bytes(old, noise)._st.cands.items.tolist()) == items
