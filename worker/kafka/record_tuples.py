"""Record tuples straight from aiokafka's record batches: the input consumer's fetch path.

For every record it hands over, aiokafka's ``getmany`` builds a
``ConsumerRecord``: an 11-field dataclass, two ``len`` calls, a deserializer
test and a ``tuple`` of the headers, in Python, inside a generator. Measured
here (``benchmarks/bench_fetch_records.py``, 200,000 JSON records of ~130
bytes in 500-record batches): **2.8-3.3 us per record**, which is nearly the
whole cost of a raw ``getmany`` loop. The worker needs four fields of each
record, ``(offset, key, value, timestamp)`` (:data:`worker.ingest.records.Record`);
reading them from the C record objects of aiokafka's own batch parser costs
**0.25 us**, plus 0.16 us of CRC check (kept).

:func:`input_consumer_options` returns the keyword that makes one
``AIOKafkaConsumer`` hand over such tuples: a :class:`TupleMode` passed as its
``value_deserializer``. :func:`install` (idempotent; the worker calls it at start)
replaces the ``PartitionRecords`` name in ``aiokafka.consumer.fetcher`` by a
factory that builds :class:`RecordTuples` for consumers in tuple mode and
aiokafka's own ``PartitionRecords`` for every other consumer (readers, the
checkpoint store, tests), which therefore behave exactly as before; and
``FetchResult.getall`` by the same steps with one C slice instead of a Python
loop per record when its records are :class:`RecordTuples` (aiokafka's own
method otherwise).

:class:`RecordTuples` follows aiokafka 0.14's ``PartitionRecords._unpack_records``
step for step: the CRC of every batch is checked (``CorruptRecordException``),
control batches are skipped, ``read_committed`` skips aborted transactional
batches, records before the fetch offset are skipped, and ``next_fetch_offset``
moves exactly as aiokafka's does (a ``getmany`` that stops inside a batch at
``max_records`` resumes after the last record it returned). The one addition:
the timestamp type of every batch (not only the first record of a fetched
list) is noted in :attr:`TupleMode.timestamp_types` when it is not
``LogAppendTime``, for the worker's event-time check
(:meth:`worker.ingest.event_time.TimestampTypeGuard.check`) before the records are
applied.

A batch that fails (its CRC, or aiokafka's parser raising anything on it) no
longer stops the worker. aiokafka raises ``CorruptRecordException`` out of
``getmany``, which failed the consume task, and a restarted worker met the
same batch again: a crash loop on one bad batch. Here the fetch stops before
the batch without moving the position, so the next fetch reads it again (a
transient fault heals); after :attr:`TupleMode.attempts` failures of the
same batch it is skipped: the position moves past it and a
:class:`SkippedBatch` tells the worker, which dead-letters it as
``corrupt_batch`` (:meth:`worker.engine.engine.Engine.skip_batch`).

aiokafka is pinned (``pyproject.toml``, :data:`PINNED_AIOKAFKA`); :func:`install`
patches only that version's fetcher, and ``tests/unit/test_record_tuples.py``
compares both paths record for record, including control, aborted, corrupt and
legacy batches. On any other aiokafka (or a fetcher that is not the one this
module follows), :func:`install` patches nothing and logs ONE warning naming
the version found and the cost; :func:`input_consumer_class` then returns
:class:`PublicFetchConsumer`, which makes the same ``(offset, key, value,
timestamp)`` tuples and timestamp-type notes from aiokafka's public
``getmany`` (:data:`PUBLIC_PATH_COST`, measured with
``benchmarks/bench_fetch_records.py``). What the public path does not do:
skip a batch that fails on every fetch (aiokafka raises
``CorruptRecordException`` out of ``getmany``, which fails the worker).

>>> mode = TupleMode(attempts=2)
>>> mode(b"x")  # never called on the fast path; aiokafka's own path gets the value back
b'x'
>>> mode.take_timestamp_types()
[]
>>> mode.batch_failed("in", 0, 100, "Invalid CRC"), mode.batch_failed("in", 0, 100, "Invalid CRC")
(False, True)
"""

from __future__ import annotations

import itertools
import logging
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiokafka
import aiokafka.consumer.fetcher as _fetcher
import aiokafka.errors as _errors
from aiokafka import AIOKafkaConsumer
from aiokafka.record.control_record import ABORT_MARKER, ControlRecord

from worker.ingest.records import Record

log = logging.getLogger(__name__)

