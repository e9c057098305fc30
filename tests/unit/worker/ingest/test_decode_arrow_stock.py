"""The ``arrow`` encoding as stock writers produce it (issue 22 part 4).

Every text layout (``utf8``, ``large_utf8``, ``string_view``, dictionary-encoded,
``binary``/``large_binary``/``binary_view`` items) with and without LZ4_FRAME /
ZSTD body compression decodes to the same items, hashed to the same keys, with
the same per-row dead letters; pyarrow, pandas, Polars and DuckDB writers at their
defaults. Hostile cases: compression bombs refused before decompressing (from the
declared uncompressed lengths), dictionaries and views that expand past
``input.max_arrow_expansion``, declared lengths and views pointing outside.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketches.core.hash_keys import item_keys
from worker.config.topology import FieldPaths, InputSpec
from worker.ingest import arrow as decode_arrow
from worker.ingest.arrow import META_SHARD, META_VERSION, _Flat
from worker.ingest.decode import REASONS, decode_batch

STR = InputSpec("in", 1, "arrow", FieldPaths("router", "src"), 1 << 20, max_item_bytes=64)
UNIT = InputSpec("in", 1, "arrow", FieldPaths("router", "src", "user"), 1 << 20)
META = {META_VERSION: b"1", META_SHARD: b"r1"}

ITEMS = ["10.0.0.1", "a", "é", "日本語のテキスト", "10.0.0.1", "", "a much longer item than twelve",
         "a", "10.0.0.1"]
"""Short (inline views) and long (out-of-line views) values, repeats, non-ASCII, empty."""

TEXT_TYPES: dict[str, Any] = {
    "utf8": lambda v: pa.array(v, pa.string()),
    "large_utf8": lambda v: pa.array(v, pa.large_string()),
    "string_view": lambda v: pa.array(v, pa.string_view()),
    "dictionary<utf8>": lambda v: pa.array(v, pa.string()).dictionary_encode(),
    "dictionary<large_utf8>,int8": lambda v: pa.DictionaryArray.from_arrays(
        pa.array(v).dictionary_encode().indices.cast(pa.int8()),
        pa.array(v).dictionary_encode().dictionary.cast(pa.large_string())),
    "dictionary<string_view>": lambda v: pa.DictionaryArray.from_arrays(
        pa.array(v).dictionary_encode().indices,
        pa.array(v).dictionary_encode().dictionary.cast(pa.string_view())),
    "binary": lambda v: pa.array([None if x is None else x.encode() for x in v], pa.binary()),
    "large_binary": lambda v: pa.array([None if x is None else x.encode() for x in v],
                                       pa.large_binary()),
    "binary_view": lambda v: pa.array([None if x is None else x.encode() for x in v],
                                      pa.binary_view()),
    "dictionary<binary>": lambda v: pa.array(
        [None if x is None else x.encode() for x in v], pa.binary()).dictionary_encode(),
}
COMPRESSION = [None, "lz4", "zstd"]


def rec(i: int, value: bytes | None) -> tuple[int, bytes | None, bytes | None, int]:
    return (i, b"k", value, 1000 + i)


def stream(cols: dict[str, Any], meta: dict[bytes, bytes] | None = None,
           compression: str | None = None, batches: int = 1,
           options: pa.ipc.IpcWriteOptions | None = None) -> bytes:
    """An IPC stream written by pyarrow at its defaults (optionally compressed)."""
    table = pa.table(cols)
    schema = table.schema.with_metadata(META if meta is None else meta)
    if options is None:
        options = pa.ipc.IpcWriteOptions(compression=compression)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=options) as w:
        size = max(1, -(-table.num_rows // batches))
        for b in table.to_batches(max_chunksize=size):
            w.write_batch(b.replace_schema_metadata(schema.metadata))
    return sink.getvalue().to_pybytes()


def decoded(spec: InputSpec, value: bytes) -> Any:
    return decode_batch(spec, [rec(0, value)])


def reasons(spec: InputSpec, value: bytes) -> list[str]:
    return [d.reason for d in decoded(spec, value).dead]


# ---------------------------------------------------------------- every layout, same items

REFERENCE = decode_batch(STR, [rec(0, stream({"item": pa.array(ITEMS)}))])
REF_KEYS = item_keys(REFERENCE.items, 3, 4)


@pytest.mark.parametrize("compression", COMPRESSION)
@pytest.mark.parametrize("layout", list(TEXT_TYPES))
def test_every_text_layout_gives_the_same_items_and_keys(layout: str,
                                                         compression: str | None) -> None:
    """The same logical strings hash to the same keys whatever their Arrow type, so
    releases are identical; binary items are the UTF-8 bytes of their text."""
    out = decoded(STR, stream({"item": TEXT_TYPES[layout](ITEMS)}, compression=compression))
    assert out.dead == []
    assert out.items.dtype == object and out.items.tolist() == ITEMS
    assert np.array_equal(item_keys(out.items, 3, 4), REF_KEYS)
    assert REFERENCE.dead == [] and out.shards.tolist() == ["r1"] * len(ITEMS)


@pytest.mark.parametrize("layout", ["large_utf8", "string_view", "dictionary<utf8>",
                                    "dictionary<string_view>"])
def test_unit_column_in_any_text_layout(layout: str) -> None:
    units = ["u1", "u2", "u1"]
    out = decoded(UNIT, stream({"item": TEXT_TYPES[layout](["a", "b", "c"]),
                                "unit": TEXT_TYPES[layout](units)}, compression="zstd"))
    assert out.dead == [] and out.units is not None and out.units.tolist() == units


def test_binary_unit_is_refused() -> None:
    """Only items may be binary (their bytes are the item); a unit is text."""
    value = stream({"item": pa.array(["a"]), "unit": pa.array([b"u"], pa.binary())})
    assert reasons(UNIT, value) == ["wrong_type"]


BAD_ROWS = ["a", None, "x" * 65, "b\x00", "c"]


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("layout", list(TEXT_TYPES))
def test_bad_rows_fail_alone_in_every_layout(layout: str, compression: str | None) -> None:
    """A null, an oversized value, a NUL: the row is dropped alone (one dead letter
    listing it), the others count; with a dictionary, every row using a bad entry."""
    out = decoded(STR, stream({"item": TEXT_TYPES[layout](BAD_ROWS)}, compression=compression))
    assert out.items.tolist() == ["a", "c"]
    assert len(out.dead) == 1 and out.dead[0].detail.startswith("3 of 5 rows")
    for reason in ("wrong_type", "oversized_item", "nul_in_field"):
        assert reason in out.dead[0].detail


def test_a_bad_dictionary_entry_fails_every_row_using_it() -> None:
    col = pa.array(["a", "b\x00", "a", "b\x00", "c"]).dictionary_encode()
    out = decoded(STR, stream({"item": col}))
    assert out.items.tolist() == ["a", "a", "c"]
    assert [d.reason for d in out.dead] == ["nul_in_field"]
    assert out.dead[0].detail.startswith("2 of 5 rows")


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_binary_item_that_is_not_utf8_fails_its_row(typ: pa.DataType) -> None:
    out = decoded(STR, stream({"item": pa.array([b"a", b"\xff\xfe", b"c"], typ)}))
    assert out.items.tolist() == ["a", "c"]
    assert [d.reason for d in out.dead] == ["not_utf8"]
    assert out.dead[0].detail.startswith("1 of 3 rows")
    out = decoded(STR, stream({"item": pa.array([b"a", b"\xff", b"a"]).dictionary_encode()}))
    assert out.items.tolist() == ["a", "a"] and [d.reason for d in out.dead] == ["not_utf8"]


@pytest.mark.parametrize("deltas", [False, True])
def test_several_batches_with_different_dictionaries(deltas: bool) -> None:
    """Dictionary replacement (pyarrow's default) and delta dictionaries."""
    chunks = [pa.array(["a", "b", "a"]).dictionary_encode(),
              pa.array(["c", "a", "c\x00"]).dictionary_encode()]
    if deltas:  # deltas need the second dictionary to extend the first
        chunks[1] = pa.DictionaryArray.from_arrays(pa.array([2, 0, 3], pa.int32()),
                                                   pa.array(["a", "b", "c", "c\x00"]))
    table = pa.table({"item": pa.chunked_array(chunks)})
    schema = table.schema.with_metadata(META)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema,
                           options=pa.ipc.IpcWriteOptions(emit_dictionary_deltas=deltas)) as w:
        for b in table.to_batches():
            w.write_batch(b.replace_schema_metadata(META))
    out = decoded(STR, sink.getvalue().to_pybytes())
    assert out.items.tolist() == ["a", "b", "a", "c", "a"]
    assert [d.reason for d in out.dead] == ["nul_in_field"]
    assert "rows [5]" in out.dead[0].detail or "5" in out.dead[0].detail


