"""The ``arrow`` encoding (worker/ingest/arrow.py): exact decoding and hostile batches.

Every hostile message must become exactly one dead letter with a reason code,
never an exception, and the checks before pyarrow must refuse what would make
pyarrow allocate beyond the message (huge declared lengths; compressed, dictionary
and view layouts: tests/unit/worker/test_decode_arrow_stock.py). The
fuzz tests run derandomized (a fixed example sequence), so they are
reproducible and cannot fail by chance.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketches.core.hash_keys import item_keys
from worker.config.topology import FieldPaths, InputSpec
from worker.ingest.arrow import META_SHARD, META_VERSION, arrow_message, ipv4_text
from worker.ingest.decode import REASONS, decode_batch
from worker.ingest.routing import ShardGate, group_by_shard
from worker.kafka.demo_producer import ipv4_str

STR = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), 1 << 16, max_item_bytes=64)
INT = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), 1 << 16, item_type="int")
UW = InputSpec("in", 1, "arrow", FieldPaths("router", "src", "user", "pkts"), 1 << 16)
BITS = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), item_type="int", item_bits=8)


def rec(i: int, value: bytes | None) -> tuple[int, bytes | None, bytes | None, int]:
    return (i, b"k", value, 1000 + i)


def stream(cols: dict[str, pa.Array], meta: dict[bytes, bytes] | None = None,
           options: pa.ipc.IpcWriteOptions | None = None) -> bytes:
    batch = pa.RecordBatch.from_pydict(cols)
    schema = batch.schema.with_metadata(
        {META_VERSION: b"1", META_SHARD: b"r1"} if meta is None else meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=options) as w:
        w.write_batch(batch.replace_schema_metadata(schema.metadata))
    return sink.getvalue().to_pybytes()


def reasons(spec: InputSpec, value: bytes | None) -> list[str]:
    out = decode_batch(spec, [rec(0, value)])
    return [d.reason for d in out.dead]


# ---------------------------------------------------------------- exact decoding

def test_ipv4_text_equals_python_text_and_hashes_alike() -> None:
    rng = np.random.default_rng(0)
    a = np.r_[rng.integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32),
              np.array([0, 1, 9, 10, 99, 100, 255, 0xFFFFFFFF, 0x0A000001, 0x64646464],
                       dtype=np.uint32)]
    text = ipv4_text(a)
    assert text.tolist() == list(ipv4_str(a))
    assert text.dtype.kind == "U"  # the fixed-width hashing path
    objects = np.array(list(ipv4_str(a)), dtype=object)
    assert np.array_equal(item_keys(text, 3, 4), item_keys(objects, 3, 4))


def test_utf8_int_and_weighted_columns() -> None:
    out = decode_batch(STR, [rec(0, arrow_message("r1", ["a", "é", "10.0.0.1"]))])
    assert out.dead == [] and out.items.tolist() == ["a", "é", "10.0.0.1"]
    assert out.shards.tolist() == ["r1"] * 3
    out = decode_batch(INT, [rec(0, arrow_message("r2", np.array([-5, 7], dtype=np.int64)))])
    assert out.items.dtype == np.int64 and out.items.tolist() == [-5, 7]
    out = decode_batch(UW, [rec(0, arrow_message("r1", ["x", "y"], units=["u1", "u2"],
                                                  weights=[2.0, 0.5]))])
    assert out.units is not None and out.units.tolist() == ["u1", "u2"]
    assert out.weights is not None and out.weights.tolist() == [2.0, 0.5]


def test_several_messages_and_shards_keep_order() -> None:
    msgs = [rec(i, arrow_message(f"r{i % 2}", np.array([i, i + 1], dtype=np.uint32)))
            for i in range(4)]
    out = decode_batch(STR, msgs)
    assert out.shards.tolist() == ["r0", "r0", "r1", "r1", "r0", "r0", "r1", "r1"]
    groups = {k: out.items[idx].tolist() for k, idx in group_by_shard(out.shards)}
    assert groups == {"r0": ["0.0.0.0", "0.0.0.1", "0.0.0.2", "0.0.0.3"],
                      "r1": ["0.0.0.1", "0.0.0.2", "0.0.0.3", "0.0.0.4"]}


def test_several_record_batches_in_one_stream() -> None:
    schema = pa.schema([("item", pa.uint32())], metadata={META_VERSION: b"1",
                                                          META_SHARD: b"r1"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        for k in range(3):
            w.write_batch(pa.RecordBatch.from_arrays([pa.array([k], pa.uint32())],
                                                     schema=schema))
    out = decode_batch(STR, [rec(0, sink.getvalue().to_pybytes())])
    assert out.dead == [] and out.items.tolist() == ["0.0.0.0", "0.0.0.1", "0.0.0.2"]


def test_group_by_shard_runs_equal_the_general_path() -> None:
    shards = np.array(["b"] * 20 + ["a"] * 30 + ["b"] * 20 + ["c"] * 5, dtype=object)
    got = {k: idx.tolist() for k, idx in group_by_shard(shards)}
    assert list(got) == ["a", "b", "c"]
    assert got["b"] == list(range(20)) + list(range(50, 70))
    assert got["a"] == list(range(20, 50)) and got["c"] == list(range(70, 75))


# ---------------------------------------------------------------- hostile batches

U32 = {"item": pa.array([1, 2, 3], pa.uint32())}


@pytest.mark.parametrize(("value", "reason"), [
    (None, "empty"), (b"", "empty"), (b"x" * 70_000, "oversized"),
    (b"not arrow at all", "malformed_arrow"), (b"\xff\xff\xff\xff", "malformed_arrow"),
    (b"\xff\xff\xff\xff\x00\x00\x00\x00", "malformed_arrow"),  # end marker, no schema
    (stream(U32, meta={}), "bad_version"),
    (stream(U32, meta={META_VERSION: b"2", META_SHARD: b"r1"}), "bad_version"),
    (stream(U32, meta={META_VERSION: b"1"}), "missing_field"),
    (stream(U32, meta={META_VERSION: b"1", META_SHARD: b"\xff"}), "not_utf8"),
    (stream(U32, meta={META_VERSION: b"1", META_SHARD: b"r\x00"}), "nul_in_field"),
    (stream(U32, meta={META_VERSION: b"1", META_SHARD: b"s" * 65}), "oversized_item"),
    (stream({"src": pa.array([1], pa.uint32())}), "wrong_schema"),
    (stream({"item": pa.array([1], pa.uint32()), "x": pa.array([1])}), "wrong_schema"),
    (stream({"item": pa.array([1], pa.int32())}), "wrong_type"),
    (stream({"item": pa.array([1.5])}), "wrong_type"),
    (stream({"item": pa.array([[1]])}), "wrong_type"),  # list<int64>
    (stream({"item": pa.array([True])}), "wrong_type"),
    (stream({"item": pa.array([1, 2]).dictionary_encode()}), "wrong_type"),  # not text
    (stream({"item": pa.array([1, None], pa.uint32())}), "wrong_type"),
    (stream({"item": pa.array(["a", None])}), "wrong_type"),
    (stream({"item": pa.array(["a\x00b"])}), "nul_in_field"),
    (stream({"item": pa.array(["x" * 65])}), "oversized_item"),
    (stream(U32)[:-20], "malformed_arrow"),
    (stream(U32) + b"\x00" * 8, "malformed_arrow"),
])
def test_hostile_str_messages(value: bytes | None, reason: str) -> None:
    assert reasons(STR, value) == [reason]


def test_arrow_file_format_is_refused() -> None:
    sink = pa.BufferOutputStream()
    batch = pa.RecordBatch.from_pydict(U32)
    with pa.ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)
    assert reasons(STR, sink.getvalue().to_pybytes()) == ["malformed_arrow"]


@pytest.mark.parametrize(("cols", "spec", "reason"), [  # one row: the row is the message
    ({"item": pa.array([2**63], pa.uint64())}, INT, "wrong_type"),
    ({"item": pa.array(["1"])}, INT, "wrong_type"),
    ({"item": pa.array([256], pa.int64())}, BITS, "out_of_domain"),
    ({"item": pa.array([-1], pa.int64())}, BITS, "out_of_domain"),
    ({"item": pa.array(["a"]), "unit": pa.array(["u"])}, UW, "missing_field"),
    ({"item": pa.array(["a"]), "unit": pa.array([1]), "weight": pa.array([1.0])}, UW,
     "wrong_type"),
    ({"item": pa.array(["a"]), "unit": pa.array(["u"]), "weight": pa.array([-1.0])}, UW,
     "wrong_type"),
    ({"item": pa.array(["a"]), "unit": pa.array(["u"]), "weight": pa.array([np.inf])}, UW,
     "wrong_type"),
    ({"item": pa.array(["a"]), "unit": pa.array(["u"]), "weight": pa.array([None],
                                                                           pa.float64())},
     UW, "wrong_type"),
    ({"item": pa.array(["a"]), "unit": pa.array(["u"]), "weight": pa.array(["1"])}, UW,
     "wrong_type"),
])
def test_hostile_columns(cols: dict[str, pa.Array], spec: InputSpec, reason: str) -> None:
    assert reasons(spec, stream(cols)) == [reason]


@pytest.mark.parametrize(("cols", "spec", "reason", "good"), [
    ({"item": pa.array([1, 2**63, 3], pa.uint64())}, INT, "wrong_type", [1, 3]),
    ({"item": pa.array([1, None, 3], pa.int64())}, INT, "wrong_type", [1, 3]),
    ({"item": pa.array([1, 256, 3], pa.int64())}, BITS, "out_of_domain", [1, 3]),
    ({"item": pa.array([-1, 2], pa.int64())}, BITS, "out_of_domain", [2]),
    ({"item": pa.array(["a", "x" * 65, "c"])}, STR, "oversized_item", ["a", "c"]),
    ({"item": pa.array(["a", "b\x00", "c"])}, STR, "nul_in_field", ["a", "c"]),
    ({"item": pa.array(["a", None, "c"])}, STR, "wrong_type", ["a", "c"]),
    ({"item": pa.array([0x0A000001, None], pa.uint32())}, STR, "wrong_type", ["10.0.0.1"]),
    ({"item": pa.array(["a", "b"]), "unit": pa.array(["u", "v\x00"]),
      "weight": pa.array([1.0, 2.0])}, UW, "nul_in_field", ["a"]),
    ({"item": pa.array(["a", "b"]), "unit": pa.array(["u", "v"]),
      "weight": pa.array([-1.0, 2.0])}, UW, "wrong_type", ["b"]),
    ({"item": pa.array(["a", "b"]), "unit": pa.array(["u", "v"]),
      "weight": pa.array([1.0, np.nan])}, UW, "wrong_type", ["a"]),
    ({"item": pa.array(["a", "b"]), "unit": pa.array([None, "v"]),
      "weight": pa.array([1.0, None], pa.float64())}, UW, "wrong_type", []),
])
def test_bad_rows_fail_alone(cols: dict[str, pa.Array], spec: InputSpec, reason: str,
                             good: list) -> None:
    """One event is the unit (docs/PRIVACY.md §2): a bad row is one dead letter listing
    it, and the message's other rows count (the old decoder dropped the message)."""
    out = decode_batch(spec, [rec(0, stream(cols))])
    assert [d.reason for d in out.dead] == [reason]
    assert out.items.tolist() == good
    n = len(next(iter(cols.values())))
    assert out.dead[0].detail.startswith(f"{n - len(good)} of {n} rows")