READ_COMMITTED = 1
"""aiokafka's isolation level constant for ``read_committed``."""

LOG_APPEND_TIME = 1
"""Kafka's timestamp type of a record stamped by the broker."""

MAX_SKIP = 1 << 20
"""The most offsets one skipped batch may span (a corrupt header can claim anything)."""

CHUNK = 65_536
"""Records of a batch turned into tuples at a time: bounds the memory one batch can
take (a zstd batch of millions of empty records), as aiokafka's generator does."""

_OFFSET = operator.itemgetter(0)


@dataclass(frozen=True)
class SkippedBatch:
    """A record batch skipped after repeated failures: offsets ``[first, end)``."""

    topic: str
    partition: int
    first: int
    end: int
    detail: str


class TupleMode:
    """Marker (the consumer's ``value_deserializer``): hand over record tuples.

    It also collects the non-``LogAppendTime`` timestamp types of the batches the
    consumer read, per topic, until :meth:`take_timestamp_types` collects them.
    Calling it returns the value unchanged (aiokafka's own path never calls it
    for a tuple-mode consumer; the call exists so that nothing breaks if it did).
    """

    def __init__(self, attempts: int = 3) -> None:
        self.attempts = max(1, int(attempts))
        self.timestamp_types: dict[str, int] = {}
        self.failures: dict[tuple[str, int, int], int] = {}
        self.skipped: list[SkippedBatch] = []

    def __call__(self, value: bytes | None) -> bytes | None:
        return value

    def note_timestamp_type(self, topic: str, timestamp_type: int | None) -> None:
        """Remember that ``topic`` had a batch with this (non-LogAppendTime) type."""
        self.timestamp_types[topic] = -1 if timestamp_type is None else int(timestamp_type)

    def batch_failed(self, topic: str, partition: int, first: int, detail: str) -> bool:
        """Count a failure of the batch at ``first``; True once it is to be skipped."""
        key = (topic, partition, first)
        n = self.failures.get(key, 0) + 1
        if n >= self.attempts:
            self.failures.pop(key, None)
            return True
        self.failures[key] = n
        log.warning("record batch %s/%d@%d failed (%s), attempt %d of %d: reading it again",
                    topic, partition, first, detail, n, self.attempts)
        return False

    def forget_failures(self, topic: str, partition: int, first: int, end: int) -> None:
        """Drop the failure counts of positions in ``[first, end)`` (read fine since)."""
        for k in [k for k in self.failures if k[:2] == (topic, partition)
                  and first <= k[2] < end]:
            del self.failures[k]

    def take_skipped(self) -> list[SkippedBatch]:
        """Batches skipped since the last call (for the dead-letter topic), and forget them."""
        out, self.skipped = self.skipped, []
        return out

    def take_timestamp_types(self) -> list[tuple[str, int]]:
        """``(topic, timestamp_type)`` noted since the last call, and forget them."""
        out = sorted(self.timestamp_types.items())
        self.timestamp_types.clear()
        return out


