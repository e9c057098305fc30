"""One writer per release (issue 19), without a broker.

The real :class:`worker.engine.checkpoint.CheckpointStore` runs over :class:`FakeLog`, an
in-memory single-partition log with the Kafka semantics the protocol uses (offsets in
write order, headers, read from a position); two engines share it like two workers
share the checkpoint topic. What these tests prove: the *protocol* (claims in log order,
owner headers, read-back after each head) refuses another deployment's checkpoint, fences
a zombie before it publishes anything drawn after the claim, and the claimant repairs
what the zombie wrote. The same code against the real broker: tests/integration/
test_one_writer.py.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from privacy_audit.duplicates import duplicate_report
from sketches.errors import SerializationError
from tests.support.engine import TOPO, Clock, MemSink, MemStore, ev
from worker.config.settings import Settings
from worker.config.topology import parse_topology
from worker.engine.checkpoint import (
    CLAIM_MAGIC,
    HEAD_MAGIC,
    OWNER_HEADER,
    CheckpointCache,
    CheckpointStore,
    ForeignCheckpoint,
    claim_key,
    head_key,
)
from worker.engine.engine import Engine


class FakeLog:
    """One topic partition: ``(offset, key, value, headers)`` in write order."""

    def __init__(self) -> None:
        self.records: list[SimpleNamespace] = []
        self.next_offset = 0  # offsets keep growing after compaction, as in Kafka

    def append(self, key: bytes, value: bytes | None, headers: Any) -> SimpleNamespace:
        r = SimpleNamespace(offset=self.next_offset, key=key, value=value,
                            headers=tuple(headers or ()))
        self.next_offset += 1
        self.records.append(r)
        return r

    def compacted(self) -> FakeLog:
        """The log after compaction: the latest record of each key, offsets kept."""
        last = {r.key: r.offset for r in self.records}
        out = FakeLog()
        out.records = [r for r in self.records if last[r.key] == r.offset]
        out.next_offset = self.next_offset
        return out


class FakeProducer:
    def __init__(self, log: FakeLog) -> None:
        self.log = log

    async def send(self, topic: str, key: bytes, value: bytes | None, partition: int = 0,
                   headers: Any = None) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(self.log.append(key, value, headers))
        return fut

    async def send_and_wait(self, topic: str, key: bytes, value: bytes | None,
                            partition: int = 0, headers: Any = None) -> Any:
        return await (await self.send(topic, key, value, partition, headers))


class FakeConsumer:
    def __init__(self, log: FakeLog) -> None:
        self.log, self.pos = log, 0

    async def getmany(self, timeout_ms: int = 0, max_records: int = 0) -> dict[str, list[Any]]:
        out = self.log.records[self.pos:]
        self.pos = len(self.log.records)
        return {"ck": out} if out else {}

    def assignment(self) -> set[Any]:
        return set()  # an in-memory log: nothing to pause between read-backs

    def pause(self, *partitions: Any) -> None:
        return None

    def resume(self, *partitions: Any) -> None:
        return None


def store(log: FakeLog, deployment: str, takeover: tuple[str, ...] = ()) -> CheckpointStore:
    return CheckpointStore(FakeProducer(log), FakeConsumer(log), "ck", deployment=deployment,
                           takeover=takeover)


def topo():
    return parse_topology(TOPO.format(mech="test_exact_counts", params="{}", unit="", cap=""))


def engine(st: Any, clock: Clock, deployment: str, takeover: tuple[str, ...] = ()) -> Engine:
    return Engine([topo()], st, MemSink(), clock=clock, deployment=deployment,
                  takeover_from=takeover)


def envelopes(*engines: Engine) -> list[bytes]:
    return [v for e in engines for t, _, v, _ in e.sink.sent if t == "out"]  # type: ignore


# ---- deployment identity ------------------------------------------------------
def test_checkpoint_of_another_deployment_is_refused_naming_both_and_the_fix() -> None:
    mem, clock = MemStore(), Clock(1_000_000.0)
    blue = engine(mem, clock, "blue")

    async def run() -> None:
        await blue.assign([("in", 0)])
        await blue.process_batch("in", 0, [ev(0, "r1", "x")])
        clock.t += 0.5
        await blue.on_timer()
        assert mem.load("t", 0).deployment == "blue"  # type: ignore[union-attr]
        green = engine(mem, clock, "green")
        with pytest.raises(ForeignCheckpoint) as err:
            await green.assign([("in", 0)])
        msg = str(err.value)
        for part in ("topology t partition 0", "'blue'", "'green'", "DPSTREAM_TAKEOVER_FROM=blue",
                     "DPSTREAM_CHECKPOINT_TOPIC", "new `name`"):
            assert part in msg, part
        assert green.sink.sent == []  # type: ignore[attr-defined]
        # the explicit takeover restores it
        takeover = engine(mem, clock, "green", ("blue",))
        assert await takeover.assign([("in", 0)]) == {("in", 0): 1}

    asyncio.run(run())


def test_checkpoint_without_deployment_id_is_accepted() -> None:
    """Checkpoints written before issue 19 carry no id: they restore as before."""
    mem, clock = MemStore(), Clock(1_000_000.0)
    old = engine(mem, clock, "")  # no id: nothing is stamped

    async def run() -> None:
        await old.assign([("in", 0)])
        await old.process_batch("in", 0, [ev(0, "r1", "x")])
        await old.checkpoint_all()
        assert mem.load("t", 0).deployment is None  # type: ignore[union-attr]
        assert await engine(mem, clock, "green").assign([("in", 0)]) == {("in", 0): 1}

    asyncio.run(run())


def test_store_refuses_a_foreign_claim_before_writing_its_own() -> None:
    """The check runs before the claim, so a misconfigured deployment never fences the
    one that owns the partition."""
    log, clock = FakeLog(), Clock(1_000_000.0)

    async def run() -> None:
        await engine(store(log, "blue"), clock, "blue").assign([("in", 0)])  # claim, no head
        n = len(log.records)
        with pytest.raises(ForeignCheckpoint, match="ownership claim"):
            await engine(store(log, "green"), clock, "green").assign([("in", 0)])
        assert [r.key for r in log.records[n:]] == [b"__dpstream_marker__"]  # no claim

    asyncio.run(run())


def test_a_foreign_claim_racing_ours_is_refused() -> None:
    """Two deployments claim at the same moment: the one whose check ran before the
    other's claim landed still sees it after its own claim, and refuses."""
    log = FakeLog()

    async def run() -> None:
        green = store(log, "green")
        await green.refresh()  # green's check will see nothing
        log.append(claim_key("t", 0), CLAIM_MAGIC + b'{"deployment": "blue"}', None)
        with pytest.raises(ForeignCheckpoint, match="while this worker claimed it"):
            await green.claim("t", 0)

    asyncio.run(run())


