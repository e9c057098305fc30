"""Event-time ticks: a record's tick from its own Kafka timestamp; ticks close on read progress.

SEMANTICS.md §2: which tick an event gets must not depend on
other events. With ``privacy.time: event`` (the default of production
topologies) the worker assigns every record the tick of its Kafka record
timestamp, which the broker sets at append time when the input topic has
``message.timestamp.type=LogAppendTime``:

- ``tick(record) = timestamp_ms // tick_ms``: a function of the record alone;
- the **watermark** of an input partition closes tick ``g`` (ending at
  ``end(g) = (g + 1) * tick_ms``) only once everything of tick ``g`` has been
  read from that partition, i.e. when

  (a) a record with timestamp ``>= end(g) + allowed_lateness_ms`` has been read
      (LogAppendTime does not decrease along a partition, so every record of
      tick ``g`` came before it), or
  (b) the consumer was at the partition's end of log (position == high
      watermark, reported by the driver through :meth:`EventTimeQueue.reached_end`)
      at a wall-clock time ``t`` with ``t - allowed_lateness_ms >= end(g)``;

  and never before the wall clock minus the lateness has passed ``end(g)``;
- a record whose tick is already closed when the worker reads it is **late**:
  it goes to the dead-letter topic with reason ``late`` (it is never moved to
  another tick);
- a record of a tick the watermark has not reached yet waits in
  :class:`EventTimeQueue` (raw, undecoded) until the watermark reaches its
  tick; it is then applied at its own tick, before that tick closes;
- a record stamped more than ``allowed_lateness_ms + tick_ms`` ahead of the
  wall clock is dead-lettered as ``future`` (a wrong clock must not pin the
  partition's checkpoint offset forever).

So with LogAppendTime a record is late only if the broker's append times go
backwards along the partition by more than the lateness, or if clock skew plus
fetch and replication delay between the broker and the worker exceed it (both
outside the model: alert on ``late`` dead letters). How fast the worker reads
(load, batching, restarts, backlogs) never makes a record late: it only
delays the watermark, and with it the *publication* of releases (their content
and ``published_at`` do not change). The tick and the late/on-time status of
a record therefore depend on its own timestamp only, never on other records
or on when it is read. (Assumption: LogAppendTime is assigned per producer
batch, so one event can shift the append time of the other records of its
producer batch slightly; docs/PRIVACY.md section 11 B5.)

Restarts: the checkpoint keeps the watermark; a restored partition restarts it
there, and reading the backlog moves it on by (a), then (b). A partition
without a checkpoint starts at ``wall clock - allowed_lateness_ms`` at its
assignment: records older than that are late (they belong to ticks before the
worker's first schedule).

Checkpoints: a partition's ``next_offset`` is the smallest offset still waiting
(those records are read again after a restore, with the same timestamps and
hence the same ticks), and ``done`` lists the offsets above it that are already
in the state or dead-lettered (normally empty: LogAppendTime grows with the
offset), so nothing is counted twice.

Examples
--------
>>> q = EventTimeQueue(tick_ms=100, lateness_ms=250)
>>> rec = lambda off, ts: (off, b"k", b"{}", ts)
>>> q.resume(None, 10_000)                # fresh partition: watermark 9_750 (tick 97 open)
>>> late, future = q.add([rec(0, 9_650), rec(1, 9_700), rec(2, 9_990), rec(3, 99_999)], 10_000)
>>> [r[0] for r in late], [r[0] for r in future]   # tick 96 closed; 99_999 is far ahead
([0], [3])
>>> q.watermark_ms(10_300)    # the wall clock moved on, but nothing newer has been read
9750
>>> [(g, [r[0] for r in rs]) for g, rs in q.due(10_300)]   # tick 97 can be applied now
[(97, [1])]
>>> q.resume_offset(high=4), q.covered_above(q.resume_offset(high=4))
(2, [3])
>>> q.reached_end(10_300)     # (b): read to the end of the log at 10_300
>>> [(g, [r[0] for r in rs]) for g, rs in q.due(10_300)]   # the watermark reached tick 99
[(99, [2])]
>>> q.resume_offset(high=4)
4
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from sketches.errors import SpecError
from worker.ingest.records import Record

log = logging.getLogger(__name__)

LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"
TIMESTAMP_TYPE = "message.timestamp.type"


class EventTimeQueue:
    """Records of one input partition waiting for the watermark to reach their tick."""

    def __init__(self, tick_ms: int, lateness_ms: int,
                 follow: EventTimeQueue | None = None) -> None:
        self.tick_ms, self.lateness_ms = int(tick_ms), int(lateness_ms)
        self.follow = follow
        """Forwarded records (:mod:`worker.ingest.repartition`): this queue holds them by
        their source timestamps, which do not grow along the repartition topic, so it
        never moves a watermark; it uses ``follow``'s (the input partition's)."""
        self.cap: int | None = None
        """The watermark never moves past this (ms; None: no cap): the lowest mark of the
        other partitions forwarding into this one (:meth:`worker.ingest.repartition.Inbox.
        marks_floor`), so a forwarded record is never late because of the hop."""
        self._held: list[tuple[int, int, Record]] = []  # (tick, offset, record)
        self._sorted = True  # _held sorted by (tick, offset)
        self._watermark: int | None = None
        self._read_ms: int | None = None  # (a): newest timestamp read (on-time records)
        self._end_ms: int | None = None   # (b): last time the consumer was at the log's end
        self.done: set[int] = set()

    def read_progress(self, now_ms: int) -> int | None:
        """How far reading has got: ``max(newest read, log end seen) - lateness``,
        capped at ``now_ms - lateness`` (None: no progress yet); not capped by
        :attr:`cap` (what a mark of this partition says: worker/ingest/repartition.py)."""
        seen = max((x for x in (self._read_ms, self._end_ms) if x is not None), default=None)
        if seen is None:
            return None
        return min(int(now_ms), seen) - self.lateness_ms

    def _progress(self, now_ms: int) -> int | None:
        progress = self.read_progress(now_ms)
        if progress is None or self.cap is None:
            return progress
        return min(progress, self.cap)

    def watermark_ms(self, now_ms: int) -> int:
        """The watermark (ms): ticks ending at or before it are closed; never moves back.

        It drives the tick schedule (releases, epoch ends). It moves only with
        read progress (module docstring, (a) and (b)) and never past
        ``now_ms - allowed_lateness_ms``; a wall clock that steps back holds it
        where it was, so a closed tick never reopens. Before :meth:`resume` it
        starts at ``now_ms - allowed_lateness_ms``.
        """
        if self.follow is not None:
            return self.follow.watermark_ms(now_ms)
        if self._watermark is None:
            self._watermark = int(now_ms) - self.lateness_ms
        progress = self._progress(now_ms)
        if progress is not None and progress > self._watermark:
            self._watermark = progress
        return self._watermark

    def resume(self, watermark_ms: int | None, now_ms: int) -> None:
        """Start (None: a fresh partition, at ``now_ms - lateness``) or restore the watermark.

        A restored partition restarts at the checkpointed ``watermark_ms`` and
        moves on as the backlog is read (records appended while no worker ran
        are not late, however long reading them takes).
        """
        start = int(now_ms) - self.lateness_ms if watermark_ms is None else int(watermark_ms)
        # never below a watermark already in use: the clocks closed ticks up to it
        self._watermark = max(start, self._watermark if self._watermark is not None else start)

    def reached_end(self, at_ms: int) -> None:
        """(b): every record the partition had at wall-clock ``at_ms`` has been read."""
        if self._end_ms is None or int(at_ms) > self._end_ms:
            self._end_ms = int(at_ms)

    @property
    def watermark(self) -> int | None:
        """The current watermark (ms; None before the first use), checkpointed."""
        return self._watermark

    def watermark_tick(self, now_ms: int) -> int:
        """Oldest open tick at wall-clock ``now_ms``: every tick before it is closed."""
        return self.watermark_ms(now_ms) // self.tick_ms

    def add(self, records: Iterable[Record], now_ms: int) -> tuple[list[Record], list[Record]]:
        """Hold every on-time record; return ``(late, future)`` records (to dead-letter).

        Records are taken one by one in offset order: each is judged against
        the watermark left by the records before it (so how the partition is
        cut into batches changes nothing). Offsets in :attr:`done` (already
        handled before a restore) are skipped.
        """
        wm = self.watermark_ms(now_ms)
        w = wm // self.tick_ms
        limit = int(now_ms) - self.lateness_ms
        if self.cap is not None:
            limit = min(limit, self.cap)
        ahead = (int(now_ms) + self.lateness_ms + self.tick_ms) // self.tick_ms
        read = self._read_ms
        late: list[Record] = []
        future: list[Record] = []
        for rec in records:
            off = int(rec[0])
            if off in self.done:
                continue
            ts = int(rec[3])
            g = ts // self.tick_ms
            if g < w:
                late.append(rec)
                self.done.add(off)
            elif g > ahead:
                future.append(rec)
                self.done.add(off)
            else:
                self._held.append((g, off, rec))
                if self.follow is not None:
                    continue  # forwarded: source timestamps say nothing of read progress
                if read is None or ts > read:  # (a): everything before it has been read
                    read = ts
                    if min(limit, ts - self.lateness_ms) > wm:
                        wm = min(limit, ts - self.lateness_ms)
                        w = wm // self.tick_ms
        if self.follow is None:
            self._read_ms, self._watermark = read, wm
        self._sorted = False
        return late, future

    def due(self, now_ms: int) -> list[tuple[int, list[Record]]]:
        """Pop the held records whose tick the watermark has reached, by tick, in offset order.

        The caller applies them at their tick (closing only earlier ticks)
        before it advances any clock past the watermark.
        """
        w = self.watermark_tick(now_ms)
        if not self._sorted:  # nearly sorted already (LogAppendTime grows with the offset)
            self._held.sort(key=lambda x: (x[0], x[1]))
            self._sorted = True
        cut = bisect.bisect_left(self._held, (w + 1, -1), key=lambda x: (x[0], x[1]))
        ready, self._held = self._held[:cut], self._held[cut:]
        out: list[tuple[int, list[Record]]] = []
        for g, off, rec in ready:
            self.done.add(off)
            if out and out[-1][0] == g:
                out[-1][1].append(rec)
            else:
                out.append((g, [rec]))
        return out

    def resume_offset(self, high: int) -> int:
        """Checkpoint offset: the smallest waiting offset, else ``high`` (next to read)."""
        return min((off for _, off, _ in self._held), default=int(high))

    def covered_above(self, resume: int) -> list[int]:
        """Offsets ``>= resume`` already in the state or dead-lettered (pruning the rest)."""
        self.done = {o for o in self.done if o >= resume}
        return sorted(self.done)

    def __len__(self) -> int:
        return len(self._held)


def timestamp_problems(topologies: Sequence[Any], configs: dict[str, str | None]
                       ) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` for the topics' reported ``message.timestamp.type``.

    ``configs`` maps a topic to the value the broker reports (None: not
    reported). Event-time input topics need ``LogAppendTime`` (the broker's
    append time; with ``CreateTime`` a producer chooses the tick of its own
    records, and load-dependent client batching shifts it); release topics
    need ``CreateTime`` (the worker sets each release's timestamp to its
    data-independent ``published_at``; ``LogAppendTime`` would publish the send
    time, which depends on load and state size). A wrong value is an error in
    a production topology and a warning otherwise; an unreported value is a
    warning (the broker cannot be checked).

    >>> class T:
    ...     def __init__(self, prod):
    ...         self.production, self.source = prod, "t.yaml"
    ...         self.input = type("I", (), {"topic": "in"})()
    ...         self.release = type("R", (), {"topic": "out"})()
    ...         self.privacy = type("P", (), {"clock": "tick", "time": "event"})()
    >>> errors, warnings = timestamp_problems([T(True)], {"in": "CreateTime", "out": None})
    >>> errors[0][:68]
    "t.yaml: input.topic: topic 'in' has message.timestamp.type=CreateTim"
    >>> timestamp_problems([T(False)], {"in": "LogAppendTime", "out": "CreateTime"})
    ([], [])
    """
    errors: list[str] = []
    warnings: list[str] = []
    for t in topologies:
        checks = [("release.topic", t.release.topic, CREATE_TIME)]
        if t.privacy.clock == "tick" and t.privacy.time == "event":
            checks.insert(0, ("input.topic", t.input.topic, LOG_APPEND_TIME))
        for path, topic, want in checks:
            got = configs.get(topic)
            if got == want:
                continue
            if got is None:
                warnings.append(
                    f"{t.source}: {path}: the broker does not report {TIMESTAMP_TYPE} of "
                    f"topic {topic!r}; make sure it is {want} (docs/TOPOLOGY.md \"Event time\")")
                continue
            msg = (f"{t.source}: {path}: topic {topic!r} has {TIMESTAMP_TYPE}={got}, dpstream "
                   f"needs {want}; run `kafka-configs --alter --entity-type topics "
                   f"--entity-name {topic} --add-config {TIMESTAMP_TYPE}={want}`")
            (errors if t.production else warnings).append(msg)
    return errors, warnings