@pytest.mark.parametrize("compression", COMPRESSION)
def test_uint32_ipv4_and_int_items_compressed(compression: str | None) -> None:
    out = decoded(STR, stream({"item": pa.array([0x0A000001, 7], pa.uint32())},
                              compression=compression))
    assert out.dead == [] and out.items.tolist() == ["10.0.0.1", "0.0.0.7"]
    spec = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), item_type="int")
    out = decoded(spec, stream({"item": pa.array([5, -3], pa.int64())}, compression=compression,
                               batches=2))
    assert out.dead == [] and out.items.tolist() == [5, -3]


def test_large_compressed_message_with_uncompressed_buffers() -> None:
    """pyarrow stores a buffer uncompressed (length prefix -1) when compressing does
    not pay; both kinds of buffer in one message."""
    rng = np.random.default_rng(3)
    items = [f"{x:032x}" for x in rng.integers(0, 1 << 62, 3000)]
    value = stream({"item": pa.array(items)},
                   options=pa.ipc.IpcWriteOptions(compression="lz4"))
    out = decoded(InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 22), value)
    assert out.dead == [] and out.items.tolist() == items


# ---------------------------------------------------------------- stock writers at their defaults


def test_pandas_categorical_and_strings_via_from_pandas() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"item": pd.Categorical(ITEMS)})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    assert pa.types.is_dictionary(table.schema.field("item").type)
    for t in (table, pa.Table.from_pandas(pd.DataFrame({"item": ITEMS}), preserve_index=False)):
        schema = t.schema.with_metadata({**(t.schema.metadata or {}), **META})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as w:
            w.write_table(t.replace_schema_metadata(schema.metadata))
        out = decoded(STR, sink.getvalue().to_pybytes())
        assert out.dead == [] and out.items.tolist() == ITEMS
        assert np.array_equal(item_keys(out.items, 3, 4), REF_KEYS)


