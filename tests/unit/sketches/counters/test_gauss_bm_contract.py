"""ContinualCounters (the tree) beyond its noise law (issue 24, mutation survivors of
``sketches/counters/gauss_bm.py``): its standalone state's header, the continued noise
source after ``from_bytes``, ``restore`` without a sigma, the error bound's defaults."""

from __future__ import annotations

import numpy as np
import pytest

from sketches.core.serialization import unpack
from sketches.counters.gauss_bm import ContinualCounters
from sketches.counters.gauss_bm_lazy import LazyNoiseCounters
from sketches.errors import IncompatibleSpecError, SerializationError, SpecError
from tests.support.noise_sources import Pattern as Counting


@pytest.mark.parametrize("cls", [ContinualCounters, LazyNoiseCounters])
@pytest.mark.parametrize("integer", [True, False])
def test_to_bytes_names_the_tree_counter_and_whether_it_is_lazy(cls: type,
                                                                 integer: bool) -> None:
    c = cls(3, 16, 2.0, integer, Counting())
    c.push(np.array([1, 2, 3]), 5)
    header, arrays = unpack(c.to_bytes())
    assert header["mechanism"] == "counter_tree"
    assert header["spec"] == {"n": 3, "horizon": 16}
    st = header["state"]
    assert st["counter"] == "tree"
    assert st["lazy"] is (cls is LazyNoiseCounters)
    assert st["rounds"] == 5 and st["sigma"] == 2.0 and st["integer_noise"] is integer
    assert st["horizon"] == 16
    assert arrays["prefix"].tolist() == [1, 2, 3]


@pytest.mark.parametrize("integer", [True, False])
def test_from_bytes_continues_with_the_noise_source_given(integer: bool) -> None:
    """The restored counter draws its next nodes from the source passed to ``from_bytes``:
    with that source continuing the original's draws, both release the same values."""
    src_a = Counting()
    a = ContinualCounters(2, 64, 1.5, integer, src_a)
    a.push(np.array([4, 1]), 3)
    blob = a.to_bytes()
    src_b = Counting()
    src_b.i = src_a.i
    b = ContinualCounters.from_bytes(blob, src_b)
    assert b._noise_src is src_b
    for c in (a, b):
        c.push(np.array([1, 1]), 5)
    assert src_b.i == src_a.i > 0
    assert a.query().tolist() == b.query().tolist()
    assert a.to_bytes() == b.to_bytes()


def test_restore_without_a_sigma_is_a_calibration_mismatch() -> None:
    a = ContinualCounters(2, 16, 1.0, True, Counting())
    a.push(np.array([1, 2]), 3)
    hdr = {k: v for k, v in a.state_header().items() if k != "sigma"}
    b = ContinualCounters(2, 16, 1.0, True, Counting())
    with pytest.raises(IncompatibleSpecError, match="sigma"):
        b.restore(hdr, a.state_arrays())
    assert b.rounds == 0


def test_error_bound_defaults_to_one_release_of_every_counter() -> None:
    c = ContinualCounters(4, 64, 2.0, False, Counting())
    assert c.error_bound(beta=0.01) == c.error_bound(beta=0.01, steps=1, counters=4)
    assert c.error_bound(beta=0.01, counters=1) < c.error_bound(beta=0.01)


def test_integer_noise_releases_int64_for_behind_counters_too() -> None:
    """With integer noise every release is int64, also the ``behind`` answer (round
    ``rounds - 1``, summed by ``noise_sum``), and equals prefix + noise_sum(rounds - 1)."""
    c = ContinualCounters(3, 16, 2.0, True, Counting())
    c.push(np.array([1, 2, 3]), 6)
    behind = np.array([True, False, True])
    assert c.noise_sum(5).dtype == np.int64
    got = c.query(behind=behind)
    assert got.dtype == np.int64
    want = np.where(behind, c._prefix + c.noise_sum(5), c._prefix + c.noise_sum(6))
    assert got.tolist() == want.tolist()
    f = ContinualCounters(3, 16, 2.0, False, Counting())
    assert f.noise_sum(0).dtype == np.float64


def test_restore_refuses_each_missing_or_misshapen_array_alone() -> None:
    a = ContinualCounters(2, 16, 1.0, True, Counting())
    a.push(np.array([1, 2]), 3)
    hdr, arr = a.state_header(), a.state_arrays()
    bad_cases = [{"node_noise": arr["node_noise"]}, {"prefix": arr["prefix"]},
                 {"prefix": np.zeros(3, np.int64), "node_noise": arr["node_noise"]},
                 {"prefix": arr["prefix"], "node_noise": np.zeros((2, 2), np.int64)}]
    for case in bad_cases:
        b = ContinualCounters(2, 16, 1.0, True, Counting())
        with pytest.raises(SerializationError, match=r"prefix|node_noise|shapes"):
            b.restore(hdr, case)
        assert b.rounds == 0
    with pytest.raises(SerializationError, match="shapes"):
        ContinualCounters(2, 16, 1.0, True, Counting()).restore(hdr, bad_cases[2])


