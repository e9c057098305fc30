"""The ``columnar`` encoding: one JSON message carries many events of one shard.

::

    {"v": 1, "shard": "r7", "item": ["10.0.0.1", ...],
     "unit": [...],       # only if the topology has a privacy unit
     "weight": [...]}     # only if the topology has a weight field

One event is the unit on every encoding (docs/PRIVACY.md §2): each row is
validated on its own, a bad row (an item over ``input.max_item_bytes``, out of
range, of the wrong type, a NUL in a unit, a negative weight, ...) is
dead-lettered alone (one dead letter per message, listing the bad rows by reason)
and the message's good rows count. Columns are checked as a whole first (no
per-event Python loop when every row is good); only a column that fails is
walked row by row. Failures that cannot be pinned to a row (not JSON, oversized,
``v`` wrong, a column missing or of the wrong length, more rows than
``input.max_events_per_message``, the shard key) dead-letter the whole message:
the noise covers them only through ``max_events_per_message``
(docs/PRIVACY.md §2). Called through :func:`worker.ingest.decode.decode_batch`.

Examples
--------
>>> from worker.ingest.decode import decode_batch
>>> from worker.config.topology import FieldPaths, InputSpec
>>> spec = InputSpec("in", 1, "columnar", FieldPaths(shard="s", item="i"))
>>> out = decode_batch(spec, [(0, None, b'{"v": 1, "shard": "r1", "item": ["a", 2, [3]]}', 0),
...                           (1, None, b'{"v": 2, "shard": "r1", "item": []}', 0)])
>>> out.items.tolist(), out.shards.tolist(), [(d.offset, d.reason) for d in out.dead]
(['a', '2'], ['r1', 'r1'], [(0, 'wrong_type'), (1, 'bad_version')])
>>> print(out.dead[0].detail[:70])
1 of 3 rows dead-lettered: wrong_type x1 (row 2: item must be a string
>>> out.dead[0].detail.endswith("the message's other 2 good rows were counted")
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from worker.config.topology import InputSpec
from worker.ingest.records import (
    BadRecord,
    DeadLetter,
    Decoded,
    Gate,
    Record,
    check_event_count,
    decode_messages,
    gated,
    key_str,
    load_json_rows,
    max_str_len,
    maybe_special,
    text_field,
)

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


def _item_column(col: list[Any], spec: InputSpec, special: bool) -> np.ndarray:
    """One column of items as an array; column-level checks (no per-event loop).

    ``set(map(type, col))`` runs in C; ``bool`` and ``float`` are distinct
    types there, so ``True``/``1.5`` are caught without an ``isinstance`` scan
    (docs/INGESTION.md: about 5x faster than the per-item check). String items
    stay Python strings in an object array: a fixed-width numpy string dtype
    would drop trailing NULs. Raises on the first bad value: the caller then finds
    the bad rows one by one (:func:`_item_rows`).
    """
    types = set(map(type, col))
    if spec.item_type == "int":
        if not types <= {int}:
            raise BadRecord("wrong_type", "column 'item' must hold int64 integers")
        try:
            items = np.array(col, dtype=np.int64)
        except OverflowError:
            raise BadRecord("wrong_type", "column 'item' must hold int64 integers") from None
        if spec.item_bits is not None and items.shape[0] and (
                int(items.min()) < 0 or int(items.max()) >= 1 << spec.item_bits):
            raise BadRecord("out_of_domain", "column 'item' has values outside the domain")
        return items
    if types <= {str}:
        out = np.array(col, dtype=object)
    elif types <= {str, int}:  # integers become decimal strings, as in the JSON encoding
        out = np.array([v if type(v) is str else str(v) for v in col], dtype=object)
    else:
        raise BadRecord("wrong_type", "column 'item' must hold strings or integers")
    _text_column(out.tolist(), "column 'item'", spec.max_item_bytes, special)
    return out


def _one_item(v: Any, spec: InputSpec, special: bool) -> Any:
    """One item value, checked alone (the per-row path after a column-level failure)."""
    if spec.item_type == "int":
        if type(v) is not int or not -(1 << 63) <= v < 1 << 63:
            raise BadRecord("wrong_type", f"item must be an int64 integer, got "
                            f"{type(v).__name__}")
        if spec.item_bits is not None and not 0 <= v < 1 << spec.item_bits:
            raise BadRecord("out_of_domain", f"item {v} is outside [0, 2**{spec.item_bits}) "
                            "(the mechanism's `bits`)")
        return v
    if type(v) is int:
        v = str(v)
    elif type(v) is not str:
        raise BadRecord("wrong_type", f"item must be a string or integer, got {type(v).__name__}")
    return text_field(v, "item", spec.max_item_bytes, special)


def _one_unit(v: Any, spec: InputSpec, special: bool) -> str:
    return text_field(key_str(v, "unit"), "unit", spec.max_item_bytes, special)


def _one_weight(w: Any, signed: bool) -> float:
    if not isinstance(w, (int, float)) or isinstance(w, bool):
        raise BadRecord("wrong_type", f"weight must be a number, got {type(w).__name__}")
    try:
        x = float(w)
    except OverflowError:  # an integer too large for a float
        raise BadRecord("wrong_type", "weight must be a finite number") from None
    if not math.isfinite(x) or (x < 0 and not signed):
        raise BadRecord("wrong_type", "weight must be a finite number, non-negative unless "
                        "input.signed_weights is true")
    return x


class RowErrors:
    """The bad rows of one message: ``ok`` (a mask) and ``{reason: [(row, detail)]}``.

    One event is the unit on every encoding (docs/PRIVACY.md §2): a bad row is
    dropped alone and the message's other rows count. :meth:`dead_letters` turns
    the bad rows into one dead letter per reason that lists them.

    >>> e = RowErrors(3)
    >>> e.add(1, "wrong_type", "item must be ..."); e.add(1, "nul_in_field", "later")
    >>> e.ok.tolist(), list(e.by_reason)
    ([True, False, True], ['wrong_type'])
    """

    def __init__(self, n: int) -> None:
        self.ok = np.ones(n, dtype=bool)
        self.by_reason: dict[str, list[tuple[int, str]]] = {}

    def add(self, row: int, reason: str, detail: str) -> None:
        if self.ok[row]:  # the first failure of a row decides its reason
            self.ok[row] = False
            self.by_reason.setdefault(reason, []).append((row, detail))

    def check(self, values: list[Any], one: Callable[[Any], Any], fill: Any) -> list[Any]:
        """``one`` applied to every value; a value that fails is recorded and replaced."""
        out = []
        for i, v in enumerate(values):
            try:
                out.append(one(v))
            except BadRecord as bad:
                self.add(i, bad.reason, bad.detail)
                out.append(fill)
        return out

    def good_rows(self, items: np.ndarray, units: np.ndarray | None,
                  weights: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The message's columns without its bad rows (every encoding's rule)."""
        keep = self.ok
        return (items[keep], None if units is None else units[keep],
                None if weights is None else weights[keep])

    def dead_letter(self, record: Record) -> DeadLetter:
        """One dead letter for the message's bad rows (one per offset, like every other
        dead letter): its reason is the most frequent one among the rows, its detail
        counts every reason and lists the first rows of each."""
        offset, key, value, ts = record
        n = self.ok.shape[0]
        bad = n - int(np.count_nonzero(self.ok))
        reasons = sorted(self.by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        parts = []
        for reason, rows in reasons:
            shown = "; ".join(f"row {i}: {d}" for i, d in rows[:3])
            more = f"; and {len(rows) - 3} more" if len(rows) > 3 else ""
            parts.append(f"{reason} x{len(rows)} ({shown}{more})")
        return DeadLetter(offset, key, value, ts, reasons[0][0],
                          f"{bad} of {n} rows dead-lettered: {', '.join(parts)}; the "
                          f"message's other {n - bad} good rows were counted")


def _item_rows(col: list[Any], spec: InputSpec, special: bool, errs: RowErrors) -> np.ndarray:
    try:
        return _item_column(col, spec, special)
    except BadRecord:
        pass
    fill: Any = 0 if spec.item_type == "int" else ""
    vals = errs.check(col, lambda v: _one_item(v, spec, special), fill)
    return np.array(vals, dtype=np.int64 if spec.item_type == "int" else object)


def _unit_rows(col: list[Any], spec: InputSpec, special: bool, errs: RowErrors) -> np.ndarray:
    try:
        ulist = [key_str(u, "unit") for u in col]
        _text_column(ulist, "column 'unit'", spec.max_item_bytes, special)
        return np.array(ulist, dtype=object)
    except BadRecord:
        return np.array(errs.check(col, lambda v: _one_unit(v, spec, special), ""),
                        dtype=object)


def _weight_rows(col: list[Any], signed: bool, errs: RowErrors) -> np.ndarray:
    n = len(col)
    if not n:
        return np.empty(0, dtype=np.float64)
    if all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in col):
        try:
            w = np.asarray(col, dtype=object).astype(np.float64)
            if np.all(np.isfinite(w)) and (signed or np.all(w >= 0)):
                return w
        except OverflowError:
            pass
    return np.array(errs.check(col, lambda v: _one_weight(v, signed), 0.0), dtype=np.float64)


