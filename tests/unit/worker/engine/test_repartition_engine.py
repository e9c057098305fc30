"""The engine with a repartition topic (no broker): forward, dedup, checkpoint, caps."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from tests.support.engine import Clock, MemStore
from worker.config.topology import parse_topology
from worker.engine.checkpoint import PartitionCheckpoint, decode_checkpoint, encode_checkpoint
from worker.engine.engine import Engine
from worker.ingest.repartition import repartition_topic, unframe
from worker.ingest.routing import partition_for

TOPO = """
name: t
input: {{topic: in, partitions: 2, fields: {{shard: r, item: i{unit}}}}}
mechanism: {{name: test_exact_counts}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50{cap}}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out}}
dead_letter: {{topic: dlq}}
"""
R = repartition_topic("in")
SHARD = next(s for s in (f"r{i}" for i in range(50)) if partition_for(s, 2) == 0)


def topo(cap: int | None = None) -> Any:
    return parse_topology(TOPO.format(unit=", unit: u" if cap else "",
                                      cap=f", unit_cap: {cap}" if cap else ""))


class Sink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, int | None]] = []
        self.flushes = 0

    async def publish(self, topic: str, key: bytes, value: bytes,
                      timestamp_ms: int | None = None, partition: int | None = None) -> None:
        self.sent.append((topic, key, value, partition))

    async def flush(self) -> None:
        self.flushes += 1


def ev(offset: int, r: str, i: str, u: str | None = None) -> tuple[int, bytes, bytes, int]:
    doc: dict[str, Any] = {"r": r, "i": i}
    if u is not None:
        doc["u"] = u
    return (offset, b"", json.dumps(doc).encode(), 0)


def counts(sink: Sink) -> dict[str, int]:
    docs = [json.loads(v) for t, _, v, _ in sink.sent if t == "out"]
    return max(docs, key=lambda d: d["seq"])["payload"]["counts"] if docs else {}


def forwards(sink: Sink, first_r_offset: int = 0) -> list[tuple[int, bytes, bytes, int]]:
    """The sink's repartition-topic records as partition 0 would read them back."""
    got = [(k, v) for t, k, v, p in sink.sent if t == R and p == 0]
    return [(first_r_offset + n, k, v, 0) for n, (k, v) in enumerate(got)]