class RecordTuples:
    """One partition's fetched record batches as ``(offset, key, value, timestamp)``.

    The interface aiokafka's ``FetchResult`` uses: iteration (``getall``),
    ``next`` (``getone``) and ``next_fetch_offset``. Each batch becomes one list
    of tuples (a comprehension over aiokafka's C records); iteration chains the
    lists in C, so nothing runs in Python per record. ``next_fetch_offset`` is
    computed on demand from the current list's iterator: after the last record
    handed over, as aiokafka's generator sets it record by record.
    """

    def __init__(self, tp: Any, records: Any, aborted_transactions: Any, fetch_offset: int,
                 mode: TupleMode, check_crcs: bool, isolation_level: int) -> None:
        self._tp = tp
        self._records = records
        self._aborted = sorted(aborted_transactions or [], key=lambda x: x[1])
        self._aborted_producers: set[int] = set()
        self._mode = mode
        self._check_crcs = check_crcs
        self._isolation_level = isolation_level
        self._next = fetch_offset  # the position before the current batch's first record
        self._current: tuple[list[Record], Iterator[Record]] | None = None
        self._it: Iterator[Record] = itertools.chain.from_iterable(self._batches())

    @property
    def next_fetch_offset(self) -> int:
        """The offset after the last record handed over (or skipped batch)."""
        current = self._current
        if current is None:
            return self._next
        recs, it = current
        done = len(recs) - it.__length_hint__()  # type: ignore[attr-defined]
        return recs[done - 1][0] + 1 if done else self._next

    def __iter__(self) -> Iterator[Record]:
        return self._it  # the C chain itself: ``for msg in records`` never enters Python

    def __next__(self) -> Record:
        return next(self._it)

    def take(self, max_records: int | None) -> list[Record]:
        """The next ``max_records`` records (all if None): what ``getall`` collects."""
        it = self._it
        return list(it) if max_records is None else list(itertools.islice(it, max_records))

    def _skip_aborted(self, batch: Any) -> bool:
        """read_committed: True when ``batch`` belongs to an aborted transaction."""
        while self._aborted and self._aborted[0][1] <= batch.base_offset:
            self._aborted_producers.add(self._aborted.pop(0)[0])
        if batch.is_control_batch:
            try:
                control = next(iter(batch))
            except StopIteration:  # pragma: no cover - a broker bug
                raise _errors.KafkaError("Control batch did not contain any records") from None
            if ControlRecord.parse(control.key) == ABORT_MARKER:
                self._aborted_producers.discard(batch.producer_id)
        return bool(batch.is_transactional and batch.producer_id in self._aborted_producers)

    def _open(self, batch: Any) -> Iterator[Any] | None:
        """The batch's record iterator (None: an aborted or control batch); raises if the
        batch fails its CRC check."""
        if self._check_crcs and not batch.validate_crc():
            raise _errors.CorruptRecordException(f"Invalid CRC - {self._tp}")
        if (self._isolation_level == READ_COMMITTED and batch.producer_id is not None
                and self._skip_aborted(batch)):
            return None
        if batch.is_control_batch:
            return None
        ttype = getattr(batch, "timestamp_type", None)  # legacy batches: per record
        if ttype is not None and ttype != LOG_APPEND_TIME:
            self._mode.note_timestamp_type(self._tp.topic, ttype)
        # one iterator for all chunks (aiokafka's batch asserts when iter() is called on
        # it again, as islice would); chain iterates it in C
        return itertools.chain(batch)

    def _take(self, it: Iterator[Any], legacy: bool, lo: int,
              hi: int) -> tuple[list[Record], bool]:
        """Up to :data:`CHUNK` more records of a batch as tuples, past the position, in
        aiokafka's order rules; and whether the batch may have more. Raises whatever
        aiokafka's parser raises on the batch, and ``CorruptRecordException`` for a record
        outside the batch's offsets ``[lo, hi)``: handed over, its offset would move the
        position past the records after the batch, which would never be read."""
        if legacy:
            raw = []
            for r in itertools.islice(it, CHUNK):
                if r.timestamp_type != LOG_APPEND_TIME:
                    self._mode.note_timestamp_type(self._tp.topic, r.timestamp_type)
                raw.append((r.offset, r.key, r.value, r.timestamp))
        else:
            raw = [(r.offset, r.key, r.value, r.timestamp) for r in itertools.islice(it, CHUNK)]
        more = len(raw) == CHUNK
        if not raw:
            return raw, more
        start = self._next
        increasing = all(map(operator.lt, map(_OFFSET, raw),
                             map(_OFFSET, itertools.islice(raw, 1, None))))
        if increasing:  # the common case
            first, last = raw[0][0], raw[-1][0]
        else:
            first, last = min(map(_OFFSET, raw)), max(map(_OFFSET, raw))
        if first < lo or last >= hi:
            raise _errors.CorruptRecordException(
                f"record offsets {first}..{last} outside the batch's {lo}..{hi - 1}")
        if increasing and first >= start:
            return raw, more  # increasing from the position: no filter
        out = []  # aiokafka's rule record by record: skip what is below the position
        for rec in raw:
            if rec[0] >= start:
                out.append(rec)
                start = rec[0] + 1
        return out, more

    def _fail(self, detail: str, claimed: int) -> tuple[int, int, str] | None:
        """A batch at the position failed: None to stop this fetch before it (it is read
        again), else the skip ``(first, claimed end, detail)`` to finish."""
        mode, tp = self._mode, self._tp
        if not mode.batch_failed(tp.topic, tp.partition, self._next, detail):
            return None
        end = claimed if self._next < claimed <= self._next + MAX_SKIP else self._next + 1
        return self._next, end, detail

    def _skip(self, first: int, end: int, detail: str) -> None:
        tp = self._tp
        log.error("record batch %s/%d offsets %d..%d failed %d times (%s): skipped, "
                  "dead-lettered as corrupt_batch", tp.topic, tp.partition, first, end - 1,
                  self._mode.attempts, detail)
        self._mode.skipped.append(SkippedBatch(tp.topic, tp.partition, first, end, detail))
        self._next = max(self._next, end)

    def _batches(self) -> Iterator[Iterator[Record]]:
        records, mode = self._records, self._mode
        key = (self._tp.topic, self._tp.partition)
        pending: tuple[int, int, str] | None = None  # a skip waiting for the next batch
        while True:
            framing = None
            try:
                batch = records.next_batch() if records.has_next() else None
            except Exception as exc:  # the rest of the response cannot be framed
                batch, framing = None, f"{type(exc).__name__}: {exc}"[:500]
            if pending is not None:
                # the claimed end of a corrupt batch is not trusted past the next
                # batch's first offset
                first, end, why = pending
                base = getattr(batch, "base_offset", None)
                if isinstance(base, int) and first < base:
                    end = min(end, base) if end > first + 1 else min(base, first + MAX_SKIP)
                self._skip(first, end, why)
                pending = None
            if batch is None:
                if framing is not None:
                    pending = self._fail(framing, self._next + 1)
                    if pending is not None:
                        self._skip(*pending)
                return
            detail: str | None = None
            try:
                it = self._open(batch)
                if it is None:  # aborted or control batch
                    self._next = max(self._next, batch.next_offset)
                    continue
                legacy = getattr(batch, "timestamp_type", None) is None
                # v2: [base, base + lastOffsetDelta]; v0/v1: up to the wrapper's offset
                lo, hi = (-1 << 63) if legacy else batch.base_offset, batch.next_offset
                recs, more = self._take(it, legacy, lo, hi)
                source: Iterator[Any] = it
            except Exception as exc:  # whatever aiokafka's parser raises on this batch
                detail = f"{type(exc).__name__}: {exc}"[:500]
            if detail is not None:
                pending = self._fail(detail, getattr(batch, "next_offset", 0))
                if pending is None:
                    return  # stop before it: the next fetch reads it again
                continue
            opened_at = self._next
            while True:
                if recs:
                    chunk = iter(recs)
                    self._current = (recs, chunk)
                    yield chunk
                    self._current = None
                    self._next = recs[-1][0] + 1
                if not more:
                    break
                try:
                    recs, more = self._take(source, legacy, lo, hi)
                except Exception as exc:  # fails inside the batch, after records handed over
                    detail = f"{type(exc).__name__}: {exc}"[:500]
                    break
            if detail is not None:
                pending = self._fail(detail, getattr(batch, "next_offset", 0))
                if pending is None:
                    return
                continue
            # v2 keeps a batch's last offset even when compaction removed its last
            # record: the next fetch starts after the batch (as aiokafka does).
            self._next = max(self._next, batch.next_offset)
            if mode.failures:  # it read fine to its end: forget its earlier failures
                mode.forget_failures(*key, opened_at, self._next)


