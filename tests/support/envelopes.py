"""Envelopes of every release kind, for the reader tests."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from sketches import HashSpec

SPEC = HashSpec(seed=99, depth=3, width=64)


def sketch_env(shard: str, seq: int, counts: dict[str, float], epoch: int = 1,
               item_type: str = "str") -> dict[str, Any]:
    """A schema-1 envelope whose matrix holds ``counts`` exactly (a CMS without noise)."""
    m = np.zeros((SPEC.depth, SPEC.width))
    items = list(counts)
    if items:
        keys = SPEC.item_keys([int(i) for i in items] if item_type == "int" else items)
        b = SPEC.buckets(keys)
        for j, item in enumerate(items):
            m[np.arange(SPEC.depth), b[:, j]] += counts[item]
    return {"schema_version": 1, "topology": "dst", "shard": shard, "epoch": epoch, "seq": seq,
            "final": False, "mechanism": "lazy_cms", "eps": 1.0, "delta": 1e-6,
            "relation": "add_remove", "unit": "event", "unit_cap": 1, "clock": "tick",
            "rounds": seq + 1, "horizon": 100, "item_type": item_type, "published_at": 0,
            "error_bound": {"noise": 1.0}, "lag_bound": 1,
            "payload": {"kind": "sketch", "estimator": "min", "hash": SPEC.to_public(),
                        "matrix": m.tolist(), "rounds": seq + 1}}


def hh_env(shard: str, seq: int, items: list[tuple[str, float]]) -> dict[str, Any]:
    return {"schema_version": 1, "topology": "hh", "shard": shard, "epoch": 1, "seq": seq,
            "mechanism": "lazy_hh", "eps": 1.0, "delta": 1e-6, "relation": "add_remove",
            "unit": "event", "rounds": 3, "error_bound": None,
            "payload": {"kind": "heavy_hitters", "threshold": 5.0,
                        "items": [{"item": i, "estimate": e} for i, e in items]}}


async def publish(bootstrap: str, topic: str, values: list[bytes], partitions: int = 2) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for v in values:  # in order: one send at a time
            key = b"x"
            if v.startswith(b"{"):
                doc = json.loads(v)
                key = f"{doc.get('topology')}/{doc.get('shard')}".encode()
            await (await producer.send(topic, v, key=key))
    finally:
        await producer.stop()


def enc(env: dict[str, Any]) -> bytes:
    return json.dumps(env).encode()

