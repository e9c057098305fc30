"""What both input encodings share: records, dead letters, event columns, checks.

:mod:`worker.decode` (the ``json`` encoding and the entry point
:func:`~worker.decode.decode_batch`) and :mod:`worker.decode_columnar` (the
``columnar`` encoding) build on these. The underscore names are internal to
those two modules; everything public is re-exported by :mod:`worker.decode`.

Examples
--------
>>> _key_str(7, "shard key"), _gated(_accept_all, "r1")
('7', 'r1')
>>> try:
...     _load(b"[1]", 100)
... except _Bad as bad:
...     print(bad.reason)
not_an_object
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
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


def _key_str(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _Bad("wrong_type", f"{what} must be a string or integer, got {type(value).__name__}")


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