_ORIGINAL = _fetcher.PartitionRecords
_ORIGINAL_GETALL = _fetcher.FetchResult.getall
_EXPECTED = "aiokafka.consumer.fetcher"

PINNED_AIOKAFKA = "0.14.0"
"""The aiokafka version whose fetcher :class:`RecordTuples` follows step for step."""

PUBLIC_PATH_COST = ("measured 6.0 us per fetched record instead of 1.3, about 4.6x the fetch "
                    "cost: results/bench_fetch_records.md")
"""The public path's measured cost (``results/bench_fetch_records.md``), for the warning."""

_state: dict[str, bool] = {}


def _getall(self: Any, max_records: int | None = None) -> list[Any]:
    """``FetchResult.getall`` (aiokafka 0.14, same steps), one C slice for record tuples.

    aiokafka's loop appends and counts record by record in Python (~0.2 us each);
    for :class:`RecordTuples` the records are taken in one ``islice``. Any other
    partition records go through aiokafka's own method."""
    records = self._partition_records
    if type(records) is not RecordTuples:
        return _ORIGINAL_GETALL(self, max_records)
    if not self.check_assignment(self._topic_partition) or not self.has_more():
        return []
    out = records.take(max_records)
    self._update_position()
    if max_records is None or len(out) < max_records:
        self._partition_records = None  # exhausted (aiokafka's loop ran to its end)
    return out


