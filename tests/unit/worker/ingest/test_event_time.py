"""Event-time ticks (issue 8 item 3): a record's tick never depends on other records.

Pure tests of the engine (no broker). ``test_tick_log`` is a test mechanism that
logs the tick every event is applied at; the property test compares a stream with
and without one extra record, each read at its own arbitrary, load-dependent times
(delays far above the allowed lateness), cut into arbitrary batches, with
arbitrary timer schedules and end-of-log reports, and checks that every record
gets its own timestamp's tick, that no record is ever late (append times that do
not go backwards by more than the lateness: LogAppendTime), and that the extra
record changes nothing about any other record.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketches.errors import SpecError
from tests.support.engine import Clock, MemSink, MemStore
from tests.support.event_time import (
    EPOCH_TICKS,
    LATENESS_MS,
    LOG,
    T0_MS,
    TICK_MS,
    TOPO,
    topo,
)
from worker.config.topology import parse_topology
from worker.engine.engine import Engine

Event = tuple[str, int, int]  # (item, append timestamp ms, read time ms)
Step = tuple[str, Any]        # ("batch", [events]) or ("timer", time_ms)


def run(steps: Sequence[Step], time: str = "event") -> tuple[dict[str, int], set[str]]:
    """Run the engine over ``steps``; return ``({item: global tick}, {late items})``.

    At a timer the consumer reports the end of the log (``Engine.log_end``) only if it
    has read every record appended before that time (append time = the running
    maximum of the timestamps along the partition) and the step allows it.
    """
    LOG.clear()
    clock = Clock(T0_MS / 1000)
    eng = Engine([topo(time)], MemStore(), MemSink(), clock=clock)
    offset = 0
    appended: list[tuple[int, int]] = []  # (append time, read time) of every record
    for kind, arg in steps:
        if kind == "batch":
            for _, ts, read in arg:
                appended.append((max(ts, appended[-1][0]) if appended else ts, read))

    async def go() -> None:
        nonlocal offset
        await eng.assign([("in", 0)])
        for kind, arg in steps:
            if kind == "timer":
                t, report = arg if isinstance(arg, tuple) else (arg, True)
                clock.t = max(clock.t, t / 1000)
                now = int(clock.t * 1000)
                # at the end of the log: every record appended before now was processed
                if report == "force" or (report and all(i < offset for i, (a, _)
                                                        in enumerate(appended) if a < now)):
                    eng.log_end("in", 0, now)
                await eng.on_timer()
                continue
            clock.t = max(clock.t, max(r for _, _, r in arg) / 1000)
            recs = []
            for item, ts, _ in arg:
                recs.append((offset, b"r1", json.dumps({"r": "r1", "i": item}).encode(), ts))
                offset += 1
            await eng.process_batch("in", 0, recs)
        clock.t += 10.0  # everything read: every tick closes
        eng.log_end("in", 0, int(clock.t * 1000))
        await eng.on_timer()

    asyncio.run(go())
    base = (T0_MS // TICK_MS // EPOCH_TICKS) * EPOCH_TICKS
    ticks = {item: base + tick for item, tick in LOG}
    assert len(ticks) == len(LOG)  # every item once
    late = set()
    for t, _, v, *_ in eng.sink.sent:  # type: ignore[attr-defined]
        if t == "dlq":
            doc = json.loads(v)
            assert doc["reason"] == "late", doc
            import base64

            late.add(json.loads(base64.b64decode(doc["value_b64"]))["i"])
    return ticks, late


@st.composite
def streams(draw: Any) -> tuple[list[Event], int, Event]:
    """LogAppendTime-like records: append times non-decreasing along the partition, the
    timestamp up to 60 ms below it (clock skew, well within the 300 ms lateness); each
    read at an arbitrary later time (up to 3 s: a loaded worker or a backlog), read
    times non-decreasing along the partition. Plus one extra record and where it goes."""
    n = draw(st.integers(1, 25))
    appends = sorted(T0_MS + draw(st.integers(0, 6_000)) for _ in range(n + 1))
    k = draw(st.integers(0, n))
    events: list[Event] = []
    read = T0_MS
    for i, a in enumerate(appends):
        read = max(read, a + draw(st.integers(0, 3_000)))
        events.append(("extra" if i == k else f"e{len(events) - (i > k)}",
                       a - draw(st.integers(0, 60)), read))
    extra = events.pop(k)
    return events, k, extra


def batched(events: Sequence[Event], cuts: Sequence[bool], timers: Sequence[int],
            reports: Sequence[bool]) -> list[Step]:
    """Consecutive events sharing a read time form runs; ``cuts`` splits runs further;
    ``timers`` are timer calls (ms after T0) interleaved by time, each with an
    end-of-log report when ``reports`` allows it (and the log is read to its end)."""
    steps: list[Step] = []
    cur: list[Event] = []
    for j, e in enumerate(events):
        if cur and (cur[-1][2] != e[2] or cuts[j % len(cuts)]):
            steps.append(("batch", cur))
            cur = []
        cur.append(e)
    if cur:
        steps.append(("batch", cur))
    out: list[Step] = []
    pending = sorted(T0_MS + t for t in timers)
    rep = [reports[j % len(reports)] for j in range(len(pending))]
    for step in steps:
        t_batch = max(r for _, _, r in step[1])
        while pending and pending[0] <= t_batch:
            out.append(("timer", (pending.pop(0), rep.pop(0))))
        out.append(step)
    out += [("timer", (t, r)) for t, r in zip(pending, rep, strict=True)]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.lists(st.booleans(), min_size=1, max_size=8),
       st.lists(st.booleans(), min_size=1, max_size=8),
       st.lists(st.integers(0, 10_000), max_size=8), st.lists(st.integers(0, 10_000), max_size=8),
       st.lists(st.booleans(), min_size=1, max_size=4),
       st.lists(st.booleans(), min_size=1, max_size=4), st.integers(0, 2_000))
def test_adding_one_record_never_changes_another_records_tick(
        stream: tuple[list[Event], int, Event], cuts_a: list[bool], cuts_b: list[bool],
        timers_a: list[int], timers_b: list[int], reports_a: list[bool],
        reports_b: list[bool], slower: int) -> None:
    events, k, extra = stream
    # X' is read at its own, later times (the extra record's load slows the worker down)
    with_extra = [*events[:k], extra, *events[k:]]
    with_extra = [(i, ts, r + (slower if j >= k else 0)) for j, (i, ts, r)
                  in enumerate(with_extra)]
    ticks_a, late_a = run(batched(events, cuts_a, timers_a, reports_a))
    ticks_b, late_b = run(batched(with_extra, cuts_b, timers_b, reports_b))
    # no record is late, however late it is read; every tick is the record's own
    assert late_a == late_b == set()
    for evs, ticks in ((events, ticks_a), (with_extra, ticks_b)):
        assert ticks == {i: ts // TICK_MS for i, ts, _ in evs}
    # so the extra record changes nothing about any other record
    assert {i: t for i, t in ticks_b.items() if i != "extra"} == ticks_a


def test_processing_time_fails_the_property() -> None:
    """The witness the property test guards against: under processing time, one extra
    record in the batch delays the batch's processing (here: it is read later), and the
    other record moves to another tick."""
    a = [("batch", [("e0", T0_MS, T0_MS + 50)])]
    b = [("batch", [("e0", T0_MS, T0_MS + 50), ("extra", T0_MS + 10, T0_MS + 150)])]
    assert run(a, "processing")[0]["e0"] != run(b, "processing")[0]["e0"]
    assert run(a, "event")[0]["e0"] == run(b, "event")[0]["e0"] == T0_MS // TICK_MS


def test_late_records_are_dead_lettered_with_reason_late() -> None:
    """Late only when the record really violates the model: its timestamp is more than the
    lateness behind one read before it (CreateTime, clock skew), or behind the time the
    partition was read to its end. Reading it late (load) alone never makes it late."""
    ticks, late = run([("batch", [("on_time", T0_MS, T0_MS + 250)]),
                       ("batch", [("read_late", T0_MS + 10, T0_MS + 5_000)]),
                       ("batch", [("newer", T0_MS + 1_000, T0_MS + 5_000)]),
                       ("batch", [("behind", T0_MS + 20, T0_MS + 5_000)])])
    assert ticks == {"on_time": T0_MS // TICK_MS, "read_late": T0_MS // TICK_MS,
                     "newer": (T0_MS + 1_000) // TICK_MS} and late == {"behind"}
    ticks, late = run([("batch", [("a", T0_MS, T0_MS + 50)]),
                       ("timer", (T0_MS + 450, "force")),  # "read to the end" at T0 + 450
                       ("batch", [("appended_before", T0_MS + 20, T0_MS + 460)])])
    assert ticks == {"a": T0_MS // TICK_MS} and late == {"appended_before"}


def test_records_waiting_for_the_watermark_survive_a_restart() -> None:
    """A checkpoint taken while records wait resumes at the first waiting offset and skips
    the ones already applied above it (nothing lost, nothing counted twice)."""
    LOG.clear()
    store, clock = MemStore(), Clock(T0_MS / 1000)
    t = topo()
    rec = [(0, b"r1", b'{"r": "r1", "i": "a"}', T0_MS + 300),   # waits (tick ahead)
           (1, b"r1", b'{"r": "r1", "i": "b"}', T0_MS - 300)]   # open tick: applied now
    e1 = Engine([t], store, MemSink(), clock=clock)

    async def first() -> None:
        await e1.assign([("in", 0)])
        await e1.process_batch("in", 0, rec)
        await e1.checkpoint_all()

    asyncio.run(first())
    assert [i for i, _ in LOG] == ["b"]
    cp = store.load("et", 0)
    assert cp is not None and (cp.next_offset, cp.done) == (0, [1])
    e2 = Engine([t], store, MemSink(), clock=clock)

    async def second() -> dict:
        offsets = await e2.assign([("in", 0)])
        await e2.process_batch("in", 0, rec)  # re-read from offset 0: 'b' is skipped
        clock.t += 1.0
        e2.log_end("in", 0, e2.now_ms())  # read to the end of the log
        await e2.on_timer()
        return offsets

    assert asyncio.run(second()) == {("in", 0): None}  # offset 0: from the beginning
    assert sorted(i for i, _ in LOG) == ["a", "b"]
    assert dict(LOG)["a"] == (T0_MS + 300) // TICK_MS - (T0_MS // TICK_MS // EPOCH_TICKS
                                                          * EPOCH_TICKS)


def test_event_time_is_the_production_default_and_processing_time_is_refused() -> None:
    prod = TOPO.replace("name: et", "name: et\nproduction: true\nshards: {allowed: [r1]}") \
        .replace("noise: {kind: zero, allow_insecure_noise: true}", "noise: {kind: secure}")
    assert parse_topology(prod.replace("time: TIME, ", "")).privacy.time == "event"
    assert parse_topology(TOPO.replace("time: TIME, ", "")).privacy.time == "processing"
    with pytest.raises(SpecError, match=r"privacy\.time"):
        parse_topology(prod.replace("TIME", "processing"))
    with pytest.raises(SpecError, match=r"privacy\.time"):
        parse_topology(TOPO.replace("TIME", "event").replace(
            "epoch_ticks: 10000", "epoch_events: 10, relation: replace, clock: arrival"))


def test_timestamp_type_check_refuses_create_time_inputs_in_production() -> None:
    from worker.ingest.event_time import check_timestamp_types, topic_configs

    prod = parse_topology(TOPO.replace("name: et", "name: et\nproduction: true\n"
                                       "shards: {allowed: [r1]}").replace(
        "noise: {kind: zero, allow_insecure_noise: true}", "noise: {kind: secure}")
        .replace("TIME", "event"))
    assert topic_configs(prod) == ({"message.timestamp.type": "LogAppendTime"},
                                   {"message.timestamp.type": "CreateTime"})
    with pytest.raises(SpecError, match="LogAppendTime"):
        check_timestamp_types([prod], {"in": "CreateTime", "out": "CreateTime"})
    with pytest.raises(SpecError, match=r"release\.topic"):
        check_timestamp_types([prod], {"in": "LogAppendTime", "out": "LogAppendTime"})
    check_timestamp_types([prod], {"in": "LogAppendTime", "out": "CreateTime"})
    check_timestamp_types([prod], {"in": None, "out": None})  # not reported: warnings only
    check_timestamp_types([topo()], {"in": "CreateTime", "out": "CreateTime"})  # warning


def test_a_restart_resumes_the_watermark_so_the_backlog_is_not_late() -> None:
    """Records appended while the worker was down (10 s >> lateness) are read on time,
    however slowly: the restored watermark restarts at the checkpointed one and moves only
    as the backlog is read (read here one record per 2 s, far behind the wall clock)."""
    LOG.clear()
    store, clock = MemStore(), Clock(T0_MS / 1000)
    t = topo()
    e1 = Engine([t], store, MemSink(), clock=clock)

    async def first() -> None:
        await e1.assign([("in", 0)])
        await e1.process_batch("in", 0, [(0, b"r1", b'{"r": "r1", "i": "a"}', T0_MS - 100)])
        clock.t += 0.3
        e1.log_end("in", 0, e1.now_ms())
        await e1.on_timer()  # 'a' applied (its tick reached by the watermark)
        await e1.checkpoint_all()

    asyncio.run(first())
    clock.t += 10.0  # down for 10 s
    backlog = [(k, b"r1", json.dumps({"r": "r1", "i": f"b{k}"}).encode(), T0_MS + 1000 * k)
               for k in range(1, 10)]
    e2 = Engine([t], store, MemSink(), clock=clock)

    async def second() -> None:
        await e2.assign([("in", 0)])
        for rec in backlog:  # a slow reader: the backlog grows faster than it is read
            clock.t += 2.0
            await e2.process_batch("in", 0, [rec])
            await e2.on_timer()
        e2.log_end("in", 0, e2.now_ms())  # read to the end
        await e2.on_timer()

    asyncio.run(second())
    late = [v for tp, _, v, *_ in e2.sink.sent if tp == "dlq"]  # type: ignore[attr-defined]
    assert late == []
    base = T0_MS // TICK_MS // EPOCH_TICKS * EPOCH_TICKS
    assert dict(LOG) == {"a": (T0_MS - 100) // TICK_MS - base,
                         **{f"b{k}": (T0_MS + 1000 * k) // TICK_MS - base for k in range(1, 10)}}
    st = e2.parts[("et", 0)].shards["r1"]
    assert st.rounds == (int(clock.t * 1000) - LATENESS_MS) // TICK_MS - base  # caught up


def test_switching_to_event_time_never_reopens_a_closed_tick() -> None:
    """A checkpoint without a watermark (processing time, or written before event time):
    the restored watermark starts at the shards' closed ticks, so a record of an already
    closed tick is late, never moved to the open tick."""
    from worker.engine.checkpoint import decode_checkpoint, encode_checkpoint

    LOG.clear()
    store, clock = MemStore(), Clock(T0_MS / 1000)
    e1 = Engine([topo("processing")], store, MemSink(), clock=clock)

    async def first() -> None:
        await e1.assign([("in", 0)])
        await e1.process_batch("in", 0, [(0, b"r1", b'{"r": "r1", "i": "a"}', T0_MS)])
        clock.t += 0.05
        await e1.on_timer()
        await e1.checkpoint_all()

    asyncio.run(first())
    cp = decode_checkpoint(store.data[("et", 0)])
    assert cp.watermark is None
    blob = cp.shards[0]  # pretend the checkpoint predates `time` (version-1 state)
    from tests.support.checkpoints import as_version_1 as _as_version_1

    cp.shards = [_as_version_1(blob)]
    store.data[("et", 0)] = encode_checkpoint(cp)
    e2 = Engine([topo("event")], store, MemSink(), clock=clock)

    async def second() -> None:
        await e2.assign([("in", 0)])
        await e2.process_batch("in", 0, [(1, b"r1", b'{"r": "r1", "i": "b"}', T0_MS - 100)])
        clock.t += 1.0
        await e2.on_timer()

    asyncio.run(second())
    assert "b" not in dict(LOG)
    assert [json.loads(v)["reason"] for t, _, v, *_ in e2.sink.sent  # type: ignore[attr-defined]
            if t == "dlq"] == ["late"]


def test_create_time_records_fail_production_and_warn_once_otherwise(caplog) -> None:
    """A broker that reports LogAppendTime but keeps producer timestamps (Tansu)."""
    from worker.ingest.event_time import TimestampTypeGuard

    prod = parse_topology(TOPO.replace("name: et", "name: et\nproduction: true\n"
                                       "shards: {allowed: [r1]}").replace(
        "noise: {kind: zero, allow_insecure_noise: true}", "noise: {kind: secure}")
        .replace("TIME", "event"))
    with pytest.raises(SpecError, match="CreateTime"):
        TimestampTypeGuard([prod]).check("in", 0)
    TimestampTypeGuard([prod]).check("in", 1)
    guard = TimestampTypeGuard([topo()])
    for _ in range(3):
        guard.check("in", 0)
    assert sum("CreateTime" in r.message for r in caplog.records) == 1
    TimestampTypeGuard([topo("processing")]).check("in", 0)  # processing time: no check


def test_create_time_records_make_non_production_releases_not_private() -> None:
    """Issue 19 item 5: with producer CreateTime one record stamped just inside the future
    bound made about 8 later records late (25/25 trials), yet releases said private:
    true. The guard's reason now reaches the running epoch's block (checkpointed) and
    every later epoch's, before any record of the revealing fetch is applied."""
    from worker.ingest.event_time import TimestampTypeGuard

    t = parse_topology(TOPO.replace("TIME", "event").replace(
        "noise: {kind: zero, allow_insecure_noise: true}", "noise: {kind: secure}"))
    clock = Clock(T0_MS / 1000)
    sink = MemSink()
    eng = Engine([t], MemStore(), sink, clock=clock)
    guard = TimestampTypeGuard([t])

    async def go() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [(0, b"r1", b'{"r": "r1", "i": "a"}', T0_MS)])
        assert guard.check("in", 1) is None  # LogAppendTime: nothing to say
        reason = guard.check("in", 0)
        assert reason is not None and "CreateTime" in reason
        eng.mark_input_not_private("in", reason)
        await eng.process_batch("in", 0, [(1, b"r1", b'{"r": "r1", "i": "b"}', T0_MS + 50)])
        clock.t += 10.0
        eng.log_end("in", 0, int(clock.t * 1000))
        await eng.on_timer()
        # a new epoch (far later) keeps the reason
        clock.t += EPOCH_TICKS * TICK_MS / 1000
        eng.log_end("in", 0, int(clock.t * 1000))
        await eng.on_timer()

    asyncio.run(go())
    docs = [json.loads(v) for topic, _, v, _ in sink.sent if topic == "out"]
    assert docs and all(d["private"] is False for d in docs)
    assert all("CreateTime" in d["not_private_reason"] for d in docs)
    assert len({d["epoch"] for d in docs}) >= 2