def _with_schema_metadata(value: bytes) -> bytes:
    """A stream written by another library, its schema message replaced by the same
    schema with dpstream's metadata (Polars cannot set schema metadata): the record
    and dictionary batches are the writer's own bytes."""
    schema = pa.ipc.open_stream(value).schema
    size = struct.unpack_from("<I", value, 4)[0]
    return schema.with_metadata(META).serialize().to_pybytes() + value[8 + size:]


@pytest.mark.parametrize("compression", ["uncompressed", "lz4", "zstd"])
@pytest.mark.parametrize("categorical", [False, True])
def test_polars_write_ipc_stream(compression: str, categorical: bool) -> None:
    pl = pytest.importorskip("polars")
    dtype = pl.Categorical if categorical else pl.String
    frame = pl.DataFrame({"item": pl.Series(ITEMS, dtype=dtype)})
    buf = io.BytesIO()
    frame.write_ipc_stream(buf, compression=compression)
    raw = buf.getvalue()
    kind = pa.ipc.open_stream(raw).schema.field("item").type
    assert pa.types.is_dictionary(kind) if categorical else pa.types.is_string_view(kind)
    # as written: framing, compression, views and dictionaries accepted; only the
    # dpstream metadata (which Polars cannot write) is missing
    assert reasons(STR, raw) == ["bad_version"]
    out = decoded(STR, _with_schema_metadata(raw))
    assert out.dead == [] and out.items.tolist() == ITEMS
    assert np.array_equal(item_keys(out.items, 3, 4), REF_KEYS)