def test_max_events_per_message_refuses_longer_messages() -> None:
    spec = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), item_type="int",
                     max_events_per_message=2)
    out = decode_batch(spec, [rec(0, stream({"item": pa.array([1, 2], pa.int64())})),
                              rec(1, stream({"item": pa.array([1, 2, 3], pa.int64())}))])
    assert out.items.tolist() == [1, 2]
    assert [(d.offset, d.reason) for d in out.dead] == [(1, "too_many_events")]


def test_gate_refuses_unknown_shard() -> None:
    gate = ShardGate(2, {0}, allowed=frozenset({"r9"}))
    out = decode_batch(STR, [rec(0, arrow_message("r1", np.array([1], dtype=np.uint32)))], gate)
    assert [d.reason for d in out.dead] == ["unknown_shard"]


def _patch_batch_length(value: bytes, rows: int) -> bytes:
    """Rewrite the declared row count of the (only) record batch in place."""
    schema_len = struct.unpack_from("<I", value, 4)[0]
    pos = 8 + schema_len
    meta_len = struct.unpack_from("<I", value, pos + 4)[0]
    fb = bytearray(value[pos + 8:pos + 8 + meta_len])
    root = struct.unpack_from("<I", fb, 0)[0]

    def field(table: int, i: int) -> int:
        vt = table - struct.unpack_from("<i", fb, table)[0]
        return table + struct.unpack_from("<H", fb, vt + 4 + 2 * i)[0]

    header = field(root, 2)
    header += struct.unpack_from("<I", fb, header)[0]
    struct.pack_into("<q", fb, field(header, 0), rows)
    return value[:pos + 8] + bytes(fb) + value[pos + 8 + meta_len:]


