"""Decoding JSON and columnar batches; every bad message becomes a dead letter."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.config.topology import FieldPaths, InputSpec
from worker.ingest.decode import REASONS, decode_batch
from worker.ingest.routing import ShardGate, group_by_shard, partition_for

JSON = InputSpec("in", 1, "json", FieldPaths("router", "src.ip", "user", None), 300)
JSONW = InputSpec("in", 1, "json", FieldPaths("router", "src", None, "pkts"))
COL = InputSpec("in", 1, "columnar", FieldPaths("router", "src", None, "pkts"))
COLI = InputSpec("in", 1, "columnar", FieldPaths("router", "src"), item_type="int")


def rec(i: int, value: bytes | None) -> tuple[int, bytes | None, bytes | None, int]:
    return (i, b"k", value, 1000 + i)


def test_json_good_events_all_columns() -> None:
    msgs = [rec(i, json.dumps({"router": f"r{i % 2}", "src": {"ip": f"10.0.0.{i}"},
                               "user": i % 3}).encode()) for i in range(5)]
    out = decode_batch(JSON, msgs)
    assert out.dead == []
    assert out.items.tolist() == [f"10.0.0.{i}" for i in range(5)]
    assert out.shards.tolist() == ["r0", "r1", "r0", "r1", "r0"]
    assert out.units is not None and out.units.tolist() == ["0", "1", "2", "0", "1"]


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"router": "r1", "src": ', "malformed_json"),
    (b"\xff\xfe\x81", "not_utf8"),
    (b"[1, 2]", "not_an_object"),
    (b'{"router": "r1", "user": 1}', "missing_field"),
    (b'{"router": "r1", "src": {"ip": "a"}}', "missing_field"),
    (b'{"router": "r1", "src": {"ip": {"x": 1}}, "user": 1}', "wrong_type"),
    (b'{"router": "r1", "src": {"ip": true}, "user": 1}', "wrong_type"),
    (b'{"router": 1.5, "src": {"ip": "a"}, "user": 1}', "wrong_type"),
    (b"", "empty"),
    (None, "empty"),
    (b'{"router": "r1", "src": {"ip": "' + b"x" * 400 + b'"}, "user": 1}', "oversized"),
])
def test_json_bad_messages_dead_lettered(raw: bytes | None, reason: str) -> None:
    good = rec(1, b'{"router": "r1", "src": {"ip": "a"}, "user": "u"}')
    out = decode_batch(JSON, [good, rec(2, raw), good])
    assert [d.reason for d in out.dead] == [reason]
    assert out.dead[0].offset == 2 and out.dead[0].value == raw
    assert out.items.tolist() == ["a", "a"]  # good events unaffected
    assert reason in REASONS
    doc = json.loads(out.dead[0].to_json("t", "in", 3))
    assert doc["reason"] == reason and doc["partition"] == 3 and doc["offset"] == 2


def test_int_item_normalised_to_string_and_int_type() -> None:
    out = decode_batch(JSONW, [rec(0, b'{"router": 7, "src": 42, "pkts": 3}')])
    assert out.items.tolist() == ["42"] and out.shards.tolist() == ["7"]
    assert out.weights is not None and out.weights.tolist() == [3.0]
    ints = InputSpec("in", 1, "json", FieldPaths("router", "src"), item_type="int")
    out = decode_batch(ints, [rec(0, b'{"router": "r", "src": 42}'),
                              rec(1, b'{"router": "r", "src": "42"}')])
    assert out.items.dtype == np.int64 and out.items.tolist() == [42]
    assert [d.reason for d in out.dead] == ["wrong_type"]


def test_negative_weight_rejected() -> None:
    out = decode_batch(JSONW, [rec(0, b'{"router": "r", "src": "a", "pkts": -1}')])
    assert [d.reason for d in out.dead] == ["wrong_type"] and len(out) == 0


def test_gate_rejects_unknown_and_wrong_partition() -> None:
    spec = InputSpec("in", 4, "json", FieldPaths("router", "src"))
    p = partition_for("r1", 4)
    other = next(s for s in (f"r{i}" for i in range(50)) if partition_for(s, 4) != p)
    gate = ShardGate(p, 4, frozenset({"r1", other}))
    msgs = [rec(0, b'{"router": "r1", "src": "a"}'),
            rec(1, json.dumps({"router": other, "src": "a"}).encode()),
            rec(2, b'{"router": "zz", "src": "a"}')]
    out = decode_batch(spec, msgs, gate)
    assert out.shards.tolist() == ["r1"]
    assert [d.reason for d in out.dead] == ["wrong_partition", "unknown_shard"]


def test_columnar_batch_decodes_to_arrays() -> None:
    msg = json.dumps({"v": 1, "shard": "r9", "item": ["a", "b", 5],
                      "weight": [1, 2.5, 0]}).encode()
    out = decode_batch(COL, [rec(0, msg), rec(1, msg)])
    assert out.items.tolist() == ["a", "b", "5", "a", "b", "5"]
    assert out.shards.tolist() == ["r9"] * 6
    assert out.weights is not None and out.weights.tolist() == [1, 2.5, 0, 1, 2.5, 0]
    out = decode_batch(COLI, [rec(0, b'{"v": 1, "shard": "r", "item": [1, 2, 3]}')])
    assert out.items.dtype == np.int64 and out.items.tolist() == [1, 2, 3]


@pytest.mark.parametrize(("doc", "reason"), [
    ({"v": 2, "shard": "r", "item": ["a"], "weight": [1]}, "bad_version"),
    ({"v": 1, "item": ["a"], "weight": [1]}, "missing_field"),
    ({"v": 1, "shard": "r", "weight": [1]}, "missing_field"),
    ({"v": 1, "shard": "r", "item": "a", "weight": [1]}, "wrong_type"),
    ({"v": 1, "shard": "r", "item": ["a", "b"], "weight": [1]}, "length_mismatch"),
    ({"v": 1, "shard": ["r"], "item": ["a"], "weight": [1]}, "wrong_type"),
])
def test_columnar_message_level_failures(doc: dict, reason: str) -> None:
    """Failures that cannot be pinned to one row dead-letter the whole message."""
    out = decode_batch(COL, [rec(0, json.dumps(doc).encode())])
    assert [d.reason for d in out.dead] == [reason] and len(out) == 0


@pytest.mark.parametrize(("doc", "reason", "good"), [
    ({"v": 1, "shard": "r", "item": ["a", 1.5, "c"], "weight": [1, 1, 3]}, "wrong_type",
     (["a", "c"], [1, 3])),
    ({"v": 1, "shard": "r", "item": [{"x": 1}, "b"], "weight": [1, 2]}, "wrong_type",
     (["b"], [2])),
    ({"v": 1, "shard": "r", "item": ["a", "b"], "weight": ["x", 2]}, "wrong_type",
     (["b"], [2])),
    ({"v": 1, "shard": "r", "item": ["a", "b"], "weight": [-1, 2]}, "wrong_type",
     (["b"], [2])),
    ({"v": 1, "shard": "r", "item": ["a", "x" * 2000], "weight": [1, 2]}, "oversized_item",
     (["a"], [1])),
    ({"v": 1, "shard": "r", "item": ["a\u0000", "b"], "weight": [1, 2]}, "nul_in_field",
     (["b"], [2])),
    ({"v": 1, "shard": "r", "item": ["\ud800", "b"], "weight": [1, 2]}, "not_utf8",
     (["b"], [2])),
])
def test_columnar_bad_rows_alone(doc: dict, reason: str, good: tuple) -> None:
    """One event is the unit (docs/PRIVACY.md §2): a bad row is dead-lettered alone and
    the message's other rows count (the old decoder dropped the whole message)."""
    out = decode_batch(COL, [rec(0, json.dumps(doc).encode())])
    assert [d.reason for d in out.dead] == [reason]
    assert out.items.tolist() == good[0] and out.weights is not None
    assert out.weights.tolist() == good[1]
    assert out.dead[0].detail.startswith("1 of ")


