"""Checkpoint records (``worker/engine/checkpoint.py``): a record whose bytes are not the ones its
head (or its own header) was written with is refused, never restored (issue 24: removing
the CRC check survived every test).

The corruptions here are the ones a length check and zlib's own checksum cannot see: a
chunk of the right length holding a *different valid* compressed checkpoint (a chunk
slot rewritten by another generation, a compaction race, a bug in a writer). Without the
CRC the worker would silently restore another state.
"""

from __future__ import annotations

import zlib

import pytest

from sketches.errors import SerializationError
from worker.engine.checkpoint import (
    CheckpointCache,
    PartitionCheckpoint,
    chunk_records,
    encode_checkpoint,
    shard_key_prefix,
    shard_records,
)


def _blob(next_offset: int) -> bytes:
    cp = PartitionCheckpoint("t", 0, next_offset=next_offset, shards=[b"s1"], pending=[])
    return zlib.compress(encode_checkpoint(cp), 1)


def test_a_head_chunk_of_the_right_length_with_other_valid_bytes_is_refused() -> None:
    """The head states the CRC-32 of its chunks; chunks of another checkpoint with the same
    length (a valid zlib stream, so decompression would succeed) must raise
    SerializationError naming the CRC, not restore offset 43 for a head written at 42."""
    a, b = _blob(42), _blob(43)
    assert len(a) == len(b) and a != b
    good = CheckpointCache()
    for k, v in chunk_records("t", 0, 5, a):
        good.feed(k, v)
    got = good.get("t", 0)
    assert got is not None and got[1].next_offset == 42
    bad = CheckpointCache()
    recs = chunk_records("t", 0, 5, a)
    (ck, _), head = recs[0], recs[-1]
    (_, other), _ = chunk_records("t", 0, 5, b)
    bad.feed(ck, other)
    bad.feed(*head)
    with pytest.raises(SerializationError, match="CRC mismatch"):
        bad.get("t", 0)


def test_a_shard_record_of_the_right_length_with_other_valid_bytes_is_refused() -> None:
    """Same for the incremental per-shard records: each carries the CRC-32 of its state."""
    one = shard_records("t", 0, "r1", 1, 7, b"state-A" * 20)
    two = shard_records("t", 0, "r1", 1, 7, b"state-B" * 20)
    (key, v1), (_, v2) = one[0], two[0]
    assert len(v1) == len(v2) and v1[32:] != v2[32:]
    prefix = shard_key_prefix("t", 0)[:-1]
    good = CheckpointCache()
    good.feed(key, v1)
    assert good.shard_state(prefix, "r1", 7) == (1, 7, b"state-A" * 20)
    bad = CheckpointCache()
    bad.feed(key, v1[:32] + v2[32:])  # A's header (its CRC), B's compressed state
    with pytest.raises(SerializationError, match="CRC mismatch"):
        bad.shard_state(prefix, "r1", 7)
