"""LazyHH's compiled hot path (``sketches/continual/lazy_hh/kernel.py``) is exact.

Two levels: each kernel against the numpy function it replaces, and whole
sketches run with the kernel (default) and with the numpy path (``_kernel =
False``) on seeded random streams: every release and every checkpoint byte
must be equal (the noise is part of the state: the same seed must give the
same releases). Deterministic: no false failures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.continual.lazy_hh import kernel
from sketches.continual.lazy_hh.sketch import LazyHH, LazyHHSpec
from sketches.core.hashing import HashSpec
from sketches.core.keyed_prf import siphash24_multi
from sketches.core.noise import FastNoise

KEYS = (bytes(range(16)), bytes(range(100, 116)))


def _words() -> np.ndarray:
    return np.frombuffer(KEYS[0] + KEYS[1], dtype="<u8").astype(np.uint64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_siphash_pair_equals_numpy_siphash(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 41, 500)  # 0 bytes, exact multiples of 8, long items
    alphabet = np.array(list("0123456789abcdef.:/ \x00\x7f"))
    items = np.array(["".join(rng.choice(alphabet, n)) for n in lengths], dtype=object)
    enc = kernel.ascii_blob(items)
    assert enc is not None
    out = np.empty((2, items.size), dtype=np.uint64)
    kernel.siphash_pair(*enc, _words(), out)
    assert np.array_equal(out, siphash24_multi(KEYS, items))
    assert kernel.ascii_blob(items.astype(str)) is not None  # numpy U arrays too


@pytest.mark.parametrize("items", [
    ["a", "é"],  # non-ASCII Latin-1: a 0xFF-separated blob would mislocate items
    ["a", "€"],  # beyond Latin-1
    ["a", b"b"],  # bytes
    ["\xff", "b"],  # the separator byte itself
])
def test_ascii_blob_refuses_what_it_cannot_locate(items: list[Any]) -> None:
    assert kernel.ascii_blob(np.array(items, dtype=object)) is None


@pytest.mark.parametrize(("depth", "width"), [(5, 64), (7, 12), (1, 1)])
def test_cells_and_cell_counts_equal_hashspec_and_bincount(depth: int, width: int) -> None:
    rng = np.random.default_rng(depth * width)
    h = HashSpec(11, depth, width)
    keys = h.item_keys(rng.integers(0, 300, 4000))  # many repeats: the dedup table is used
    assert np.array_equal(kernel.cells(keys, h.words(), depth, width), h.cells(keys))
    slot = np.sort(rng.integers(0, 4, keys.size))
    acc = kernel.cell_counts(keys, slot, h.words(), depth, width, 4)
    cells = h.cells(keys)
    want = np.stack([np.bincount(cells[:, slot == s].ravel(), minlength=depth * width)
                     for s in range(4)])
    assert np.array_equal(acc, want)


@pytest.mark.parametrize("s0", [0, 5, 63, 64, 1000])
@pytest.mark.parametrize("width", [64, 10])
def test_round_sums_equal_numpy_round_sums(s0: int, width: int) -> None:
    spec = LazyHHSpec(k=2, k_tilde=width, horizon=10_000, eps=1.0, delta=1e-3,
                      relation="replace", clock="arrival", hash_seed=3)
    hh = LazyHH(spec, FastNoise(1))
    keys = hh.hash.item_keys(np.random.default_rng(s0).integers(0, 100, 777))
    slots = (s0 + 776) // width - s0 // width + 3
    want = hh._round_sums(hh.hash.buckets(keys), s0, slots).reshape(slots, -1)
    got = kernel.round_sums(keys, s0, hh.hash.words(), hh.hash.depth, width, slots)
    assert np.array_equal(got, want)


def test_first_occurrences() -> None:
    rng = np.random.default_rng(5)
    k1 = rng.integers(0, 50, 3000).astype(np.uint64)
    k2 = rng.integers(0, 3, 3000).astype(np.uint64)  # equal first words, distinct pairs
    _, first = np.unique(k1, return_index=True)
    assert np.array_equal(kernel.first_of_keys(k1), np.sort(first))
    pairs = k1 * np.uint64(4) + k2
    _, first = np.unique(pairs, return_index=True)
    assert np.array_equal(kernel.first_of_pairs(k1, k2), np.sort(first))


def _stream(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    ints = np.where(rng.random(n) < 0.5, 1, np.minimum(rng.zipf(1.3, n), 500))  # 1 is heavy
    if kind == "int":
        return ints.astype(np.int64)
    if kind == "str":
        return np.array([f"10.0.{v // 256}.{v % 256}" for v in ints.tolist()], dtype=object)
    # mixed encodings: non-ASCII str and bytes take the general (numpy) SipHash path
    return np.array([f"hôte-{v}" if v % 3 else f"h{v}".encode() for v in ints.tolist()],
                    dtype=object)


CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("int", dict(relation="add_remove", clock="tick", k_tilde=16)),
    ("str", dict(relation="add_remove", clock="tick", k_tilde=16, output_every=3)),
    ("mixed", dict(relation="add_remove", clock="tick", k_tilde=12)),
    ("int", dict(relation="replace", clock="arrival", k_tilde=16)),
    ("str", dict(relation="replace", clock="arrival", k_tilde=12)),
    ("int", dict(relation="add_remove", clock="tick", k_tilde=32, calibrator="analytic")),
]


@pytest.mark.parametrize(("kind", "kw"), CONFIGS, ids=[f"{k}-{c['clock']}-{c['k_tilde']}"
                                                       for k, c in CONFIGS])
@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_and_numpy_paths_release_and_checkpoint_the_same_bytes(
    kind: str, kw: dict[str, Any], seed: int,
) -> None:
    arrival = kw["clock"] == "arrival"
    extra: dict[str, Any] = {} if arrival else {"event_horizon": 100_000}
    spec = LazyHHSpec(k=4, horizon=30_000 if arrival else 400, eps=50.0, delta=1e-2,
                      hash_seed=seed, **extra, **kw)
    fast, slow = LazyHH(spec, FastNoise(seed)), LazyHH(spec, FastNoise(seed))
    slow._kernel = False
    rng = np.random.default_rng(seed)
    tick, published = 0, 0
    for _ in range(8):
        n = int(rng.integers(0, 3000))
        items = _stream(rng, kind, n)
        ticks = None
        if not arrival:  # gaps, repeats and boundaries crossed inside the batch
            ticks = tick + np.sort(rng.integers(0, 25, n)).astype(np.int64)
            tick = int(ticks[-1]) if n else tick
        fast.update_batch(items, ticks)
        slow.update_batch(items, ticks)
        assert fast.release() == slow.release()
        assert fast.to_bytes() == slow.to_bytes()
        published += len(fast.release()["items"])
    assert published, "the stream must produce heavy hitters to compare"


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_candidate_merge_fast_path_equals_sorting_add(wide: bool, seed: int) -> None:
    """``CandidateSet.add`` of ascending keys (merge, no sort) == add of the same keys
    shuffled (sort), including equal first words of wide sets (which fall back)."""
    from sketches.core.candidates import CandidateSet

    rng = np.random.default_rng(seed)
    merged, sorted_ = CandidateSet(3, True, wide=wide), CandidateSet(3, True, wide=wide)
    seen: set[tuple[int, int]] = set()
    for _ in range(6):
        k1 = rng.integers(0, 40, 30).astype(np.uint64)  # small range: equal first words
        k2 = rng.integers(0, 2, 30).astype(np.uint64) if wide else np.zeros(30, np.uint64)
        pairs = sorted({(int(a), int(b)) for a, b in zip(k1, k2, strict=True)} - seen)
        seen.update(pairs)
        if not pairs:
            continue
        keys = np.array([p[0] for p in pairs], np.uint64)
        keys2 = np.array([p[1] for p in pairs], np.uint64) if wide else None
        cells = rng.integers(0, 100, (3, keys.size))
        items = keys.astype(np.int64) * 3
        merged.add(keys, items, cells, keys2)  # ascending (by pair)
        perm = rng.permutation(keys.size)
        sorted_.add(keys[perm], items[perm], cells[:, perm],
                    None if keys2 is None else keys2[perm])
        for a, b in ((merged.keys, sorted_.keys), (merged.items, sorted_.items),
                     (merged.cells, sorted_.cells)):
            assert np.array_equal(a, b)
        if wide:
            assert merged.keys2 is not None and sorted_.keys2 is not None
            assert np.array_equal(merged.keys2, sorted_.keys2)
        est = rng.random(merged.size)
        merged.trim(est, 20)
        sorted_.trim(est, 20)
        seen = {(int(a), int(b)) for a, b in zip(
            merged.keys, merged.keys2 if wide else np.zeros(merged.size, np.uint64),
            strict=True)}


def test_tick_kernel_bounds_its_work_array(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many distinct ticks in one output interval: the compiled path groups ticks so a
    call's (tick, cell) array stays bounded, with the numpy path's exact result."""
    import sketches.continual.lazy_hh.sketch as module

    spec = LazyHHSpec(k=2, k_tilde=16, horizon=400, eps=50.0, delta=1e-2, hash_seed=4,
                      relation="add_remove", clock="tick", event_horizon=100_000,
                      output_every=50)
    fast, slow = LazyHH(spec, FastNoise(3)), LazyHH(spec, FastNoise(3))
    slow._kernel = False
    monkeypatch.setattr(module, "_KCELLS", 3 * fast.hash.depth * 16)  # 3 ticks per call
    rng = np.random.default_rng(3)
    calls: list[int] = []
    real = kernel.cell_counts
    monkeypatch.setattr(kernel, "cell_counts",
                        lambda *a: calls.append(a[-1]) or real(*a))  # type: ignore[func-returns-value]
    for t0 in (0, 60, 170):
        items = _stream(rng, "int", 2000)
        ticks = t0 + np.sort(rng.integers(0, 45, items.size)).astype(np.int64)
        fast.update_batch(items, ticks)
        slow.update_batch(items, ticks)
        assert fast.release() == slow.release()
        assert fast.to_bytes() == slow.to_bytes()
    assert max(calls) == 3  # rows of the work array: at most 3 ticks per call, used


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_min_over_rows_equals_numpy_min(dtype: type) -> None:
    rng = np.random.default_rng(4)
    n, d, m = 300, 7, 120
    cells = rng.integers(0, n, size=(d, m))
    values = (rng.normal(0, 50, n) if dtype is np.float64 else rng.integers(-9, 9, n)).astype(dtype)
    used = kernel.used_cells(cells, n)
    got = kernel.min_over_rows(cells, used, values[used], n)
    assert got.dtype == dtype and np.array_equal(got, values[cells].min(axis=0))