def _message(spec: InputSpec, value: bytes | None, gate: Gate
             ) -> tuple[str, RowErrors, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Message-level checks (they cannot be pinned to a row), then the rows one by one."""
    f = spec.fields
    doc, lossy = load_json_rows(value, spec.max_message_bytes)
    assert value is not None  # load_json_rows refused None
    if doc.get("v") != COLUMNAR_VERSION:
        raise BadRecord("bad_version", f"columnar 'v' must be {COLUMNAR_VERSION}")
    shard = key_str(doc.get("shard"), "shard key") if "shard" in doc else None
    if shard is None:
        raise BadRecord("missing_field", "column 'shard' is missing")
    # raw bytes that are not UTF-8 became lone surrogates: the rows holding them fail
    special = lossy or maybe_special(value)
    text_field(shard, "shard key", spec.max_item_bytes, True)
    gated(gate, shard)
    raw_items = _column(doc, "item", None)
    n = len(raw_items)
    check_event_count(spec, n)
    raw_units = _column(doc, "unit", n) if f.unit else None
    raw_weights = _column(doc, "weight", n) if f.weight else None
    errs = RowErrors(n)
    items = _item_rows(raw_items, spec, special, errs)
    units = None if raw_units is None else _unit_rows(raw_units, spec, special, errs)
    weights = None if raw_weights is None else _weight_rows(raw_weights, spec.signed_weights,
                                                            errs)
    return shard, errs, items, units, weights


def decode_columnar(spec: InputSpec, records: Sequence[Record], gate: Gate) -> Decoded:
    return decode_messages(spec, records, gate, _message, shard_dtype=object)
