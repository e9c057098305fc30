"""Non-private CMS / CS: bincount update vs a per-item reference, merge, release guard."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.continual.plain import CMS, CS, PlainSketchSpec
from sketches.core.base import lookup
from sketches.core.release import query_release
from sketches.errors import IncompatibleSpecError, PrivacyError, SpecError


def _reference(spec: PlainSketchSpec, items: np.ndarray, weights: np.ndarray,
               signed: bool) -> np.ndarray:
    h = spec.hash_spec
    m = np.zeros((spec.depth, spec.width), dtype=np.int64)
    for x, wt in zip(items, weights, strict=True):
        key = h.item_keys(np.array([x]))
        b, s = h.buckets(key)[:, 0], h.signs(key)[:, 0]
        for i in range(spec.depth):
            m[i, b[i]] += int(wt) * (int(s[i]) if signed else 1)
    return m


@pytest.mark.parametrize("cls", [CMS, CS])
def test_update_matches_per_item_reference(cls):
    spec = PlainSketchSpec(depth=4, width=32, hash_seed=9)
    rng = np.random.default_rng(0)
    items = rng.integers(0, 200, 500)
    weights = rng.integers(1, 5, 500)
    sk = cls(spec)
    sk.update_batch(items[:250], weights=weights[:250])
    sk.update_batch(items[250:], weights=weights[250:])
    np.testing.assert_array_equal(sk.matrix(), _reference(spec, items, weights, cls is CS))


def test_cms_never_underestimates_and_cs_is_exact_without_collisions():
    items = np.random.default_rng(1).zipf(1.3, 3000) % 500
    true = np.bincount(items, minlength=500)
    cms = CMS(PlainSketchSpec(depth=5, width=64))
    cms.update_batch(items)
    assert np.all(cms.query(np.arange(500)) >= true)
    cs = CS(PlainSketchSpec(depth=5, width=4096, hash_seed=3))
    cs.update_batch(items)
    # with w >> distinct items, the median row is collision-free for the heaviest items
    top = np.argsort(true)[-5:]
    np.testing.assert_array_equal(cs.query(top), true[top])


def test_merge_copy_and_incompatible_merge():
    spec = PlainSketchSpec(depth=3, width=16, hash_seed=1)
    a, b = CMS(spec), CMS(spec)
    a.update_batch(np.arange(10))
    b.update_batch(np.arange(5, 20))
    c = a.copy()
    c.merge(b)
    both = CMS(spec)
    both.update_batch(np.concatenate([np.arange(10), np.arange(5, 20)]))
    np.testing.assert_array_equal(c.matrix(), both.matrix())
    np.testing.assert_array_equal(a.matrix(), CMS(spec).matrix() + a.matrix())  # a unchanged
    with pytest.raises(IncompatibleSpecError, match="spec"):
        a.merge(CMS(PlainSketchSpec(depth=3, width=16, hash_seed=2)))
    with pytest.raises(IncompatibleSpecError):
        a.merge(CS(spec))


def test_release_refused_unless_explicitly_non_private():
    sk = CMS(PlainSketchSpec(depth=2, width=8))
    with pytest.raises(PrivacyError, match="release_exact"):
        sk.release()
    ok = CS(PlainSketchSpec(depth=3, width=64, release_exact=True))
    ok.update_batch(np.array(["x"] * 4))
    rel = ok.release()
    assert rel["private"] is False
    assert query_release(rel, ["x"]).tolist() == [4.0]


def test_registry_builds_from_params():
    entry = lookup("cms")
    sk = entry.build(entry.build_spec({"depth": 2, "width": 8}), None)
    assert isinstance(sk, CMS)
    with pytest.raises(SpecError, match=r"^widht:"):
        entry.build_spec({"depth": 2, "widht": 8})
    with pytest.raises(SpecError, match=r"^width:"):
        entry.build_spec({"depth": 2})
    with pytest.raises(SpecError, match=r"^weights:"):
        sk.update_batch(np.arange(3), weights=np.ones(3))


def test_query_release_reads_envelopes_and_rejects_other_payloads():
    sk = CMS(PlainSketchSpec(depth=2, width=16, release_exact=True))
    sk.update_batch(np.array([3, 3, 3]))
    envelope = {"schema_version": 1, "payload": sk.release()}
    assert query_release(envelope, [3]).tolist() == [3.0]
    with pytest.raises(SpecError, match=r"^payload.kind:"):
        query_release({"kind": "heavy_hitters", "items": []}, [3])
    bad = dict(sk.release(), estimator="mean")
    with pytest.raises(SpecError, match=r"^estimator:"):
        query_release(bad, [3])