def test_columnar_rows_with_invalid_utf8_fail_alone() -> None:
    raw = b'{"v": 1, "shard": "r", "item": ["a", "b\xff", "c"], "weight": [1, 2, 3]}'
    out = decode_batch(COL, [rec(0, raw)])
    assert [d.reason for d in out.dead] == ["not_utf8"] and out.items.tolist() == ["a", "c"]


def test_columnar_many_bad_rows_one_dead_letter_per_message() -> None:
    """One dead letter per offset (as for every encoding): the most frequent reason,
    every reason counted and the first rows of each listed."""
    items = ["ok"] * 300 + [1.5] * 7 + ["y" * 2000] * 2
    out = decode_batch(COL, [rec(0, json.dumps({"v": 1, "shard": "r", "item": items,
                                                 "weight": [1] * len(items)}).encode())])
    assert len(out) == 300 and [d.reason for d in out.dead] == ["wrong_type"]
    detail = out.dead[0].detail
    assert detail.startswith("9 of 309 rows dead-lettered: wrong_type x7 (row 300: ")
    assert "and 4 more), oversized_item x2 (row 307: " in detail
    assert detail.endswith("other 300 good rows were counted")


def test_columnar_max_events_per_message() -> None:
    spec = dataclasses.replace(COL, max_events_per_message=3)
    ok = {"v": 1, "shard": "r", "item": ["a", "b", "c"], "weight": [1, 1, 1]}
    big = {"v": 1, "shard": "r", "item": ["a"] * 4, "weight": [1] * 4}
    out = decode_batch(spec, [rec(0, json.dumps(ok).encode()), rec(1, json.dumps(big).encode())])
    assert len(out) == 3 and [(d.offset, d.reason) for d in out.dead] == [(1, "too_many_events")]


