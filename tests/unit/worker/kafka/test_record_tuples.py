"""worker/kafka/record_tuples.py against aiokafka's own PartitionRecords, record for record (pure).

Both read the same fetch-response bytes (built with aiokafka's batch builders);
every test compares what the worker's tuple path hands over, and where the
fetch position ends up, with aiokafka's ``ConsumerRecord`` path.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

import aiokafka.consumer.fetcher as fetcher
import pytest
from aiokafka.errors import CorruptRecordException
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.record_batches import batch, corrupt
from worker.kafka.record_tuples import (
    RecordTuples,
    TupleMode,
    _partition_records,
    input_consumer_options,
    install,
)

TP = TopicPartition("in", 3)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def _original() -> Any:
    from worker.kafka import record_tuples
    return record_tuples._ORIGINAL




def legacy(base: int, n: int, magic: int = 1) -> bytes:
    """A v0/v1 message set (CreateTime for v1)."""
    out = b""
    for i in range(n):
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
        b.append(0, timestamp=1_700_000_000_000 + i if magic else None, key=None,
                 value=b"v%d" % (base + i))
        buf = bytearray(b.build())
        struct.pack_into(">q", buf, 0, base + i)
        out += bytes(buf)
    return out


def both(data: bytes, fetch_offset: int = 0, aborted: Any = None,
         isolation: int = READ_UNCOMMITTED, limit: int | None = None) -> tuple[Any, Any]:
    """``(aiokafka records as tuples, next offset)`` and ``(tuples, next offset, mode)``."""
    ref = _original()(TP, MemoryRecords(data), aborted, fetch_offset, None, None, True,
                      isolation)
    mode = TupleMode()
    new = RecordTuples(TP, MemoryRecords(data), aborted, fetch_offset, mode, True, isolation)
    got_ref = [(r.offset, r.key, r.value, r.timestamp) for r in itertools.islice(ref, limit)]
    got_new = list(itertools.islice(iter(new), limit))
    return (got_ref, ref.next_fetch_offset), (got_new, new.next_fetch_offset, mode)


def test_plain_batches_match_aiokafka_record_for_record() -> None:
    data = batch(0, 7) + batch(7, 500) + batch(507, 1)
    (ref, ref_next), (new, new_next, mode) = both(data)
    assert new == ref and len(new) == 508 and new_next == ref_next == 508
    assert new[0] == (0, b"k0", b'{"x": 1}0', 1_700_000_000_000)
    assert mode.take_timestamp_types() == [("in", 0)]  # CreateTime noted


def test_fetch_offset_inside_a_batch_skips_the_records_before_it() -> None:
    """The broker returns the whole batch holding the fetch offset."""
    data = batch(100, 50) + batch(150, 10)
    (ref, ref_next), (new, new_next, _) = both(data, fetch_offset=123)
    assert new == ref and new[0][0] == 123 and new_next == ref_next == 160


@pytest.mark.parametrize("limit", [1, 3, 7, 8, 499, 507])
def test_stopping_inside_a_batch_leaves_the_position_after_the_last_record(limit: int) -> None:
    """``getmany(max_records=...)`` stops mid-batch; the next fetch must start right after."""
    data = batch(0, 7) + batch(7, 500)
    (ref, ref_next), (new, new_next, _) = both(data, limit=limit)
    assert new == ref and new_next == ref_next == limit


def test_getall_with_max_records_through_aiokafka_fetch_result() -> None:
    """aiokafka's FetchResult drives the object exactly as it drives its own."""

    class State:
        paused, position = False, 0

        def consumed_to(self, offset: int) -> None:
            self.position = offset

    class Assignment:
        active = True

        def __init__(self) -> None:
            self.state = State()

        def state_value(self, tp: Any) -> State:
            return self.state

    install()  # FetchResult.getall takes RecordTuples in one slice

    def off(r: Any) -> int:
        return r[0] if isinstance(r, tuple) else r.offset

    for maker in (lambda d: RecordTuples(TP, MemoryRecords(d), None, 0, TupleMode(), True, 0),
                  lambda d: _original()(TP, MemoryRecords(d), None, 0, None, None, True, 0)):
        data = batch(0, 10) + batch(10, 10)
        a = Assignment()
        res = fetcher.FetchResult(TP, assignment=a, partition_records=maker(data), backoff=0)
        first = res.getall(max_records=13)
        assert [off(r) for r in first] == list(range(13)) and a.state.position == 13
        rest = res.getall(max_records=7)  # exactly what is left: still "has more"
        assert [off(r) for r in rest] == list(range(13, 20)) and a.state.position == 20
        assert res.has_more() and res.getall(max_records=7) == [] and not res.has_more()
        res = fetcher.FetchResult(TP, assignment=Assignment(), partition_records=maker(data),
                                  backoff=0)
        assert len(res.getall()) == 20 and not res.has_more()
        a = Assignment()
        a.state.position = 3  # a seek moved the position: the buffered fetch is dropped
        res = fetcher.FetchResult(TP, assignment=a, partition_records=maker(data), backoff=0)
        assert res.getall(max_records=5) == [] and not res.has_more()


