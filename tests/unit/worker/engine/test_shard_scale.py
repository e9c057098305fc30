"""Scale in shards (issue 12, target 3): a timer tick costs nothing per quiet shard, and
checkpoints write only the shards changed since the last one. Pure (no broker), zero noise."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.engine import Clock, MemSink, MemStore, ev
from tests.support.schedule import T0, make, out
from worker.engine.engine import Engine
from worker.engine.shard_state import ShardState


def _closed(n: int, every: int = 5) -> Any:
    names = ", ".join(f"s{i}" for i in range(n))
    return make(every=every, shards="shards: {allowed: [" + names + "]}")


def test_a_timer_tick_between_release_boundaries_touches_no_shard(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Quiet shards cost nothing per tick: between slot boundaries the timer visits no
    shard (no clock advance, no tick_of, no gauges); at a boundary every shard releases."""
    clock = Clock(T0)
    eng = Engine([_closed(200)], MemStore(), MemSink(), clock=clock)
    calls: dict[str, int] = {"tick_of": 0, "advance": 0}
    real_tick_of, real_advance = ShardState.tick_of, ShardState.advance

    def tick_of(self: ShardState, now_ms: int) -> tuple[int, int]:
        calls["tick_of"] += 1
        return real_tick_of(self, now_ms)

    def advance(self: ShardState, local_tick: int) -> None:
        calls["advance"] += 1
        real_advance(self, local_tick)

    async def run() -> None:
        await eng.assign([("in", 0)])
        clock.t += 0.15
        await eng.on_timer()  # first tick after assignment: may visit every shard once
        monkeypatch.setattr(ShardState, "tick_of", tick_of)
        monkeypatch.setattr(ShardState, "advance", advance)
        for _ in range(3):  # ticks 2, 3, 4: no boundary crossed
            clock.t += 0.1
            await eng.on_timer()
        assert calls == {"tick_of": 0, "advance": 0}
        assert out(eng.sink) == []
        clock.t += 0.1  # tick 5: the slot-1 boundary
        await eng.on_timer()

    asyncio.run(run())
    got = out(eng.sink)
    assert len(got) == 200 and {r["seq"] for r in got} == {0}
    assert [r["shard"] for r in got] == sorted(r["shard"] for r in got)  # (published_at, shard)


def test_an_event_between_boundaries_still_releases_every_shard_on_time() -> None:
    """The skip never hides a due release: shards of an open set created by events
    mid-slot (after the timer ran) release at the next boundary, and a multi-slot gap
    yields every slot of every shard."""
    clock = Clock(T0)
    eng = Engine([make(every=5)], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "a", "x")])
        clock.t += 0.15
        await eng.on_timer()
        await eng.process_batch("in", 0, [ev(1, "b", "y")])  # tick 1, after the timer
        clock.t += 0.2
        await eng.on_timer()  # tick 3: nothing due
        assert out(eng.sink) == []
        clock.t += 0.8  # tick 11: slots 1 and 2 crossed
        await eng.on_timer()

    asyncio.run(run())
    got = [(r["shard"], r["seq"], r["published_at"]) for r in out(eng.sink)]
    b1, b2 = int(T0 * 1000) + 500, int(T0 * 1000) + 1000
    assert got == [("a", 0, b1), ("b", 0, b1), ("a", 1, b2), ("b", 1, b2)]


# ---- incremental checkpoints on the real CheckpointStore over an in-memory log ----------

class _Meta:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class _Rec:
    def __init__(self, offset: int, key: bytes, value: bytes | None,
                 headers: Any = None) -> None:
        self.offset, self.key, self.value = offset, key, value
        self.headers = headers  # the owner header (worker/engine/checkpoint.py)


class FakeLog:
    """One topic partition: the producer appends, each consumer reads from its position.
    ``fail_on_head`` makes the next partition-head send raise (a crash before the commit)."""

    def __init__(self) -> None:
        self.records: list[_Rec] = []
        self.fail_on_head = False

    async def send(self, topic: str, key: bytes, value: bytes | None, partition: int,
                   headers: Any = None) -> Any:
        self.records.append(_Rec(len(self.records), key, value, headers))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(_Meta(len(self.records) - 1))
        return fut

    async def send_and_wait(self, topic: str, key: bytes, value: bytes | None,
                            partition: int, headers: Any = None) -> _Meta:
        if self.fail_on_head and value is not None and value[:4] == b"DPCH":
            self.fail_on_head = False
            raise OSError("broker gone before the head")
        return await (await self.send(topic, key, value, partition, headers))

    def consumer(self) -> Any:
        log, pos = self, [0]

        class _C:
            async def getmany(self, timeout_ms: int = 0, max_records: int = 0) -> Any:
                got = log.records[pos[0]:]
                pos[0] = len(log.records)
                return {0: got}

            def assignment(self) -> set[Any]:
                return set()  # an in-memory log: nothing to pause between read-backs

            def pause(self, *partitions: Any) -> None:
                return None

            def resume(self, *partitions: Any) -> None:
                return None

        return _C()


