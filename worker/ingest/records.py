"""What every input encoding shares: records, dead letters, event columns, checks.

:mod:`worker.ingest.decode` (the ``json`` encoding and the entry point
:func:`~worker.ingest.decode.decode_batch`), its fast path :mod:`worker.ingest.fast_json`, and the
``columnar`` and ``arrow`` decoders (:mod:`worker.ingest.columnar`,
:mod:`worker.ingest.arrow`) build on these. The decoder toolkit (``BadRecord``, the
verdict a check raises; ``load_json``, ``text_field``, ``key_str``, ``gated``,
``max_str_len``, ``maybe_special``, ``empty_decoded``, ``concat_decoded``) is public to
those modules; users import from :mod:`worker.ingest.decode`, which re-exports the rest.
Underscore names stay private to this module.

Examples
--------
>>> key_str(7, "shard key"), gated(accept_all, "r1")
('7', 'r1')
>>> try:
...     load_json(b"[1]", 100)
... except BadRecord as bad:
...     print(bad.reason)
not_an_object
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worker.config.topology import InputSpec
from worker.errors import BadRecord

Record = tuple[int, bytes | None, bytes | None, int]
"""``(offset, key, value, timestamp_ms)`` as handed to ``process_batch``."""

REASONS = ("oversized", "empty", "not_utf8", "malformed_json", "too_deep", "not_an_object",
           "missing_field", "wrong_type", "bad_version", "length_mismatch",
           "unknown_shard", "wrong_partition", "nul_in_field", "out_of_domain",
           "oversized_item", "undecodable", "poison", "late", "future",
           "malformed_arrow", "wrong_schema", "shard_limit", "corrupt_batch",
           "too_many_events")
"""Every dead-letter reason code (also the ``reason`` label of the metrics).

``late`` / ``future`` (event time, :mod:`worker.ingest.event_time`): the record's
tick was already closed by the watermark, or its timestamp is further ahead
of the wall clock than the allowed lateness plus one tick; they are dead
letters but not decode errors.

``malformed_arrow`` / ``wrong_schema`` (the ``arrow`` encoding,
:mod:`worker.ingest.arrow`): not a valid uncompressed Arrow IPC stream of plain
record batches / columns other than the topology's.

``too_many_events`` (``columnar`` / ``arrow``): a message with more rows than
``input.max_events_per_message``, the public bound its noise is calibrated for.

``shard_limit``: a record of a new shard of an open shard set while the worker
already holds ``DPSTREAM_MAX_OPEN_SHARDS`` shards of the topology
(:class:`worker.ingest.routing.ShardBudget`).

``corrupt_batch``: a whole Kafka record batch failed its CRC check or could not be
parsed on every one of a bounded number of fetches and was skipped by offset range
(:mod:`worker.kafka.record_tuples`); the dead letter names the range and the error.