@pytest.mark.parametrize("integer", [True, False])
def test_push_before_any_round_accepts_only_zeros(integer: bool) -> None:
    """``push(total, 0)`` with no round open: zeros are a no-op, any count is refused (there
    is no round to count it in); after a round, ``push(total, 0)`` joins the open round."""
    src = Counting()
    c = ContinualCounters(3, 16, 1.0, integer, src)
    c.push(np.zeros(3, dtype=np.int64), 0)
    assert c.rounds == 0 and src.i == 0 and c._prefix.tolist() == [0, 0, 0]
    for bad in ([1, 0, 0], [0, 0, 5]):
        with pytest.raises(SpecError, match="round"):
            c.push(np.array(bad), 0)
        assert c._prefix.tolist() == [0, 0, 0]
    c.push(np.array([1, 2, 3]), 1)
    before = c.query()
    c.push(np.array([2, 0, 1]), 0)
    assert (c.query() - before).tolist() == [2, 0, 1] and c.rounds == 1


@pytest.mark.parametrize("integer", [True, False])
def test_advance_empty_dtypes_empty_ends_and_ends_of_any_shape(integer: bool) -> None:
    """No ends: a ``(0, n)`` array of the release dtype, nothing opened. Ends given as a
    scalar, a 2-D array or float-typed whole numbers are the same ends."""
    want = np.int64 if integer else np.float64
    c = ContinualCounters(2, 16, 1.0, integer, Counting())
    empty = c.advance_empty(np.array([], dtype=np.int64))
    assert empty.shape == (0, 2) and empty.dtype == want and c.rounds == 0
    outs = []
    for ends in (np.array([4, 7]), [[4.0, 7.0]], np.array([[4], [7]])):
        d = ContinualCounters(2, 16, 1.0, integer, Counting())
        got = d.advance_empty(ends)
        assert got.dtype == want and d.rounds == 7 and isinstance(d.rounds, int)
        outs.append(got.tolist())
    assert outs[0] == outs[1] == outs[2]
    s = ContinualCounters(2, 16, 1.0, integer, Counting())
    assert s.advance_empty(np.int64(3)).shape == (1, 2) and s.rounds == 3


@pytest.mark.parametrize("integer", [True, False])
def test_one_counter_and_any_finite_sigma_from_zero_are_accepted(integer: bool) -> None:
    for sigma in (0.0, 0.5, 1.0, 7.25):
        c = ContinualCounters(1, 8, sigma, integer, Counting())
        assert c.n == 1 and c.sigma == sigma
    for bad_sigma in (-1.0, float("nan"), float("inf"), -float("inf")):
        with pytest.raises(SpecError, match="sigma"):
            ContinualCounters(2, 8, bad_sigma, integer, Counting())
    with pytest.raises(SpecError, match="n"):
        ContinualCounters(0, 8, 1.0, integer, Counting())


def test_an_integer_counter_builds_its_noise_table_at_construction() -> None:
    """Integer noise: the exact sampler's table is built when the counter is made (start-up
    cost and errors at construction, not at the first release); sigma 0 needs none."""
    from sketches.core.noise_tables import discrete_gaussian_table

    discrete_gaussian_table.cache_clear()
    ContinualCounters(2, 16, 0.0, True, Counting())
    ContinualCounters(2, 16, 3.25, False, Counting())
    assert discrete_gaussian_table.cache_info().currsize == 0
    ContinualCounters(2, 16, 3.25, True, Counting())
    assert discrete_gaussian_table.cache_info().currsize == 1
    hits = discrete_gaussian_table.cache_info().hits
    discrete_gaussian_table(3.25)
    assert discrete_gaussian_table.cache_info().hits == hits + 1


def _with_header(blob: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """``blob`` with its JSON header passed through ``edit`` (arrays and CRC unchanged)."""
    import json

    from sketches.core import serialization as ser

    magic, version, hlen = ser._PREFIX.unpack_from(blob)
    header = json.loads(blob[ser._PREFIX.size:ser._PREFIX.size + hlen])
    edit(header)
    hjson = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return ser._PREFIX.pack(magic, version, len(hjson)) + hjson + blob[ser._PREFIX.size + hlen:]


@pytest.mark.parametrize(("field", "edit"), [
    ("state", lambda h: h.pop("state")),
    ("spec", lambda h: h.pop("spec")),
    ("state", lambda h: h.__setitem__("state", None)),
    ("spec", lambda h: h.__setitem__("spec", [1, 2])),
    ("sigma", lambda h: h["state"].pop("sigma")),
    ("integer_noise", lambda h: h["state"].pop("integer_noise")),
    ("n", lambda h: h["spec"].pop("n")),
    ("horizon", lambda h: h["spec"].pop("horizon")),
    ("three", lambda h: h["spec"].__setitem__("n", "three")),
])
@pytest.mark.parametrize("cls", [ContinualCounters, LazyNoiseCounters])
def test_from_bytes_refuses_an_incomplete_header_as_a_serialization_error(
        cls: type, field: str, edit) -> None:  # type: ignore[no-untyped-def]
    """A checkpoint header without its ``state``/``spec`` mappings (or a field of them) is a
    corrupt state: ``SerializationError`` naming the field (or the bad value), not
    ``KeyError``/``TypeError`` (as ``FactorizedCounters.from_bytes``)."""
    blob = cls(3, 16, 2.0, True, Counting()).to_bytes()
    assert cls.from_bytes(_with_header(blob, lambda h: None), Counting()).n == 3
    with pytest.raises(SerializationError, match=f"'{field}'"):  # the name, quoted
        cls.from_bytes(_with_header(blob, edit), Counting())
