"""Checkpoint states in older formats."""

from __future__ import annotations

import json
import struct

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from worker.engine.shard_state import STATE_MAGIC


def as_version_1(blob: bytes) -> bytes:
    """Rewrite a shard state as the version-1 format (no `params` block)."""
    (mlen,) = struct.unpack_from("<I", blob, 6)
    meta = json.loads(blob[10:10 + mlen])
    meta.pop("params")
    mb = json.dumps(meta, separators=(",", ":")).encode()
    return STATE_MAGIC + struct.pack("<HI", 1, len(mb)) + mb + blob[10 + mlen:]

