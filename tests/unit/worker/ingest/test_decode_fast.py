"""The msgspec fast path (worker/ingest/fast_json.py) against the reference json decoder.

Differential: for any batch, ``decode_batch`` (fast path first) must give the
same columns and the same dead letters (offset, reason, detail) as the
reference ``_decode_json`` (``json.loads``); the fast path either agrees or
declines. Hostile values are mixed into otherwise plain batches.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.config.topology import FieldPaths, InputSpec
from worker.ingest.decode import _decode_json, decode_batch
from worker.ingest.fast_json import MAX_DEPTH, fast_json

PLAIN = InputSpec("t", 1, "json", FieldPaths(shard="router", item="src_ip"))
DOTTED = InputSpec("t", 1, "json", FieldPaths(shard="r.id", item="src.ip", unit="u",
                                                   weight="m.w"))
INTS = InputSpec("t", 1, "json", FieldPaths(shard="router", item="n", weight="w"),
                 item_type="int", signed_weights=True)
BITS = InputSpec("t", 1, "json", FieldPaths(shard="router", item="n"), item_type="int",
                 item_bits=16)
SMALL = InputSpec("t", 1, "json", FieldPaths(shard="router", item="src_ip"), max_item_bytes=16,
                  max_message_bytes=200)
SPECS = [PLAIN, DOTTED, INTS, BITS, SMALL]


def _gate(shard: str) -> str | None:
    return "unknown_shard" if shard == "bad" else None


def _same(spec: InputSpec, values: list[bytes | None]) -> None:
    recs = [(i, b"k", v, 1000 + i) for i, v in enumerate(values)]
    got = decode_batch(spec, recs, _gate)
    ref = _decode_json(spec, recs, _gate)
    assert got.items.tolist() == ref.items.tolist()
    assert got.items.dtype == ref.items.dtype
    assert got.shards.tolist() == ref.shards.tolist()
    for a, b in ((got.units, ref.units), (got.weights, ref.weights)):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    assert [(d.offset, d.reason, d.detail) for d in got.dead] == \
        [(d.offset, d.reason, d.detail) for d in ref.dead]


def _good(spec: InputSpec, i: int) -> dict:
    if spec is DOTTED:
        return {"r": {"id": f"r{i % 3}"}, "src": {"ip": f"10.0.0.{i}"}, "u": "alice",
                "m": {"w": i * 0.5}, "other": [1, {"x": None}]}
    if spec in (INTS, BITS):
        return {"router": f"r{i % 3}", "n": i, "w": -1.5 * i}
    return {"router": f"r{i % 3}", "src_ip": f"10.0.0.{i}", "extra": {"a": [True, None]}}


def _batch(spec: InputSpec, n: int = 20) -> list[bytes | None]:
    return [json.dumps(_good(spec, i)).encode() for i in range(n)]


def test_fast_path_taken_on_plain_batches() -> None:
    for spec in [PLAIN, DOTTED, INTS, BITS]:  # SMALL: 4 * len may exceed 16 bytes, declines
        recs = [(i, None, v, 0) for i, v in enumerate(_batch(spec))]
        assert fast_json(spec, recs, _gate) is not None, spec.fields
        _same(spec, _batch(spec))


HOSTILE: list[bytes | None] = [
    None, b"", b"x" * 300, b"\xff\xfe", b'{"router":"r1","src_ip":"a","z":"\xff"}',
    b'\xef\xbb\xbf{"router":"r1","src_ip":"a"}', b'{"router":"r1","src_ip":"a\\u0000"}',
    b'{"router":"r1","src_ip":"\\ud800"}', b'{"router":"r1","src_ip":"\\ud83d\\ude00"}',
    b'{"router":"r1","src_ip":"a","z":' + b"[" * (MAX_DEPTH + 10) + b"]" * (MAX_DEPTH + 10)
    + b"}",
    b'{"router":"r1","src_ip":"a","z":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"router":"r1","src_ip":"a"}{"router":"r1","src_ip":"b"}', b"[1]", b"7", b"null",
    b'{"router":"r1","src_ip":"a","router":"r2"}', b'{"router":1,"src_ip":"a"}',
    b'{"router":"r1","src_ip":7}', b'{"router":"r1","src_ip":true}', b'{"router":"r1"}',
    b'{"router":"bad","src_ip":"a"}', b'{"router":"r1","src_ip":"' + b"y" * 40 + b'"}',
    b'{"router":"r1","src_ip":"\xc3\xa9\xc3\xa9\xc3\xa9"}', b'{"router":"r1","src_ip":NaN}',
    b'{"router":"r1","n":NaN,"w":1}', b'{"router":"r1","n":1,"w":Infinity}',
    b'{"router":"r1","n":1,"w":1e400}', b'{"router":"r1","n":1,"w":-1e400}',
    b'{"router":"r1","n":99999999999999999999999,"w":1}',
    b'{"router":"r1","n":9223372036854775808}',
    b'{"router":"r1","n":-9223372036854775809}', b'{"router":"r1","n":70000}',
    b'{"router":"r1","n":-1}', b'{"router":"r1","n":1.0}', b'{"router":"r1","n":true}',
    b'{"router":"r1","n":1,"w":true}', b'{"router":"r1","n":1,"w":"1"}',
    b'{"router":"r1","n":1,"w":123456789012345678901}', b'{"router":"r1","n":1,"w":-0.0}',
    b'{"r":{"id":"r1"},"src":{"ip":"a"},"u":"x","m":{"w":-2}}',
    b'{"r":{"id":"r1"},"src":"flat","u":"x","m":{"w":2}}',
    b'{"r":{"id":"r1"},"src":{"ip":"a"},"u":7,"m":{"w":2}}',
    b'{"r":{"id":"r1"},"src":{"ip":"a","ip":"b"},"u":"x","m":{"w":2}}',
    b'  {"router":"r1","src_ip":"a"}  ', b'{"router":"r1","src_ip":"a"},',
    b'{"router":"r1","src_ip":"a"', b'{"router":"r1","src_ip":"a"} // c',
]


def test_hostile_values_match_reference() -> None:
    for spec in SPECS:
        for bad in HOSTILE:
            batch = _batch(spec, 5)
            _same(spec, [*batch[:2], bad, *batch[2:]])
            _same(spec, [bad])


_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from(["r1", "r2", "bad", "\x00", "\ud800", "é", "10.0.0.1"]))
_json = st.recursive(_json_leaf, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.sampled_from(
        ["router", "src_ip", "n", "w", "r", "id", "src", "ip", "u", "m", "z"]), c, max_size=4)),
    max_leaves=12)


@st.composite
def _value(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.one_of(st.none(), st.binary(max_size=30)))
    doc = draw(_json)
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    if kind == 1 and raw:  # corrupt one byte
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i + 1:]
    return raw


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SPECS), st.lists(_value(), max_size=6), st.integers(0, 6))
def test_differential_random_batches(spec: InputSpec, values: list[bytes | None],
                                     good: int) -> None:
    _same(spec, _batch(spec, good) + values)
    _same(spec, values)
