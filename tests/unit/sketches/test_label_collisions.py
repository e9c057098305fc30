"""Issue 8 item 1: one forged event must not change the label another item is published under.

For the public seed 0 the printable string ``FORGED`` had the same 64-bit key
as ``"10.0.0.1"`` under the old str key chain (``sketches/core/hash_keys.py``). With
``X = 200 x "10.0.0.1"`` and ``X' = [FORGED] + X`` (add/remove neighbours) the
old PMG, PAMG, merged MG and LazyHH (with a fixed test seed) published
``FORGED`` as the heavy item of ``X'``: a label no threshold protects. Zero
noise makes the tests deterministic (the label of a published item does not
depend on the noise).
"""

from __future__ import annotations

import numpy as np

from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.hashing import HashSpec
from sketches.core.noise import make_noise
from sketches.windowed.misra_gries.misra_gries import PMG, PMGSpec
from sketches.windowed.misra_gries.pamg import PAMG, PAMGSpec, merge_mg, merge_pamg

FORGED = "10.0.857b^6``e!/"
TARGET = "10.0.0.1"
ZERO = make_noise("zero", allow_insecure=True)


def _neighbours() -> tuple[np.ndarray, np.ndarray]:
    x = np.array([TARGET] * 200, dtype=object)
    return x, np.concatenate([np.array([FORGED], dtype=object), x])


def _labels(release: dict) -> list:
    return [e["item"] for e in release["items"]]


def test_the_forged_string_collides_under_the_public_seed() -> None:
    """The premise: the old public-seed key chain maps both strings to one key."""
    keys = HashSpec(seed=0, depth=1, width=1).item_keys([FORGED, TARGET])
    assert keys[0] == keys[1]


def test_pmg_str_label_is_not_changed_by_a_colliding_event() -> None:
    x, x2 = _neighbours()
    for stream in (x, x2):
        mg = PMG(PMGSpec(k=256, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
        mg.update_batch(stream)
        rel = mg.release()
        assert _labels(rel) == [TARGET]
        assert rel["items"][0]["estimate"] == 200
        assert mg.counts().get(FORGED, 0) == (1 if len(stream) > 200 else 0)


def test_pamg_str_label_is_not_changed_by_a_colliding_unit() -> None:
    x, x2 = _neighbours()
    for stream in (x, x2):
        pa = PAMG(PAMGSpec(k=16, m=1, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
        pa.update_batch(stream, units=np.arange(stream.size).astype(str))
        assert _labels(pa.release()) == [TARGET]


def test_merged_mg_and_merged_pamg_str_labels() -> None:
    x, _ = _neighbours()
    for extra in ([], [FORGED]):  # the forged event is in the last shard (merged last)
        parts = (x, np.array(extra, dtype=object))
        shards = []
        for part in parts:
            mg = PMG(PMGSpec(k=8, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
            mg.update_batch(part)
            shards.append(mg)
        assert _labels(merge_mg(shards, ZERO).release()) == [TARGET]
        pas = []
        for part in parts:
            pa = PAMG(PAMGSpec(k=8, m=1, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
            pa.update_batch(part, units=np.arange(part.size).astype(str))
            pas.append(pa)
        assert _labels(merge_pamg(pas, ZERO).release()) == [TARGET]


def test_lazy_hh_str_keys_are_a_keyed_prf_not_the_seeded_chain() -> None:
    """LazyHH with the test seed 0 used the same chain: the forged string was published."""
    x, x2 = _neighbours()
    for stream in (x, x2):
        spec = LazyHHSpec(k=2, k_tilde=16, horizon=4, eps=40.0, delta=1e-3, hash_seed=0,
                          event_horizon=1000)
        hh = LazyHH(spec, ZERO)
        hh.update_batch(stream, ticks=np.zeros(stream.size, np.int64))
        hh.advance_to(1)
        assert _labels(hh.release()) == [TARGET]


def test_str_states_round_trip_exactly_and_non_utf8_bytes_are_base64() -> None:
    items = np.array(["b", b"\xff\x00", "a", "b", "a\x00", "b"], dtype=object)
    mg = PMG(PMGSpec(k=3, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
    mg.update_batch(items[:3])
    again = PMG.from_bytes(mg.to_bytes(), ZERO)
    again.update_batch(items[3:])
    mg.update_batch(items[3:])
    assert again.counts() == mg.counts() == {"a": 0, "b": 2, b"\xff\x00": 0}  # 1 decrement
    empty = PMG.from_bytes(PMG(PMGSpec(k=3, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
                           .to_bytes(), ZERO)
    assert empty.counts() == {}
    raw = PMG(PMGSpec(k=4, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
    raw.update_batch(np.array([b"\xff"] * 100 + ["\\xff"] * 100, dtype=object))
    rel = raw.release()["items"]
    assert rel == [{"item": "\\xff", "estimate": 100},
                   {"item": "/w==", "estimate": 100, "item_encoding": "base64"}]
    pa = PAMG(PAMGSpec(k=4, m=2, eps=1.0, delta=1e-6, item_kind="str"), ZERO)
    pa.update_batch(np.array(["x", "y", "x"], dtype=object), units=np.array(["u", "u", "v"]))
    assert PAMG.from_bytes(pa.to_bytes(), ZERO).counts() == pa.counts() == {"x": 2, "y": 1}


def test_old_str_states_keyed_by_the_public_hash_are_refused() -> None:
    from dataclasses import asdict

    import pytest

    from sketches.core.serialization import pack
    from sketches.errors import SerializationError

    spec = PMGSpec(k=2, eps=1.0, delta=1e-6, item_kind="str")
    old = pack("pmg", asdict(spec), {"n": 1, "decrements": 0, "released": False, "format": 1,
                                     "labels": {"5": "a"}},
               {"keys": np.array([5, 1], np.uint64), "dummy": np.array([False, True]),
                "counts": np.array([1, 0], np.int64)})
    with pytest.raises(SerializationError, match="format 1 keyed str items"):
        PMG.from_bytes(old, ZERO)
    ints = pack("pmg", asdict(PMGSpec(k=2, eps=1.0, delta=1e-6)),
                {"n": 1, "decrements": 0, "released": False, "format": 1, "labels": {}},
                {"keys": np.array([5, 1], np.uint64), "dummy": np.array([False, True]),
                 "counts": np.array([1, 0], np.int64)})
    assert PMG.from_bytes(ints, ZERO).counts() == {5: 1}  # int items: same layout, restored
    pspec = PAMGSpec(k=2, m=1, eps=1.0, delta=1e-6, item_kind="str")
    old2 = pack("pamg", asdict(pspec), {"format": 2, "released": False, "dropped": 0,
                                        "labels": {}, "legacy_hashed_units": False},
                {"units": np.zeros(0, np.uint64), "unit_kind": np.zeros(0, np.uint8),
                 "lens": np.zeros(0, np.int64), "items": np.zeros(0, np.uint64)})
    with pytest.raises(SerializationError, match="format 2 keyed str items"):
        PAMG.from_bytes(old2, ZERO)