def test_columnar_int_items_reject_floats_and_bools() -> None:
    for items in ([1.5], [True], ["1"]):
        out = decode_batch(COLI, [rec(0, json.dumps({"v": 1, "shard": "r",
                                                     "item": items}).encode())])
        assert [d.reason for d in out.dead] == ["wrong_type"], items


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    for spec in (JSON, COL):
        out = decode_batch(spec, [rec(0, raw)])
        assert len(out) + len(out.dead) >= 1
        assert all(d.reason in REASONS for d in out.dead)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=50))
def test_group_by_shard_partitions_indices(shards: list[str]) -> None:
    arr = np.array(shards, dtype=object)
    seen: list[int] = []
    for key, idx in group_by_shard(arr):
        assert all(arr[i] == key for i in idx)
        assert list(idx) == sorted(idx)
        seen += list(idx)
    assert sorted(seen) == list(range(len(shards)))


_MSG = st.one_of(
    st.builds(lambda r, s: json.dumps({"router": r, "src": {"ip": s}, "user": "u"}).encode(),
              st.sampled_from(["r1", "r2"]), st.text(max_size=5)),
    st.sampled_from([b'{"router": "r1", "src": {"ip": "a"}, "user": 1},{"x": 1}', b"1]", b"",
                     b'{"router": "r1"}', b"\xff", b' {"router": "r1", "src": {"ip": 7}, '
                     b'"user": "u"} ', b"[1", b'"str"', b"{}{}"]),
    st.binary(max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_MSG, max_size=12))
def test_joined_fast_path_equals_message_by_message(values: list[bytes]) -> None:
    """One json.loads over the joined batch gives exactly the per-message result."""
    recs = [rec(i, v) for i, v in enumerate(values)]
    batch = decode_batch(JSON, recs)
    singles = [decode_batch(JSON, [r]) for r in recs]
    assert batch.items.tolist() == [x for s in singles for x in s.items.tolist()]
    assert batch.shards.tolist() == [x for s in singles for x in s.shards.tolist()]
    assert [(d.offset, d.reason) for d in batch.dead] == [
        (d.offset, d.reason) for s in singles for d in s.dead]
    simple = InputSpec("in", 1, "json", FieldPaths("router", "src"))
    flat = [rec(i, v.replace(b'{"ip": ', b"").replace(b'}, "user"', b', "user"'))
            for i, v in enumerate(values)]
    b2 = decode_batch(simple, flat)
    s2 = [decode_batch(simple, [r]) for r in flat]
    assert b2.items.tolist() == [x for s in s2 for x in s.items.tolist()]
    assert [(d.offset, d.reason) for d in b2.dead] == [(d.offset, d.reason) for s in s2
                                                       for d in s.dead]


@pytest.mark.parametrize("spec", [JSON, JSONW])
@pytest.mark.parametrize("doc", [
    {"router": "r1", "src": {"ip": "10.0.0.1\x00"}, "user": "u", "pkts": 1},
    {"router": "r1\x00", "src": {"ip": "10.0.0.1"}, "user": "u", "pkts": 1},
])
def test_nul_in_item_or_shard_is_dead_lettered(spec: InputSpec, doc: dict) -> None:
    """NUL characters would merge items (numpy strips trailing NULs): reject them."""
    if spec is JSONW:
        doc = {"router": doc["router"], "src": doc["src"]["ip"], "pkts": 1}
    out = decode_batch(spec, [rec(0, json.dumps(doc).encode())])
    assert [d.reason for d in out.dead] == ["nul_in_field"] and len(out) == 0


def test_nul_in_unit_is_dead_lettered_and_escaped_backslash_is_not_nul() -> None:
    out = decode_batch(JSON, [rec(0, json.dumps({"router": "r1", "src": {"ip": "a"},
                                                 "user": "u\x00"}).encode()),
                              rec(1, json.dumps({"router": "r1", "src": {"ip": "\\u0000"},
                                                 "user": "u"}).encode())])
    assert [d.reason for d in out.dead] == ["nul_in_field"]
    assert out.items.tolist() == ["\\u0000"]  # a literal backslash-u, not a NUL