def _partition_records(tp: Any, records: Any, aborted_transactions: Any, fetch_offset: int,
                       key_deserializer: Any, value_deserializer: Any, check_crcs: bool,
                       isolation_level: int) -> Any:
    """aiokafka's ``PartitionRecords(...)`` call: tuples for a :class:`TupleMode` consumer."""
    if isinstance(value_deserializer, TupleMode):
        return RecordTuples(tp, records, aborted_transactions, fetch_offset,
                            value_deserializer, check_crcs, isolation_level)
    return _ORIGINAL(tp, records, aborted_transactions, fetch_offset, key_deserializer,
                     value_deserializer, check_crcs, isolation_level)


def _fast_path_applies() -> str | None:
    """None when the installed aiokafka is the pinned one with the expected fetcher, else
    what differs."""
    found = aiokafka.__version__
    if found != PINNED_AIOKAFKA:
        return f"aiokafka {found} is installed"
    current, getall = _fetcher.PartitionRecords, _fetcher.FetchResult.getall
    if not (isinstance(current, type) and current.__module__ == _EXPECTED
            and hasattr(current, "_unpack_records") and getall is _ORIGINAL_GETALL
            and getall.__module__ == _EXPECTED):
        return (f"aiokafka {found}'s fetcher PartitionRecords / FetchResult.getall are not "
                "the ones this module follows")
    return None


def install() -> bool:
    """Route aiokafka's fetcher through :func:`_partition_records` (idempotent); True when
    the fast path is on.

    On any aiokafka but :data:`PINNED_AIOKAFKA` (or a fetcher that differs),
    nothing is patched, one WARNING names the version and the cost of the public
    path, and False is returned: the input consumer is then a
    :class:`PublicFetchConsumer` (:func:`input_consumer_class`).
    """
    if _fetcher.PartitionRecords is _partition_records:
        return True
    why = _fast_path_applies()
    if why is not None:
        if _state.get("warned"):
            return False
        _state["warned"] = True
        log.warning("%s; the fast fetch path (worker/kafka/record_tuples.py) follows aiokafka "
                    "%s only: using aiokafka's public getmany path instead (%s; corrupt record "
                    "batches then fail the worker instead of being dead-lettered). Pin "
                    "aiokafka==%s for the fast path", why, PINNED_AIOKAFKA, PUBLIC_PATH_COST,
                    PINNED_AIOKAFKA)
        return False
    _fetcher.FetchResult.getall = _getall
    _fetcher.PartitionRecords = _partition_records
    return True


def public_tuples(topic: str, records: list[Any], mode: TupleMode) -> list[Record]:
    """aiokafka ``ConsumerRecord``s as :data:`~worker.ingest.records.Record` tuples, noting
    each non-``LogAppendTime`` timestamp type in ``mode`` (as :class:`RecordTuples` does
    per batch)."""
    for r in records:
        if r.timestamp_type != LOG_APPEND_TIME:
            mode.note_timestamp_type(topic, r.timestamp_type)
    return [(r.offset, r.key, r.value, r.timestamp) for r in records]


class PublicFetchConsumer(AIOKafkaConsumer):
    """The input consumer on aiokafka's public path: ``getmany`` returns record tuples.

    Used when :func:`install` could not install the fast path; its
    ``value_deserializer`` must be a :class:`TupleMode` (it returns the value unchanged
    and collects the timestamp types). ``read_committed`` filtering, CRC checks and
    positions are aiokafka's own.
    """

    def __init__(self, *topics: str, **kwargs: Any) -> None:
        super().__init__(*topics, **kwargs)
        self.tuple_mode = kwargs.get("value_deserializer")

    async def getmany(self, *partitions: Any, timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[Any, list[Any]]:
        fetched = await super().getmany(*partitions, timeout_ms=timeout_ms,
                                        max_records=max_records)
        mode = self.tuple_mode
        if not isinstance(mode, TupleMode):
            return dict(fetched)
        # tuples already (the fast path was installed after this consumer was chosen)
        return {tp: recs if recs and isinstance(recs[0], tuple)
                else public_tuples(tp.topic, recs, mode) for tp, recs in fetched.items()}


def input_consumer_class() -> type[AIOKafkaConsumer]:
    """The input consumer's class: ``AIOKafkaConsumer`` with the fast path installed, else
    :class:`PublicFetchConsumer` (one warning, :func:`install`)."""
    return AIOKafkaConsumer if install() else PublicFetchConsumer


def input_consumer_options(attempts: int = 3) -> dict[str, Any]:
    """The ``AIOKafkaConsumer`` keyword for a consumer that hands over record tuples."""
    install()
    return {"value_deserializer": TupleMode(attempts)}