@pytest.mark.parametrize("rows", [2**40, -1, 10**6])
def test_huge_declared_lengths_refused_before_pyarrow(rows: int) -> None:
    value = _patch_batch_length(stream(U32), rows)
    assert reasons(STR, value) == ["malformed_arrow"]


def test_small_wrong_declared_length_caught_by_validation() -> None:
    value = _patch_batch_length(stream({"item": pa.array(["a", "b", "c"])}), 50)
    assert reasons(STR, value) == ["malformed_arrow"]


# ---------------------------------------------------------------- fuzz

def fuzz(n: int) -> settings:
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


VALID = [arrow_message("r1", np.array([1, 0x0A000001, 7], dtype=np.uint32)),
         arrow_message("r2", ["a", "bb", "é"]),
         arrow_message("r1", ["x", "y"], units=["u", "v"], weights=[1.0, 2.0])]
SPECS = [STR, UW, INT]


@fuzz(400)
@given(st.sampled_from(range(len(VALID))), st.sampled_from(range(len(SPECS))),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1,
                max_size=6),
       st.one_of(st.none(), st.integers(0, 10_000)))
def test_mutated_batches_never_raise(which: int, spec_i: int,
                                     flips: list[tuple[int, int]], cut: int | None) -> None:
    """Byte flips and truncations of valid batches: decoded or one dead letter each."""
    data = bytearray(VALID[which])
    for pos, byte in flips:
        data[pos % len(data)] = byte
    value = bytes(data[:cut] if cut is not None else data)
    spec = SPECS[spec_i]
    out = decode_batch(spec, [rec(0, value), rec(1, VALID[which])])
    assert len(out.dead) <= 2
    assert all(d.reason in REASONS and d.reason != "undecodable" for d in out.dead), \
        [(d.reason, d.detail) for d in out.dead]
    assert out.items.shape == out.shards.shape
    if out.units is not None:
        assert out.units.shape == out.items.shape


@fuzz(200)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(value: bytes) -> None:
    for spec in SPECS:
        out = decode_batch(spec, [rec(0, value)])
        assert len(out) == 0 and [d.reason for d in out.dead] != ["undecodable"]


def test_mixed_ipv4_and_utf8_messages_in_one_batch() -> None:
    msgs = [rec(0, arrow_message("r1", np.array([0x0A000001], dtype=np.uint32))),
            rec(1, arrow_message("r1", ["10.0.0.1", "x"])),
            rec(2, b"bad"),
            rec(3, arrow_message("r2", np.array([0xC0A80101], dtype=np.uint32)))]
    out = decode_batch(STR, msgs)
    assert out.items.tolist() == ["10.0.0.1", "10.0.0.1", "x", "192.168.1.1"]
    assert out.shards.tolist() == ["r1", "r1", "r1", "r2"]
    assert [d.offset for d in out.dead] == [2]
    keys = item_keys(out.items, 1, 2)
    assert keys[0] == keys[1]  # the same item whether sent as uint32 or as text