def test_columnar_nul_rejected() -> None:
    """A NUL in an item fails its row; in the shard key (shared by every row) the message."""
    for doc, good in (({"v": 1, "shard": "r", "item": ["a", "a\x00"], "weight": [1, 1]}, 1),
                      ({"v": 1, "shard": "r\x00", "item": ["a"], "weight": [1]}, 0)):
        out = decode_batch(COL, [rec(0, json.dumps(doc).encode())])
        assert [d.reason for d in out.dead] == ["nul_in_field"] and len(out) == good


def test_signed_weights_only_when_enabled() -> None:
    signed = InputSpec("in", 1, "json", FieldPaths("router", "src", weight="pkts"),
                       signed_weights=True)
    out = decode_batch(signed, [rec(0, b'{"router": "r", "src": "a", "pkts": -1}'),
                                rec(1, b'{"router": "r", "src": "a", "pkts": Infinity}')])
    assert out.weights is not None and out.weights.tolist() == [-1.0]
    assert [d.reason for d in out.dead] == ["wrong_type"]
    cols = InputSpec("in", 1, "columnar", FieldPaths("router", "src", weight="w"),
                     signed_weights=True)
    out = decode_batch(cols, [rec(0, b'{"v": 1, "shard": "r", "item": ["a"], "weight": [-1]}')])
    assert out.weights is not None and out.weights.tolist() == [-1.0]


def test_nul_rejected_on_the_simple_fast_path() -> None:
    simple = InputSpec("in", 1, "json", FieldPaths("router", "src"))
    out = decode_batch(simple, [rec(0, b'{"router": "r", "src": "a"}'),
                                rec(1, b'{"router": "r", "src": "a\\u0000"}')])
    assert out.items.tolist() == ["a"] and [d.reason for d in out.dead] == ["nul_in_field"]


def test_int_items_outside_the_mechanism_domain_are_dead_lettered() -> None:
    spec = InputSpec("in", 1, "json", FieldPaths("router", "src"), item_type="int", item_bits=4)
    out = decode_batch(spec, [rec(0, b'{"router": "r", "src": 15}'),
                              rec(1, b'{"router": "r", "src": 16}'),
                              rec(2, b'{"router": "r", "src": -1}')])
    assert out.items.tolist() == [15] and [d.reason for d in out.dead] == ["out_of_domain"] * 2
    cols = InputSpec("in", 1, "columnar", FieldPaths("router", "src"), item_type="int",
                     item_bits=4)
    out = decode_batch(cols, [rec(0, b'{"v": 1, "shard": "r", "item": [1, 16]}'),
                              rec(1, b'{"v": 1, "shard": "r", "item": [1, 2]}')])
    assert out.items.tolist() == [1, 1, 2] and [d.reason for d in out.dead] == ["out_of_domain"]


POISON_PILLS = [  # issue 9: each of these crashed the worker
    (b'{"router": "r1", "src": {"ip": "\\ud800"}, "user": "u"}', "not_utf8"),
    (b'{"router": "r1", "src": {"ip": ' + b"[" * 3000 + b"]" * 3000 + b"}}", "too_deep"),
    (b"[" * 3000, "too_deep"),
    (b'{"router": "r1", "src": {"ip": "' + b"x" * 900_000 + b'"}, "user": "u"}',
     "oversized_item"),
    (b'{"router": "\\udfff", "src": {"ip": "a"}, "user": "u"}', "not_utf8"),
]


@pytest.mark.parametrize(("raw", "reason"), POISON_PILLS)
def test_poison_pills_are_dead_lettered_with_a_reason(raw: bytes, reason: str) -> None:
    spec = InputSpec("in", 1, "json", FieldPaths("router", "src.ip", "user", None), 2_000_000)
    good = rec(1, b'{"router": "r1", "src": {"ip": "10.0.0.1"}, "user": "u"}')
    for batch in ([rec(0, raw), good], [rec(0, raw)]):
        out = decode_batch(spec, batch)
        assert [(d.offset, d.reason) for d in out.dead] == [(0, reason)]
        assert out.items.tolist() == ["10.0.0.1"] * (len(batch) - 1)


