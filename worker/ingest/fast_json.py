"""Whole-batch fast path of the ``json`` encoding (msgspec, typed to the topology's fields).

One ``msgspec.json.Decoder`` per input spec decodes ``[v1,v2,...]`` (the batch's
values joined, one C call) into small typed structs holding only the fields the
topology names (shard, item, optional unit and weight; dotted paths become
nested structs); msgspec skips every other field without building Python
objects for it. Chosen on measurements (``results/json_decoders.md``): about
0.9 us per demo message against 3 us for ``json.loads`` of the joined batch and
2 us for orjson.

It is exact or it declines: :func:`fast_json` returns ``None`` whenever the
reference decoder (:func:`worker.ingest.decode._decode_json`, ``json.loads``) could
judge any record of the batch differently, and the caller then decodes the
batch with the reference, so every dead letter keeps the reference's reason
and detail. It declines on: an empty or oversized value; a batch that is not
valid UTF-8 or holds a BOM (msgspec skips unread fields without validating
them); any ``\\u0000`` or surrogate escape (NUL and lone-surrogate rules); a
message nested deeper than :data:`MAX_DEPTH` (the reference's recursion
limit); anything msgspec rejects (syntax, NaN/Infinity, a wrong type, an int
shard key the reference would accept as text, a missing field); a count
mismatch (a message smuggling two values); an int item outside int64 or the
mechanism's ``bits``; a weight that is negative (unless signed) or not finite;
a string that may exceed ``input.max_item_bytes``; a shard the gate rejects.
Duplicate keys: both take the last value. ``tests/unit/test_decode_fast.py``
checks the two against each other (hypothesis).

>>> from worker.config.topology import FieldPaths, InputSpec
>>> spec = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src.ip"))
>>> out = fast_json(spec, [(0, None, b'{"router":"r1","src":{"ip":"10.0.0.1"},"x":[1]}', 0)],
...                 lambda shard: None)
>>> out.items.tolist(), out.shards.tolist()
(['10.0.0.1'], ['r1'])
>>> fast_json(spec, [(0, None, b'{"router":7,"src":{"ip":"10.0.0.1"}}', 0)], lambda s: None)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from worker.config.topology import InputSpec
from worker.ingest.records import Decoded, Gate, Record, max_str_len, maybe_special

MAX_DEPTH = 500
"""Deepest nesting (``{`` plus ``[``) the fast path takes; deeper batches go to the
reference, whose ``too_deep`` rule depends on the interpreter's recursion limit."""

_BOM = b"\xef\xbb\xbf"


def _tree(paths: dict[str, str]) -> dict[str, Any]:
    """``{"shard": "a.b", ...}`` -> nested ``{"a": {"b": "shard"}}`` (leaves: column names)."""
    root: dict[str, Any] = {}
    for column, dotted in paths.items():
        node = root
        keys = dotted.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):  # a path is a prefix of another: no fast path
                raise ValueError(dotted)
        if keys[-1] in node:
            raise ValueError(dotted)
        node[keys[-1]] = column
    return root


def _struct(tree: dict[str, Any], types: dict[str, Any], name: str) -> Any:
    fields = []
    for n, (key, sub) in enumerate(tree.items()):
        tp = _struct(sub, types, f"{name}_{n}") if isinstance(sub, dict) else types[sub]
        fields.append((f"f{n}", tp, msgspec.field(name=key)))
    return msgspec.defstruct(name, fields, gc=False)


def _getters(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for n, (_key, sub) in enumerate(tree.items()):
        path = f"{prefix}f{n}"
        if isinstance(sub, dict):
            out.update(_getters(sub, path + "."))
        else:
            out[sub] = path
    return out


@lru_cache(maxsize=64)
def _plan(spec: InputSpec) -> tuple[Any, dict[str, Callable[[Any], Any]]] | None:
    """The batch decoder and one attribute getter per column, or None (no fast path)."""
    f = spec.fields
    paths = {"shard": f.shard, "item": f.item}
    types: dict[str, Any] = {"shard": str, "item": int if spec.item_type == "int" else str}
    if f.unit:
        paths["unit"], types["unit"] = f.unit, str
    if f.weight:
        paths["weight"], types["weight"] = f.weight, float
    try:
        tree = _tree(paths)
    except ValueError:
        return None
    root = _struct(tree, types, "_Event")
    return (msgspec.json.Decoder(list[root]),  # type: ignore[valid-type]
            {c: attrgetter(p) for c, p in _getters(tree).items()})


def _plain_text(joined: bytes) -> bool:
    """True if the joined values are UTF-8 without BOM, NUL or surrogate escapes."""
    if not joined.isascii():
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if _BOM in joined:
            return False
    return b"\\u" not in joined or not maybe_special(joined)  # one scan if no escapes


def _shallow(joined: bytes, values: list[bytes]) -> bool:
    """No message nested deeper than MAX_DEPTH (brackets counted, strings included)."""
    extra = joined.count(b"{") + joined.count(b"[") - len(values)
    if extra <= MAX_DEPTH:  # each decoded message has at least its own "{"
        return True
    return max(v.count(b"{") + v.count(b"[") for v in values) <= MAX_DEPTH


def _long_int(values: list[bytes], longest: int) -> bool:
    """True if a message may hold an integer longer than Python's ``int_max_str_digits``.

    ``json.loads`` refuses such an integer (anywhere, a skipped field included) and
    msgspec reads it, so the batch must take the reference path (found by the
    hostile-input differential tests, tests/unit/test_decode_typed.py). Only messages
    longer than the limit are scanned; digits inside strings also decline (safe).
    """
    digits = sys.get_int_max_str_digits()
    if digits <= 0 or longest <= digits:  # no limit, or no message long enough
        return False
    run = re.compile(rb"[0-9]{%d}" % (digits + 1))
    return any(len(v) > digits and run.search(v) is not None for v in values)


def fast_json(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded | None:
    """Decode a whole ``json`` batch with msgspec, or None if the reference must (see above)."""
    plan = _plan(spec)
    if plan is None or not records:
        return None
    decoder, get = plan
    values = [r[2] for r in records]
    if not all(values):
        return None
    longest = max(map(len, values))  # type: ignore[arg-type]
    if longest > spec.max_message_bytes:
        return None
    joined = b",".join(values)  # type: ignore[arg-type]
    if not _plain_text(joined) or not _shallow(joined, values):  # type: ignore[arg-type]
        return None
    if _long_int(values, longest):  # type: ignore[arg-type]
        return None
    try:
        docs = decoder.decode(b"[" + joined + b"]")
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    if len(docs) != len(values):
        return None
    limit = spec.max_item_bytes
    shards = list(map(get["shard"], docs))
    strings = [shards]
    if spec.item_type == "int":
        ints = list(map(get["item"], docs))
        lo, hi = (0, 1 << spec.item_bits) if spec.item_bits is not None else (-(2**63), 2**63)
        if ints and not (lo <= min(ints) and max(ints) < hi):
            return None
        items = np.array(ints, dtype=np.int64)
    else:
        item_list = list(map(get["item"], docs))
        strings.append(item_list)
        items = np.array(item_list, dtype=object)
    units = None
    if spec.fields.unit:
        unit_list = list(map(get["unit"], docs))
        strings.append(unit_list)
        units = np.array(unit_list, dtype=object)
    weights = None
    if spec.fields.weight:
        weights = np.fromiter(map(get["weight"], docs), dtype=np.float64, count=len(docs))
        if not np.isfinite(weights).all():
            return None
        if not spec.signed_weights and not (weights >= 0).all():
            return None
    if 4 * max(map(max_str_len, strings)) > limit:  # maybe over input.max_item_bytes
        return None
    if any(gate(sh) is not None for sh in dict.fromkeys(shards)):
        return None
    return Decoded(items, np.array(shards, dtype=object), units, weights, [])
