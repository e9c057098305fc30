"""The ``arrow`` encoding: one Apache Arrow IPC stream per message, many events of one shard.

A producer in any language writes it with a stock Arrow library at its defaults
(no dpstream code): an IPC *stream* (not the file format) holding one schema,
dictionary batches if a column is dictionary-encoded, and one or more record
batches, uncompressed or with LZ4_FRAME / ZSTD body compression::

    schema metadata  dpstream.v = "1", dpstream.shard = "r7"
    item    text | binary | uint32 (IPv4)       str topologies
            int8..int64/uint8..uint64           int topologies
    unit    text      only if the topology has a privacy unit
    weight  float64 | float32 | integer   only if the topology has a weight field

where *text* is ``utf8``, ``large_utf8``, ``string_view`` (Polars' default) or a
dictionary of one of them (pandas categoricals, DuckDB enums), and *binary* is
``binary``, ``large_binary``, ``binary_view`` or a dictionary of one of them.

Items are the same whatever their layout: every text layout decodes to the same
Python str objects, hashed by :func:`sketches.core.hash_keys.item_keys` over
their UTF-8 bytes, so ``utf8``, ``large_utf8``, views and dictionaries release
identical counts. A *binary* item is the UTF-8 encoding of its text: its bytes
are hashed, exactly as the text with those bytes (``b"abc"`` and ``"abc"`` are
one item); a binary value that is not UTF-8 fails its row (``not_utf8``), since
releases carry items as text.

No other column may appear; a null in a row makes that row bad. docs/TOPOLOGY.md
("Encodings", ``arrow``) is the normative schema. The semantics are those of
the ``columnar`` encoding (:mod:`worker.ingest.columnar`): one shard per
message, the Kafka record timestamp is every event's event time, a bad row (a
null, an item over ``input.max_item_bytes``, a NUL, out of range, a negative
weight; with a dictionary, every row using a bad entry) is dead-lettered alone
and the other rows count, and a failure that cannot be pinned to a row
(malformed IPC, the schema, the shard key, oversized, more rows than
``input.max_events_per_message``) dead-letters the message.

Bounded work before Arrow allocates. :func:`_scan` walks the stream's
framing and flatbuffer headers in pure Python first (a few microseconds per
message) and refuses: anything but one schema then dictionary and record
batches (no tensors), declared lengths that do not fit the message (a batch or
array node longer than the message has bytes: every accepted column needs at
least one body byte per row), buffers or bodies past the end of the message,
an unknown codec. Compressed buffers carry their uncompressed length in an
8-byte prefix; their sum over the message may not exceed the *expansion cap*
(:func:`expansion_cap`: ``input.max_arrow_expansion`` x the message's size, at
least :data:`EXPANSION_FLOOR`), checked before anything is decompressed
(``oversized``: no decompression bombs; the rows, ~8 bytes each once decoded,
count against the same cap), and pyarrow refuses a buffer that does
not decompress to exactly its declared size. Only then does pyarrow read the
batches (zero-copy views of the message bytes, or the bounded decompressed
buffers) and fully validate them (offsets, views, dictionary indices, UTF-8).

Text that rows share is bounded by the same cap (:class:`_Budget`): a
dictionary's entries are decoded once per message (record batches sharing a
dictionary batch share the decoded entries) and its rows reference them (no
copy), but both the decoded dictionaries (each delta makes a new, longer one)
and the text its rows stand for (what hashing reads) are counted; a view's length
is read from the view, so an oversized value is never copied and the rest is
copied once, counted. A message whose text would pass the cap is ``oversized``.

IPv4 items: a ``uint32`` item column in a ``str`` topology is an IPv4
address whose item is its dotted-quad text, exactly as the JSON encodings
would carry it (``"10.0.0.1"``), so releases are identical. The text is built
without Python objects (:func:`ipv4_text`: two table look-ups per address) as
a fixed-width ``U16`` array, which :func:`sketches.core.hash_keys.item_keys`
hashes on its fixed-width path.

Examples
--------
>>> import numpy as np
>>> from worker.ingest.decode import decode_batch
>>> from worker.config.topology import FieldPaths, InputSpec
>>> spec = InputSpec("in", 1, "arrow", FieldPaths(shard="s", item="i"))
>>> ok = arrow_message("r1", np.array([0x0A000001, 0xC0A80101], dtype=np.uint32))
>>> out = decode_batch(spec, [(0, None, ok, 0), (1, None, b"not arrow", 0)])
>>> out.items.tolist(), out.shards.tolist(), [d.reason for d in out.dead]
(['10.0.0.1', '192.168.1.1'], ['r1', 'r1'], ['malformed_arrow'])
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from worker.config.topology import InputSpec
from worker.ingest.columnar import RowErrors
from worker.ingest.records import (
    BadRecord,
    Decoded,
    Gate,
    Record,
    check_event_count,
    decode_messages,
    gated,
    text_field,
)

ARROW_VERSION = "1"
META_VERSION = b"dpstream.v"
META_SHARD = b"dpstream.shard"
MAX_IPC_MESSAGES = 1024
"""Schema plus record batches per Kafka message (each costs a pyarrow call)."""

_CONTINUATION = 0xFFFFFFFF
_HEADER_SCHEMA, _HEADER_DICTIONARY_BATCH, _HEADER_RECORD_BATCH = 1, 2, 3
_CODECS = {0: "LZ4_FRAME", 1: "ZSTD"}
EXPANSION_FLOOR = 1 << 18
"""A message may always expand to this many bytes, whatever its size (a small
message of a repeated value compresses far more than ``max_arrow_expansion``)."""
_HEADER_NAMES = {0: "NONE", 1: "Schema", 2: "DictionaryBatch", 3: "RecordBatch",
                 4: "Tensor", 5: "SparseTensor"}


# ---------------------------------------------------------------- framing, before pyarrow


class _Flat:
    """Just enough of a bounds-checked FlatBuffers reader for Arrow's Message.fbs."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def _u(self, fmt: str, pos: int) -> int:
        if pos < 0:
            raise struct.error("negative offset")
        return int(struct.unpack_from(fmt, self.buf, pos)[0])

    def root(self) -> int:
        return self._u("<I", 0)

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field ``index`` of ``table``, or None if absent."""
        vtable = table - self._u("<i", table)
        vsize = self._u("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vsize:
            return None
        off = self._u("<H", vtable + slot)
        return table + off if off else None

    def scalar(self, table: int, index: int, fmt: str, default: int = 0) -> int:
        pos = self.field(table, index)
        return default if pos is None else self._u(fmt, pos)

    def ref(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return None if pos is None else pos + self._u("<I", pos)

    def vector(self, table: int, index: int) -> tuple[int, int]:
        """``(start, length)`` of a vector field (``(0, 0)`` if absent)."""
        pos = self.ref(table, index)
        if pos is None:
            return 0, 0
        return pos + 4, self._u("<I", pos)


def expansion_cap(spec: InputSpec, message_bytes: int) -> int:
    """The bytes one message may expand to (``input.max_arrow_expansion``, docs/TOPOLOGY.md).

    >>> from worker.config.topology import FieldPaths, InputSpec
    >>> spec = InputSpec("in", 1, "arrow", FieldPaths("s", "i"))
    >>> expansion_cap(spec, 100_000), expansion_cap(spec, 100)
    (6400000, 262144)
    """
    return max(spec.max_arrow_expansion * message_bytes, EXPANSION_FLOOR)


def _scan(value: bytes, cap: int) -> int:
    """Check the IPC stream's framing and headers; return the number of record batches.

    Raises ``BadRecord("malformed_arrow", ...)`` for anything but one Schema message
    then dictionary and record batches whose declared lengths and buffers fit the
    message (compressed ones: fit ``cap``), and ``BadRecord("oversized", ...)`` when
    their compressed buffers declare more than ``cap`` uncompressed bytes in all
    (read from each buffer's 8-byte length prefix, before anything is decompressed).
    """
    total, pos, batches, seen, expanded = len(value), 0, 0, 0, 0
    try:
        while pos < total:
            size = struct.unpack_from("<I", value, pos)[0]
            pos += 4
            if size == _CONTINUATION:
                size = struct.unpack_from("<I", value, pos)[0]
                pos += 4
            if size == 0:  # end-of-stream marker
                if pos != total:
                    raise BadRecord("malformed_arrow", "bytes after the IPC end-of-stream marker")
                break
            if size > total - pos:
                raise BadRecord("malformed_arrow", f"IPC message header of {size} bytes runs past "
                                f"the end of the {total}-byte message (truncated?)")
            seen += 1
            if seen > MAX_IPC_MESSAGES:
                raise BadRecord("malformed_arrow", f"more than {MAX_IPC_MESSAGES} IPC messages; "
                                "write fewer, larger record batches")
            fb = _Flat(value[pos:pos + size])
            msg = fb.root()
            kind = fb.scalar(msg, 1, "<B")
            body = fb.scalar(msg, 3, "<q")
            pos += size
            if body < 0 or body > total - pos:
                raise BadRecord(
                    "malformed_arrow", f"IPC message body of {body} bytes runs past the "
                    f"end of the {total}-byte message (truncated?)")
            if seen == 1 and kind != _HEADER_SCHEMA:
                raise BadRecord("malformed_arrow", "an Arrow IPC stream must start with its schema "
                                "(write the IPC stream format, not the file format)")
            if seen > 1 and kind not in (_HEADER_RECORD_BATCH, _HEADER_DICTIONARY_BATCH):
                raise BadRecord(
                    "malformed_arrow", f"IPC message {_HEADER_NAMES.get(kind, kind)} is "
                    "not accepted: only dictionary and record batches follow the schema")
            if kind == _HEADER_RECORD_BATCH:
                header = fb.ref(msg, 2)
                batches += 1
            elif kind == _HEADER_DICTIONARY_BATCH:
                dictionary = fb.ref(msg, 2)
                header = None if dictionary is None else fb.ref(dictionary, 1)
            if kind != _HEADER_SCHEMA:
                if header is None:
                    raise BadRecord("malformed_arrow", "batch message without a header")
                expanded += _check_batch(fb, header, value, pos, body, cap)
                if expanded > cap:
                    raise BadRecord(
                        "oversized", f"IPC body compression declares {expanded} or more "
                        f"uncompressed bytes, over the {cap} this {total}-byte message may "
                        f"expand to (input.max_arrow_expansion x its size, at least "
                        f"{EXPANSION_FLOOR}); refused before decompressing: write smaller "
                        "record batches or raise input.max_arrow_expansion")
            pos += body
    except struct.error:
        raise BadRecord("malformed_arrow", "not an Arrow IPC stream (truncated or corrupt "
                        "framing)") from None
    if seen == 0:
        raise BadRecord("malformed_arrow", "not an Arrow IPC stream (no schema message)")
    return batches


def _check_batch(fb: _Flat, header: int, value: bytes, body_at: int, body: int,
                 cap: int) -> int:
    """Check one RecordBatch table (of a record or dictionary batch) whose body is
    ``value[body_at:body_at + body]``; return the uncompressed bytes its compressed
    buffers declare (0 if it is not compressed)."""
    total = len(value)
    compression = None if fb.field(header, 3) is None else fb.ref(header, 3)
    if compression is not None:
        codec, method = fb.scalar(compression, 0, "<b"), fb.scalar(compression, 1, "<b")
        if codec not in _CODECS or method != 0:
            raise BadRecord("malformed_arrow", f"unknown IPC body compression (codec {codec}, "
                            f"method {method}); use LZ4_FRAME or ZSTD")
    start, count = fb.vector(header, 2)
    if count > total:
        raise BadRecord("malformed_arrow", "record batch declares more buffers than bytes")
    expanded = 0
    buffers = struct.iter_unpack("<qq", fb.buf[start:start + 16 * count])
    if len(fb.buf) < start + 16 * count:
        raise struct.error("buffer vector past the header")
    for i, (off, size) in enumerate(buffers):  # Buffer structs: (offset, length) in the body
        if not (0 <= off <= body and 0 <= size <= body - off):
            raise BadRecord("malformed_arrow", f"buffer {i} ({size} bytes at {off}) lies "
                            f"outside its {body}-byte message body")
        if compression is None or size == 0:
            continue
        if size < 8:
            raise BadRecord("malformed_arrow", f"compressed buffer {i} of {size} bytes has no "
                            "8-byte uncompressed length")
        declared = struct.unpack_from("<q", value, body_at + off)[0]
        if declared < -1:
            raise BadRecord("malformed_arrow", f"compressed buffer {i} declares "
                            f"{declared} uncompressed bytes")
        expanded += size - 8 if declared == -1 else declared  # -1: stored uncompressed
        if expanded > cap:
            return expanded  # the caller refuses it
    # every accepted column needs at least one body byte per row, uncompressed
    bound = total if compression is None else cap
    length = fb.scalar(header, 0, "<q")
    if not 0 <= length <= bound:
        raise BadRecord("malformed_arrow", f"record batch declares {length} rows, more than its "
                        f"{total}-byte message can hold")
    start, count = fb.vector(header, 1)
    if count > total:
        raise BadRecord("malformed_arrow", "record batch declares more array nodes than bytes")
    for i in range(count):  # FieldNode structs: (length int64, null_count int64)
        n, nulls = struct.unpack_from("<qq", fb.buf, start + 16 * i)
        if not (0 <= n <= bound and 0 <= nulls <= n):
            raise BadRecord("malformed_arrow", f"array node declares {n} values ({nulls} null), "
                            f"more than its {total}-byte message can hold")
    return expanded


# ---------------------------------------------------------------- columns

_ipv4_tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Text of every 16-bit half of an address: ``"a.b."`` and ``"c.d"`` as
    little-endian uint64 words, with their byte lengths (built once, 2 MiB)."""
    global _ipv4_tables
    if _ipv4_tables is None:
        o = np.arange(256, dtype=np.uint64)
        n = 1 + (o >= 10).astype(np.uint64) + (o >= 100).astype(np.uint64)  # digits
        d = [o // np.uint64(100), o // np.uint64(10) % np.uint64(10), o % np.uint64(10)]
        zero, dot = np.uint64(ord("0")), np.uint64(ord("."))
        # the octet's digits as little-endian bytes, most significant first
        txt = np.where(n == 3, (d[0] + zero) | (d[1] + zero) << np.uint64(8)
                       | (d[2] + zero) << np.uint64(16),
                       np.where(n == 2, (d[1] + zero) | (d[2] + zero) << np.uint64(8),
                                d[2] + zero))
        a, b = np.repeat(txt, 256), np.tile(txt, 256)  # index = 256 * a + b
        la, lb = np.repeat(n, 256), np.tile(n, 256)
        lo = a | dot << (la * np.uint64(8)) | b << ((la + np.uint64(1)) * np.uint64(8))
        hi = lo | dot << ((la + lb + np.uint64(1)) * np.uint64(8))
        _ipv4_tables = (hi, la + lb + np.uint64(2), lo, la + lb + np.uint64(1))
    return _ipv4_tables


_TEXT_PIECE = 1 << 15  # addresses per piece of ipv4_text (~3 MB of temporaries)


def ipv4_text(addrs: np.ndarray) -> np.ndarray:
    """Dotted-quad text of uint32 IPv4 addresses as a ``U16`` array, no Python objects.

    ``"a.b."`` (4-8 bytes) and ``"c.d"`` (3-7 bytes) come from two tables
    indexed by the address's halves and are joined by shifts on two 64-bit
    words, which are the text's bytes (zero padded to 16).

    >>> ipv4_text(np.array([0x0A000001, 0xFFFFFFFF, 0], dtype=np.uint32)).tolist()
    ['10.0.0.1', '255.255.255.255', '0.0.0.0']
    """
    a = np.asarray(addrs, dtype=np.uint32).reshape(-1)
    out = np.empty(a.shape[0], dtype="U16")
    codes = out.view(np.uint32).reshape(-1, 16)
    hi_t, hi_len, lo_t, _ = _tables()
    # in pieces: the temporaries stay in cache (one pass over ~1M-event poll batches was
    # 3-10x slower per event, memory-bound); the text is written once, into ``out``
    for s in range(0, a.shape[0], _TEXT_PIECE):
        part = a[s:s + _TEXT_PIECE]
        top, bottom = part >> np.uint32(16), part & np.uint32(0xFFFF)
        p, q, shift = hi_t[top], lo_t[bottom], hi_len[top] * np.uint64(8)  # shift in 32..64
        words = np.empty((part.shape[0], 2), dtype="<u8")
        # q << shift in two steps: numpy (like C) leaves a 64-bit shift undefined
        words[:, 0] = p | ((q << (shift - np.uint64(8))) << np.uint64(8))
        words[:, 1] = q >> (np.uint64(64) - shift)  # shift == 64: q >> 0, all of q
        # bytes -> UCS-4 code points (ASCII); numpy's own S -> U cast is ~15x slower
        np.copyto(codes[s:s + _TEXT_PIECE], words.view(np.uint8).reshape(-1, 16))
    return out


class _Errs(Protocol):
    def add(self, row: int, reason: str, detail: str) -> None: ...


class _Shifted:
    """Row errors of one chunk (record batch) of a column that starts at row ``base``."""

    def __init__(self, errs: _Errs, base: int) -> None:
        self.errs, self.base = errs, base

    def add(self, row: int, reason: str, detail: str) -> None:
        self.errs.add(self.base + row, reason, detail)


class _EntryErrors:
    """The bad entries of a dictionary: ``{entry: (reason, detail)}``, the first decides."""

    def __init__(self) -> None:
        self.bad: dict[int, tuple[str, str]] = {}

    def add(self, row: int, reason: str, detail: str) -> None:
        self.bad.setdefault(row, (reason, detail))


class _Budget:
    """The text bytes a message's dictionary and view columns may expand to (the cap of
    :func:`expansion_cap`); spending past it dead-letters the message (``oversized``)."""

    def __init__(self, cap: int) -> None:
        self.cap, self.left = cap, cap
        self.dictionaries: dict[Any, tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]]
        self.dictionaries = {}  # decoded dictionaries of this message, by their buffers

    def spend(self, n: int, what: str, *args: Any) -> None:
        """Spend ``n`` bytes; ``what.format(*args)`` names them if that passes the cap."""
        self.left -= n
        if self.left < 0:
            what = what.format(*args)
            raise BadRecord("oversized", f"{what} expands to more than the {self.cap} bytes "
                            "this message may expand to (input.max_arrow_expansion x its "
                            f"size, at least {EXPANSION_FLOOR}); send plain utf8 values, "
                            "smaller messages, or raise input.max_arrow_expansion")


def _nulls(col: Any, name: str, errs: _Errs) -> Any:
    """Rows holding a null are bad rows (``wrong_type``); the column with them filled."""
    if not col.null_count:
        return col
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    for i in np.flatnonzero(mask).tolist():
        errs.add(i, "wrong_type", f"column {name!r} holds a null; nulls are not allowed "
                 "(drop those rows at the producer)")
    t = col.type
    fill = (pa.scalar("", t) if pa.types.is_string(t) or pa.types.is_large_string(t)
            else pa.scalar(b"", t) if pa.types.is_binary(t) or pa.types.is_large_binary(t)
            else 0)
    return pc.fill_null(col, fill)


def _checked_text(col: Any, name: str, limit: int, errs: _Errs
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A null-free ``utf8`` or ``large_utf8`` column as an object array of str, and each
    value's UTF-8 byte length; a value over ``limit`` bytes (``input.max_item_bytes``,
    measured from the offsets) or holding a NUL makes its row bad, alone."""
    lengths = np.zeros(0, dtype=np.int64)
    if len(col):
        bufs = col.buffers()  # validity, offsets, data
        width = 4 if col.type == "string" else 8  # large_utf8: int64 offsets
        offsets = np.frombuffer(bufs[1], dtype=f"<i{width}", count=len(col) + 1,
                                offset=col.offset * width)
        lengths = np.diff(offsets)
        if int(lengths.max()) > limit:
            for i in np.flatnonzero(lengths > limit).tolist():
                errs.add(i, "oversized_item", f"column {name!r} has a value of "
                         f"{int(lengths[i])} UTF-8 bytes, over input.max_item_bytes={limit}; "
                         "shorten it at the producer or raise the limit")
        data = bufs[2]
        if data is not None:
            raw = memoryview(data)[int(offsets[0]):int(offsets[-1])].tobytes()
            if raw.find(b"\x00") >= 0:  # memchr over the values' bytes
                at = np.frombuffer(raw, dtype=np.uint8)
                pos = np.flatnonzero(at == 0) + int(offsets[0])
                for i in np.unique(np.searchsorted(offsets, pos, side="right") - 1).tolist():
                    errs.add(i, "nul_in_field", f"column {name!r} contains a NUL character; "
                             "strip NULs at the producer")
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object), lengths


def _without_rows(col: Any, views: np.ndarray, bad: np.ndarray) -> Any:
    """A view column with the rows of mask ``bad`` replaced by empty values and no
    validity bitmap (the views are copied, 16 bytes a row; the values are not)."""
    import pyarrow as pa

    if not bad.any() and not col.null_count and not col.offset:
        return col
    raw = views.copy()
    raw[bad] = 0  # an inline view of length 0
    return pa.Array.from_buffers(col.type, len(col),
                                 [None, pa.py_buffer(raw), *col.buffers()[2:]])


def _utf8_of_binary(col: Any, name: str, errs: _Errs) -> Any:
    """A null-free binary column as utf8 (same offsets and bytes): a value that is not
    UTF-8 makes its row bad (``not_utf8``) and is replaced by an empty one."""
    import pyarrow as pa

    text = pa.large_string() if pa.types.is_large_binary(col.type) else pa.string()
    try:
        return col.cast(text)
    except (pa.ArrowInvalid, ValueError):
        pass
    values = col.to_pylist()  # the error path only: one bytes object per row
    for i, v in enumerate(values):
        try:
            v.decode("utf-8")
        except UnicodeDecodeError:
            errs.add(i, "not_utf8", f"column {name!r} holds a binary value that is not UTF-8; "
                     "binary items are the UTF-8 bytes of their text")
            values[i] = b""
    return pa.array(values, type=col.type).cast(text)


def _text_array(col: Any, name: str, limit: int, errs: _Errs, budget: _Budget,
                binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """One chunk of a text column of any accepted Arrow type as an object array of
    str and the UTF-8 byte length of each value (see :func:`_checked_text`).

    ``utf8``/``large_utf8`` are read in place; ``binary``/``large_binary`` (if
    ``binary``) are the UTF-8 bytes of their text, cast in place after a UTF-8 check;
    ``string_view``/``binary_view`` values are measured from their views first (an
    oversized or null value is never copied) and the rest copied once, within
    ``budget``; a dictionary's entries are decoded once and shared by reference by
    the rows (each entry's failure fails the rows that use it), its rows' text
    counted against ``budget``. Any other type fails the message (``wrong_type``).
    """
    import pyarrow as pa

    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _checked_text(_nulls(col, name, errs), name, limit, errs)
    if binary and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        return _checked_text(_utf8_of_binary(_nulls(col, name, errs), name, errs), name,
                             limit, errs)
    if pa.types.is_string_view(t) or (binary and pa.types.is_binary_view(t)):
        n = len(col)
        bad = np.zeros(n, dtype=bool)
        if col.null_count:
            bad = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            for i in np.flatnonzero(bad).tolist():
                errs.add(i, "wrong_type", f"column {name!r} holds a null; nulls are not "
                         "allowed (drop those rows at the producer)")
        # views: (length int32, 12 bytes of prefix or buffer index and offset); a null
        # row's view is undefined, so its length is not read
        views = np.frombuffer(col.buffers()[1], dtype="<i4", count=4 * n,
                              offset=16 * col.offset).reshape(n, 4)
        lengths = np.where(bad, 0, views[:, 0]).astype(np.int64)
        over = lengths > limit
        for i in np.flatnonzero(over).tolist():
            errs.add(i, "oversized_item", f"column {name!r} has a value of {int(lengths[i])} "
                     f"UTF-8 bytes, over input.max_item_bytes={limit}; shorten it at the "
                     "producer or raise the limit")
        bad |= over
        budget.spend(int(lengths[~bad].sum()), "column {!r} ({})", name, t)
        is_bin = pa.types.is_binary_view(t)
        flat = _without_rows(col, views, bad).cast(pa.large_binary() if is_bin
                                                   else pa.large_string())
        if is_bin:
            flat = _utf8_of_binary(flat, name, errs)
        return _checked_text(flat, name, limit, errs)
    if pa.types.is_dictionary(t):
        import pyarrow.compute as pc

        # the record batches of one dictionary batch share its buffers: decoded once
        d = col.dictionary
        key = (str(d.type), d.offset, len(d),
               tuple((b.address, b.size) if b is not None else None for b in d.buffers()))
        if key not in budget.dictionaries:
            entries = _EntryErrors()
            vals, lens = _text_array(d, name, limit, entries, budget, binary)
            # each delta makes a new, longer dictionary: decoding them is counted too
            budget.spend(int(lens.sum()), "the dictionaries of column {!r}", name)
            budget.dictionaries[key] = (vals, lens, entries.bad)
        values, lengths, bad_entries = budget.dictionaries[key]
        lengths = lengths.copy()
        idx = np.array(pc.fill_null(col.indices, 0).to_numpy(zero_copy_only=False),
                       dtype=np.intp)
        if col.null_count:
            mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            for i in np.flatnonzero(mask).tolist():
                errs.add(i, "wrong_type", f"column {name!r} holds a null; nulls are not "
                         "allowed (drop those rows at the producer)")
            # a null row reads an extra empty entry (the dictionary may be empty)
            idx[mask] = len(values)
            values = np.append(values, np.array([""], dtype=object))
            lengths = np.append(lengths, 0)
        if bad_entries:
            bad_entry = np.zeros(len(values), dtype=bool)
            bad_entry[list(bad_entries)] = True
            lengths[bad_entry] = 0
            for i in np.flatnonzero(bad_entry[idx]).tolist():
                entry = int(idx[i])
                reason, detail = bad_entries[entry]
                errs.add(i, reason, f"{detail} (dictionary entry {entry})")
        rows = lengths[idx]
        budget.spend(int(rows.sum()), "dictionary-encoded column {!r}", name)
        return values[idx], rows
    kinds = ("utf8, large_utf8, string_view, a dictionary of them, binary, large_binary "
             "or binary_view" if binary else "utf8, large_utf8, string_view or a "
             "dictionary of them")
    raise BadRecord("wrong_type", f"column {name!r} must be text ({kinds}), got {t}")


def _text_column(chunks: list[Any], name: str, limit: int, errs: RowErrors,
                 budget: _Budget, binary: bool = False) -> np.ndarray:
    """A text column (one chunk per record batch) as an object array of str; a null, a
    value over ``limit`` UTF-8 bytes (``input.max_item_bytes``), a NUL or a binary value
    that is not UTF-8 makes its row bad, alone (:func:`_text_array`)."""
    if len(chunks) == 1:
        return _text_array(chunks[0], name, limit, errs, budget, binary)[0]
    parts, base = [], 0
    for chunk in chunks:
        parts.append(_text_array(chunk, name, limit, _Shifted(errs, base), budget, binary)[0])
        base += len(chunk)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=object)


def _combined(chunks: list[Any], typ: Any) -> Any:
    """The chunks of a non-text column as one array."""
    import pyarrow as pa

    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks) if chunks else pa.array([], type=typ)


def _item_column(chunks: list[Any], typ: Any, spec: InputSpec, errs: RowErrors,
                 budget: _Budget) -> np.ndarray:
    """The item column; IPv4 (``uint32`` in a ``str`` topology) stays ``uint32`` here
    and becomes text once per poll batch in :func:`decode_arrow`. A column of the wrong
    type fails the message; a bad value fails its row."""
    import pyarrow as pa

    t = typ
    if spec.item_type == "str":
        if pa.types.is_uint32(t):
            return _nulls(_combined(chunks, t), "item", errs).to_numpy(zero_copy_only=False)
        try:
            return _text_column(chunks, "item", spec.max_item_bytes, errs, budget, binary=True)
        except BadRecord as bad:
            if bad.reason == "wrong_type" and bad.detail.startswith("column 'item' must be"):
                raise BadRecord("wrong_type", f"column 'item' must be text (utf8, large_utf8, "
                                "string_view, a dictionary of them, binary, large_binary, "
                                f"binary_view) or uint32 (IPv4) in a str topology, got {t}"
                                ) from None
            raise
    if not pa.types.is_integer(t):
        raise BadRecord("wrong_type", f"column 'item' must be an integer type (int64) in an int "
                        f"topology, got {t}")
    arr = _nulls(_combined(chunks, t), "item", errs).to_numpy(zero_copy_only=False)
    if t == pa.uint64() and len(arr) and int(arr.max()) >= 1 << 63:
        for i in np.flatnonzero(arr >= np.uint64(1 << 63)).tolist():
            errs.add(i, "wrong_type", "item must be an int64 integer (a uint64 value is "
                     ">= 2**63)")
        arr = np.where(arr >= np.uint64(1 << 63), np.uint64(0), arr)
    items = arr.astype(np.int64, copy=False)
    if spec.item_bits is not None and len(items) and (
            int(items.min()) < 0 or int(items.max()) >= 1 << spec.item_bits):
        for i in np.flatnonzero((items < 0) | (items >= 1 << spec.item_bits)).tolist():
            errs.add(i, "out_of_domain", f"item {int(items[i])} is outside "
                     f"[0, 2**{spec.item_bits}) (the mechanism's `bits`)")
    return items


def _weight_column(col: Any, signed: bool, errs: RowErrors) -> np.ndarray:
    import pyarrow as pa

    t = col.type
    if not ((pa.types.is_floating(t) and t != pa.float16()) or pa.types.is_integer(t)):
        raise BadRecord("wrong_type", f"column 'weight' must be float64, float32 or an integer "
                        f"type, got {t}")
    w = _nulls(col, "weight", errs).to_numpy(zero_copy_only=False).astype(np.float64,
                                                                            copy=False)
    if len(w):
        bad = ~np.isfinite(w) if signed else ~(np.isfinite(w) & (w >= 0))
        for i in np.flatnonzero(bad).tolist():
            errs.add(i, "wrong_type", "weight must be a finite number, non-negative unless "
                     "input.signed_weights is true")
    return w


def _shard(meta: dict[bytes, bytes] | None, spec: InputSpec, gate: Gate) -> str:
    meta = meta or {}
    if meta.get(META_VERSION) != ARROW_VERSION.encode():
        raise BadRecord("bad_version", f"schema metadata {META_VERSION.decode()!r} must be "
                        f"{ARROW_VERSION!r}")
    raw = meta.get(META_SHARD)
    if raw is None:
        raise BadRecord("missing_field", f"schema metadata {META_SHARD.decode()!r} (the shard key) "
                        "is missing")
    try:
        shard = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRecord("not_utf8", "the shard key is not UTF-8 text") from None
    return gated(gate, text_field(shard, "shard key", spec.max_item_bytes, True))


def _read(value: bytes, cap: int) -> tuple[Any, list[str], list[Any]]:
    """Schema and record batches, after :func:`_scan`; malformed Arrow raises BadRecord.

    pyarrow resolves dictionary batches (and deltas) into the record batches'
    dictionary columns and decompresses LZ4/ZSTD buffers into the sizes their
    prefixes declare, which :func:`_scan` has bounded by ``cap``; a buffer that does
    not decompress to exactly that size fails the read."""
    import pyarrow as pa

    _scan(value, cap)
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(value))
        schema = reader.schema
        names = list(schema.names)  # a field name that is not UTF-8 raises here
        batches = list(reader)
        for b in batches:
            b.validate(full=True)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise BadRecord("malformed_arrow", f"invalid Arrow IPC stream: {str(exc)[:200]}") from None
    return schema, names, batches


def _columns(spec: InputSpec) -> tuple[str, ...]:
    f = spec.fields
    return ("item",) + (("unit",) if f.unit else ()) + (("weight",) if f.weight else ())


def _decode_one(spec: InputSpec, value: bytes | None, gate: Gate
                ) -> tuple[str, RowErrors, np.ndarray, np.ndarray | None, np.ndarray | None]:
    if value is None or len(value) == 0:
        raise BadRecord("empty", "message has no value")
    if len(value) > spec.max_message_bytes:
        raise BadRecord("oversized", f"message of {len(value)} bytes exceeds "
                        f"max_message_bytes={spec.max_message_bytes}")
    budget = _Budget(expansion_cap(spec, len(value)))
    schema, names, batches = _read(value, budget.cap)
    want = _columns(spec)
    extra = sorted(set(names) - set(want))
    if extra or len(names) != len(set(names)):
        raise BadRecord("wrong_schema", f"unexpected or repeated columns {extra or names}; the "
                        f"schema has exactly the columns {list(want)}")
    for name in want:
        if name not in names:
            raise BadRecord("missing_field", f"column {name!r} is missing")
    shard = _shard(schema.metadata, spec, gate)
    import pyarrow as pa

    chunks = {n: [b.column(n) for b in batches] for n in want}
    n = sum(len(c) for c in chunks["item"])
    check_event_count(spec, n)
    # the decoded columns hold ~8 bytes a row: rows count against the cap too (only a
    # compressed message can get near it: every accepted column has >= 1 byte a row)
    budget.spend(8 * n, "its {} rows", n)
    errs = RowErrors(n)
    try:
        items = _item_column(chunks["item"], schema.field("item").type, spec, errs, budget)
        units = (_text_column(chunks["unit"], "unit", spec.max_item_bytes, errs, budget)
                 if "unit" in chunks else None)
        weights = (_weight_column(_combined(chunks["weight"], schema.field("weight").type),
                                  spec.signed_weights, errs)
                   if "weight" in chunks else None)
    except (pa.ArrowException, ValueError, TypeError, IndexError, OverflowError) as exc:
        # valid Arrow (fully validated) that a conversion still refuses: the message
        raise BadRecord("malformed_arrow", f"cannot read the columns: {str(exc)[:200]}"
                        ) from None
    return shard, errs, items, units, weights


def decode_arrow(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    return decode_messages(spec, records, gate, _decode_one,
                           items_of=lambda parts: _join_items(spec, parts))


def _join_items(spec: InputSpec, parts: list[np.ndarray]) -> np.ndarray:
    """The messages' items as one array; IPv4 ``uint32`` columns become text where the
    topology's items are strings (one conversion per batch when every message has them)."""
    if spec.item_type == "str" and any(p.dtype == np.uint32 for p in parts):
        if all(p.dtype == np.uint32 for p in parts):
            return ipv4_text(np.concatenate(parts))
        return np.concatenate([ipv4_text(p) if p.dtype == np.uint32 else p for p in parts])
    return np.concatenate(parts)


def arrow_message(shard: str, items: np.ndarray | Sequence[Any],
                  units: Sequence[str] | None = None,
                  weights: np.ndarray | Sequence[float] | None = None) -> bytes:
    """One ``arrow`` message (an IPC stream of one record batch), as a producer writes it.

    ``items``: a uint32 array (IPv4), an integer array, or strings (utf8).
    Used by the demo producer and the tests; any Arrow library writes the same.
    """
    import pyarrow as pa

    arr = np.asarray(items) if not isinstance(items, np.ndarray) else items
    cols = {"item": pa.array(arr, type=pa.string()) if arr.dtype.kind in "OUS" else pa.array(arr)}
    if units is not None:
        cols["unit"] = pa.array(list(units), type=pa.string())
    if weights is not None:
        cols["weight"] = pa.array(np.asarray(weights, dtype=np.float64))
    batch = pa.RecordBatch.from_pydict(cols)
    schema = batch.schema.with_metadata({META_VERSION: ARROW_VERSION.encode(),
                                         META_SHARD: shard.encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch.replace_schema_metadata(schema.metadata))
    return bytes(sink.getvalue().to_pybytes())