def _store(log: FakeLog) -> Any:
    from worker.engine.checkpoint import CheckpointStore
    return CheckpointStore(log, log.consumer(), "ck")


def _states(eng: Engine) -> dict[str, bytes]:
    return {s: st.to_bytes() for s, st in eng.parts[("t", 0)].shards.items()}


def test_checkpoint_bytes_follow_changed_shards_and_restore_reassembles() -> None:
    """After a release (every shard changed), a checkpoint writes only the shards with
    events since; a restore in a fresh engine reassembles every shard byte for byte."""
    log, clock = FakeLog(), Clock(T0)
    topo = _closed(100)
    eng = Engine([topo], _store(log), MemSink(), clock=clock)
    written: list[int] = []

    async def run() -> None:
        await eng.assign([("in", 0)])
        clock.t += 0.5  # tick 5: every shard releases (and changes)
        await eng.on_timer()
        written.append(eng.store.bytes_written)  # type: ignore[attr-defined]
        await eng.process_batch("in", 0, [ev(0, "s7", "a"), ev(1, "s8", "b")])
        await eng.checkpoint_all()
        written.append(eng.store.bytes_written)  # type: ignore[attr-defined]
        await eng.checkpoint_all()  # nothing changed: the head only
        written.append(eng.store.bytes_written)  # type: ignore[attr-defined]

    asyncio.run(run())
    full, two, none = written[0], written[1] - written[0], written[2] - written[1]
    assert two < 0.1 * full and none < two
    e2 = Engine([topo], _store(log), MemSink(), clock=clock)
    asyncio.run(e2.assign([("in", 0)]))
    assert _states(e2) == _states(eng) and len(_states(e2)) == 100
    assert e2.parts[("t", 0)].next_offset == 2


def test_a_crash_before_the_head_never_resurrects_uncommitted_shard_records() -> None:
    """Shard records written without their head are not committed: a restore ignores them,
    and later heads (whose shard sets differ) never pick them up."""
    log, clock = FakeLog(), Clock(T0)
    topo = _closed(4)
    eng = Engine([topo], _store(log), MemSink(), clock=clock)

    async def first() -> None:
        await eng.assign([("in", 0)])
        await eng.checkpoint_all()
        await eng.process_batch("in", 0, [ev(0, "s1", "x")])
        log.fail_on_head = True
        with pytest.raises(OSError):
            await eng.checkpoint_all()  # s1's record written, head lost: a crash

    asyncio.run(first())
    e2 = Engine([topo], _store(log), MemSink(), clock=clock)

    async def second() -> None:
        await e2.assign([("in", 0)])
        assert e2.parts[("t", 0)].next_offset == 0  # the event is read again
        assert sum(e2.parts[("t", 0)].shards["s1"].mechanism.counts.values()) == 0
        await e2.process_batch("in", 0, [ev(0, "s2", "y")])  # a different shard changes
        await e2.checkpoint_all()

    asyncio.run(second())
    e3 = Engine([topo], _store(log), MemSink(), clock=clock)
    asyncio.run(e3.assign([("in", 0)]))
    shards = e3.parts[("t", 0)].shards
    assert dict(shards["s1"].mechanism.counts) == {} and dict(shards["s2"].mechanism.counts) == {
        "y": 1}


def test_version_1_full_snapshots_restore_and_unknown_versions_are_refused() -> None:
    """A version-1 checkpoint (every shard in one record) restores; the next checkpoint
    rewrites every shard as its own record; a head of an unknown version is refused."""
    import struct

    from sketches.errors import SerializationError
    from worker.engine.checkpoint import PartitionCheckpoint

    log, clock = FakeLog(), Clock(T0)
    topo = _closed(3)
    eng = Engine([topo], _store(log), MemSink(), clock=clock)

    async def v1() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "s0", "a")])
        states = [st.to_bytes() for st in eng.parts[("t", 0)].shards.values()]
        await eng.store.write(PartitionCheckpoint("t", 0, 1, states, []))  # names None: v1

    asyncio.run(v1())
    e2 = Engine([topo], _store(log), MemSink(), clock=clock)
    asyncio.run(e2.assign([("in", 0)]))
    assert _states(e2) == _states(eng)
    asyncio.run(e2.checkpoint_all())
    e3 = Engine([topo], _store(log), MemSink(), clock=clock)
    asyncio.run(e3.assign([("in", 0)]))
    assert _states(e3) == _states(eng)
    head = [r for r in log.records if r.key == b"t/0"][-1]
    assert struct.unpack_from("<H", head.value, 4) == (2,)
    # written by the partition's latest owner (its header): a headerless record after a
    # claim would be a pre-claim worker's and is fenced (second review of issue 19)
    owner = e3.store.owners["t/0"]  # type: ignore[attr-defined]
    log.records.append(_Rec(len(log.records), b"t/0",
                            head.value[:4] + struct.pack("<H", 9) + head.value[6:],
                            [("dpstream-owner", str(owner).encode())]))
    e4 = Engine([topo], _store(log), MemSink(), clock=clock)
    with pytest.raises(SerializationError, match=r"unknown head version 9.*new `name`"):
        asyncio.run(e4.assign([("in", 0)]))