def test_log_append_time_batches_are_not_noted_and_carry_the_broker_time() -> None:
    data = batch(0, 5, log_append=True) + batch(5, 5, log_append=True)
    (ref, _), (new, _, mode) = both(data)
    assert new == ref and mode.take_timestamp_types() == []
    # LogAppendTime: every record of a batch carries the batch's max timestamp
    assert {r[3] for r in new[:5]} == {1_700_000_000_004}


def test_a_create_time_batch_after_log_append_ones_is_noted() -> None:
    """Every batch's type counts, not only the first record of a fetched list."""
    data = batch(0, 5, log_append=True) + batch(5, 5)
    (_, _), (new, _, mode) = both(data)
    assert len(new) == 10 and mode.take_timestamp_types() == [("in", 0)]
    assert mode.take_timestamp_types() == []  # taken


def test_control_batches_are_skipped_and_move_the_position() -> None:
    commit = struct.pack(">hh", 0, 1)
    data = batch(0, 3, producer_id=9, transactional=True) + \
        batch(3, 1, producer_id=9, transactional=True, control=commit) + batch(4, 2)
    for iso in (READ_UNCOMMITTED, READ_COMMITTED):
        (ref, ref_next), (new, new_next, _) = both(data, isolation=iso)
        assert new == ref and [r[0] for r in new] == [0, 1, 2, 4, 5]
        assert new_next == ref_next == 6
    only_control = batch(0, 1, producer_id=9, transactional=True, control=commit)
    (ref, ref_next), (new, new_next, _) = both(only_control)
    assert new == ref == [] and new_next == ref_next == 1


def test_read_committed_skips_aborted_transactions_like_aiokafka() -> None:
    abort = struct.pack(">hh", 0, 0)
    data = (batch(0, 2, producer_id=5, transactional=True)  # aborted below
            + batch(2, 2, producer_id=6, transactional=True)  # committed
            + batch(4, 1, producer_id=5, transactional=True, control=abort)
            + batch(5, 2, producer_id=5, transactional=True))  # a new transaction
    aborted = [(5, 0)]
    (ref, ref_next), (new, new_next, _) = both(data, aborted=aborted, isolation=READ_COMMITTED)
    assert new == ref and [r[0] for r in new] == [2, 3, 5, 6] and new_next == ref_next == 7
    (ref, _), (new, _, _) = both(data, aborted=aborted, isolation=READ_UNCOMMITTED)
    assert new == ref and [r[0] for r in new] == [0, 1, 2, 3, 5, 6]