def test_misplaced_records_are_forwarded_and_counted_once_on_their_partition() -> None:
    clock, store, sink = Clock(1_000_000.0), MemStore(), Sink()
    eng = Engine([topo()], store, sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        # SHARD belongs to partition 0; three of its events arrive on partition 1
        assert await eng.process_batch("in", 1, [ev(k, SHARD, "x") for k in range(3)]) == 0
        fw = forwards(sink)
        assert len(fw) == 3 and {k for _, k, _, _ in fw} == {SHARD.encode()}
        assert [unframe(v).offset for _, _, v, _ in fw] == [0, 1, 2]  # type: ignore[union-attr]
        assert await eng.process_batch(R, 0, fw) == 3
        # a kill -9 before partition 1's checkpoint: the same records forwarded again
        assert await eng.process_batch(R, 0, [(3 + r, k, v, ts) for r, k, v, ts in fw]) == 0
        await eng.process_batch("in", 0, [ev(0, SHARD, "y")])
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(run())
    assert counts(sink) == {"x": 3, "y": 1}
    m = eng.metrics
    assert m.value("dpstream_repartition_forwarded_total", topology="t") == 3
    assert m.value("dpstream_repartition_deduplicated_total", topology="t") == 3
    assert m.value("dpstream_dead_letters_total", topology="t", reason="wrong_partition") \
        in (None, 0)
    assert sink.flushes >= 1  # forwards flushed before partition 1's checkpoint


def test_inbox_survives_a_restore_and_old_checkpoints_restore_empty() -> None:
    clock, store, sink = Clock(1_000_000.0), MemStore(), Sink()
    eng = Engine([topo()], store, sink, clock=clock)

    async def first() -> list[tuple[int, bytes, bytes, int]]:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        await eng.process_batch("in", 1, [ev(k, SHARD, "x") for k in range(4)])
        fw = forwards(sink)
        await eng.process_batch(R, 0, fw)
        await eng.checkpoint_all()
        return fw

    fw = asyncio.run(first())
    cp = store.load("t", 0)
    assert cp is not None and cp.repartition == {"next": 4, "seen": {1: 3}, "done": []}
    assert decode_checkpoint(encode_checkpoint(cp)).repartition == cp.repartition

    sink2 = Sink()
    eng2 = Engine([topo()], store, sink2, clock=clock)

    async def second() -> None:
        got = await eng2.assign([("in", 0), (R, 0)])
        assert got[(R, 0)] == 4  # seek the repartition topic to the checkpointed offset
        # copies (re-forwarded by a restarted partition 1) are skipped
        assert await eng2.process_batch(R, 0, [(4 + r, k, v, t) for r, k, v, t in fw]) == 0
        clock.t += 0.5
        await eng2.on_timer()

    asyncio.run(second())
    assert counts(sink2) == {"x": 4}

    # a checkpoint written before the repartition topic (no block) restores, inbox empty
    old = PartitionCheckpoint("t", 0, 7, [], [], names=[], incremental=True, held=0)
    raw = encode_checkpoint(old)
    assert b"repartition" not in raw and decode_checkpoint(raw).repartition is None
    store2 = MemStore()
    store2.data[("t", 0)] = raw
    eng3 = Engine([topo()], store2, Sink(), clock=clock)
    got = asyncio.run(eng3.assign([("in", 0), (R, 0)]))
    assert got == {("in", 0): 7, (R, 0): None}
    assert eng3.parts[("t", 0)].inbox.seen == {}


def test_unit_cap_is_exact_across_forwarded_and_placed_events() -> None:
    """All of a unit's events of a shard meet in one state: the cap holds across the hop."""
    clock, sink = Clock(1_000_000.0), Sink()
    eng = Engine([topo(cap=1)], MemStore(), sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        await eng.process_batch("in", 0, [ev(0, SHARD, "x", u="u1")])
        await eng.process_batch("in", 1, [ev(0, SHARD, "z", u="u1"), ev(1, SHARD, "z", u="u2")])
        await eng.process_batch(R, 0, forwards(sink))
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(run())
    assert counts(sink) == {"x": 1, "z": 1}  # u1's second event is capped


def test_foreign_records_on_the_repartition_topic_are_dead_lettered() -> None:
    clock, sink = Clock(1_000_000.0), Sink()
    eng = Engine([topo()], MemStore(), sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0), (R, 0)])
        await eng.process_batch(R, 0, [ev(0, SHARD, "x")])  # not a frame

    asyncio.run(run())
    assert eng.metrics.value("dpstream_dead_letters_total", topology="t",
                             reason="bad_forward") == 1


EVENT_TOPO = """
name: t
input: {topic: in, partitions: 2, fields: {shard: r, item: i}}
mechanism: {name: test_exact_counts}
privacy: {eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 100000, time: event,
          allowed_lateness_ms: 1000}
noise: {kind: zero, allow_insecure_noise: true}
release: {every_ticks: 5, topic: out}
dead_letter: {topic: dlq}
"""


def test_event_time_hop_makes_nothing_late() -> None:
    """Partition 0 reads its own records far ahead of a forwarded one; its watermark
    waits for partition 1's marks, so the forwarded event (source timestamp) is on time."""
    clock, sink = Clock(1_000_050.0), Sink()  # mid-epoch (epochs of 10,000 s)
    eng = Engine([parse_topology(EVENT_TOPO)], MemStore(), sink, clock=clock)
    now = 1_000_050_000
    seen = [0]

    def r0_news() -> list[tuple[int, bytes, bytes, int]]:
        """Records of repartition partition 0 not handed to the engine yet."""
        got = [(k, v) for t, k, v, p in sink.sent if t == R and p == 0]
        out = [(seen[0] + n, k, v, now) for n, (k, v) in enumerate(got[seen[0]:])]
        seen[0] = len(got)
        return out

    def ev_at(offset: int, shard: str, item: str, ts: int) -> tuple[int, bytes, bytes, int]:
        return (offset, b"", json.dumps({"r": shard, "i": item}).encode(), ts)

    async def run() -> None:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        # partition 1 reads one event of SHARD (home 0): forwarded as it is read
        await eng.process_batch("in", 1, [ev_at(0, SHARD, "fw", now - 500)])
        await eng.on_timer()  # marks: partition 1 has read up to now - 500
        # partition 0 reads its own event stamped 4.5 s later (its own watermark would
        # pass the forwarded event's tick)
        clock.t += 5.0
        await eng.process_batch("in", 0, [ev_at(0, SHARD, "own", now + 4500)])
        await eng.on_timer()
        await eng.process_batch(R, 0, r0_news())  # the forward arrives after all that
        for _ in range(3):  # both partitions read to their end: marks move, ticks close
            clock.t += 2.0
            eng.log_end("in", 0, int(clock.t * 1000))
            eng.log_end("in", 1, int(clock.t * 1000))
            await eng.on_timer()
            await eng.process_batch(R, 0, r0_news())
            await eng.on_timer()

    asyncio.run(run())
    m = eng.metrics
    assert m.value("dpstream_dead_letters_total", topology="t", reason="late") in (None, 0)
    assert m.value("dpstream_repartition_forwarded_total", topology="t") == 1
    assert m.value("dpstream_events_in_total", topology="t") == 2
    assert counts(sink) == {"fw": 1, "own": 1}


