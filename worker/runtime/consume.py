"""The consume loop: fetched input records into the engine, nothing lost or applied twice.

The input consumer hands over record batches with ``getmany`` as
``(offset, key, value, timestamp)`` tuples read straight from the record
batches (:mod:`worker.kafka.record_tuples`), plus the record batches it had to
skip (corrupt on every fetch). Each round of :class:`ConsumeLoop`:

1. sets the whole fetch aside while a restore runs (``rebalancing``): those
   records come from positions the restore has not set yet; each partition
   is seeked back to its first record (or skipped batch) and read again;
2. checks the timestamp type of every batch read (event time needs the
   broker's ``LogAppendTime``: :class:`worker.ingest.event_time.TimestampTypeGuard`);
3. applies each partition's records (poison records contained by
   :mod:`worker.runtime.poison`), with the skipped batches dead-lettered in
   offset order between them, and stops applying a partition once it was
   restored since the fetch (:meth:`worker.runtime.assignment.Assignment.stale`);
4. on a broker error, sets the rest of the fetch aside and resets the
   partition to its checkpoint once the broker answers again;
5. tells the engine which partitions are read to their end of log (event time,
   condition (b) of :mod:`worker.ingest.event_time`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError

from worker.ingest.records import Record
from worker.kafka.record_tuples import SkippedBatch
from worker.runtime.assignment import Assignment
from worker.runtime.poison import BROKER_ERRORS, process_guarded
from worker.runtime.state import RunState

log = logging.getLogger(__name__)


class ConsumeLoop:
    """Fetch, check and apply input records until the worker stops (module docstring).

    ``reset_after_outage(tp)`` resets a partition after a broker error
    (normally :meth:`Assignment.reset_after_outage`).
    """

    def __init__(self, state: RunState, assignment: Assignment,
                 reset_after_outage: Callable[[TopicPartition], Awaitable[None]]) -> None:
        self.state, self.assignment = state, assignment
        self.reset_after_outage = reset_after_outage
        self._set_aside_why: str | None = None  # the last cause logged at INFO

    async def run(self) -> None:
        """Consume until a stop is requested (an exception fails the worker's task)."""
        state = self.state
        while not state.stopping:
            batches = await state.consumer.getmany(timeout_ms=100,
                                                   max_records=state.settings.max_batch)
            skips = state.fetch_mode.take_skipped()
            skipped: dict[TopicPartition, list[SkippedBatch]] = {}
            for sk in skips:
                skipped.setdefault(TopicPartition(sk.topic, sk.partition), []).append(sk)
            pending = dict(batches)  # (offset, key, value, timestamp) tuples
            for tp in skipped:
                pending.setdefault(tp, [])
            if state.rebalancing:
                # Drained before a restore's seeks (no await between the drain and this
                # check): these records are read again, from the restored offsets for
                # the partitions being restored (their seeks come after this one) and
                # from where they were for the others (a timer's restore of one
                # partition must not cost the others their records).
                self._set_aside(pending, "a restore is running", skipped)
                continue
            self._set_aside_why = None
            stamp = self.assignment.take_stamp()
            # Every batch read (not only the first record of each list): a CreateTime
            # batch on a production event-time topic fails the worker before any of
            # this round's records is applied.
            for topic, timestamp_type in state.fetch_mode.take_timestamp_types():
                reason = state.timestamps.check(topic, timestamp_type)
                if reason is not None:  # non-production: its releases stop claiming privacy
                    state.engine.mark_input_not_private(topic, reason)
            while pending:
                tp = next(iter(pending))
                records = pending.pop(tp)
                if state.rebalancing:
                    pending[tp] = records
                    self._set_aside(pending, "a restore started meanwhile", skipped)
                    break
                try:
                    await self._apply(tp, records, skipped.get(tp, []), stamp)
                except BROKER_ERRORS as exc:
                    # The batch may be half-applied: reset to the checkpoint once the
                    # broker answers again (the checkpoint is on the broker); the other
                    # partitions' records of this fetch are read again.
                    state.broker_error(exc)
                    self._set_aside(pending, "the broker failed", skipped)
                    await self.reset_after_outage(tp)
                    break
            await self._report_log_ends()

    async def _apply(self, tp: TopicPartition, records: list[Record],
                     skips: list[SkippedBatch], stamp: dict[TopicPartition, int]) -> None:
        """One partition's records of a fetch, and the record batches skipped in it
        (:mod:`worker.kafka.record_tuples`: dead-lettered ``corrupt_batch`` in offset order
        between the records around them). Stops at a reset of the partition: the rest
        is read again from the restored offset."""
        guard, engine, stale = self.state.guard, self.state.engine, self.assignment.stale
        restore = functools.partial(self.assignment.restore_and_seek, [tp])
        rest = records
        for sk in sorted(skips, key=lambda k: k.first):
            before = [r for r in rest if r[0] < sk.first]
            rest = [r for r in rest if r[0] >= sk.end]
            if stale(tp, stamp) or (before and not await process_guarded(
                    guard, engine, tp.topic, tp.partition, before, restore)):
                return
            if stale(tp, stamp):
                return
            await engine.skip_batch(sk.topic, sk.partition, sk.first, sk.end, sk.detail)
        if rest and not stale(tp, stamp):
            await process_guarded(guard, engine, tp.topic, tp.partition, rest, restore)

    def _set_aside(self, pending: dict[TopicPartition, list[Record]], why: str,
                   skipped: dict[TopicPartition, list[SkippedBatch]]) -> None:
        """Seek each partition of ``pending`` back to its first record, or to the first
        batch skipped in it (``skipped``: those of the same fetch), to be read again.

        aiokafka has already moved the positions past them; without the seek they
        would be lost (a skipped batch: its range passed without its dead letter). A
        partition no longer assigned is left (its new owner reads it from the
        checkpoint); a restore that seeks it later wins."""
        consumer = self.state.consumer
        seeks = []
        for tp, records in pending.items():
            starts = [sk.first for sk in skipped.get(tp, ())]
            if records:
                starts.append(records[0][0])
            if not starts or tp not in consumer.assignment():
                continue
            offset = min(starts)
            with contextlib.suppress(IllegalStateError, AssertionError):
                consumer.seek(tp, offset)
                seeks.append(f"{tp.topic}/{tp.partition}@{offset}")
        if seeks:
            # once per cause until records flow again (a restore spans many fetches)
            level = logging.DEBUG if why == self._set_aside_why else logging.INFO
            self._set_aside_why = why
            log.log(level, "%s: %d fetched records set aside, read again (nothing is lost): %s",
                    why, sum(map(len, pending.values())), sorted(seeks))

    async def _report_log_ends(self) -> None:
        """Event time, condition (b) of worker/ingest/event_time.py: after this round's batches
        were handed to the engine, tell it which partitions are read to their end of log
        (position == high watermark) and when (the fetch response's wall-clock time)."""
        state = self.state
        consumer = state.consumer
        for tp in consumer.assignment():
            if state.rebalancing or tp not in consumer.assignment():
                return
            high, at = consumer.highwater(tp), consumer.last_poll_timestamp(tp)
            if high is None or at is None:
                continue
            try:
                pos = await asyncio.wait_for(consumer.position(tp), 0.1)
            except Exception:  # position unknown (e.g. during a rebalance): next round
                continue
            if pos >= high and not state.rebalancing:
                state.engine.log_end(tp.topic, tp.partition, int(at))