def _input_isolation(env: dict[str, str]) -> int:
    """The isolation level aiokafka's fetcher gets from the worker's input consumer."""
    from aiokafka import AIOKafkaConsumer

    from worker.config.settings import Settings
    from worker.kafka.client_config import aiokafka_kwargs

    async def build() -> int:
        consumer = AIOKafkaConsumer(**aiokafka_kwargs(Settings.from_env(env), "input", {
            "group_id": "g", "value_deserializer": TupleMode()}))
        level = consumer._isolation_level
        await consumer.stop()
        # the consumer's Fetcher turns the string into aiokafka's constant, as here
        return {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}[level]

    return asyncio.run(build())


def test_the_input_consumer_is_read_committed_and_drops_an_aborted_batch() -> None:
    """Issue 22 item 2: aborted transactions were counted (the input consumer read
    read_uncommitted). The embedded broker does not abort, so: the consumer the worker
    builds passes READ_COMMITTED to the fetcher, and at that level both fetch paths drop
    the aborted batch (abort marker + aborted-transactions list)."""
    level = _input_isolation({})
    assert level == READ_COMMITTED
    abort = struct.pack(">hh", 0, 0)
    data = (batch(0, 3, producer_id=9, transactional=True)  # aborted
            + batch(3, 1, producer_id=9, transactional=True, control=abort)
            + batch(4, 2))  # plain records
    fast = list(iter(_partition_records(TP, MemoryRecords(data), [(9, 0)], 0, None,
                                        TupleMode(), True, level)))
    public = list(_original()(TP, MemoryRecords(data), [(9, 0)], 0, None, None, True, level))
    assert [r[0] for r in fast] == [r.offset for r in public] == [4, 5]
    assert _input_isolation({"DPSTREAM_ISOLATION_LEVEL": "read_uncommitted"}) == \
        READ_UNCOMMITTED


@pytest.mark.parametrize("codec", [1, 2, 3, 4])  # gzip, snappy, lz4, zstd
def test_compressed_batches_match(codec: int) -> None:
    """Flow exporters compress; cramjam (aiokafka's extras) provides snappy, lz4, zstd."""
    data = batch(0, 40, compression=codec) + batch(40, 3, compression=codec)
    (ref, ref_next), (new, new_next, _) = both(data, fetch_offset=5)
    assert new == ref and len(new) == 38 and new_next == ref_next == 43




def _unparsable(base: int, n: int) -> bytes:
    """A batch whose CRC is right but whose first record's length varint is garbage."""
    buf = bytearray(batch(base, n))
    buf[61] = 0x7F  # record length (zig-zag varint) far beyond the batch
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_aiokafka_raises_out_of_getmany_on_a_corrupt_batch() -> None:
    """What the worker used to get: an exception that failed its consume task."""
    data = batch(0, 5) + corrupt(batch(5, 5))
    ref = _original()(TP, MemoryRecords(data), None, 0, None, None, True, 0)
    with pytest.raises(CorruptRecordException):
        list(ref)


@pytest.mark.parametrize("bad", [corrupt(batch(5, 5)), _unparsable(5, 5)],
                         ids=["crc", "unparsable"])
def test_a_failing_batch_is_read_again_then_skipped(bad: bytes) -> None:
    """No exception out of the fetch: the records before it are handed over, the fetch
    stops before it (position unchanged, so the next fetch reads it again), and after
    ``attempts`` failures it is skipped and reported once."""
    mode = TupleMode(attempts=3)
    first = RecordTuples(TP, MemoryRecords(batch(0, 5) + bad + batch(10, 5)), None, 0,
                         mode, True, 0)
    assert [r[0] for r in first] == [0, 1, 2, 3, 4] and first.next_fetch_offset == 5
    again = RecordTuples(TP, MemoryRecords(bad + batch(10, 5)), None, 5, mode, True, 0)
    assert list(again) == [] and again.next_fetch_offset == 5
    assert mode.take_skipped() == []
    third = RecordTuples(TP, MemoryRecords(bad + batch(10, 5)), None, 5, mode, True, 0)
    assert [r[0] for r in third] == [10, 11, 12, 13, 14] and third.next_fetch_offset == 15
    (skipped,) = mode.take_skipped()
    assert (skipped.topic, skipped.partition, skipped.first, skipped.end) == ("in", 3, 5, 10)
    assert "Error" in skipped.detail or "Invalid" in skipped.detail
    assert mode.take_skipped() == [] and mode.failures == {}