def test_settings_deployment_id_defaults_to_the_group_and_takeover_is_comma_separated() -> None:
    s = Settings.from_env({"DPSTREAM_GROUP_ID": "green",
                           "DPSTREAM_TAKEOVER_FROM": "blue, ,blue-2"})
    assert s.deployment == "green" and s.takeover_from == ("blue", "blue-2")
    assert Settings.from_env({"DPSTREAM_GROUP_ID": "g", "DPSTREAM_DEPLOYMENT_ID": "prod"}
                             ).deployment == "prod"


# ---- zombie fencing ---------------------------------------------------------
def test_zombie_is_fenced_before_publishing_and_claimant_republishes_identically() -> None:
    log, clock = FakeLog(), Clock(1_000_000.0)
    a = engine(store(log, "d"), clock, "d")
    b = engine(store(log, "d"), clock, "d")

    async def run() -> None:
        await a.assign([("in", 0)])
        await a.process_batch("in", 0, [ev(0, "r1", "x")])
        clock.t += 0.5
        await a.on_timer()  # checkpoint + publish seq 0
        assert len(envelopes(a)) == 1
        # A "pauses"; B takes the partition over: claims, restores A's last checkpoint
        await b.assign([("in", 0)])
        await b.process_batch("in", 0, [ev(1, "r1", "y")])
        clock.t += 0.5
        await b.on_timer()  # seq 1 by B
        # A resumes with other data and its timer fires: its head comes after B's claim
        await a.process_batch("in", 0, [ev(1, "r1", "z"), ev(2, "r1", "z")])
        await a.on_timer()
        assert ("t", 0) not in a.parts and a.taken_over is None  # same deployment
        assert a.metrics.value("dpstream_fenced_total", topology="t") == 1
        assert len(envelopes(a)) == 1  # nothing after the claim
        # a reader now still restores B's checkpoint (A's records are ignored, the valid
        # records they were written over are still on the topic) ...
        b_state = b.parts[("t", 0)].shards["r1"].to_bytes()
        a_claim = next(r.offset for r in log.records if r.value and r.value[:4] == CLAIM_MAGIC)
        zombie_keys = {r.key for r in log.records if (OWNER_HEADER, str(a_claim).encode())
                       in r.headers and r.offset > b.store.owners["t/0"]}  # type: ignore
        committed = f"t/0@2:r1#{b.store.slots['t/0']['r1']}#0".encode()  # type: ignore
        assert committed in zombie_keys  # the zombie wrote over B's committed record
        late = store(log, "d")
        await late.refresh()
        got = late.load("t", 0)
        assert got is not None and got.next_offset == 2 and got.shards == [b_state]
        assert late.cache.fenced_records > 0
        # ... but once compaction removed those, it refuses rather than restore stale state
        lost = store(log.compacted(), "d")
        await lost.refresh()
        with pytest.raises(SerializationError, match="fenced writer"):
            lost.load("t", 0)
        # B reads A's zombie records back after its next head and repairs at once (two
        # more checkpoints: rewrite the shards, then tombstone the keys)
        clock.t += 0.5
        await b.on_timer()
        assert not b.store.cache.damaged  # type: ignore[attr-defined]
        assert not b.store.needs_repair("t", 0)  # type: ignore[attr-defined]
        # a third reader restores B's state, also after compaction (the zombie's keys were
        # all rewritten or tombstoned: none is left last)
        for view in (log, log.compacted()):
            c = store(view, "d")
            await c.refresh()
            cp = c.load("t", 0)
            assert cp is not None and cp.next_offset == 2 and cp.deployment == "d"
            assert cp.shards == [b.parts[("t", 0)].shards["r1"].to_bytes()]
        assert c.cache.fenced_records == 0

    asyncio.run(run())
    rels = [json.loads(v) for v in envelopes(a, b)]
    # B re-published A's last checkpointed release byte for byte (at least once)
    assert sorted(r["seq"] for r in rels) == [0, 0, 1, 2]
    report = duplicate_report(envelopes(a, b))
    assert report.conflicting == [] and report.identical == 1


