"""Dead-letter records (``worker/ingest/records.py``): the copy of a bad record fits the
producer's limit exactly, and is only cut when it has to be (issue 24: a dead letter of
exactly ``max_bytes`` was not covered by any test)."""

from __future__ import annotations

import base64
import hashlib
import json

from worker.ingest.records import DeadLetter

LETTER = DeadLetter(11, b"key-" * 40, bytes(range(256)) * 12, 1_700_000_000_000,
                    "oversized", "value exceeds the limit")


def test_a_dead_letter_of_exactly_max_bytes_is_kept_whole() -> None:
    """``max_bytes`` is inclusive: the full copy of exactly that size is sent as is (not
    truncated, which would lose the record's bytes for nothing); one byte less truncates."""
    full = LETTER.to_json("t", "in", 3, max_bytes=10**9)
    assert "truncated" not in json.loads(full)
    assert LETTER.to_json("t", "in", 3, max_bytes=len(full)) == full
    cut = LETTER.to_json("t", "in", 3, max_bytes=len(full) - 1)
    assert len(cut) <= len(full) - 1 and json.loads(cut)["truncated"] is True


def test_a_truncated_dead_letter_never_exceeds_the_limit_and_keeps_what_fits() -> None:
    """At every limit below the full size the copy is within the limit, states the
    lengths and SHA-256 of the originals, and keeps a head of the value that is a prefix
    of it; the head is dropped only when not even the lengths and hashes leave room."""
    full = LETTER.to_json("t", "in", 3, max_bytes=10**9)
    value_sha = hashlib.sha256(LETTER.value or b"").hexdigest()
    heads = 0
    for limit in range(len(full) - 1, 400, -1):
        out = LETTER.to_json("t", "in", 3, max_bytes=limit)
        assert len(out) <= limit, limit
        doc = json.loads(out)
        assert doc["truncated"] is True and doc["value_bytes"] == 3072
        assert doc["value_sha256"] == value_sha and doc["key_bytes"] == 160
        head = base64.b64decode(doc["value_b64"])
        assert (LETTER.value or b"").startswith(head)
        if limit > len(full) // 2:
            # lots of room: the head fills it up to base64 granularity and key head
            assert len(out) > limit - 16, limit
            heads += 1
    assert heads > 100


def test_the_detail_is_cut_only_when_lengths_and_hashes_alone_exceed_the_limit() -> None:
    """Smallest limits: with no room for any head the copy is the lengths, hashes and the
    full detail (up to 1000 characters) as long as that fits, *inclusively*; one byte
    less cuts the detail to 100 characters."""
    letter = DeadLetter(11, b"k" * 500, b"v" * 5000, 0, "undecodable", "x" * 999)
    doc = json.loads(letter.to_json("t", "in", 3, max_bytes=2000))
    doc.update(key_b64="", value_b64="", detail="x" * 999)
    stub = len(json.dumps(doc, separators=(",", ":")).encode())
    at = letter.to_json("t", "in", 3, max_bytes=stub)
    assert len(at) == stub and json.loads(at)["detail"] == "x" * 999
    below = json.loads(letter.to_json("t", "in", 3, max_bytes=stub - 1))
    assert below["detail"] == "x" * 100 and below["value_b64"] == ""