def test_a_record_stamped_ahead_of_the_clock_never_moves_the_watermark_past_now_minus_lateness(
) -> None:
    """The watermark never passes ``now - allowed_lateness_ms`` (module docstring, (a)):
    a record stamped ahead of the wall clock (a broker clock ahead of ours, within the
    ``lateness + tick`` window it is held for) must not close ticks early. Without the
    cap the issue's reproduction gave a watermark of 10,050 instead of 9,750 and turned
    on-time records into ``late`` dead letters (issue 24 survivor). Every path that
    moves the watermark: progress between batches (``watermark_ms``), progress inside a
    batch (``add``), the end of the log (``reached_end``), and a wall clock stepping
    back (the watermark never moves back)."""
    from worker.ingest.event_time import EventTimeQueue

    rec = lambda off, ts: (off, b"k", b"{}", ts)  # noqa: E731
    # between batches: the read stamp 10,300 is capped at 10,000 - 250
    q = EventTimeQueue(tick_ms=100, lateness_ms=250)
    q.resume(None, 10_000)
    late, future = q.add([rec(0, 10_300)], 10_000)  # 300 ms ahead: held, not "future"
    assert (late, future) == ([], []) and len(q) == 1
    assert q.watermark_ms(10_000) == 9_750
    assert q.add([rec(1, 9_800)], 10_000)[0] == []  # tick 98 is still open at 10,000
    # inside one batch (a restored partition catching up from its checkpointed 9,000):
    # the stamp 10,300 moves the watermark to 9,750, not 10,050, so the next record of
    # the batch (tick 99) is on time
    r = EventTimeQueue(tick_ms=100, lateness_ms=250)
    r.resume(9_000, 10_000)
    # 9,760 is in tick 97, still open at a watermark of 9,750 (inside tick 97)
    late, _ = r.add([rec(0, 10_300), rec(1, 9_900), rec(2, 9_760)], 10_000)
    assert late == [] and r.watermark_ms(10_000) == 9_750
    # the wall clock steps back 200 ms: a newer stamp never moves the watermark back
    b = EventTimeQueue(tick_ms=100, lateness_ms=250)
    b.resume(None, 10_000)
    assert b.add([rec(0, 10_100)], 9_800) == ([], [])
    assert b.watermark_ms(9_800) == 9_750
    # the log's end seen at a time ahead of the clock
    e = EventTimeQueue(tick_ms=100, lateness_ms=250)
    e.resume(None, 10_000)
    e.reached_end(10_400)
    assert e.watermark_ms(10_000) == 9_750
    assert e.add([rec(0, 9_760)], 10_000)[0] == []


