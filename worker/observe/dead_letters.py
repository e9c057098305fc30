"""Dead-letter bursts summarised at WARNING: one line per topology per interval.

The engine dead-letters records it cannot use (bad JSON, a missing field, late
or future under event time, a poison record, ...): each goes to the topology's
dead-letter topic and ``dpstream_dead_letters_total``, and here.
:class:`DeadLetterSummary` counts them per topology and reason and, once the
interval since the first uncounted one has passed, logs one WARNING per topology::

    topology netmon: dead letters in the last 30 s: 120 bad_json, 4 late (on topic
    netflow-dlq; dpstream_dead_letters_total counts each)

so a burst is visible in the log without a line per record. The engine calls
:meth:`DeadLetterSummary.add` per dead letter and :meth:`DeadLetterSummary.flush_due`
from its timer round; :meth:`DeadLetterSummary.flush` logs what is left (at stop).

>>> import logging
>>> t = [0.0]
>>> s = DeadLetterSummary(30.0, clock=lambda: t[0])
>>> s.add("netmon", "bad_json", 120, topic="netflow-dlq"); s.add("netmon", "late", 4)
>>> s.flush_due()  # not yet: the interval has not passed
[]
>>> t[0] = 30.0
>>> print(*s.flush_due())  # doctest: +NORMALIZE_WHITESPACE
topology netmon: dead letters in the last 30 s: 120 bad_json, 4 late (on topic
netflow-dlq; dpstream_dead_letters_total counts each)
>>> s.flush_due()
[]
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("worker.observe.dead_letters")


@dataclass
class _Window:
    started: float
    counts: Counter[str] = field(default_factory=Counter)
    topic: str = ""


class DeadLetterSummary:
    """Counts dead letters per topology and reason; one WARNING per topology per interval."""

    def __init__(self, interval_s: float = 30.0, *,
                 clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger | None = None) -> None:
        self.interval_s = float(interval_s)
        self.clock = clock
        self.log = logger or log
        self._open: dict[str, _Window] = {}

    def add(self, topology: str, reason: str, n: int = 1, *, topic: str = "") -> None:
        """Count ``n`` dead letters of ``topology`` for ``reason`` (``topic``: its
        dead-letter topic, named in the summary)."""
        w = self._open.get(topology)
        if w is None:
            w = self._open[topology] = _Window(self.clock())
        w.counts[reason] += n
        if topic:
            w.topic = topic

    def pending(self) -> dict[str, dict[str, int]]:
        """Counts not summarised yet, per topology and reason."""
        return {t: dict(w.counts) for t, w in self._open.items()}

    def flush_due(self) -> list[str]:
        """Log (and return) the summary of each topology whose interval has passed."""
        now = self.clock()
        due = [t for t, w in self._open.items() if now - w.started >= self.interval_s]
        return [self._emit(t, now) for t in due]

    def flush(self) -> list[str]:
        """Log (and return) every pending summary now (e.g. at stop)."""
        now = self.clock()
        return [self._emit(t, now) for t in list(self._open)]

    def _emit(self, topology: str, now: float) -> str:
        w = self._open.pop(topology)
        seconds = max(self.interval_s, now - w.started)
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(w.counts.items(),
                                                          key=lambda kv: (-kv[1], kv[0])))
        where = f"on topic {w.topic}; " if w.topic else ""
        msg = (f"topology {topology}: dead letters in the last {seconds:.0f} s: {reasons} "
               f"({where}dpstream_dead_letters_total counts each)")
        self.log.warning("%s", msg, extra={"topology": topology})
        return msg