@pytest.mark.parametrize("setting", ["", "SET arrow_large_buffer_size = true",
                                     "SET arrow_output_version = '1.4'; "
                                     "SET produce_arrow_string_view = true"])
def test_duckdb_arrow_export(setting: str) -> None:
    """DuckDB's Arrow export (VARCHAR, ENUM = dictionary, BLOB = binary), written to an
    IPC stream by pyarrow at its defaults (DuckDB has no IPC writer without extensions)."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    if setting:
        con.execute(setting)
    values = ", ".join("('" + v.replace("'", "''") + "')" for v in ITEMS)
    con.execute(f"CREATE TABLE t AS SELECT * FROM (VALUES {values}) v(item)")
    con.execute("CREATE TYPE e AS ENUM (SELECT DISTINCT item FROM t)")
    for expr in ("item", "item::e", "encode(item)"):  # encode: VARCHAR -> UTF-8 BLOB
        table = con.sql(f"SELECT {expr} AS item FROM t").to_arrow_table()
        if "string_view" in setting and expr == "item":
            assert pa.types.is_string_view(table.schema.field("item").type)
        sink = pa.BufferOutputStream()
        schema = table.schema.with_metadata(META)
        with pa.ipc.new_stream(sink, schema) as w:
            w.write_table(table.replace_schema_metadata(META))
        out = decoded(STR, sink.getvalue().to_pybytes())
        assert out.dead == [] and out.items.tolist() == ITEMS, expr


# ---------------------------------------------------------------- hostile: bounded work


def _messages(value: bytes) -> list[tuple[int, int, int, int]]:
    """``(metadata start, metadata size, header kind, body start)`` per IPC message."""
    out, pos = [], 0
    while pos < len(value):
        size = struct.unpack_from("<I", value, pos + 4)[0]
        if size == 0:
            break
        fb = _Flat(value[pos + 8:pos + 8 + size])
        root = fb.root()
        out.append((pos + 8, size, fb.scalar(root, 1, "<B"), pos + 8 + size))
        pos += 8 + size + fb.scalar(root, 3, "<q")
    return out


def _batch_table(value: bytes, which: int) -> tuple[_Flat, int, int, int]:
    """The flatbuffer, RecordBatch table, metadata start and body start of IPC
    message ``which`` (a record batch, or a dictionary batch's data)."""
    start, size, kind, body = _messages(value)[which]
    fb = _Flat(value[start:start + size])
    header = fb.ref(fb.root(), 2)
    assert header is not None
    if kind == 2:  # DictionaryBatch: its data
        header = fb.ref(header, 1)
        assert header is not None
    return fb, header, start, body


def _patch(value: bytes, at: int, fmt: str, number: int) -> bytes:
    data = bytearray(value)
    struct.pack_into(fmt, data, at, number)
    return bytes(data)


@pytest.fixture
def no_pyarrow_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if pyarrow is asked to read (and so to decompress) the stream."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pyarrow read a stream the pre-scan should have refused")
    monkeypatch.setattr(pa.ipc, "open_stream", refuse)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compression_bomb_refused_before_decompressing(compression: str,
                                                       no_pyarrow_read: None) -> None:
    """A small message of 4M zero bytes' worth of uint32 declares its uncompressed
    size: over max_arrow_expansion x its size, it is refused before pyarrow reads."""
    import pyarrow as real_pa  # the module object the fixture patched

    table = real_pa.table({"item": np.zeros(1 << 20, dtype=np.uint32)})
    sink = real_pa.BufferOutputStream()
    schema = table.schema.with_metadata(META)
    with real_pa.ipc.RecordBatchStreamWriter(
            sink, schema, options=real_pa.ipc.IpcWriteOptions(compression=compression)) as w:
        w.write_table(table.replace_schema_metadata(META))
    value = sink.getvalue().to_pybytes()
    assert len(value) < 40_000  # 4 MiB of body in a few KiB
    out = decoded(STR, value)
    assert [d.reason for d in out.dead] == ["oversized"]
    assert "refused before decompressing" in out.dead[0].detail
    assert "max_arrow_expansion" in out.dead[0].detail