# ---------------------------------------------------------------- issue 24: mutation score
def _rec(off: int, ts: int) -> tuple[int, bytes, bytes, int]:
    return (off, b"k", b"{}", ts)


def test_queue_watermark_before_resume_ticks_and_due_records_by_tick() -> None:
    """The queue's schedule in detail: a queue used before ``resume`` starts at
    ``now - lateness``; ``watermark_tick`` is the integer tick of the watermark; ``due``
    releases exactly the records of ticks up to it, the records of one tick as one group
    in offset order, and never a record of the first open tick (whatever its offset)."""
    from worker.ingest.event_time import EventTimeQueue

    q = EventTimeQueue(tick_ms=100, lateness_ms=250)
    assert q.watermark_ms(10_000) == 9_750 and q.watermark == 9_750
    q2 = EventTimeQueue(tick_ms=100, lateness_ms=250)
    q2.resume(9_850, 10_200)
    tick = q2.watermark_tick(10_200)
    assert tick == 98 and isinstance(tick, int)
    # offset 0 of tick 99 (open) and later records of ticks 98 (closed) and 97
    late, future = q2.add([_rec(0, 9_950), _rec(1, 9_870), _rec(2, 9_880), _rec(3, 9_890)],
                          10_200)
    assert (late, future) == ([], [])
    due = q2.due(10_200)
    assert [(g, [r[0] for r in rs]) for g, rs in due] == [(98, [1, 2, 3])]
    assert len(q2) == 1 and q2.resume_offset(high=4) == 0


