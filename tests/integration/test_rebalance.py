"""7c: two workers in one group; one joins, one leaves; shards move with state and epochs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.support.kafka import conflicting_ids, create_topic, latest_by_shard, produce, read_all

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROUTERS = [f"r{i}" for i in range(8)]


def _chunk(exact: dict[str, Counter[str]], start: int, n: int) -> list[tuple[bytes | None, bytes]]:
    out: list[tuple[bytes | None, bytes]] = []
    for i in range(start, start + n):
        r, src = ROUTERS[i % len(ROUTERS)], f"192.168.{i % 3}.{i % 11}"
        exact[r][src] += 1
        out.append((r.encode(), json.dumps({"router": r, "src": src}).encode()))
    return out


def _done(exact):
    def check(msgs) -> bool:
        latest = latest_by_shard(msgs)
        return all(r in latest and latest[r]["payload"]["counts"] == dict(c)
                   for r, c in exact.items())
    return check


@pytest.mark.parametrize("runner", ["faust", "asyncio"])
def test_join_and_leave_move_state(broker, workers, make_topology, unique, tmp_path,
                                   runner) -> None:
    """Join, then leave: every event counted once, one epoch, seq continues across owners.

    ``faust``: workers hosted in the Faust app (the default of ``dpstream run``);
    ``asyncio``: the plain runner (``--no-faust``). The last phase produces
    while the survivor is still rebalancing, so its first fetch after the
    restore's seek may have started before the rebalance; those records must
    be applied, not dropped (the bug this guards against lost them for good).
    """
    args = () if runner == "faust" else ("--no-faust",)
    topo = make_topology(partitions=4, tick_ms=200, every_ticks=1, epoch_ticks=10_000_000)
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-in", 4))
    out_topic = f"{unique}-out"
    exact: dict[str, Counter[str]] = {r: Counter() for r in ROUTERS}
    a = workers.start(topo, group=unique, args=args)
    asyncio.run(produce(broker.bootstrap, f"{unique}-in", _chunk(exact, 0, 800)))
    msgs = asyncio.run(read_all(broker.bootstrap, out_topic, _done(exact), 60))
    assert _done(exact)(msgs), workers.logs()

    b = workers.start(topo, group=unique, args=args)  # joins: partitions are split
    log_b = Path(tmp_path / "worker-1.log")

    def b_restored() -> bool:
        return log_b.exists() and "restored" in log_b.read_text(errors="replace")

    asyncio.run(read_all(broker.bootstrap, out_topic, lambda m: b_restored(), 60))
    assert b_restored(), workers.logs()
    asyncio.run(produce(broker.bootstrap, f"{unique}-in", _chunk(exact, 800, 800)))
    msgs = asyncio.run(read_all(broker.bootstrap, out_topic, _done(exact), 60))
    assert _done(exact)(msgs), workers.logs()

    assert workers.terminate(a) == 0  # leaves: b takes every partition
    asyncio.run(produce(broker.bootstrap, f"{unique}-in", _chunk(exact, 1600, 800)))
    msgs = asyncio.run(read_all(broker.bootstrap, out_topic, _done(exact), 60))
    assert _done(exact)(msgs), workers.logs()
    assert b.poll() is None

    assert conflicting_ids(msgs) == []
    seqs: dict[tuple[str, int], set[int]] = defaultdict(set)
    for m in msgs:
        doc = json.loads(m.value)
        seqs[(doc["shard"], doc["epoch"])].add(doc["seq"])
    for (shard, _epoch), s in seqs.items():  # one epoch, seq continues across owners
        assert s == set(range(max(s) + 1)), (shard, sorted(s)[:20])
    assert len({e for _, e in seqs}) == 1
    assert workers.terminate(b) == 0