@pytest.mark.parametrize(("declared", "reason"), [
    (2**40, "oversized"),        # a huge declared uncompressed length
    (2**63 - 1, "oversized"),
    (-2, "malformed_arrow"),     # only -1 (stored uncompressed) may be negative
    (3, "malformed_arrow"),      # wrong small length: the codec fails, pyarrow refuses
])
def test_declared_uncompressed_length_of_a_buffer(declared: int, reason: str) -> None:
    value = stream({"item": pa.array(["a", "bb", "ccc"] * 50)}, compression="zstd")
    fb, header, _, body = _batch_table(value, 1)
    start, count = fb.vector(header, 2)
    patched = value
    for i in range(count):
        off, size = struct.unpack_from("<qq", fb.buf, start + 16 * i)
        if size >= 8 and struct.unpack_from("<q", value, body + off)[0] > 8:
            patched = _patch(value, body + off, "<q", declared)
            break
    assert patched != value
    assert reasons(STR, patched) == [reason]


def test_compressed_dictionary_bomb_refused(no_pyarrow_read: None) -> None:
    """The dictionary batch's compressed buffers count against the same cap."""
    import pyarrow as real_pa

    dictionary = real_pa.array(["x" * (1 << 22)])
    col = real_pa.DictionaryArray.from_arrays(real_pa.array([0], real_pa.int8()), dictionary)
    schema = real_pa.schema([("item", col.type)], metadata=META)
    sink = real_pa.BufferOutputStream()
    with real_pa.ipc.RecordBatchStreamWriter(
            sink, schema, options=real_pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_batch(real_pa.RecordBatch.from_arrays([col], schema=schema))
    value = sink.getvalue().to_pybytes()
    assert len(value) < 4096 and _messages(value)[1][2] == 2  # a dictionary batch
    assert reasons(STR, value) == ["oversized"]


@pytest.mark.parametrize("field", ["length", "node"])
def test_dictionary_batch_with_huge_declared_length(field: str) -> None:
    value = stream({"item": pa.array(["a", "b", "a"]).dictionary_encode()})
    fb, header, meta_at, _ = _batch_table(value, 1)
    assert _messages(value)[1][2] == 2
    if field == "length":
        at = fb.field(header, 0)
    else:
        at = fb.vector(header, 1)[0]  # the first FieldNode's length
    assert at is not None
    assert reasons(STR, _patch(value, meta_at + at, "<q", 2**40)) == ["malformed_arrow"]


def test_dictionary_expanding_past_the_cap_is_oversized() -> None:
    """One 1,024-byte entry used by 200,000 one-byte indices: 200 MB of text from a
    200 kB message; refused (before any row's text is built) at 64x its size."""
    spec = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 20, max_item_bytes=1024)
    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(200_000, dtype=np.int8)),
                                         pa.array(["y" * 1024]))
    out = decoded(spec, stream({"item": col}))
    assert [d.reason for d in out.dead] == ["oversized"]
    assert "dictionary-encoded column 'item'" in out.dead[0].detail
    # the same rows within the cap decode (a setting raises it)
    roomy = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 20, max_item_bytes=1024,
                      max_arrow_expansion=2000)
    assert decoded(roomy, stream({"item": col})).dead == []


def _views(lengths: list[int], buffer_index: list[int], offsets: list[int],
           data: bytes, typ: pa.DataType | None = None) -> pa.Array:
    """A view array from raw views (no validation: hostile on purpose)."""
    raw = bytearray()
    for n, b, o in zip(lengths, buffer_index, offsets, strict=True):
        if n <= 12:
            raw += struct.pack("<i", n) + data[o:o + n].ljust(12, b"\x00")
        else:
            raw += struct.pack("<i4sii", n, data[o:o + 4], b, o)
    return pa.Array.from_buffers(typ or pa.string_view(), len(lengths),
                                 [None, pa.py_buffer(bytes(raw)),
                                  pa.py_buffer(data)])


