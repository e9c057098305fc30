"""``worker.ingest.routing.murmur2`` is Kafka's partitioner hash, byte for byte.

The ingest layer carries its own pure-Python murmur2 (it may not import a Kafka
client library); it must equal aiokafka's (the Java client's ``Utils.murmur2``)
on every key, or shards would be dead-lettered as ``wrong_partition``.
"""

from __future__ import annotations

import random

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from worker.ingest.routing import murmur2, partition_for


def _keys() -> list[bytes]:
    rng = random.Random(21)
    keys = [b"", b"\x00", b"\xff" * 7, "é".encode(), "分片-ß-🙂".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 40) for _ in range(25)]
    keys += [rng.randbytes(rng.randrange(40, 5000)) for _ in range(200)]
    alphabet = "abcXYZ019-_ éü中文🙂\u0000\u07ff"
    keys += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))).encode()
             for _ in range(1000)]
    return keys


def test_murmur2_equals_aiokafka_on_random_keys() -> None:
    for key in _keys():
        assert murmur2(key) == aiokafka_murmur2(key), key


def test_partition_for_equals_the_default_partitioner() -> None:
    rng = random.Random(7)
    for _ in range(500):
        shard = "".join(rng.choice("rs0123456789é中") for _ in range(rng.randrange(0, 20)))
        for n in (1, 2, 3, 4, 7, 16, 100):
            parts = list(range(n))
            assert partition_for(shard, n) == DefaultPartitioner()(shard.encode(), parts, parts)