def test_a_transient_failure_heals_without_a_skip() -> None:
    mode = TupleMode(attempts=3)
    broken = RecordTuples(TP, MemoryRecords(corrupt(batch(0, 5))), None, 0, mode, True, 0)
    assert list(broken) == [] and broken.next_fetch_offset == 0
    fine = RecordTuples(TP, MemoryRecords(batch(0, 5)), None, 0, mode, True, 0)
    assert [r[0] for r in fine] == [0, 1, 2, 3, 4]
    assert mode.take_skipped() == []


def test_a_skip_never_spans_more_than_max_skip_offsets() -> None:
    """A corrupt header can claim any last offset: the skip is capped."""
    from worker.kafka.record_tuples import MAX_SKIP

    buf = bytearray(batch(5, 5))
    struct.pack_into(">i", buf, 23, MAX_SKIP + 100)  # lastOffsetDelta (inside the CRC)
    mode = TupleMode(attempts=1)
    rt = RecordTuples(TP, MemoryRecords(bytes(buf)), None, 5, mode, True, 0)
    assert list(rt) == [] and rt.next_fetch_offset == 6
    assert [(b.first, b.end) for b in mode.take_skipped()] == [(5, 6)]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_match_and_note_their_type(magic: int) -> None:
    data = legacy(10, 4, magic=magic)
    (ref, ref_next), (new, new_next, mode) = both(data, fetch_offset=11)
    assert new == ref and [r[0] for r in new] == [11, 12, 13] and new_next == ref_next == 14
    assert mode.take_timestamp_types() == [("in", 0 if magic else -1)]


def test_next_works_like_getone() -> None:
    new = RecordTuples(TP, MemoryRecords(batch(0, 2)), None, 0, TupleMode(), True, 0)
    assert next(new)[0] == 0 and next(new)[0] == 1
    with pytest.raises(StopIteration):
        next(new)
    with pytest.raises(StopIteration):
        next(new)
    assert list(iter(new)) == []


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6),
       fetch=st.integers(0, 120), limit=st.one_of(st.none(), st.integers(1, 150)),
       log_append=st.lists(st.booleans(), min_size=6, max_size=6))
def test_random_fetches_match(sizes: list[int], fetch: int, limit: int | None,
                              log_append: list[bool]) -> None:
    fetch = min(fetch, sum(sizes) - 1)
    data, base, kinds = b"", 0, []
    for n, la in zip(sizes, log_append, strict=False):
        if base + n > fetch:  # a broker answers from the batch holding the fetch offset
            data += batch(base, n, log_append=la)
            kinds.append(la)
        base += n
    (ref, ref_next), (new, new_next, mode) = both(data, fetch_offset=fetch, limit=limit)
    assert new == ref and new_next == ref_next
    if limit is None:  # every batch was read: noted iff one of them is CreateTime
        assert mode.take_timestamp_types() == ([] if all(kinds) else [("in", 0)])


def test_the_position_never_goes_back_before_the_fetch_offset() -> None:
    """A response holding a batch wholly before the fetch offset (no broker sends one):
    aiokafka moves its position back to that batch's end and hands over records before
    the fetch offset; the tuple path never does."""
    data = batch(0, 1) + batch(1, 2)
    (ref, _), (new, new_next, _) = both(data, fetch_offset=2)
    assert [r[0] for r in ref] == [1, 2]
    assert [r[0] for r in new] == [2] and new_next == 3


