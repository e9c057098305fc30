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

Examples
--------
>>> from worker.topology import FieldPaths, InputSpec
>>> spec = InputSpec("flows", 1, "json", FieldPaths(shard="router", item="src.ip"))
>>> out = decode_batch(spec, [(0, b"r1", b'{"router": "r1", "src": {"ip": "10.0.0.1"}}', 0),
...                           (1, None, b'{"router": "r1"}', 0)])
>>> out.items.tolist(), out.shards.tolist(), [d.reason for d in out.dead]
(['10.0.0.1'], ['r1'], ['missing_field'])
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worker.topology import InputSpec

Record = tuple[int, bytes | None, bytes | None, int]
"""``(offset, key, value, timestamp_ms)`` as handed to ``process_batch``."""

REASONS = ("oversized", "empty", "not_utf8", "malformed_json", "not_an_object",
           "missing_field", "wrong_type", "bad_version", "length_mismatch",
           "unknown_shard", "wrong_partition", "nul_in_field", "out_of_domain")
"""Every dead-letter reason code (also the ``reason`` label of the metrics)."""

COLUMNAR_VERSION = 1


@dataclass(frozen=True)
class DeadLetter:
    """A message that was not ingested, with why."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    reason: str
    detail: str

    def to_json(self, topology: str, topic: str, partition: int) -> bytes:
        """The dead-letter topic record (JSON, ``schema_version`` 1, raw bytes base64).

        >>> DeadLetter(5, None, b"\\xff", 0, "not_utf8", "value is not UTF-8").to_json(
        ...     "t", "in", 0)[:60]
        b'{"schema_version":1,"reason":"not_utf8","detail":"value is n'
        """
        doc = {
            "schema_version": 1, "reason": self.reason, "detail": self.detail,
            "topology": topology, "topic": topic, "partition": partition,
            "offset": self.offset, "timestamp": self.timestamp,
            "key_b64": None if self.key is None else base64.b64encode(self.key).decode(),
            "value_b64": None if self.value is None else base64.b64encode(self.value).decode(),
        }
        return json.dumps(doc, separators=(",", ":")).encode()


@dataclass
class Decoded:
    """Event columns of one batch (same length) plus the dead letters."""

    items: np.ndarray
    shards: np.ndarray
    units: np.ndarray | None
    weights: np.ndarray | None
    dead: list[DeadLetter] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.items.shape[0])


class _Bad(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _getter(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _dig(obj: Any, path: tuple[str, ...], dotted: str) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            raise _Bad("missing_field", f"field {dotted!r} is missing")
        obj = obj[key]
    return obj


def _key_str(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Bad("wrong_type", f"{what} must be a string or integer, got {type(value).__name__}")


def _item(value: Any, item_type: str) -> Any:
    if isinstance(value, bool):
        raise _Bad("wrong_type", "item must be a string or integer, got bool")
    if item_type == "int":
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return value
        raise _Bad("wrong_type", f"item must be an int64 integer, got {type(value).__name__}")
    return _key_str(value, "item")


def _weight(value: Any, signed: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("wrong_type", "weight must be a number")
    if signed and not math.isfinite(value):
        raise _Bad("wrong_type", "weight must be a finite number")
    if not signed and not value >= 0:  # NaN fails too
        raise _Bad("wrong_type", "weight must be a non-negative number (set "
                   "input.signed_weights: true to allow deletions)")
    return value


_NUL_ESCAPE = b"\\u0000"
"""How JSON writes a NUL character (raw control characters are invalid JSON)."""


def _no_nul(value: str, what: str) -> str:
    """Reject NUL characters: numpy's fixed-width strings drop trailing NULs, which
    would merge ``"a"`` and ``"a\\x00"`` (items, units or shard keys)."""
    if "\x00" in value:
        raise _Bad("nul_in_field", f"{what} contains a NUL character; strip NULs at the "
                   "producer")
    return value


def _load(value: bytes | None, limit: int) -> Any:
    if value is None or len(value) == 0:
        raise _Bad("empty", "message has no value")
    if len(value) > limit:
        raise _Bad("oversized", f"message of {len(value)} bytes exceeds max_message_bytes={limit}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad("not_utf8", "value is not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad("malformed_json", f"not valid JSON: {exc.msg} at char {exc.pos}") from None
    except ValueError as exc:  # e.g. numbers too long to convert
        raise _Bad("malformed_json", f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _Bad("not_an_object", f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _empty(spec: InputSpec, dead: list[DeadLetter]) -> Decoded:
    dtype = np.int64 if spec.item_type == "int" else object
    return Decoded(np.empty(0, dtype=dtype), np.empty(0, dtype=object),
                   np.empty(0, dtype=object) if spec.fields.unit else None,
                   np.empty(0, dtype=np.float64) if spec.fields.weight else None, dead)


Gate = Callable[[str], "str | None"]
"""Shard check: ``None`` accepts a shard key, a string is the dead-letter reason."""


def _accept_all(shard: str) -> str | None:
    return None


def _gated(gate: Gate, shard: str) -> str:
    reason = gate(shard)
    if reason is not None:
        raise _Bad(reason, f"shard key {shard!r} is not accepted on this partition")
    return shard


def decode_batch(spec: InputSpec, records: Sequence[Record], gate: Gate = _accept_all) -> Decoded:
    """Decode ``records`` according to ``spec.encoding``; never raises on bad input.

    ``gate`` (see :class:`worker.routing.ShardGate`) rejects shard keys that
    are unknown or belong to another partition.
    """
    if spec.encoding == "columnar":
        return _decode_columnar(spec, records, gate)
    return _decode_json(spec, records, gate)


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
    nul = _NUL_ESCAPE in joined  # no JSON NUL escape anywhere: no NUL in any string
    try:
        docs = json.loads(b"[" + joined + b"]")
    except ValueError:
        return None, nul
    if not isinstance(docs, list) or len(docs) != len(values):
        return None, nul
    return docs, nul


def _simple_columns(docs: list[Any], ks: str, ki: str, gate: Gate) -> Decoded | None:
    """Whole-batch fast path: every doc an object with string shard and item fields, every
    shard accepted, no NUL anywhere. Column-level checks only (no per-event branches);
    returns None (caller decodes message by message) if anything is off.
    """
    try:
        shards = [d[ks] for d in docs]
        items = [d[ki] for d in docs]
    except (KeyError, TypeError, IndexError):
        return None
    if set(map(type, shards)) != {str} or set(map(type, items)) != {str}:
        return None
    if any(gate(sh) is not None for sh in set(shards)):
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
    limit, item_type = spec.max_message_bytes, spec.item_type
    docs, maybe_nul = _parse_joined(records, limit)
    simple = (len(p_shard) == 1 and len(p_item) == 1 and p_unit is None and p_weight is None
              and item_type == "str")
    ks, ki = p_shard[0], p_item[0]
    signed = spec.signed_weights
    top = None if spec.item_bits is None else 1 << spec.item_bits
    if simple and docs and not maybe_nul:
        fast = _simple_columns(docs, ks, ki, gate)
        if fast is not None:
            return fast
    for n, (offset, key, value, ts) in enumerate(records):
        try:
            doc = _load(value, limit) if docs is None else docs[n]
            nul = maybe_nul and value is not None and _NUL_ESCAPE in value
            if simple and not nul and type(doc) is dict:  # fast path: plain string fields
                shard, item = doc.get(ks), doc.get(ki)
                if type(shard) is str and type(item) is str and gate(shard) is None:
                    shards.append(shard)
                    items.append(item)
                    continue
            if not isinstance(doc, dict):
                raise _Bad("not_an_object", f"expected a JSON object, got {type(doc).__name__}")
            shard = _key_str(_dig(doc, p_shard, f.shard), "shard key")
            item = _item(_dig(doc, p_item, f.item), item_type)
            if top is not None and not 0 <= item < top:
                raise _Bad("out_of_domain", f"item outside [0, 2**{spec.item_bits}) (the "
                           "mechanism's `bits`)")
            unit = _key_str(_dig(doc, p_unit, str(f.unit)), "unit") if p_unit else None
            if nul:
                _no_nul(shard, "shard key")
                if isinstance(item, str):
                    _no_nul(item, "item")
                if unit is not None:
                    _no_nul(unit, "unit")
            shard = _gated(gate, shard)
            weight = _weight(_dig(doc, p_weight, str(f.weight)), signed) if p_weight else None
        except _Bad as bad:
            dead.append(DeadLetter(offset, key, value, ts, bad.reason, bad.detail))
            continue
        items.append(item)
        shards.append(shard)
        if unit is not None:
            units.append(unit)
        if weight is not None:
            weights.append(weight)
    if not items:
        return _empty(spec, dead)
    item_arr = np.array(items, dtype=np.int64 if item_type == "int" else object)
    return Decoded(item_arr, np.array(shards, dtype=object),
                   np.array(units, dtype=object) if p_unit else None,
                   np.asarray(weights, dtype=np.float64) if p_weight else None, dead)


def _column(doc: dict[str, Any], name: str, n: int | None) -> list[Any]:
    col = doc.get(name)
    if col is None:
        raise _Bad("missing_field", f"column {name!r} is missing")
    if not isinstance(col, list):
        raise _Bad("wrong_type", f"column {name!r} must be a JSON array")
    if n is not None and len(col) != n:
        raise _Bad("length_mismatch", f"column {name!r} has {len(col)} values, 'item' has {n}")
    return col


def _item_column(col: list[Any], item_type: str) -> np.ndarray:
    """One column of items as an array; a column-level type check (no per-event loop).

    ``set(map(type, col))`` runs in C; ``bool`` and ``float`` are distinct
    types there, so ``True``/``1.5`` are caught without an ``isinstance`` scan
    (docs/INGESTION.md: about 5x faster than the per-item check). String items
    stay Python strings in an object array: a fixed-width numpy string dtype
    would drop trailing NULs.
    """
    types = set(map(type, col))
    if item_type == "int":
        if types <= {int}:
            try:
                return np.array(col, dtype=np.int64)
            except OverflowError:
                raise _Bad("wrong_type", "column 'item' must hold int64 integers") from None
        raise _Bad("wrong_type", "column 'item' must hold int64 integers")
    if types <= {str}:
        return np.array(col, dtype=object)
    if types <= {str, int}:  # integers become decimal strings, as in the JSON encoding
        return np.array([v if type(v) is str else str(v) for v in col], dtype=object)
    raise _Bad("wrong_type", "column 'item' must hold strings or integers")


def _decode_columnar(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    f = spec.fields
    parts_items: list[np.ndarray] = []
    parts_shards: list[np.ndarray] = []
    parts_units: list[np.ndarray] = []
    parts_weights: list[np.ndarray] = []
    dead: list[DeadLetter] = []
    for offset, key, value, ts in records:
        try:
            doc = _load(value, spec.max_message_bytes)
            if doc.get("v") != COLUMNAR_VERSION:
                raise _Bad("bad_version", f"columnar 'v' must be {COLUMNAR_VERSION}")
            shard = _key_str(doc.get("shard"), "shard key") if "shard" in doc else None
            if shard is None:
                raise _Bad("missing_field", "column 'shard' is missing")
            nul = _NUL_ESCAPE in value  # type: ignore[operator]  # _load refused None
            if nul:
                _no_nul(shard, "shard key")
            _gated(gate, shard)
            raw_items = _column(doc, "item", None)
            n = len(raw_items)
            if nul and spec.item_type == "str":
                _no_nul("".join(v for v in raw_items if isinstance(v, str)), "column 'item'")
            items = _item_column(raw_items, spec.item_type)
            if spec.item_bits is not None and n and (
                    int(items.min()) < 0 or int(items.max()) >= 1 << spec.item_bits):
                raise _Bad("out_of_domain", f"column 'item' has values outside "
                           f"[0, 2**{spec.item_bits}) (the mechanism's `bits`)")
            units = None
            if f.unit:
                ulist = [_key_str(u, "unit") for u in _column(doc, "unit", n)]
                if nul:
                    _no_nul("".join(ulist), "column 'unit'")
                units = np.array(ulist, dtype=object)
            weights = None
            if f.weight:
                weights = np.asarray(_column(doc, "weight", n), dtype=object)
                if n and not all(isinstance(w, (int, float)) and not isinstance(w, bool)
                                 for w in weights):
                    raise _Bad("wrong_type", "column 'weight' must hold numbers")
                weights = weights.astype(np.float64)
                if n and not (np.all(np.isfinite(weights)) if spec.signed_weights
                              else np.all(weights >= 0)):
                    raise _Bad("wrong_type", "column 'weight' must be non-negative (finite "
                               "with input.signed_weights)")
        except _Bad as bad:
            dead.append(DeadLetter(offset, key, value, ts, bad.reason, bad.detail))
            continue
        parts_items.append(items)
        parts_shards.append(np.full(n, shard, dtype=object))
        if units is not None:
            parts_units.append(units)
        if weights is not None:
            parts_weights.append(weights)
    if not parts_items:
        return _empty(spec, dead)
    return Decoded(
        np.concatenate(parts_items), np.concatenate(parts_shards),
        np.concatenate(parts_units) if f.unit else None,
        np.concatenate(parts_weights) if f.weight else None, dead)