def test_offsets_already_done_are_skipped_without_dropping_the_rest_of_the_batch() -> None:
    """After a restore, ``done`` offsets (applied before the checkpoint) are skipped one by
    one: the records after one in the same batch are still judged and held."""
    from worker.ingest.event_time import EventTimeQueue

    q = EventTimeQueue(tick_ms=100, lateness_ms=250)
    q.resume(9_750, 10_000)
    q.done = {5}
    assert q.add([_rec(4, 9_800), _rec(5, 9_810), _rec(6, 9_820)], 10_000) == ([], [])
    assert len(q) == 2 and q.resume_offset(high=7) == 4


def test_a_restored_done_offset_equal_to_the_next_resume_offset_is_kept() -> None:
    """``covered_above(resume)`` keeps the done offsets ``>= resume``, the one equal to it
    included. After a restore the done offsets lie *above* the restored offset: restored at
    offset 10 with ``done={11}`` (11 already counted), record 10 is read and dead-lettered
    (late), so the next checkpoint resumes at 11 and must still list 11 as done, else a
    second restore reads record 11 again and counts it twice (mutant ``o > resume``)."""
    from worker.ingest.event_time import EventTimeQueue

    q = EventTimeQueue(tick_ms=100, lateness_ms=250)
    q.resume(10_000, now_ms=10_300)
    q.done = {11}
    late, future = q.add([_rec(10, 9_000)], now_ms=10_300)
    assert [r[0] for r in late] == [10] and not future
    resume = q.resume_offset(high=11)
    assert resume == 11
    assert q.covered_above(resume) == [11]
    # a restore from (resume, done) skips record 11
    r = EventTimeQueue(tick_ms=100, lateness_ms=250)
    r.resume(q.watermark, now_ms=10_300)
    r.done = set(q.covered_above(resume))
    assert r.add([_rec(11, 10_200)], now_ms=10_300) == ([], []) and len(r) == 0