def check_timestamp_types(topologies: Sequence[Any], configs: dict[str, str | None]) -> None:
    """Log the warnings of :func:`timestamp_problems`; raise SpecError on its errors."""
    errors, warnings = timestamp_problems(topologies, configs)
    for w in warnings:
        log.warning("%s", w)
    if errors:
        raise SpecError("; ".join(errors))


class TimestampTypeGuard:
    """Checks that event-time input records really carry broker timestamps.

    A broker can accept and report ``LogAppendTime`` without applying it (the
    embedded Tansu broker does): the records then arrive with the producer's
    ``CreateTime`` (Kafka timestamp type 0, LogAppendTime is 1) and a producer
    chooses its records' ticks. The worker checks the type of every record
    batch it reads (:class:`worker.kafka.record_tuples.TupleMode` notes them) before
    applying any record of that fetch: a production topology fails the worker
    (SpecError), any other logs one warning per topic and its releases say
    ``private: false`` from then on (the returned reason, see
    :meth:`worker.engine.engine.Engine.mark_input_not_private`).

    >>> class T:
    ...     production, source = True, "t.yaml"
    ...     input = type("I", (), {"topic": "in"})()
    ...     privacy = type("P", (), {"clock": "tick", "time": "event"})()
    >>> guard = TimestampTypeGuard([T()])
    >>> guard.check("in", 1)        # LogAppendTime: fine
    >>> guard.check("other", 0)     # not an event-time input topic
    >>> guard.check("in", 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketches.errors.SpecError: t.yaml: input.topic: records of topic 'in' carry CreateTime ...
    """

    def __init__(self, topologies: Sequence[Any]) -> None:
        self._topics: dict[str, tuple[bool, str]] = {}
        for t in topologies:
            if t.privacy.clock == "tick" and t.privacy.time == "event":
                prod, _ = self._topics.get(t.input.topic, (False, t.source))
                self._topics[t.input.topic] = (prod or t.production, t.source)
        self._warned: set[str] = set()

    def check(self, topic: str, timestamp_type: int) -> str | None:
        """Raise (production) if ``timestamp_type`` is not LogAppendTime (1); otherwise
        warn once and return why the topic's releases are not private (None if fine)."""
        info = self._topics.get(topic)
        if info is None or timestamp_type == 1:
            return None
        production, source = info
        msg = (f"{source}: input.topic: records of topic {topic!r} carry CreateTime "
               f"timestamps (type {timestamp_type}) although event time needs the broker's "
               f"LogAppendTime: the broker does not apply {TIMESTAMP_TYPE}={LOG_APPEND_TIME} "
               "(the embedded Tansu broker reports it but keeps producer timestamps), so "
               "producers choose their records' ticks; set the topic's "
               f"{TIMESTAMP_TYPE} to {LOG_APPEND_TIME} on a broker that honours it")
        if production:
            raise SpecError(msg)
        if topic not in self._warned:
            self._warned.add(topic)
            log.warning("%s (not a production topology: its releases now say private: false)",
                        msg)
        return (f"event time from producer CreateTime timestamps on topic {topic!r}: one "
                "record stamped ahead can advance the watermark and make later records late, "
                "so one event changes what others count")


def topic_configs(topo: Any) -> tuple[dict[str, str], dict[str, str]]:
    """``(input, release)`` topic configs the worker declares topics with."""
    inp = ({TIMESTAMP_TYPE: LOG_APPEND_TIME}
           if topo.privacy.clock == "tick" and topo.privacy.time == "event" else {})
    return inp, {TIMESTAMP_TYPE: CREATE_TIME}