def test_offsets_that_go_backwards_inside_a_batch_follow_aiokafka() -> None:
    """Review finding: a batch whose record offsets are not increasing (a broker that
    stores what a producer sends) must be filtered record by record against the running
    position, as aiokafka does, or an event can be handed over twice."""
    buf = bytearray(batch(3, 4))
    # rewrite the records' offset deltas 0,1,2,3 -> 0,5,1,2 (one-byte zig-zag varints)
    pos, deltas = 61, [0, 5, 1, 2]
    for d in deltas:
        length = buf[pos] >> 1  # zig-zag, one byte here
        # record: length, attributes(1), timestamp delta (varint), offset delta (varint)
        ts_pos = pos + 2
        while buf[ts_pos] & 0x80:
            ts_pos += 1
        buf[ts_pos + 1] = d << 1
        pos += 1 + length
    struct.pack_into(">i", buf, 23, 5)  # lastOffsetDelta
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    data = bytes(buf)
    for limit in (None, 1, 2, 3):
        (ref, ref_next), (new, new_next, _) = both(data, fetch_offset=3, limit=limit)
        assert new == ref and new_next == ref_next, limit
    (ref, _), _ = both(data, fetch_offset=3)
    assert [r[0] for r in ref] == [3, 8]


def test_install_routes_tuple_mode_consumers_only() -> None:
    install()
    install()  # idempotent
    assert fetcher.PartitionRecords is _partition_records
    data = batch(0, 3)
    mode = input_consumer_options()["value_deserializer"]
    assert isinstance(mode, TupleMode)
    fast = fetcher.PartitionRecords(TP, MemoryRecords(data), None, 0, None, mode, True, 0)
    plain = fetcher.PartitionRecords(TP, MemoryRecords(data), None, 0, None, None, True, 0)
    assert isinstance(fast, RecordTuples) and next(iter(fast)) == (0, b"k0", b'{"x": 1}0',
                                                                       1_700_000_000_000)
    rec = next(plain)
    assert type(plain) is _original() and rec.offset == 0 and rec.topic == "in"


def test_an_unknown_fetcher_is_not_patched_and_falls_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """An aiokafka upgrade that changes the class is not patched blindly: the public path
    is used (issue 22 item 6; before, install() raised and the worker did not start)."""
    from worker.kafka import record_tuples

    monkeypatch.setattr(fetcher, "PartitionRecords", lambda *a: None)
    monkeypatch.setattr(record_tuples, "_state", {})
    with caplog.at_level("WARNING", logger="worker.kafka.record_tuples"):
        assert install() is False
        assert install() is False
    assert len(caplog.records) == 1 and "public getmany path" in caplog.text


def test_another_aiokafka_version_falls_back_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 22 item 6: a version check that fails chooses the public path, with ONE
    warning naming the version found and the measured cost; nothing is patched."""
    import aiokafka

    from worker.kafka import record_tuples

    monkeypatch.setattr(fetcher, "PartitionRecords", record_tuples._ORIGINAL)
    monkeypatch.setattr(fetcher.FetchResult, "getall", record_tuples._ORIGINAL_GETALL)
    monkeypatch.setattr(aiokafka, "__version__", "0.15.1")
    monkeypatch.setattr(record_tuples, "_state", {})
    with caplog.at_level("WARNING", logger="worker.kafka.record_tuples"):
        assert record_tuples.input_consumer_class() is record_tuples.PublicFetchConsumer
        assert record_tuples.input_consumer_class() is record_tuples.PublicFetchConsumer
    assert len(caplog.records) == 1
    assert "aiokafka 0.15.1 is installed" in caplog.text
    assert record_tuples.PUBLIC_PATH_COST in caplog.text
    assert fetcher.PartitionRecords is record_tuples._ORIGINAL  # nothing patched


def test_public_tuples_match_the_fast_path_and_its_notes() -> None:
    """The fallback's conversion: the same tuples and timestamp-type notes as RecordTuples."""
    from worker.kafka.record_tuples import public_tuples

    data = batch(0, 4, log_append=True) + batch(4, 3) + batch(7, 2, log_append=True)
    fast_mode, slow_mode = TupleMode(), TupleMode()
    fast = list(iter(RecordTuples(TP, MemoryRecords(data), None, 0, fast_mode, True, 0)))
    recs = list(_original()(TP, MemoryRecords(data), None, 0, None, None, True, 0))
    assert public_tuples(TP.topic, recs, slow_mode) == fast
    assert slow_mode.take_timestamp_types() == fast_mode.take_timestamp_types() != []