class FailingSink(Sink):
    """A sink whose next flush fails (a forward's delivery failed after its retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False

    async def flush(self) -> None:
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("forward not delivered")
        await super().flush()


def test_a_failed_forward_is_never_checkpointed_past() -> None:
    clock, store, sink = Clock(1_000_000.0), MemStore(), FailingSink()
    eng = Engine([topo()], store, sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        await eng.process_batch("in", 1, [ev(0, SHARD, "x")])
        await eng.checkpoint_all()  # forwarded 0 is durable, offset 1 checkpointed
        await eng.process_batch("in", 1, [ev(1, SHARD, "x"), ev(2, SHARD, "x")])
        sink.fail_next = True
        with pytest.raises(ConnectionError):
            await eng.commit.commit(eng.parts[("t", 1)], force=True)
        assert store.load("t", 1).next_offset == 1  # type: ignore[union-attr]
        assert eng.lost_forwards() == [("in", 1)]  # the driver's timer restores it
        await eng.on_timer()  # skipped until then (no checkpoint, no error per round)
        with pytest.raises(ConnectionError):  # the consume loop resets it too
            await eng.process_batch("in", 1, [ev(3, SHARD, "x")])
        await eng.checkpoint_all()  # never past the lost forward
        assert store.load("t", 1).next_offset == 1  # type: ignore[union-attr]
        await eng.discard([("in", 1)])
        assert await eng.assign([("in", 1), (R, 1)]) == {("in", 1): 1, (R, 1): None}
        await eng.process_batch("in", 1, [ev(1, SHARD, "x"), ev(2, SHARD, "x"),
                                          ev(3, SHARD, "x")])
        # suppose the failed batch held 1 and a later one (2) was delivered anyway: the
        # receiver reads 0, 2 (prev 1: gap, skipped), then the re-forwards 1, 2, 3
        fw = forwards(sink)
        frames = [unframe(v) for _, _, v, _ in fw]
        assert [(f.offset, f.prev) for f in frames] == [  # type: ignore[union-attr]
            (0, -1), (1, 0), (2, 1), (1, -1), (2, 1), (3, 2)]
        got = [fw[0], fw[2], fw[3], fw[4], fw[5]]
        assert await eng.process_batch(R, 0, got) == 4
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(run())
    assert counts(sink) == {"x": 4}


def test_a_failed_flush_marks_every_partition_with_unflushed_forwards() -> None:
    """One flush waits for every send: a failure may hide another partition's lost
    forward, so that partition is not checkpointed past it either."""
    other = next(s for s in (f"r{i}" for i in range(50)) if partition_for(s, 2) == 1)
    clock, store, sink = Clock(1_000_000.0), MemStore(), FailingSink()
    eng = Engine([topo()], store, sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0), ("in", 1), (R, 0), (R, 1)])
        await eng.process_batch("in", 1, [ev(0, SHARD, "x")])  # forwarded to 0
        await eng.process_batch("in", 0, [ev(0, other, "y")])  # forwarded to 1
        sink.fail_next = True
        with pytest.raises(ConnectionError):
            await eng.commit.commit(eng.parts[("t", 1)], force=True)
        assert eng.parts[("t", 0)].forward_error is not None
        await eng.checkpoint_all()

    asyncio.run(run())
    assert store.load("t", 0) is None and store.load("t", 1) is None