@pytest.mark.parametrize(("lengths", "buffers", "offsets"), [
    ([20], [0], [100]),          # past the end of the data buffer
    ([2**31 - 1], [0], [0]),     # a huge length
    ([20], [3], [0]),            # a variadic buffer that does not exist
    ([20], [-1], [0]),
    ([20], [0], [-8]),
])
def test_views_pointing_outside_are_malformed(lengths: list[int], buffers: list[int],
                                              offsets: list[int]) -> None:
    data = b"0123456789abcdefghijklmnopqrstuvwxyz"
    value = stream({"item": _views(lengths, buffers, offsets, data)})
    assert reasons(STR, value) == ["malformed_arrow"]


def test_views_sharing_one_long_value_past_the_cap_are_oversized() -> None:
    """60,000 views of one 1,000-byte value: 60 MB of text from a ~1 MB message."""
    spec = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 21, max_item_bytes=1024,
                     max_arrow_expansion=16)
    data = b"v" * 1000
    n = 60_000
    value = stream({"item": _views([1000] * n, [0] * n, [0] * n, data)})
    out = decoded(spec, value)
    assert [d.reason for d in out.dead] == ["oversized"]
    few = stream({"item": _views([1000] * 50, [0] * 50, [0] * 50, data)})
    assert decoded(spec, few).items.tolist() == ["v" * 1000] * 50


def test_oversized_views_are_never_copied() -> None:
    """A view longer than max_item_bytes fails its row from its length alone."""
    data = b"w" * 5000
    out = decoded(STR, stream({"item": _views([3, 5000, 2], [0, 0, 0], [0, 0, 0], data)}))
    assert out.items.tolist() == ["www", "ww"]
    assert [d.reason for d in out.dead] == ["oversized_item"]


def test_unknown_compression_codec_is_malformed() -> None:
    value = stream({"item": pa.array(["a"])}, compression="zstd")
    fb, header, meta_at, _ = _batch_table(value, 1)
    compression = fb.ref(header, 3)
    assert compression is not None
    at = fb.field(compression, 0)  # ZSTD (1) is not the default (LZ4_FRAME): stored
    assert at is not None
    assert reasons(STR, _patch(value, meta_at + at, "<b", 7)) == ["malformed_arrow"]


def test_expansion_floor_lets_small_repetitive_messages_through() -> None:
    """A message far smaller than its text (one value repeated) may still expand to
    EXPANSION_FLOOR bytes."""
    out = decoded(STR, stream({"item": pa.array(["10.0.0.1"] * 5000).dictionary_encode()},
                              compression="zstd"))
    assert out.dead == [] and len(out.items) == 5000
    assert decode_arrow.EXPANSION_FLOOR == 1 << 18


# ---------------------------------------------------------------- fuzz


def fuzz(n: int) -> settings:
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


VALID = [stream({"item": TEXT_TYPES["string_view"](ITEMS)}),
         stream({"item": TEXT_TYPES["dictionary<utf8>"](ITEMS)}, compression="zstd"),
         stream({"item": TEXT_TYPES["large_utf8"](ITEMS)}, compression="lz4"),
         stream({"item": TEXT_TYPES["binary"](ITEMS)}, batches=3),
         stream({"item": TEXT_TYPES["dictionary<string_view>"](ITEMS),
                 "unit": TEXT_TYPES["string_view"](ITEMS)}, compression="lz4")]


@fuzz(500)
@given(st.sampled_from(range(len(VALID))), st.sampled_from([STR, UNIT]),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1,
                max_size=6),
       st.one_of(st.none(), st.integers(0, 10_000)))
def test_mutated_stock_layouts_never_raise(which: int, spec: InputSpec,
                                           flips: list[tuple[int, int]],
                                           cut: int | None) -> None:
    """Byte flips and truncations of compressed, dictionary and view messages: decoded
    or one dead letter each, never an exception."""
    data = bytearray(VALID[which])
    for pos, byte in flips:
        data[pos % len(data)] = byte
    value = bytes(data[:cut] if cut is not None else data)
    out = decode_batch(spec, [rec(0, value), rec(1, VALID[which])])
    assert len(out.dead) <= 2
    assert all(d.reason in REASONS and d.reason != "undecodable" for d in out.dead), \
        [(d.reason, d.detail) for d in out.dead]
    assert out.items.shape == out.shards.shape


