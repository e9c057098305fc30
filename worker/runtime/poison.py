"""Bounded attempts per record: no single record can crash-loop the worker.

The decoder never raises (:func:`worker.ingest.decode.decode_batch`), but a record
can still defeat a later stage (a mechanism, a plug-in, a bug). When
:meth:`worker.engine.engine.Engine.process_batch` raises anything that is not a
broker error, :func:`process_guarded`

1. drops the partition's in-memory state without checkpointing it (it may be
   half-updated) and restores it from its last checkpoint, exactly as after a
   crash of this worker (crash consistency: docs/OPERATIONS.md), then seeks
   the consumer back to the checkpointed offset;
2. remembers the offsets of the failed batch as *suspect*: when they come
   again they are applied one record per batch, so the failing record is
   isolated;
3. counts failures of a single record; after ``attempts`` failures the record
   is dead-lettered by offset with reason ``poison`` (the detail names the
   exception) and skipped.

Broker errors (``aiokafka.errors.KafkaError``, ``OSError``, timeouts) are not
record failures: they propagate to the fault handling of the worker.

Examples
--------
>>> g = PoisonGuard(attempts=2)
>>> recs = [(o, None, b"x", 0) for o in range(5)]
>>> [[r[0] for r in c] for c in g.plan("t", 0, recs)]
[[0, 1, 2, 3, 4]]
>>> g.failed("t", 0, recs[1:3]) is None
True
>>> [[r[0] for r in c] for c in g.plan("t", 0, recs)]
[[0], [1], [2], [3, 4]]
>>> g.failed("t", 0, [recs[2]]), g.failed("t", 0, [recs[2]])
(None, 2)
>>> [[r[0] for r in c] for c in g.plan("t", 0, recs)]
[[0], [1], [2], [3, 4]]
>>> g.is_poison("t", 0, 2), g.is_poison("t", 0, 1)
(True, False)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from aiokafka.errors import KafkaError

from worker.errors import HeldRecordsFailed
from worker.ingest.decode import Record

log = logging.getLogger(__name__)

BROKER_ERRORS: tuple[type[BaseException], ...] = (KafkaError, OSError, asyncio.TimeoutError)
"""Exceptions that are faults of the broker connection, not of a record."""


class PoisonGuard:
    """Suspect offset ranges and per-record failure counts of the assigned partitions."""

    def __init__(self, attempts: int = 3) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.attempts = attempts
        self._suspect: dict[tuple[str, int], tuple[int, int]] = {}
        self._fails: dict[tuple[str, int, int], int] = {}
        self._held_fails: dict[tuple[str, int, int], int] = {}
        self._poison: dict[tuple[str, int], set[int]] = {}
        self.last_error: dict[tuple[str, int], str] = {}
        """The last exception (type: message) per partition, for the poison detail."""

    def plan(self, topic: str, p: int, records: Sequence[Record]) -> list[list[Record]]:
        """Split ``records`` into batches: suspect offsets (and poison) one per batch."""
        rng = self._suspect.get((topic, p))
        poison = self._poison.get((topic, p), set())
        if rng is None and not poison:  # the usual case: one batch, no per-record loop
            return [list(records)] if records else []
        out: list[list[Record]] = []
        run: list[Record] = []
        for r in records:
            if r[0] in poison or (rng is not None and rng[0] <= r[0] <= rng[1]):
                if run:
                    out.append(run)
                    run = []
                out.append([r])
            else:
                run.append(r)
        if run:
            out.append(run)
        return out

    def is_poison(self, topic: str, p: int, offset: int) -> bool:
        """True once ``offset`` failed ``attempts`` times: skip it, dead-lettered."""
        return offset in self._poison.get((topic, p), set())

    def failed(self, topic: str, p: int, chunk: Sequence[Record],
               held: bool = False) -> int | None:
        """Record that ``chunk`` raised; return its offset if it is now poison.

        ``held``: event-time records applied after their ingestion (a drain); their
        ingestion succeeds every time, so :meth:`succeeded` must not forget their count.
        """
        if held and len(chunk) == 1:
            key = (topic, p, chunk[0][0])
            n = self._held_fails[key] = self._held_fails.get(key, 0) + 1
            if n >= self.attempts:
                self._poison.setdefault((topic, p), set()).add(chunk[0][0])
                return chunk[0][0]
            return None
        if len(chunk) > 1:
            lo, hi = chunk[0][0], chunk[-1][0]
            old = self._suspect.get((topic, p))
            if old is not None:
                lo, hi = min(lo, old[0]), max(hi, old[1])
            self._suspect[(topic, p)] = (lo, hi)
            return None
        off = chunk[0][0]
        self._suspect.setdefault((topic, p), (off, off))
        n = self._fails[(topic, p, off)] = self._fails.get((topic, p, off), 0) + 1
        if n >= self.attempts:
            self._poison.setdefault((topic, p), set()).add(off)
            return off
        return None

    def succeeded(self, topic: str, p: int, chunk: Sequence[Record]) -> None:
        """Forget suspicions that ``chunk`` (applied without error) went past."""
        if not chunk:
            return
        last = chunk[-1][0]
        rng = self._suspect.get((topic, p))
        if rng is not None and last >= rng[1]:
            del self._suspect[(topic, p)]
        for key in [k for k in self._fails if k[:2] == (topic, p) and k[2] <= last]:
            del self._fails[key]

    def forget(self, topic: str, p: int) -> None:
        """Drop everything known about a partition (it was revoked)."""
        self._suspect.pop((topic, p), None)
        self._poison.pop((topic, p), None)
        for fails in (self._fails, self._held_fails):
            for key in [k for k in fails if k[:2] == (topic, p)]:
                del fails[key]


class GuardedEngine(Protocol):
    """The :class:`worker.engine.engine.Engine` calls :func:`process_guarded` needs."""

    async def process_batch(self, topic: str, partition: int,
                            records: Sequence[Record]) -> int: ...
    async def discard(self, tps: Sequence[tuple[str, int]]) -> None: ...
    async def skip(self, topic: str, partition: int, record: Record, detail: str) -> None: ...


async def process_guarded(guard: PoisonGuard, engine: GuardedEngine, topic: str, p: int,
                          records: Sequence[Record],
                          restore: Callable[[], Awaitable[None]]) -> bool:
    """Apply ``records`` of ``topic``/``p`` under ``guard``; False if the partition was reset.

    ``restore`` restores the partition from its checkpoint and seeks the consumer
    there (after :meth:`Engine.discard`); the caller must then drop the rest of
    this partition's fetched records (they are fetched again).
    """
    for chunk in guard.plan(topic, p, records):
        if len(chunk) == 1 and guard.is_poison(topic, p, chunk[0][0]):
            n = guard.attempts
            await engine.skip(topic, p, chunk[0], f"the record failed the worker {n} times "
                              f"({guard.last_error.get((topic, p), 'unknown error')}); "
                              "skipped by offset")
            continue
        try:
            await engine.process_batch(topic, p, chunk)
        except BROKER_ERRORS:
            raise
        except Exception as exc:
            # event time: the records that raised may be held ones from earlier batches
            if isinstance(exc, HeldRecordsFailed):
                await reset_failed(guard, engine, topic, p, exc.records,
                                   exc.__cause__ or exc, restore, held=True)
            else:
                await reset_failed(guard, engine, topic, p, chunk, exc, restore)
            return False
        guard.succeeded(topic, p, chunk)
    return True


async def reset_failed(guard: PoisonGuard, engine: GuardedEngine, topic: str, p: int,
                       records: Sequence[Record], exc: BaseException,
                       restore: Callable[[], Awaitable[None]], held: bool = False) -> None:
    """``records`` of ``topic``/``p`` raised ``exc``: count them, reset the partition.

    Called by :func:`process_guarded`, and by the worker's timer for a drain of held
    event-time records that raised (:meth:`worker.engine.engine.Engine.take_failed_drains`;
    ``held``: see :meth:`PoisonGuard.failed`).
    """
    what = f"{type(exc).__name__}: {str(exc)[:300]}"
    guard.last_error[(topic, p)] = what
    poison = guard.failed(topic, p, records, held=held) if records else None
    first, last = (records[0][0], records[-1][0]) if records else (-1, -1)
    log.error("%s/%d: records %d..%d raised %s; restoring the partition from its "
              "checkpoint and retrying%s", topic, p, first, last, what,
              " (the record is now skipped as poison)" if poison is not None else
              " record by record")
    await engine.discard([(topic, p)])
    await restore()