def test_a_skip_ends_at_the_next_batch_not_at_a_corrupt_claim() -> None:
    """Review finding: bit rot in a batch's lastOffsetDelta (inside the CRC, so the CRC
    fails) claimed offsets up to 1005; the good batches after it were dropped. The next
    batch's first offset bounds the skip, and the position never goes back."""
    bad = bytearray(batch(5, 5))
    struct.pack_into(">i", bad, 23, 1000)  # claims offsets 5..1005; CRC now wrong
    data = batch(0, 5) + bytes(bad) + batch(10, 5) + batch(15, 5)
    mode = TupleMode(attempts=1)
    rt = RecordTuples(TP, MemoryRecords(data), None, 0, mode, True, 0)
    assert [r[0] for r in iter(rt)] == list(range(5)) + list(range(10, 20))
    assert rt.next_fetch_offset == 20
    assert [(b.first, b.end) for b in mode.take_skipped()] == [(5, 10)]


def test_a_response_that_cannot_be_framed_is_retried_then_skipped_offset_by_offset() -> None:
    """Review finding: aiokafka's MemoryRecords raises on a batch whose length is below
    the minimum record overhead, outside the per-batch checks: it escaped getmany on
    every attempt. Now it counts as a failure at the position (the rest of the response
    cannot be framed, so one offset is skipped per round of attempts)."""
    short = bytearray(batch(5, 1))
    struct.pack_into(">i", short, 8, 10)  # batch length 10 < 14
    data = batch(0, 5) + bytes(short)
    mode = TupleMode(attempts=2)
    first = RecordTuples(TP, MemoryRecords(data), None, 0, mode, True, 0)
    assert [r[0] for r in first] == [0, 1, 2, 3, 4] and first.next_fetch_offset == 5
    assert mode.take_skipped() == []
    again = RecordTuples(TP, MemoryRecords(bytes(short)), None, 5, mode, True, 0)
    assert list(again) == [] and again.next_fetch_offset == 6
    assert [(b.first, b.end) for b in mode.take_skipped()] == [(5, 6)]


def test_large_batches_are_taken_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review remark: a batch became one list at once (a zstd batch of millions of empty
    records took 500 MB). It is taken CHUNK records at a time; positions stay exact."""
    from worker.kafka import record_tuples

    monkeypatch.setattr(record_tuples, "CHUNK", 4)
    data = batch(0, 10) + batch(10, 3)
    for limit in (None, 3, 4, 5, 8, 11):
        (ref, ref_next), (new, new_next, _) = both(data, fetch_offset=2, limit=limit)
        assert new == ref and new_next == ref_next, limit


def test_a_failure_inside_a_batch_keeps_the_records_before_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that fails after some chunks were handed over: those records count, the
    position is after them, and the failure is keyed there (the same on every re-read)."""
    from worker.kafka import record_tuples

    monkeypatch.setattr(record_tuples, "CHUNK", 2)
    buf = bytearray(batch(0, 6))
    pos = 61
    for _ in range(4):  # to the 5th record's length varint
        pos += 1 + (buf[pos] >> 1)
    buf[pos] = 0x7F  # garbage length; CRC recomputed: only the parser sees it
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    mode = TupleMode(attempts=2)
    rt = RecordTuples(TP, MemoryRecords(bytes(buf)), None, 0, mode, True, 0)
    assert [r[0] for r in rt] == [0, 1, 2, 3] and rt.next_fetch_offset == 4
    again = RecordTuples(TP, MemoryRecords(bytes(buf)), None, 4, mode, True, 0)
    assert list(again) == [] and again.next_fetch_offset == 6
    assert [(b.first, b.end) for b in mode.take_skipped()] == [(4, 6)]


