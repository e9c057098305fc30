"""Kafka record batches built byte by byte (v2 format), intact or corrupt."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c


def batch(base: int, n: int, *, ts0: int = 1_700_000_000_000, producer_id: int = -1,
          transactional: bool = False, compression: int = 0, log_append: bool = False,
          control: bytes | None = None, value: bytes = b'{"x": 1}') -> bytes:
    """One v2 record batch at ``base`` (attributes patched and the CRC recomputed)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                  is_transactional=int(transactional), producer_id=producer_id,
                                  producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1,
                                  batch_size=1 << 30)
    for i in range(n):
        if control is not None:
            b.append(i, timestamp=ts0 + i, key=control, value=b"\x00\x00\x00\x00\x00\x00",
                     headers=[])
        else:
            b.append(i, timestamp=ts0 + i, key=None if i % 3 else f"k{i}".encode(),
                     value=value + str(base + i).encode(), headers=[("h", b"v")] if i % 5 == 0
                     else [])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base)
    attrs = struct.unpack_from(">h", buf, 21)[0]
    attrs |= (0x08 if log_append else 0) | (0x20 if control is not None else 0)
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def corrupt(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[-3] ^= 0xFF  # a value byte: the CRC no longer matches
    return bytes(bad)

