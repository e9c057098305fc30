"""Smoke test of benchmarks/bench_hh_compare.py on a tiny synthetic stream (no data files).

The benchmark compares LazyHH, PMG, TrieHH and dp_cms_hh on real traces; what
must be right before any of its numbers means anything is that every
mechanism is fed the whole stream, that the scores compare the released items
with the right truth, and that every row's total delta is within the stated
1e-6. Here four items hold 20,000 events each among 2,000 light items of 5
events (n = 90,000), eps = 1: every mechanism must find all four heavy items
and report each within 10% of its count (the largest error seen is 3.7%,
TrieHH's sampling; a stream fed twice or half-fed would be off by 50-100%).
Seeded: deterministic. Runs in a few seconds (LazyHH's k = 1024 row is left out).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import benchmarks.bench_hh_compare as H

HEAVY = np.array([3, 777, 4242, 65000])
HEAVY_COUNT = 20_000


def _frequencies() -> np.ndarray:
    f = np.zeros(1 << 16, dtype=np.int64)
    f[HEAVY] = HEAVY_COUNT
    light = np.random.default_rng(0).choice(np.setdiff1d(np.arange(1 << 16), HEAVY), 2000,
                                            replace=False)
    f[light] = 5
    return f


def test_stream_is_a_permutation_of_the_counts() -> None:
    f = _frequencies()
    items = H.stream(f, 1)
    assert np.array_equal(np.bincount(items, minlength=f.size), f)
    assert not np.array_equal(items, np.sort(items))


def test_score_on_a_hand_made_release() -> None:
    """recall@K, precision, HH recalls and ARE as the module docstring defines them."""
    f = np.zeros(1000, dtype=np.int64)
    f[:200] = np.arange(200, 0, -1) + 10  # items 0..199, counts 210 down to 11
    f[500] = 1_000_000  # the only item above n/128 (and above n/1024)
    released = ([{"item": 500, "estimate": 990_000.0}]
                + [{"item": i, "estimate": float(f[i])} for i in range(64)]
                + [{"item": 900 + i, "estimate": 1.0} for i in range(10)])
    n_rel, recall, precision, hh, hh_1024, are = H.score(released, f)
    assert n_rel == 75  # fewer than K released: all of them are ranked
    # true top 128: item 500, then items 0..126; released among them: 500 and 0..63
    assert recall == pytest.approx(65 / H.K)
    assert precision == pytest.approx(65 / 75)
    assert hh == 1.0 and hh_1024 == 1.0
    # relative error 0.01 for item 500, 0 for items 0..63, |1 - 0| / max(0, 1) for 900..909
    assert are == pytest.approx((0.01 + 10 * 1.0) / 75)


def test_no_heavy_hitter_gives_nan_hh_recall() -> None:
    f = np.ones(4096, dtype=np.int64)
    *_, hh, hh_1024, _ = H.score([{"item": 1, "estimate": 1.0}], f)
    assert math.isnan(hh) and math.isnan(hh_1024)


def test_every_mechanism_finds_the_heavy_items() -> None:
    f = _frequencies()
    items = H.stream(f, 1)
    releases: list[tuple[Any, dict[str, Any]]] = []
    rows = H.run_all("synthetic", f, items, 16, 4, 1024, 7, lazy_ks=H.LAZY_KS[:2],
                     on_release=lambda row, rel: releases.append((row, rel)))
    mechanisms = {r.mechanism for r in rows}
    assert mechanisms == {"LazyHH", "PMG", "TrieHH", "dp_cms_hh"} and len(rows) == 10
    for row, rel in releases:
        what = f"{row.mechanism} {row.config}"
        assert row.eps == H.EPS and row.delta <= H.DELTA * (1 + 1e-9), what
        assert row.hh_recall == 1.0 and row.hh_recall_1024 == 1.0, what
        est = {int(d["item"]): float(d["estimate"]) for d in rel["items"]}
        assert set(HEAVY.tolist()) <= set(est), what
        for x in HEAVY.tolist():
            assert abs(est[x] - HEAVY_COUNT) <= 0.1 * HEAVY_COUNT, (what, x, est[x])
        if row.mechanism != "dp_cms_hh":  # the others release only the heavy items here
            assert row.released == 4 and row.precision == 1.0, what
            assert row.are <= 0.1, what
