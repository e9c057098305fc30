"""Decode input messages into event columns; bad messages become dead letters.

Two encodings (documented in docs/TOPOLOGY.md):

``json``
    One JSON object per message; the topology's field paths (``a.b`` reads
    ``event["a"]["b"]``) give the shard key, the item and the optional unit and
    weight.
``columnar``
    One JSON object per message carrying many events of one shard::

        {"v": 1, "shard": "r7", "item": ["10.0.0.1", ...],
         "unit": [...],       # only if the topology has a privacy unit
         "weight": [...]}     # only if the topology has a weight field

    The columns decode straight into numpy arrays (``json.loads`` + one
    ``np.asarray`` per column), which is what makes high rates possible.

Items are normalised to the topology's ``item_type``: ``str`` (integers are
written in decimal, so ``7`` and ``"7"`` are the same item) or ``int``
(int64). Shard keys and units are strings. A message that cannot be decoded is
never dropped silently: it becomes a :class:`DeadLetter` with a reason code.

A third encoding, ``arrow`` (an Apache Arrow IPC stream per message, the binary
form of ``columnar``), is :mod:`worker.ingest.arrow`, imported on first use
(it needs pyarrow).

This module holds the entry point :func:`decode_batch` and the ``json``
encoding; the ``columnar`` encoding is :mod:`worker.ingest.columnar`, and the
pieces both share (records, dead letters, event columns, value checks) are
:mod:`worker.ingest.records`. Public names are importable from here.

Examples
--------
>>> from worker.config.topology import FieldPaths, InputSpec
>>> spec = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src.ip"))
>>> out = decode_batch(spec, [(0, b"r1", b'{"router": "r1", "src": {"ip": "10.0.0.1"}}', 0),
...                           (1, None, b'{"router": "r1"}', 0)])
>>> out.items.tolist(), out.shards.tolist(), [d.reason for d in out.dead]
(['10.0.0.1'], ['r1'], ['missing_field'])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from worker.config.topology import InputSpec
from worker.ingest.columnar import COLUMNAR_VERSION, decode_columnar
from worker.ingest.fast_json import fast_json
from worker.ingest.records import (
    DEAD_LETTER_MAX_BYTES,
    REASONS,
    BadRecord,
    DeadLetter,
    Decoded,
    Gate,
    Record,
    accept_all,
    concat_decoded,
    empty_decoded,
    gated,
    key_str,
    load_json,
    max_str_len,
    maybe_special,
    text_field,
)

__all__ = ["COLUMNAR_VERSION", "DEAD_LETTER_MAX_BYTES", "REASONS", "DeadLetter", "Decoded",
           "Gate", "Record", "decode_batch"]


def _getter(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _dig(obj: Any, path: tuple[str, ...], dotted: str) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            raise BadRecord("missing_field", f"field {dotted!r} is missing")
        obj = obj[key]
    return obj


def _item(value: Any, item_type: str) -> Any:
    if isinstance(value, bool):
        raise BadRecord("wrong_type", "item must be a string or integer, got bool")
    if item_type == "int":
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return value
        raise BadRecord("wrong_type", f"item must be an int64 integer, got {type(value).__name__}")
    return key_str(value, "item")


def _weight(value: Any, signed: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRecord("wrong_type", "weight must be a number")
    try:
        finite = math.isfinite(value)  # NaN and 1e999 (inf) are not
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise BadRecord("wrong_type", "weight must be a finite number")
    if not signed and not value >= 0:
        raise BadRecord("wrong_type", "weight must be a non-negative number (set "
                        "input.signed_weights: true to allow deletions)")
    return value


def decode_batch(spec: InputSpec, records: Sequence[Record], gate: Gate = accept_all) -> Decoded:
    """Decode ``records`` according to ``spec.encoding``; never raises.

    ``gate`` (see :class:`worker.ingest.routing.ShardGate`) rejects shard keys that
    are unknown or belong to another partition. Every per-record failure
    becomes a dead letter: bad input with its reason code, and if the decoder
    itself raises (a bug or an input nobody foresaw, whatever the exception
    type) the batch is decoded again record by record and each record that
    still raises becomes an ``undecodable`` dead letter naming the exception.
    """
    try:
        return _decode(spec, records, gate)
    except Exception:
        return _isolate(spec, records, gate)


def _decode(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    if spec.encoding == "columnar":
        return decode_columnar(spec, records, gate)
    if spec.encoding == "arrow":  # worker/ingest/arrow.py (imports pyarrow on first use)
        from worker.ingest.arrow import decode_arrow

        return decode_arrow(spec, records, gate)
    fast = fast_json(spec, records, gate)  # msgspec, exact or None (worker/ingest/fast_json.py)
    return fast if fast is not None else _decode_json(spec, records, gate)


def _isolate(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    parts: list[Decoded] = []
    dead: list[DeadLetter] = []
    for rec in records:
        try:
            parts.append(_decode(spec, [rec], gate))
        except Exception as exc:
            offset, key, value, ts = rec
            dead.append(DeadLetter(offset, key, value, ts, "undecodable",
                                   f"the decoder raised {type(exc).__name__}: {str(exc)[:300]}"))
    return concat_decoded(spec, parts, dead)


def _parse_joined(records: Sequence[Record], limit: int) -> tuple[list[Any] | None, bool]:
    """Parse every value with ONE ``json.loads`` of ``[v1,v2,...]`` (the fast path).

    Returns None when that is not exact (an empty or oversized value, any
    syntax or encoding error, or a count mismatch, e.g. a message smuggling two
    objects): the caller then parses message by message and dead-letters
    precisely. A message can only contribute more than one element if another
    contributes none, which is a syntax error, so a matching count means every
    message parsed to exactly one JSON value. The flag says whether any value
    may contain a NUL character (a ``\\u0000`` escape somewhere in the batch).
    """
    values = [r[2] for r in records]
    if not values:
        return [], False
    if not all(values) or max(map(len, values)) > limit:  # type: ignore[arg-type]
        return None, True
    joined = b",".join(values)  # type: ignore[arg-type]
    nul = maybe_special(joined)  # no NUL/surrogate escape anywhere: plain text strings
    try:
        docs = json.loads(b"[" + joined + b"]")
    except (ValueError, RecursionError):
        return None, nul
    if not isinstance(docs, list) or len(docs) != len(values):
        return None, nul
    return docs, nul


def _simple_columns(docs: list[Any], ks: str, ki: str, gate: Gate,
                    limit: int) -> Decoded | None:
    """Whole-batch fast path: every doc an object with string shard and item fields, every
    shard accepted, no NUL or surrogate anywhere, every string surely within ``limit``
    UTF-8 bytes (``input.max_item_bytes``). Column-level checks only (no per-event branches);
    returns None (caller decodes message by message) if anything is off.
    """
    try:
        shards = [d[ks] for d in docs]
        items = [d[ki] for d in docs]
    except (KeyError, TypeError, IndexError):
        return None
    if set(map(type, shards)) != {str} or set(map(type, items)) != {str}:
        return None
    if 4 * max(max_str_len(items), max_str_len(shards)) > limit:  # maybe over input.max_item_bytes
        return None
    if any(gate(sh) is not None for sh in dict.fromkeys(shards)):
        return None
    return Decoded(np.array(items, dtype=object), np.array(shards, dtype=object), None, None,
                   [])


def _decode_json(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    f = spec.fields
    p_shard, p_item = _getter(f.shard), _getter(f.item)
    p_unit = _getter(f.unit) if f.unit else None
    p_weight = _getter(f.weight) if f.weight else None
    items: list[Any] = []
    shards: list[str] = []
    units: list[str] = []
    weights: list[float] = []
    dead: list[DeadLetter] = []
    limit, item_type, max_item = spec.max_message_bytes, spec.item_type, spec.max_item_bytes
    simple = (len(p_shard) == 1 and len(p_item) == 1 and p_unit is None and p_weight is None
              and item_type == "str")
    ks, ki = p_shard[0], p_item[0]
    docs, maybe_nul = _parse_joined(records, limit)
    signed = spec.signed_weights
    top = None if spec.item_bits is None else 1 << spec.item_bits
    if simple and docs and not maybe_nul:
        fast = _simple_columns(docs, ks, ki, gate, max_item)
        if fast is not None:
            return fast
    for n, (offset, key, value, ts) in enumerate(records):
        try:
            doc = load_json(value, limit) if docs is None else docs[n]
            special = maybe_nul and value is not None and maybe_special(value)
            if simple and not special and type(doc) is dict:  # fast path: plain string fields
                shard, item = doc.get(ks), doc.get(ki)
                if (type(shard) is str and type(item) is str
                        and 4 * max(len(shard), len(item)) <= max_item and gate(shard) is None):
                    shards.append(shard)
                    items.append(item)
                    continue
            if not isinstance(doc, dict):
                raise BadRecord(
                    "not_an_object", f"expected a JSON object, got {type(doc).__name__}")
            shard = text_field(key_str(_dig(doc, p_shard, f.shard), "shard key"), "shard key",
                          max_item, special)
            item = _item(_dig(doc, p_item, f.item), item_type)
            if isinstance(item, str):
                text_field(item, "item", max_item, special)
            if top is not None and not 0 <= item < top:
                raise BadRecord("out_of_domain", f"item outside [0, 2**{spec.item_bits}) (the "
                                "mechanism's `bits`)")
            unit = (text_field(key_str(_dig(doc, p_unit, str(f.unit)), "unit"), "unit", max_item,
                          special) if p_unit else None)
            shard = gated(gate, shard)
            weight = _weight(_dig(doc, p_weight, str(f.weight)), signed) if p_weight else None
        except BadRecord as bad:
            dead.append(DeadLetter(offset, key, value, ts, bad.reason, bad.detail))
            continue
        items.append(item)
        shards.append(shard)
        if unit is not None:
            units.append(unit)
        if weight is not None:
            weights.append(weight)
    if not items:
        return empty_decoded(spec, dead)
    item_arr = np.array(items, dtype=np.int64 if item_type == "int" else object)
    return Decoded(item_arr, np.array(shards, dtype=object),
                   np.array(units, dtype=object) if p_unit else None,
                   np.asarray(weights, dtype=np.float64) if p_weight else None, dead)