def test_another_deployment_taking_over_stops_the_old_one() -> None:
    log, clock = FakeLog(), Clock(1_000_000.0)
    blue = engine(store(log, "blue"), clock, "blue")
    green = engine(store(log, "green", ("blue",)), clock, "green", ("blue",))

    async def run() -> None:
        await blue.assign([("in", 0)])
        await blue.process_batch("in", 0, [ev(0, "r1", "x")])
        await blue.checkpoint_all()
        await green.assign([("in", 0)])
        clock.t += 0.5
        await blue.on_timer()
        assert blue.taken_over is not None and "'green'" in str(blue.taken_over)
        await green.on_timer()

    asyncio.run(run())
    assert envelopes(blue) == [] and len(envelopes(green)) == 1


def test_cache_rule_records_of_an_older_owner_after_a_claim_are_fenced() -> None:
    cache = CheckpointCache()
    hk = head_key("t", 0)
    head = HEAD_MAGIC + bytes(26)
    zombie = HEAD_MAGIC + b"\x02\x00" + bytes(24)
    cache.feed(claim_key("t", 0), CLAIM_MAGIC + b'{"deployment": "d"}', None, 0)
    cache.feed(hk, head, [(OWNER_HEADER, b"0")], 1)
    assert cache.heads[hk][4] == 0
    cache.feed(claim_key("t", 0), CLAIM_MAGIC + b'{"deployment": "d"}', None, 2)
    cache.feed(hk, zombie, [(OWNER_HEADER, b"0")], 3)  # the zombie's head: ignored
    assert cache.heads[hk][4] == 0 and cache.damaged == {"t/0": {hk}}
    assert not cache.uncertain  # the valid head it was written over was seen
    # after compaction only the zombie's head is left: the restore is refused
    cache = CheckpointCache()
    cache.feed(claim_key("t", 0), CLAIM_MAGIC + b'{"deployment": "d"}', None, 2)
    cache.feed(hk, zombie, [(OWNER_HEADER, b"0")], 3)
    assert hk not in cache.heads and cache.uncertain == {"t/0": {hk}}
    with pytest.raises(SerializationError, match="fenced writer"):
        cache.get("t", 0)
    cache.feed(hk, head, [(OWNER_HEADER, b"2")], 4)  # the owner rewrites it
    assert hk in cache.heads and not cache.uncertain
    # records of an older claim *before* the newer claim stay valid (compaction may have
    # removed that older claim): no claim seen yet, or an older one
    fresh = CheckpointCache()
    fresh.feed(hk, head, [(OWNER_HEADER, b"7")], 8)
    assert hk in fresh.heads