def test_an_older_stamp_read_later_never_moves_read_progress_back() -> None:
    """Read progress (a) is the newest stamp read: a batch holding only older stamps (a
    clock step of the producer's broker) must not lower it, or the watermark would stall
    while records keep arriving."""
    from worker.ingest.event_time import EventTimeQueue

    q = EventTimeQueue(tick_ms=100, lateness_ms=250)
    q.resume(9_000, 10_200)
    q.add([_rec(0, 10_300)], 10_200)
    assert q.watermark_ms(10_200) == 9_950  # capped by the clock
    q.add([_rec(1, 10_100)], 10_200)  # older, still on time
    assert q.watermark_ms(10_600) == 10_050  # from 10,300, not 10,100


def test_held_records_failed_names_the_cause_and_keeps_the_records() -> None:
    """The poison guard's message names the failing cause and suspects exactly the held
    records (not the current batch)."""
    from worker.errors import HeldRecordsFailed

    recs = [_rec(3, 1), _rec(4, 2)]
    err = HeldRecordsFailed("in", 2, recs, ValueError("bad item"))
    assert str(err) == "ValueError: bad item"
    assert (err.topic, err.partition, err.records) == ("in", 2, recs)


def test_timestamp_checks_apply_to_event_time_inputs_only_input_first(caplog) -> None:
    """Processing-time (tick clock) topologies do not need LogAppendTime inputs: neither the
    start-up check, the per-batch guard nor the declared topic config asks for it. For
    event time, the input topic is checked first, and an unreported topic does not stop
    the checks of the next one."""
    from worker.ingest.event_time import TimestampTypeGuard, timestamp_problems, topic_configs

    proc = topo("processing")
    assert timestamp_problems([proc], {"in": "CreateTime", "out": "CreateTime"}) == ([], [])
    assert topic_configs(proc) == ({}, {"message.timestamp.type": "CreateTime"})
    TimestampTypeGuard([proc]).check("in", 0)  # nothing to check: no warning, no error
    assert not [r for r in caplog.records if "CreateTime" in r.getMessage()]
    ev = topo()
    errors, warnings = timestamp_problems([ev], {"in": "CreateTime", "out": "LogAppendTime"})
    assert errors == [] and [w.split(":")[1].strip() for w in warnings] == [
        "input.topic", "release.topic"]
    errors, warnings = timestamp_problems([ev], {"in": None, "out": "LogAppendTime"})
    assert len(warnings) == 2 and "does not report" in warnings[0]
    assert "release.topic" in warnings[1]


