"""The typed (msgspec) JSON fast path agrees with the reference path on every input.

``worker.ingest.fast_json.fast_json`` (msgspec) may only ever return what the reference path
(``json.loads`` + field checks) returns; everywhere else it must decline (None) so the
reference decides, with its dead-letter reasons. Each case is decoded twice: normally,
and with the fast path switched off, and the two results must be identical. The fuzz
test is seeded (deterministic: no false failures).
"""

from __future__ import annotations

import json
import random

import pytest

from worker.config.topology import FieldPaths, InputSpec
from worker.ingest import decode
from worker.ingest.decode import Decoded, decode_batch

SPEC = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src_ip"))
GOOD = b'{"router":"r1","src_ip":"10.0.0.1","packets":2}'

HOSTILE = {
    "duplicate_key": b'{"router":"a","src_ip":"x","router":"b"}',
    "duplicate_escaped_key": b'{"router":"a","src_ip":"x","\\u0072outer":"b"}',
    "nan": b'{"router":"a","src_ip":"x","v":NaN}',
    "minus_infinity": b'{"router":"a","src_ip":"x","v":-Infinity}',
    "huge_int": b'{"router":"a","src_ip":"x","v":' + b"9" * 900 + b"}",
    "over_int_digits": b'{"router":"a","src_ip":"x","v":' + b"1" * 5000 + b"}",
    "inf_float": b'{"router":"a","src_ip":"x","v":1e999}',
    "non_utf8_skipped_field": b'{"router":"a","src_ip":"x","v":"\xff\xfe"}',
    "non_utf8_item": b'{"router":"a","src_ip":"x\xff"}',
    "latin1_item": '{"router":"a","src_ip":"caf\xe9"}'.encode("latin-1"),
    "utf8_item": '{"router":"a","src_ip":"café"}'.encode(),
    "bom": b'\xef\xbb\xbf{"router":"a","src_ip":"x"}',
    "utf16": '{"router":"a","src_ip":"x"}'.encode("utf-16"),
    "lone_surrogate": b'{"router":"a","src_ip":"\\ud800"}',
    "surrogate_pair": b'{"router":"a","src_ip":"\\ud83d\\ude00"}',
    "nul_escape": b'{"router":"a","src_ip":"x\\u0000"}',
    "raw_control_char": b'{"router":"a","src_ip":"x\x01"}',
    "deep_nesting_small": b'{"router":"a","src_ip":"x","v":' + b"[" * 400 + b"]" * 400 + b"}",
    "deep_nesting_big": b'{"router":"a","src_ip":"x","v":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "trailing_data": b'{"router":"a","src_ip":"x"} {}',
    "two_objects": b'{"router":"a","src_ip":"x"},{"router":"a","src_ip":"y"}',
    "whitespace": b' \t{"router":"a","src_ip":"x"}\r\n ',
    "not_an_object": b'["a","x"]',
    "empty": b"",
    "int_item": b'{"router":"a","src_ip":7}',
    "bool_item": b'{"router":"a","src_ip":true}',
    "null_item": b'{"router":"a","src_ip":null}',
    "missing_item": b'{"router":"a"}',
    "int_shard": b'{"router":5,"src_ip":"x"}',
    "trailing_comma": b'{"router":"a","src_ip":"x",}',
    "single_quotes": b"{'router':'a','src_ip':'x'}",
    "leading_zero": b'{"router":"a","src_ip":"x","v":01}',
    "big_payload": b'{"router":"a","src_ip":"x","pad":"' + b"p" * 100_000 + b'"}',
    "long_item": b'{"router":"a","src_ip":"' + b"i" * 900 + b'"}',
    "escaped_chars": b'{"router":"a\\/b","src_ip":"x\\n\\t\\"y"}',
}


def _same(a: Decoded, b: Decoded) -> None:
    for name in ("items", "shards", "units", "weights"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), name
    assert [(d.offset, d.reason, d.detail) for d in a.dead] == \
        [(d.offset, d.reason, d.detail) for d in b.dead]


def _reference(monkeypatch: pytest.MonkeyPatch, records: list) -> Decoded:
    with monkeypatch.context() as m:
        m.setattr(decode, "fast_json", lambda *a, **k: None)
        return decode_batch(SPEC, records)


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("alone", [True, False])
def test_hostile_input_matches_reference(monkeypatch: pytest.MonkeyPatch, name: str,
                                         alone: bool) -> None:
    value = HOSTILE[name]
    records = [(0, None, value, 0)] if alone else [
        (0, None, GOOD, 0), (1, None, value, 0), (2, None, GOOD, 0)]
    _same(decode_batch(SPEC, records), _reference(monkeypatch, records))


def test_fast_path_taken_on_clean_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path really runs (this test fails if it declines clean input)."""
    calls = []
    real = decode.fast_json

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(decode, "fast_json", spy)
    out = decode_batch(SPEC, [(i, None, GOOD, 0) for i in range(10)])
    assert calls == [True] and out.items.tolist() == ["10.0.0.1"] * 10 and not out.dead
    decode_batch(SPEC, [(0, None, b'{"router":"a","src_ip":"x","v":"\xff"}', 0)])
    assert calls == [True, False]  # non-ASCII: declined, the reference dead-letters it


def test_gate_and_item_limit_decline(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src_ip"),
                     max_item_bytes=16)
    recs = [(0, None, b'{"router":"r1","src_ip":"' + b"a" * 17 + b'"}', 0)]
    out = decode_batch(spec, recs)
    assert [d.reason for d in out.dead] == ["oversized_item"]
    out = decode_batch(SPEC, [(0, None, GOOD, 0)], gate=lambda sh: "unknown_shard")
    assert [d.reason for d in out.dead] == ["unknown_shard"]


def test_fuzzed_messages_match_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded byte mutations of valid events (deterministic, no false failures)."""
    rng = random.Random(12)
    alphabet = b'{}[]":,\\u0 9ae.-+\x00\xff\x7f'
    base = [json.dumps({"router": f"r{i % 3}", "src_ip": f"10.0.{i}.1", "n": i,
                        "x": [1.5, None, True]}, separators=(",", ":")).encode()
            for i in range(20)]
    for _ in range(400):
        b = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                b[pos] = rng.choice(alphabet)
            elif op == 1:
                del b[pos]
            else:
                b.insert(pos, rng.choice(alphabet))
        records = [(0, None, base[0], 0), (1, None, bytes(b), 0)]
        _same(decode_batch(SPEC, records), _reference(monkeypatch, records))