def _dictionary_stream(col: pa.DictionaryArray) -> bytes:
    schema = pa.schema([("item", col.type)], metadata=META)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_batch(pa.RecordBatch.from_arrays([col], schema=schema))
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("index", [-1, 2, 5])
def test_dictionary_index_outside_its_dictionary_is_malformed(index: int) -> None:
    """A negative index would wrap around in numpy: Arrow's full validation refuses it."""
    col = pa.DictionaryArray.from_arrays(pa.array([0, index], pa.int8()), pa.array(["a", "b"]),
                                         safe=False)
    assert reasons(STR, _dictionary_stream(col)) == ["malformed_arrow"]


def test_null_rows_of_an_empty_dictionary_fail_alone() -> None:
    col = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()),
                                         pa.array([], pa.string_view()))
    out = decoded(STR, _dictionary_stream(col))
    assert len(out.items) == 0 and [d.reason for d in out.dead] == ["wrong_type"]
    assert out.dead[0].detail.startswith("2 of 2 rows")


@pytest.mark.parametrize("typ", [pa.string_view(), pa.binary_view(), pa.large_string(),
                                 pa.dictionary(pa.int8(), pa.string())])
def test_empty_batches_of_every_layout(typ: pa.DataType) -> None:
    schema = pa.schema([("item", typ)], metadata=META)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_batch(pa.RecordBatch.from_arrays([pa.array([], typ)], schema=schema))
    out = decoded(STR, sink.getvalue().to_pybytes())
    assert out.dead == [] and len(out.items) == 0


def test_null_rows_with_a_full_uint8_dictionary() -> None:
    """256 entries under uint8 indices: a null row must not need a 257th index."""
    words = [f"w{i}" for i in range(256)]
    col = pa.DictionaryArray.from_arrays(pa.array([255, None, 0], pa.uint8()), pa.array(words))
    out = decoded(STR, _dictionary_stream(col))
    assert out.items.tolist() == ["w255", "w0"] and [d.reason for d in out.dead] == ["wrong_type"]