def test_the_guard_checks_every_event_time_input_topic_and_production_wins(caplog) -> None:
    """Two topologies on one input topic: the topic is production if either is."""
    from worker.ingest.event_time import TimestampTypeGuard

    prod = parse_topology(TOPO.replace("name: et", "name: et\nproduction: true\n"
                                       "shards: {allowed: [r1]}").replace(
        "noise: {kind: zero, allow_insecure_noise: true}", "noise: {kind: secure}")
        .replace("TIME", "event"))
    for order in ([prod, topo()], [topo(), prod]):
        with pytest.raises(SpecError, match="CreateTime"):
            TimestampTypeGuard(order).check("in", 0)


class _Admin:
    """``describe_configs`` in aiokafka's shape: responses with ``resources``, each
    ``(error_code, error_message, type, name, [(key, value, ...), ...])``."""

    def __init__(self, types: dict[str, str | None], fail: frozenset[str] = frozenset()
                 ) -> None:
        self.types, self.fail = types, fail
        self.asked: list[str] = []

    async def describe_configs(self, resources: list[Any]) -> list[Any]:
        from aiokafka.admin.config_resource import ConfigResourceType

        (res,) = resources
        assert res.resource_type is ConfigResourceType.TOPIC
        name = res.name
        self.asked.append(name)
        if name in self.fail:
            raise RuntimeError("DescribeConfigs not supported")
        entries = [("cleanup.policy", "delete", False)]
        if self.types.get(name) is not None:
            entries.append(("message.timestamp.type", self.types[name], False))
        resp = type("Resp", (), {"resources": [(0, "", 2, name, entries)]})()
        return [resp]


def test_describe_timestamp_types_reads_each_topic_and_survives_a_failing_one() -> None:
    """The broker's reported ``message.timestamp.type`` per topic (None when not reported
    or when describing fails), every topic asked once, in order."""
    from worker.kafka.admin import describe_timestamp_types

    admin = _Admin({"in": "LogAppendTime", "out": "CreateTime", "quiet": None},
                   fail=frozenset({"bad"}))
    got = asyncio.run(describe_timestamp_types(admin, ["out", "in", "bad", "quiet", "in",
                                                       "zz"]))
    assert got == {"bad": None, "in": "LogAppendTime", "out": "CreateTime", "quiet": None,
                   "zz": None}
    assert admin.asked == ["bad", "in", "out", "quiet", "zz"]