def test_a_batch_that_reads_fine_again_forgets_its_failures() -> None:
    """Review remark: counts were never cleared, so separate transient faults at one
    position added up to a skip."""
    mode = TupleMode(attempts=2)
    for _ in range(3):
        broken = RecordTuples(TP, MemoryRecords(corrupt(batch(0, 5))), None, 0, mode, True, 0)
        assert list(broken) == []
        fine = RecordTuples(TP, MemoryRecords(batch(0, 5)), None, 0, mode, True, 0)
        assert len(list(fine)) == 5
    assert mode.take_skipped() == [] and mode.failures == {}


def _offset_deltas(base: int, n: int, deltas: list[int]) -> bytes:
    """batch(base, n) with its records' offset deltas rewritten (one-byte zig-zag varints,
    lastOffsetDelta and the CRC kept consistent with n)."""
    buf = bytearray(batch(base, n))
    pos = 61
    for d in deltas:
        length = buf[pos] >> 1
        ts_pos = pos + 2
        while buf[ts_pos] & 0x80:
            ts_pos += 1
        buf[ts_pos + 1] = (d << 1) if d >= 0 else ((-d << 1) - 1)
        pos += 1 + length
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize("deltas", [[0, 60, 2], [0, 1, 3], [-1, 1, 2]],
                         ids=["far-ahead", "past-last-offset", "before-base"])
def test_a_record_outside_its_batch_offset_range_fails_the_batch(deltas: list[int]) -> None:
    """Review finding: a crafted batch (offsets 5..7) whose record claims offset 65 (a
    broker that stores what a producer sends). The tuple path handed it over and kept its
    position at 66 (aiokafka goes back to the batch's end, 8): the good records 8..12
    after it were never read, silently. Such a batch is corrupt: read again, then
    skipped and dead-lettered; the records after it are read."""
    bad = _offset_deltas(5, 3, deltas)
    data = bad + batch(8, 5)
    mode = TupleMode(attempts=2)
    first = RecordTuples(TP, MemoryRecords(batch(0, 5) + data), None, 0, mode, True, 0)
    assert [r[0] for r in first] == [0, 1, 2, 3, 4] and first.next_fetch_offset == 5
    assert mode.take_skipped() == []
    again = RecordTuples(TP, MemoryRecords(data), None, 5, mode, True, 0)
    assert [r[0] for r in again] == [8, 9, 10, 11, 12] and again.next_fetch_offset == 13
    (skipped,) = mode.take_skipped()
    assert (skipped.first, skipped.end) == (5, 8) and "offset" in skipped.detail


def test_a_legacy_inner_record_past_its_wrapper_offset_fails_the_batch() -> None:
    """The same for a compressed v1 message set: inner offsets are relative to the
    wrapper's (the last inner record's) offset; one beyond it is corrupt."""
    b = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 30)
    for rel in (0, 50, 2):
        b.append(rel, timestamp=1_700_000_000_000, key=None, value=b"v%d" % rel)
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, 7)  # wrapper offset 7: inner offsets 5, 55, 7
    data = bytes(buf) + legacy(8, 3)
    mode = TupleMode(attempts=1)
    rt = RecordTuples(TP, MemoryRecords(data), None, 5, mode, True, 0)
    assert [r[0] for r in rt] == [8, 9, 10] and rt.next_fetch_offset == 11
    assert [(s.first, s.end) for s in mode.take_skipped()] == [(5, 8)]