# ---- second review of issue 19 ---------------------------------------------------------

@pytest.mark.parametrize("repair_on_restore", [True, False])
def test_compaction_keeps_the_claim_that_fences_a_zombie(repair_on_restore: bool,
                                                         monkeypatch) -> None:
    """The successor B is killed before it reads the zombie A's write back; C claims and
    restores, and is killed before its first checkpoint; compaction runs; D restores.
    With one compaction key for all claims, compaction dropped the claim that fenced A's
    head and D re-published A's withheld seq 1 (a conflicting release). Claims now have
    a key each (pruned by their owner only once nothing needs them), so D still sees A's
    records as fenced: if nobody repaired them, D refuses the restore (the valid records
    under them are compacted away: never a wrong state, never a second payload); and a
    restore that finds a fenced writer's records repairs them at once (C), so the refusal
    needs C to die within that commit."""
    log, clock = FakeLog(), Clock(1_000_000.0)
    a = engine(store(log, "d"), clock, "d")
    b = engine(store(log, "d"), clock, "d")

    async def run() -> tuple[Engine, Engine]:
        await a.assign([("in", 0)])
        await a.process_batch("in", 0, [ev(0, "r1", "x")])
        clock.t += 0.5
        await a.on_timer()
        await b.assign([("in", 0)])
        await b.process_batch("in", 0, [ev(1, "r1", "y")])
        clock.t += 0.5
        await b.on_timer()
        await a.process_batch("in", 0, [ev(1, "r1", "z"), ev(2, "r1", "z")])
        await a.on_timer()  # fenced: its seq 1 withheld, but its records are in the log
        assert ("t", 0) not in a.parts
        c = engine(store(log, "d"), clock, "d")
        if not repair_on_restore:  # C is killed before it repairs anything
            monkeypatch.setattr(c.store, "needs_repair", lambda *_: False)
        await c.assign([("in", 0)])
        d = engine(store(log.compacted(), "d"), clock, "d")
        if repair_on_restore:
            await d.assign([("in", 0)])
            clock.t += 0.5
            await d.on_timer()
        else:
            with pytest.raises(SerializationError, match="fenced writer"):
                await d.assign([("in", 0)])
        return c, d

    c, d = asyncio.run(run())
    report = duplicate_report(envelopes(a, b, c, d))
    assert report.conflicting == []
    if repair_on_restore:
        assert d.parts[("t", 0)].next_offset == 2  # B's state, not the zombie's


def test_a_racing_foreign_claim_is_found_among_many_other_claims() -> None:
    """The race check kept the last 64 claims of all partitions: a foreign claim of our
    partition followed by 64 others was forgotten. It now keeps 64 per partition."""
    from worker.engine.checkpoint import CLAIM_MAGIC, claim_key

    log = FakeLog()

    async def run() -> None:
        green = store(log, "green")
        await green.refresh()
        log.append(claim_key("t", 0), CLAIM_MAGIC + b'{"deployment": "blue"}', None)
        for p in range(1, 100):
            log.append(claim_key("t", p), CLAIM_MAGIC + b'{"deployment": "blue"}', None)
        await green.claim("t", 0)

    with pytest.raises(ForeignCheckpoint):
        asyncio.run(run())


def test_a_headerless_record_after_a_claim_is_fenced() -> None:
    """A worker of a version before claims writes no owner header; after a claim of its
    partition its records are a fenced writer's, not the owner's."""
    log, clock = FakeLog(), Clock(1_000_000.0)
    a = engine(store(log, "d"), clock, "d")

    async def run() -> None:
        await a.assign([("in", 0)])
        await a.process_batch("in", 0, [ev(0, "r1", "x")])
        clock.t += 0.5
        await a.on_timer()

    asyncio.run(run())
    head = [r for r in log.records if r.key == b"t/0"][-1]
    log.append(b"t/0", head.value, None)  # the same bytes, no owner header
    st = store(log, "d")
    asyncio.run(st.refresh())
    assert st.cache.fenced_records >= 1