def test_batches_sharing_one_dictionary_decode_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hundreds of small record batches of one large dictionary: its entries are
    decoded once per message, not once per batch (work bounded by the message)."""
    calls = []
    real = decode_arrow._checked_text

    def counting(col: Any, *args: Any) -> Any:
        calls.append(len(col))
        return real(col, *args)

    monkeypatch.setattr(decode_arrow, "_checked_text", counting)
    words = pa.array([f"entry-{i:05d}" for i in range(20_000)])
    schema = pa.schema([("item", pa.dictionary(pa.int16(), pa.string()))], metadata=META)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        for k in range(300):
            col = pa.DictionaryArray.from_arrays(pa.array([k], pa.int16()), words)
            w.write_batch(pa.RecordBatch.from_arrays([col], schema=schema))
    out = decoded(InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 22),
                  sink.getvalue().to_pybytes())
    assert out.dead == [] and out.items.tolist() == [f"entry-{k:05d}" for k in range(300)]
    assert calls == [20_000]


def _delta_stream(entries: int, size: int) -> bytes:
    """One record batch per delta dictionary batch, each adding one entry of ``size``
    bytes: pyarrow hands every record batch the whole dictionary so far."""
    words = [f"{i:04d}".ljust(size, "z") for i in range(entries)]
    schema = pa.schema([("item", pa.dictionary(pa.int32(), pa.string()))], metadata=META)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(emit_dictionary_deltas=True)
    with pa.ipc.new_stream(sink, schema, options=options) as w:
        for k in range(entries):
            col = pa.DictionaryArray.from_arrays(pa.array([k], pa.int32()),
                                                 pa.array(words[:k + 1]))
            w.write_batch(pa.RecordBatch.from_arrays([col], schema=schema))
    return sink.getvalue().to_pybytes()


def test_delta_dictionaries_decoding_is_bounded() -> None:
    """Each delta re-hands the whole dictionary (quadratic text in the number of
    deltas); decoding them is counted against the expansion cap."""
    spec = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), 1 << 22, max_item_bytes=1024)
    few = _delta_stream(10, 1000)
    assert [x[:4] for x in decoded(spec, few).items.tolist()] == [f"{k:04d}" for k in range(10)]
    many = _delta_stream(300, 1000)  # ~45 MB of dictionaries from a ~0.4 MB message
    assert len(many) < 600_000
    out = decoded(spec, many)
    assert [d.reason for d in out.dead] == ["oversized"]
    assert "the dictionaries of column 'item'" in out.dead[0].detail


# ---------------------------------------------------------------- released counts

RELEASE_TOPOLOGY = """
name: t
input: {topic: in, partitions: 1, encoding: arrow, fields: {shard: r, item: i}}
mechanism: {name: lazy_cms, params: {depth: 3, width: 16}}
privacy: {eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50}
noise: {kind: zero, allow_insecure_noise: true}
release: {every_ticks: 5, topic: out}
dead_letter: {topic: dlq}
"""


def _released(value: bytes) -> list[dict[str, Any]]:
    """The zero-noise LazyCMS releases of one arrow message (engine, no broker)."""
    import asyncio
    import json

    from tests.support.engine import Clock, MemSink, MemStore
    from worker.config.mechanism_loader import load_mechanisms
    from worker.config.topology import parse_topology
    from worker.engine.engine import Engine

    load_mechanisms()
    clock, sink = Clock(1_000_000.0), MemSink()
    engine = Engine([parse_topology(RELEASE_TOPOLOGY)], MemStore(), sink, clock=clock)

    async def run() -> None:
        await engine.assign([("in", 0)])
        await engine.process_batch("in", 0, [(0, b"r1", value, 0)])
        clock.t += 0.72  # past the first release boundary
        await engine.on_timer()

    asyncio.run(run())
    return [json.loads(v) for t, _, v, *_ in sink.sent if t == "out"]


RELEASED_REFERENCE: list[dict[str, Any]] = []


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("layout", list(TEXT_TYPES))
def test_released_counts_are_the_same_whatever_the_layout(layout: str,
                                                          compression: str | None) -> None:
    """Zero noise, the sketch's counts as released: identical to the utf8 message's."""
    if not RELEASED_REFERENCE:
        RELEASED_REFERENCE.extend(_released(stream({"item": pa.array(ITEMS)})))
        assert RELEASED_REFERENCE and RELEASED_REFERENCE[0]["shard"] == "r1"
    got = _released(stream({"item": TEXT_TYPES[layout](ITEMS)}, compression=compression))
    assert got == RELEASED_REFERENCE
    other = _released(stream({"item": TEXT_TYPES[layout](ITEMS[1:])}, compression=compression))
    assert other != RELEASED_REFERENCE  # the releases do depend on the items


def test_rows_of_a_compressed_message_count_against_the_cap() -> None:
    """4M int8 rows of zeros compress to a few hundred bytes; a cap raised to admit
    their 4 MB of buffers still refuses 4M decoded rows (8 bytes each)."""
    table = pa.table({"item": np.zeros(1 << 22, dtype=np.int8)})
    sink = pa.BufferOutputStream()
    schema = table.schema.with_metadata(META)
    with pa.ipc.new_stream(sink, schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(table.replace_schema_metadata(META))
    value = sink.getvalue().to_pybytes()
    expansion = -(-(5 << 20) // len(value))  # a cap of ~5 MB: the buffers fit
    spec = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), item_type="int",
                     max_arrow_expansion=expansion)
    out = decoded(spec, value)
    assert [d.reason for d in out.dead] == ["oversized"]
    assert f"its {1 << 22} rows" in out.dead[0].detail
    roomy = InputSpec("in", 1, "arrow", FieldPaths("r", "i"), item_type="int",
                      max_arrow_expansion=expansion * 8)
    assert len(decoded(roomy, value).items) == 1 << 22