def test_columnar_pills_and_non_finite_weights() -> None:
    col = InputSpec("in", 1, "columnar", FieldPaths("router", "src", None, "pkts"), 2_000_000)
    pills = [(b'{"v": 1, "shard": "r1", "item": ["\\ud800"], "weight": [1]}', "not_utf8"),
             (b'{"v": 1, "shard": "r1", "item": ["' + b"x" * 2000 + b'"], "weight": [1]}',
              "oversized_item"),
             (b'{"v": 1, "shard": "r1", "item": ["a"], "weight": [1e999]}', "wrong_type"),
             (b'{"v": 1, "shard": "r1", "item": ["a"], "weight": [' + b"9" * 400 + b"]}",
              "wrong_type"),
             (b'{"v": 1, "shard": "r1", "item": ' + b"[" * 3000, "too_deep")]
    out = decode_batch(col, [rec(i, raw) for i, (raw, _) in enumerate(pills)])
    assert [d.reason for d in out.dead] == [r for _, r in pills]
    js = InputSpec("in", 1, "json", FieldPaths("router", "src", None, "pkts"))
    for w in (b"1e999", b"9" * 400, b"-1e999"):
        out = decode_batch(js, [rec(0, b'{"router": "r1", "src": "a", "pkts": ' + w + b"}")])
        assert [d.reason for d in out.dead] == ["wrong_type"], w


def test_max_item_bytes_counts_utf8_bytes_of_items_shards_and_units() -> None:
    spec = InputSpec("in", 1, "json", FieldPaths("router", "src", "user", None),
                     max_item_bytes=8)
    vals = [b'{"router": "r1", "src": "12345678", "user": "u"}',  # 8 bytes: accepted
            b'{"router": "r1", "src": "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9", "user": "u"}',
            b'{"router": "r123456789", "src": "a", "user": "u"}',
            b'{"router": "r1", "src": "a", "user": "u123456789"}']
    out = decode_batch(spec, [rec(i, v) for i, v in enumerate(vals)])
    assert out.items.tolist() == ["12345678"]
    assert [(d.offset, d.reason) for d in out.dead] == [(1, "oversized_item"),
                                                        (2, "oversized_item"),
                                                        (3, "oversized_item")]
    assert "input.max_item_bytes=8" in out.dead[0].detail


def test_unknown_shard_and_wrong_partition_have_distinct_details() -> None:
    spec = InputSpec("in", 4, "json", FieldPaths("router", "src"))
    gate = ShardGate(partition=0, partitions=4, allowed=frozenset({"r1", "r3"}))
    out = decode_batch(spec, [rec(0, b'{"router": "r9", "src": "a"}'),
                              rec(1, b'{"router": "r3", "src": "a"}')], gate)
    (u, w) = out.dead
    assert (u.reason, w.reason) == ("unknown_shard", "wrong_partition")
    assert "shards.allowed" in u.detail and "partition" in w.detail and u.detail != w.detail


def test_a_decoder_bug_becomes_an_undecodable_dead_letter(monkeypatch) -> None:
    """Whatever the decoder raises on one record, the others still decode."""
    import worker.ingest.decode as dec

    real = dec._decode_json

    def flaky(spec, records, gate):
        if any(r[2] == b"boom" for r in records):
            raise ZeroDivisionError("a bug")
        return real(spec, records, gate)

    monkeypatch.setattr(dec, "_decode_json", flaky)
    spec = InputSpec("in", 1, "json", FieldPaths("router", "src"))
    out = decode_batch(spec, [rec(0, b'{"router": "r1", "src": "a"}'), rec(1, b"boom"),
                              rec(2, b"{}")])
    assert out.items.tolist() == ["a"]
    assert [(d.offset, d.reason) for d in out.dead] == [(1, "undecodable"), (2, "missing_field")]
    assert "ZeroDivisionError" in out.dead[0].detail


def test_dead_letter_copy_is_truncated_to_the_limit_with_length_and_hash() -> None:
    import base64
    import hashlib

    from worker.ingest.decode import DeadLetter

    value = b"v" * 5_000_000
    d = DeadLetter(7, b"k" * 3000, value, 0, "oversized", "big")
    raw = d.to_json("t", "in", 0, max_bytes=100_000)
    assert len(raw) <= 100_000
    doc = json.loads(raw)
    assert doc["truncated"] is True and doc["value_bytes"] == 5_000_000
    assert doc["value_sha256"] == hashlib.sha256(value).hexdigest()
    assert value.startswith(base64.b64decode(doc["value_b64"]))
    assert len(base64.b64decode(doc["value_b64"])) > 50_000
    assert doc["key_bytes"] == 3000
    small = DeadLetter(1, None, b"x", 0, "empty", "e").to_json("t", "in", 0)
    assert "truncated" not in json.loads(small)
