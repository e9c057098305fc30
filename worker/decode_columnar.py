"""The ``columnar`` encoding: one JSON message carries many events of one shard.

::

    {"v": 1, "shard": "r7", "item": ["10.0.0.1", ...],
     "unit": [...],       # only if the topology has a privacy unit
     "weight": [...]}     # only if the topology has a weight field

Each column is checked as a whole (no per-event Python loop on the item
column) and becomes one numpy array; a message that fails any check becomes
one dead letter. Called through :func:`worker.decode.decode_batch`.

Examples
--------
>>> from worker.decode import decode_batch
>>> from worker.topology import FieldPaths, InputSpec
>>> spec = InputSpec("in", 1, "columnar", FieldPaths(shard="s", item="i"))
>>> out = decode_batch(spec, [(0, None, b'{"v": 1, "shard": "r1", "item": ["a", 2]}', 0),
...                           (1, None, b'{"v": 2, "shard": "r1", "item": []}', 0)])
>>> out.items.tolist(), out.shards.tolist(), [d.reason for d in out.dead]
(['a', '2'], ['r1', 'r1'], ['bad_version'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from worker.decode_common import (
    BadRecord,
    DeadLetter,
    Decoded,
    Gate,
    Record,
    empty_decoded,
    gated,
    key_str,
    load_json,
    max_str_len,
    maybe_special,
    text_field,
)
from worker.topology import InputSpec

COLUMNAR_VERSION = 1


def _column(doc: dict[str, Any], name: str, n: int | None) -> list[Any]:
    col = doc.get(name)
    if col is None:
        raise BadRecord("missing_field", f"column {name!r} is missing")
    if not isinstance(col, list):
        raise BadRecord("wrong_type", f"column {name!r} must be a JSON array")
    if n is not None and len(col) != n:
        raise BadRecord("length_mismatch", f"column {name!r} has {len(col)} values, 'item' has {n}")
    return col


def _text_column(col: list[str], what: str, limit: int, special: bool) -> None:
    """Column-level string checks: the longest value decides whether any needs measuring."""
    if special or 4 * max_str_len(col) > limit:
        for v in col:
            text_field(v, what, limit, special)


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
                raise BadRecord("wrong_type", "column 'item' must hold int64 integers") from None
        raise BadRecord("wrong_type", "column 'item' must hold int64 integers")
    if types <= {str}:
        return np.array(col, dtype=object)
    if types <= {str, int}:  # integers become decimal strings, as in the JSON encoding
        return np.array([v if type(v) is str else str(v) for v in col], dtype=object)
    raise BadRecord("wrong_type", "column 'item' must hold strings or integers")


def decode_columnar(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    f = spec.fields
    parts_items: list[np.ndarray] = []
    parts_shards: list[np.ndarray] = []
    parts_units: list[np.ndarray] = []
    parts_weights: list[np.ndarray] = []
    dead: list[DeadLetter] = []
    for offset, key, value, ts in records:
        try:
            doc = load_json(value, spec.max_message_bytes)
            if doc.get("v") != COLUMNAR_VERSION:
                raise BadRecord("bad_version", f"columnar 'v' must be {COLUMNAR_VERSION}")
            shard = key_str(doc.get("shard"), "shard key") if "shard" in doc else None
            if shard is None:
                raise BadRecord("missing_field", "column 'shard' is missing")
            special = maybe_special(value)  # type: ignore[arg-type]  # load_json refused None
            text_field(shard, "shard key", spec.max_item_bytes, special)
            gated(gate, shard)
            raw_items = _column(doc, "item", None)
            n = len(raw_items)
            items = _item_column(raw_items, spec.item_type)
            if spec.item_type == "str":
                _text_column(items.tolist(), "column 'item'", spec.max_item_bytes, special)
            if spec.item_bits is not None and n and (
                    int(items.min()) < 0 or int(items.max()) >= 1 << spec.item_bits):
                raise BadRecord("out_of_domain", f"column 'item' has values outside "
                                f"[0, 2**{spec.item_bits}) (the mechanism's `bits`)")
            units = None
            if f.unit:
                ulist = [key_str(u, "unit") for u in _column(doc, "unit", n)]
                _text_column(ulist, "column 'unit'", spec.max_item_bytes, special)
                units = np.array(ulist, dtype=object)
            weights = None
            if f.weight:
                weights = np.asarray(_column(doc, "weight", n), dtype=object)
                if n and not all(isinstance(w, (int, float)) and not isinstance(w, bool)
                                 for w in weights):
                    raise BadRecord("wrong_type", "column 'weight' must hold numbers")
                try:
                    weights = weights.astype(np.float64)
                except OverflowError:  # an integer too large for a float
                    raise BadRecord(
                        "wrong_type", "column 'weight' must hold finite numbers") from None
                if n and not (np.all(np.isfinite(weights)) and (
                        spec.signed_weights or np.all(weights >= 0))):
                    raise BadRecord("wrong_type", "column 'weight' must hold finite numbers, "
                                    "non-negative unless input.signed_weights is true")
        except BadRecord as bad:
            dead.append(DeadLetter(offset, key, value, ts, bad.reason, bad.detail))
            continue
        parts_items.append(items)
        parts_shards.append(np.full(n, shard, dtype=object))
        if units is not None:
            parts_units.append(units)
        if weights is not None:
            parts_weights.append(weights)
    if not parts_items:
        return empty_decoded(spec, dead)
    return Decoded(
        np.concatenate(parts_items), np.concatenate(parts_shards),
        np.concatenate(parts_units) if f.unit else None,
        np.concatenate(parts_weights) if f.weight else None, dead)
