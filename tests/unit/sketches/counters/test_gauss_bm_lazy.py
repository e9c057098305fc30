"""LazyNoiseCounters: node noise drawn at first read, checked against a per-node oracle.

The oracle names every node ``(level, completion round, counter)``. With a noise
source returning distinct integers, each read must equal the exact prefix plus
the sum of the current nodes' values, where a node keeps the value it got at its
first read for its whole life, no drawn value is used by two nodes, and no value
is drawn for a node nobody read. A checkpoint continues identically (float: bit
for bit), and the noise has the right variance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sketches.core.noise import FastNoise
from sketches.counters.gauss_bm import ContinualCounters
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import SerializationError, SpecError


class Sequential:
    """Integer 'noise' 1, 2, 3, ... (distinct values: each identifies its draw)."""

    def __init__(self) -> None:
        self.next = 1

    def discrete_gaussian(self, sigma: float, size: Any) -> np.ndarray:
        out = np.arange(self.next, self.next + int(size), dtype=np.int64)
        self.next += int(size)
        return out

    def gaussian(self, sigma: float, size: Any) -> np.ndarray:
        return self.discrete_gaussian(sigma, size).astype(np.float64)


def _bits(r: int) -> list[int]:
    return [b for b in range(r.bit_length()) if (r >> b) & 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reads_match_per_node_oracle(seed: int) -> None:
    n, horizon = 12, 300
    rng = np.random.default_rng(seed)
    noise = Sequential()
    c = LazyNoiseCounters(n, horizon, 1.0, True, noise)
    prefix = np.zeros(n, dtype=np.int64)
    nodes: dict[tuple[int, int, int], int] = {}
    while c.rounds < horizon - 4:
        k = int(rng.integers(1, 4))
        inc = rng.integers(0, 5, n)
        c.push(inc, k) if rng.random() < 0.5 else c.advance(np.vstack([inc, np.zeros((k - 1, n),
                                                                        dtype=np.int64)]))
        prefix += inc
        if rng.random() < 0.3:
            continue  # rounds nobody reads: their nodes must never be drawn
        cells = rng.integers(0, n, int(rng.integers(1, 2 * n)))
        got = c.query_at(cells)
        r = c.rounds
        for cell in np.unique(cells).tolist():
            total = 0
            for b in _bits(r):
                node = (b, (r >> b) << b, cell)
                value = int(c._node_noise[b, cell])
                assert nodes.setdefault(node, value) == value  # never redrawn
                total += value
            assert got[cells == cell][0] == prefix[cell] + total
    values = list(nodes.values())
    assert len(set(values)) == len(values)  # one fresh draw per node
    assert noise.next - 1 == len(values)  # and no draw for a node nobody read


@pytest.mark.parametrize("integer", [True, False])
def test_checkpoint_continues_bit_identically(integer: bool) -> None:
    def run(c: LazyNoiseCounters, rng: np.random.Generator, until: int) -> list[np.ndarray]:
        out = []
        while c.rounds < until:
            c.push(rng.integers(0, 3, c.n), 1)
            out.append(c.query_at(rng.integers(0, c.n, 20)))
        return out

    a = LazyNoiseCounters(40, 500, 2.5, integer, FastNoise(4))
    run(a, np.random.default_rng(0), 200)
    b = LazyNoiseCounters(40, 500, 2.5, integer, FastNoise(4))
    b._noise_src = FastNoise(4)  # same state as a's source: copy it
    b._noise_src._rng.bit_generator.state = a._noise_src._rng.bit_generator.state  # type: ignore[attr-defined]
    b.restore(a.state_header(), a.state_arrays())
    ra, rb = run(a, np.random.default_rng(1), 450), run(b, np.random.default_rng(1), 450)
    assert all(np.array_equal(x, y) for x, y in zip(ra, rb, strict=True))
    assert set(a.state_arrays()) == {"prefix", "lazy_node_noise", "drawn"}


def test_eager_checkpoint_is_accepted_and_bad_state_refused() -> None:
    eager = ContinualCounters(6, 64, 1.0, True, FastNoise(1))
    eager.advance(np.ones((5, 6), dtype=np.int64))
    lazy = LazyNoiseCounters(6, 64, 1.0, True, FastNoise(2))
    lazy.restore(eager.state_header(), eager.state_arrays())
    assert np.array_equal(lazy.query(), eager.query())  # every eager node counts as drawn
    arrays = dict(lazy.state_arrays())
    del arrays["drawn"]
    with pytest.raises(SerializationError):
        LazyNoiseCounters(6, 64, 1.0, True, FastNoise(2)).restore(lazy.state_header(), arrays)
    with pytest.raises(SpecError):
        lazy.query(behind=np.ones(6, dtype=bool))
    with pytest.raises(SpecError):
        lazy.noise_sum(lazy.rounds - 1)


def test_noise_has_the_binary_mechanism_variance() -> None:
    c = LazyNoiseCounters(40_000, 64, 3.0, False, FastNoise(11))
    c.push(np.zeros(40_000, dtype=np.int64), 7)  # round 7 = 0b111: three nodes per counter
    half = c.query_at(np.arange(20_000))
    assert abs(half.std() - 3.0 * np.sqrt(3)) < 0.1 and abs(half.mean()) < 0.1
    assert c.drawn_count() == 3 * 20_000  # the unread half drew nothing
    full = c.query()  # the first half keeps its values, the second half is drawn now
    assert np.array_equal(full[:20_000], half) and c.drawn_count() == 3 * 40_000
    assert abs(np.corrcoef(full[:20_000], full[20_000:])[0, 1]) < 0.03


@pytest.mark.parametrize(("n", "horizon"), [(1, 64), (100, 4_000), (19_456, 3_906), (500, 1 << 20)])
def test_memory_is_the_algorithms_state_plus_mask_and_one_vector(n: int, horizon: int) -> None:
    c = LazyNoiseCounters(n, horizon, 1.0, False, FastNoise(0))
    c.push(np.ones(n, dtype=np.int64), 5)
    c.query_at(np.arange(0, n, 2))
    c.push(np.ones(n, dtype=np.int64), 1)
    c.query_min(np.arange(0, n, 1).reshape(1, -1))  # the compiled min keeps no work array
    base, mask = (c.levels + 1) * n * 8, c.levels * n
    arrays = sum(v.nbytes for v in vars(c).values() if isinstance(v, np.ndarray))
    assert c.memory_bytes() == arrays == base + mask + 17 * n  # no other per-counter state
    assert c.memory_bytes() <= 1.2 * base + mask + 8 * n  # no levels x n derived arrays


@pytest.mark.parametrize("integer", [True, False])
def test_every_read_is_the_fixed_order_sum(integer: bool) -> None:
    """Cache extended, decremented or recomputed: always bitwise the fixed-order sum."""
    n = 64
    rng = np.random.default_rng(7)
    c = LazyNoiseCounters(n, 1 << 12, 1.7, integer, FastNoise(3))
    prefix = np.zeros(n, dtype=np.int64)
    while c.rounds < 3_000:
        k = int(rng.choice([1, 1, 1, 2, 5]))
        inc = rng.integers(0, 4, n)
        c.push(inc, k)
        prefix += inc
        width = int(rng.choice([3, 40, n]))  # mostly the same cells, sometimes nearly all
        cells = np.unique(np.concatenate([np.arange(width // 2), rng.integers(0, n, width)]))
        got = c.query_at(cells)
        bits = _bits(c.rounds)
        want = c._node_noise[bits[-1], cells].copy()
        for b in bits[-2::-1]:
            want += c._node_noise[b, cells]
        assert np.array_equal(got, prefix[cells] + want)
        assert c._drawn[bits][:, cells].all()


def test_restore_from_fortran_ordered_arrays_never_redraws() -> None:
    # a non-C-ordered drawn mask made reshape(-1) writes land in a copy: nodes redrawn
    src = FastNoise(3)
    c = LazyNoiseCounters(6, 64, 1.0, False, src)
    c.push(np.arange(6), 5)
    first = c.query_at(np.arange(6))
    header, arrays = c.state_header(), c.state_arrays()
    back = LazyNoiseCounters(6, 64, 1.0, False, src)
    back.restore(header, {k: np.asfortranarray(v) for k, v in arrays.items()})
    back.push(np.zeros(6, np.int64), 1)
    again = back.query_at(np.array([0]))
    back.query_at(np.array([1]))  # another read set: counter 0 is read afresh next
    assert np.array_equal(back.query_at(np.array([0])), again)  # its node is not redrawn
    assert first.shape == (6,)


class _Ones:
    def gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.ones(size)

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.ones(size, np.int64)


def test_restore_reads_a_uint8_drawn_mask_as_bool() -> None:
    """A checkpoint whose ``drawn`` mask is stored as ``|u1`` (``pack`` allows it; another
    writer may store a 0/1 byte mask) is accepted and read as a bool mask: the restored
    counter knows which nodes are drawn and draws only the others (without the bool
    conversion the mask stays uint8 and ``~drawn[lin]`` in the numpy read path is integer
    fancy indexing; mutants ``restore`` 29 and 32)."""
    from sketches.core.serialization import pack

    c = LazyNoiseCounters(n=4, horizon=8, sigma=1.0, integer_noise=True, noise=_Ones())
    c.push(np.array([1, 2, 3, 4]), 3)
    c.query_at([0, 2])                         # draws levels 0 and 1 of counters 0 and 2
    st = c.state_arrays()
    arrays = {"prefix": st["prefix"], "lazy_node_noise": st["lazy_node_noise"],
              "drawn": st["drawn"].astype(np.uint8)}
    hdr = {**c.state_header(), "counter": "tree", "lazy": True}
    data = pack("counter_tree", {"n": c.n, "horizon": c.horizon}, hdr, arrays)
    d = LazyNoiseCounters.from_bytes(data, _Ones())
    assert d.state_arrays()["drawn"].dtype == np.bool_
    assert d.state_arrays()["drawn"].tolist() == st["drawn"].tolist()
    assert d.drawn_count() == 4
    # the numpy read path (noise_sum) finds counters 1 and 3 undrawn, 0 and 2 drawn
    assert d.noise_sum(3).tolist() == [2, 2, 2, 2]
    assert d.drawn_count() == 8
