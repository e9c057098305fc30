"""DPSTREAM_MAX_OPEN_SHARDS against the real broker: the worker holds at most that many
shards of an open-set topology and dead-letters records of further new shards as
``shard_limit``; the admitted shards' counts stay exact (zero noise)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.kafka import create_topic, latest_by_shard, read_all
from tests.support.poison import produce_values as _produce

pytestmark = pytest.mark.broker


def test_records_of_shards_beyond_the_limit_are_dead_lettered(broker, workers, make_topology,
                                                                unique) -> None:
    topo = make_topology(partitions=1)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 1))
    proc = workers.start(topo, group=unique, extra_env={"DPSTREAM_MAX_OPEN_SHARDS": "2"})
    records = [(r.encode(), json.dumps({"router": r, "src": f"10.0.0.{i}"}).encode())
               for i, r in enumerate(["r0", "r1", "r0", "r2", "r3", "r1", "r2"])]
    asyncio.run(_produce(broker.bootstrap, f"{unique}-in", records))

    dlq = asyncio.run(read_all(broker.bootstrap, f"{unique}-dlq", lambda m: len(m) >= 3, 60,
                               give_up=lambda: proc.poll() is not None))
    docs = [json.loads(m.value) for m in dlq]
    assert sorted((d["reason"], d["offset"]) for d in docs) == [
        ("shard_limit", 3), ("shard_limit", 4), ("shard_limit", 6)], workers.logs()
    assert "DPSTREAM_MAX_OPEN_SHARDS" in docs[0]["detail"]

    def done(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return (set(latest) == {"r0", "r1"}
                and latest["r0"]["payload"]["counts"] == {"10.0.0.0": 1, "10.0.0.2": 1}
                and latest["r1"]["payload"]["counts"] == {"10.0.0.1": 1, "10.0.0.5": 1})

    out = asyncio.run(read_all(broker.bootstrap, f"{unique}-out", done, 60))
    assert done(out), workers.logs()
    assert proc.poll() is None, "the worker must keep running"
    assert workers.terminate(proc) == 0