``undecodable``: the decoder itself raised on this record (a bug or an
unforeseen input; the detail names the exception). ``poison``: the record
defeated the worker after the decode, on every one of a bounded number of
attempts, and was skipped by offset (:mod:`worker.runtime.poison`).
"""


DEAD_LETTER_MAX_BYTES = 1_048_576 - 4096
"""Default size cap of one dead-letter record (a producer limit of 1 MiB minus headroom
for the record's key and framing); the worker passes its own producer limit."""


@dataclass(frozen=True)
class DeadLetter:
    """A message that was not ingested, with why."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    reason: str
    detail: str

    def to_json(self, topology: str, topic: str, partition: int,
                max_bytes: int = DEAD_LETTER_MAX_BYTES) -> bytes:
        """The dead-letter topic record (JSON, ``schema_version`` 1, raw bytes base64).

        A record that would exceed ``max_bytes`` (the producer's limit minus
        headroom) keeps the head of the key and value, their original lengths
        (``key_bytes``, ``value_bytes``) and SHA-256 (``key_sha256``,
        ``value_sha256``), with ``"truncated": true``; it never exceeds
        ``max_bytes``.

        >>> DeadLetter(5, None, b"\\xff", 0, "not_utf8", "value is not UTF-8").to_json(
        ...     "t", "in", 0)[:60]
        b'{"schema_version":1,"reason":"not_utf8","detail":"value is n'
        >>> import json
        >>> doc = json.loads(DeadLetter(1, b"k", b"x" * 5000, 0, "oversized", "big").to_json(
        ...     "t", "in", 0, max_bytes=2048))
        >>> doc["truncated"], doc["value_bytes"], len(base64.b64decode(doc["value_b64"])) < 2048
        (True, 5000, True)
        """
        doc: dict[str, Any] = {
            "schema_version": 1, "reason": self.reason, "detail": self.detail[:1000],
            "topology": topology, "topic": topic, "partition": partition,
            "offset": self.offset, "timestamp": self.timestamp,
            "key_b64": None if self.key is None else base64.b64encode(self.key).decode(),
            "value_b64": None if self.value is None else base64.b64encode(self.value).decode(),
        }
        raw = json.dumps(doc, separators=(",", ":")).encode()
        if len(raw) <= max_bytes:
            return raw
        doc["truncated"] = True
        for name, data in (("key", self.key), ("value", self.value)):
            if data is not None:
                doc[f"{name}_bytes"] = len(data)
                doc[f"{name}_sha256"] = hashlib.sha256(data).hexdigest()
                doc[f"{name}_b64"] = ""
        room = max_bytes - len(json.dumps(doc, separators=(",", ":")).encode())
        key_head = min(len(self.key or b""), max(0, room // 8) * 3 // 4, 1024)
        value_room = room - 4 * ((key_head + 2) // 3)
        value_head = max(0, value_room // 4 * 3 - 3)
        if self.key is not None:
            doc["key_b64"] = base64.b64encode(self.key[:key_head]).decode()
        if self.value is not None:
            doc["value_b64"] = base64.b64encode(self.value[:value_head]).decode()
        out = json.dumps(doc, separators=(",", ":")).encode()
        if len(out) > max_bytes:  # a tiny limit: lengths and hashes only
            doc.update(key_b64="", value_b64="", detail=self.detail[:100])
            out = json.dumps(doc, separators=(",", ":")).encode()
        return out


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


def key_str(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise BadRecord("wrong_type", f"{what} must be a string or integer, got {type(value).__name__}")


_NUL_ESCAPE = b"\\u0000"
"""How JSON writes a NUL character (raw control characters are invalid JSON)."""


def _no_nul(value: str, what: str) -> str:
    """Reject NUL characters: numpy's fixed-width strings drop trailing NULs, which
    would merge ``"a"`` and ``"a\\x00"`` (items, units or shard keys)."""
    if "\x00" in value:
        raise BadRecord("nul_in_field", f"{what} contains a NUL character; strip NULs at the "
                        "producer")
    return value


_SURROGATE_ESCAPES = (b"\\ud", b"\\uD")
"""How JSON writes a UTF-16 surrogate (``\\ud800``-``\\udfff``); a lone one decodes to a
str that is not valid Unicode text (it cannot be encoded as UTF-8)."""


def maybe_special(value: bytes) -> bool:
    """True if ``value`` may hold a string with a NUL or a lone surrogate (JSON escapes)."""
    return _NUL_ESCAPE in value or any(e in value for e in _SURROGATE_ESCAPES)


def text_field(value: str, what: str, limit: int, special: bool) -> str:
    """Check one decoded string: UTF-8 length within ``limit`` (``input.max_item_bytes``)
    and, if ``special`` (the message has NUL or surrogate escapes), no NUL and no lone
    surrogate."""
    if len(value) * 4 > limit:  # maybe too long: measure its UTF-8 bytes
        n = len(value.encode("utf-8", "surrogatepass"))
        if n > limit:
            raise BadRecord("oversized_item", f"{what} of {n} UTF-8 bytes exceeds "
                            f"input.max_item_bytes={limit}; shorten it at the producer or raise "
                            "the limit")
    if special:
        _no_nul(value, what)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord(
                "not_utf8", f"{what} contains a lone UTF-16 surrogate escape "
                "(\\ud800-\\udfff without its pair), which is not Unicode text") from None
    return value


def max_str_len(values: list[str]) -> int:
    return max(map(len, values), default=0)


def load_json(value: bytes | None, limit: int) -> Any:
    """One JSON object from ``value``; every failure is a :class:`BadRecord`."""
    return _load(value, limit, lenient_utf8=False)[0]


def load_json_rows(value: bytes | None, limit: int) -> tuple[Any, bool]:
    """:func:`load_json` for many-event messages: ``(doc, lossy)``.

    Bytes that are not UTF-8 become lone surrogates (``surrogateescape``) instead of
    failing the message (``lossy`` is then True), so the string holding them fails
    alone (``not_utf8`` of that row, via :func:`text_field` with ``special``).
    """
    return _load(value, limit, lenient_utf8=True)


def _load(value: bytes | None, limit: int, *, lenient_utf8: bool) -> tuple[Any, bool]:
    if value is None or len(value) == 0:
        raise BadRecord("empty", "message has no value")
    if len(value) > limit:
        raise BadRecord(
            "oversized", f"message of {len(value)} bytes exceeds max_message_bytes={limit}")
    lossy = False
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        if not lenient_utf8:
            raise BadRecord("not_utf8", "value is not UTF-8 text") from None
        text, lossy = value.decode("utf-8", "surrogateescape"), True
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRecord("malformed_json", f"not valid JSON: {exc.msg} at char {exc.pos}") from None
    except ValueError as exc:  # e.g. numbers too long to convert
        raise BadRecord("malformed_json", f"not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRecord("too_deep", "JSON nested deeper than the parser's recursion limit "
                        "(about 1,000 levels); flatten the document") from None
    if not isinstance(doc, dict):
        raise BadRecord("not_an_object", f"expected a JSON object, got {type(doc).__name__}")
    return doc, lossy


def check_event_count(spec: InputSpec, n: int) -> None:
    """Refuse a many-event message with more rows than ``input.max_events_per_message``.

    The bound is public and the noise is calibrated for a message of that many
    events (docs/PRIVACY.md §2), so a longer message is dead-lettered whole.

    >>> from worker.config.topology import FieldPaths, InputSpec
    >>> spec = InputSpec("in", 1, "columnar", FieldPaths("s", "i"), max_events_per_message=2)
    >>> check_event_count(spec, 2)
    >>> try:
    ...     check_event_count(spec, 3)
    ... except BadRecord as bad:
    ...     print(bad.reason)
    too_many_events
    """
    m = spec.max_events_per_message
    if m is not None and n > m:
        raise BadRecord("too_many_events", f"message of {n} events exceeds "
                        f"input.max_events_per_message={m} (the public bound the noise is "
                        "calibrated for); split it at the producer")


def empty_decoded(spec: InputSpec, dead: list[DeadLetter]) -> Decoded:
    dtype = np.int64 if spec.item_type == "int" else object
    return Decoded(np.empty(0, dtype=dtype), np.empty(0, dtype=object),
                   np.empty(0, dtype=object) if spec.fields.unit else None,
                   np.empty(0, dtype=np.float64) if spec.fields.weight else None, dead)


Gate = Callable[[str], "str | None"]
"""Shard check: ``None`` accepts a shard key, a string is the dead-letter reason."""


def accept_all(shard: str) -> str | None:
    return None


_GATE_DETAIL = {
    "unknown_shard": "shard key {!r} is not in the topology's shards.allowed; add it there "
                     "or fix the producer",
    "wrong_partition": "shard key {!r} belongs to another partition (the producer must use "
                       "the shard key as the Kafka message key with the default partitioner)",
    "shard_limit": "shard key {!r} would be a new shard beyond DPSTREAM_MAX_OPEN_SHARDS on "
                   "this worker (an open shard set); raise the limit, add workers, or list "
                   "the shards in shards.allowed",
}


def gated(gate: Gate, shard: str) -> str:
    reason = gate(shard)
    if reason is not None:
        template = _GATE_DETAIL.get(reason, "shard key {!r} is not accepted on this partition")
        raise BadRecord(reason, template.format(shard[:100]))
    return shard


def concat_decoded(spec: InputSpec, parts: list[Decoded], dead: list[DeadLetter]) -> Decoded:
    """One :class:`Decoded` from several (in order) plus extra dead letters."""
    for p in parts:
        dead.extend(p.dead)
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_decoded(spec, sorted(dead, key=lambda d: d.offset))
    f = spec.fields
    return Decoded(
        np.concatenate([p.items for p in parts]), np.concatenate([p.shards for p in parts]),
        np.concatenate([p.units for p in parts if p.units is not None]) if f.unit else None,
        np.concatenate([p.weights for p in parts if p.weights is not None])
        if f.weight else None, sorted(dead, key=lambda d: d.offset))


def decode_messages(spec: InputSpec, records: Sequence[Record], gate: Gate,
                    decode_one: Callable[[InputSpec, bytes | None, Gate], Any],
                    items_of: Callable[[list[np.ndarray]], np.ndarray] = np.concatenate,
                    shard_dtype: Any = None) -> Decoded:
    """The many-events-per-message encodings (columnar, arrow): ``decode_one(spec, value,
    gate)`` gives one message's ``(shard, RowErrors, items, units, weights)`` or raises
    :class:`BadRecord` (the whole message is dead-lettered); bad rows go in one dead letter
    per message and its good rows count. ``items_of`` joins the messages' item arrays.

    Shard keys are one key per message repeated per event; ``shard_dtype`` None makes them
    fixed-width (arrow: filling an object array costs ~50 ns per event in reference
    counting; NUL-free keys, :func:`key_str`, survive the fixed width), ``object`` keeps
    Python strings (columnar's contract)."""
    f = spec.fields
    parts_items: list[np.ndarray] = []
    shards: list[str] = []
    parts_units: list[np.ndarray] = []
    parts_weights: list[np.ndarray] = []
    dead: list[DeadLetter] = []
    for record in records:
        offset, key, value, ts = record
        try:
            shard, errs, items, units, weights = decode_one(spec, value, gate)
        except BadRecord as bad:
            dead.append(DeadLetter(offset, key, value, ts, bad.reason, bad.detail))
            continue
        if errs.by_reason:
            dead.append(errs.dead_letter(record))
            items, units, weights = errs.good_rows(items, units, weights)
        parts_items.append(items)
        shards.append(shard)
        if units is not None:
            parts_units.append(units)
        if weights is not None:
            parts_weights.append(weights)
    if not parts_items:
        return empty_decoded(spec, dead)
    counts = [p.shape[0] for p in parts_items]
    return Decoded(
        items_of(parts_items), np.repeat(np.array(shards, dtype=shard_dtype), counts),
        np.concatenate(parts_units) if f.unit else None,
        np.concatenate(parts_weights) if f.weight else None, dead)
