"""Broker faults: connectivity state, capped backoff, rate-limited logs, outage limit.

:class:`BrokerWatch` runs beside the worker's consume and timer tasks:

- every ``probe`` (a Metadata round trip through the worker's own client)
  that fails or times out marks the broker *disconnected*: the public
  :attr:`BrokerWatch.connected` flag (``Worker.broker_connected``, readiness)
  and the gauge ``dpstream_broker_connected`` go to 0, one WARNING says so;
- while disconnected it probes with capped exponential backoff
  (``0.5 s, 1 s, 2 s ... 10 s``); metrics keep being served (their HTTP
  server is a thread that never waits for the broker);
- after ``outage_limit_s`` seconds without the broker the worker stops with a
  clear :class:`BrokerUnavailable` (non-zero exit), instead of crash-looping
  on obscure client errors; ``0`` waits forever;
- an embedded broker (a child process of ``dpstream run``/``demo``) that dies
  is detected at the next check (every 0.2 s): the worker stops at once and
  says that the embedded broker died and that its in-memory data is gone.

:class:`RateLimitedLog` is a logging filter that lets one line per cause
(logger + message template) through per interval and appends how many similar
lines it suppressed; the worker installs it on the Kafka client loggers, which
otherwise log hundreds of lines per second while a broker is down.

Examples
--------
>>> import logging
>>> f = RateLimitedLog(interval_s=60, clock=lambda: 0.0)
>>> rec = lambda: logging.LogRecord("aiokafka", 40, "", 0, "conn %s failed", ("b1",), None)
>>> [f.filter(rec()) for _ in range(3)]
[True, False, False]
>>> f.clock = lambda: 61.0
>>> r = rec(); f.filter(r), r.getMessage()
(True, 'conn b1 failed (2 similar lines suppressed in the last 60 s)')
>>> backoff_delays(6)
[0.5, 1.0, 2.0, 4.0, 8.0, 10.0]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from worker.errors import BrokerUnavailable
from worker.kafka.client_config import for_kind

log = logging.getLogger(__name__)

KAFKA_LOGGERS = ("aiokafka", "kafka")


def backoff_delays(n: int, first: float = 0.5, cap: float = 10.0) -> list[float]:
    """The first ``n`` probe delays of the capped exponential backoff."""
    return [min(cap, first * 2 ** i) for i in range(n)]


class RateLimitedLog(logging.Filter):
    """One record per (logger, message template) per ``interval_s``, with a count."""

    def __init__(self, interval_s: float = 30.0, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        super().__init__()
        self.interval_s, self.clock = interval_s, clock
        self._last: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        if n:
            # The summary replaces the template by the formatted text, so the record must
            # carry no arguments any more: an empty tuple, not None. Formatters that
            # rewrite args (Faust's mode.utils.logging.ExtensionFormatter turns None into
            # (None,)) would otherwise apply "%" again and crash logging with a TypeError.
            record.msg = f"{record.getMessage()} ({n} similar lines suppressed in the last " \
                         f"{self.interval_s:.0f} s)"
            record.args = ()
        if len(self._last) > 10_000:  # unbounded message templates: start over
            self._last.clear()
        return True


def install_rate_limit(interval_s: float) -> RateLimitedLog:
    """Attach one :class:`RateLimitedLog` to every Kafka client logger (idempotent).

    A logger's filters only see records created on that logger (not on its
    children), so the filter goes on each existing ``aiokafka.*``/``kafka.*``
    logger; the client modules create theirs at import, before the worker starts.
    """
    import aiokafka  # noqa: F401  # its loggers exist once it is imported

    names = [n for n in list(logging.Logger.manager.loggerDict)
             if n.split(".")[0] in KAFKA_LOGGERS]
    loggers = [logging.getLogger(n) for n in sorted({*names, *KAFKA_LOGGERS})]
    for lg in loggers:
        for f in lg.filters:
            if isinstance(f, RateLimitedLog):
                return f
    flt = RateLimitedLog(interval_s)
    for lg in loggers:
        lg.addFilter(flt)
    return flt


class BrokerWatch:
    """Connectivity of the worker's broker (see the module docstring).

    Parameters
    ----------
    probe
        Coroutine: one Metadata round trip; raises or returns False if the
        broker does not answer.
    bootstrap
        For messages only.
    outage_limit_s
        Stop the worker after this long without the broker (0: never).
    embedded_exit
        For an embedded broker: returns None while the child process runs,
        else a description of how it ended (e.g. ``"killed by signal 9"``).
    on_fatal
        Called once with a :class:`BrokerUnavailable` when the worker must stop.
    on_change
        Called with the new state on every connected/disconnected transition.
    """

    def __init__(self, probe: Callable[[], Awaitable[bool]], bootstrap: str, *,
                 outage_limit_s: float, on_fatal: Callable[[BaseException], None],
                 embedded_exit: Callable[[], str | None] | None = None,
                 on_change: Callable[[bool], None] | None = None,
                 period_s: float = 2.0, probe_timeout_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.probe, self.bootstrap = probe, bootstrap
        self.outage_limit_s, self.on_fatal = outage_limit_s, on_fatal
        self.embedded_exit, self.on_change = embedded_exit, on_change
        self.period_s, self.probe_timeout_s, self.clock = period_s, probe_timeout_s, clock
        self.connected = True
        """False from a failed probe (or a broker error reported by the worker) until a
        probe succeeds again; readiness uses it."""
        self.down_since: float | None = None
        self._wake = asyncio.Event()

    def report_error(self, exc: BaseException) -> None:
        """A client call failed with a broker error: probe now."""
        log.debug("broker error reported: %r", exc)
        self._wake.set()

    def _set(self, connected: bool, why: str = "") -> None:
        if connected == self.connected:
            return
        self.connected = connected
        if connected:
            down = self.clock() - (self.down_since or self.clock())
            log.warning("broker %s reachable again after %.1f s", self.bootstrap, down)
            self.down_since = None
        else:
            self.down_since = self.clock()
            limit = (f"the worker stops after {self.outage_limit_s:.0f} s "
                     "(DPSTREAM_BROKER_OUTAGE_LIMIT_S)" if self.outage_limit_s else
                     "waiting without limit (DPSTREAM_BROKER_OUTAGE_LIMIT_S=0)")
            log.warning("broker %s unreachable (%s); retrying with backoff up to 10 s, "
                        "metrics still served, not ready; %s", self.bootstrap, why, limit)
        if self.on_change is not None:
            self.on_change(connected)

    def _check_embedded(self) -> bool:
        if self.embedded_exit is None:
            return False
        how = self.embedded_exit()
        if how is None:
            return False
        self._set(False, f"embedded broker {how}")
        self.on_fatal(BrokerUnavailable(
            f"the embedded broker on {self.bootstrap} died ({how}); its in-memory data "
            "(topics, checkpoints, releases) is gone. Restart dpstream to start a new, empty "
            "embedded broker, or point --broker / DPSTREAM_BROKER at a persistent Kafka"))
        return True

    async def _probe_once(self) -> str | None:
        try:
            ok = await asyncio.wait_for(self.probe(), self.probe_timeout_s)
        except Exception as exc:  # any failure of the round trip is an outage
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return None if ok else "no Metadata response"

    async def run(self) -> None:
        """Watch until cancelled (or until the worker must stop)."""
        fails = 0
        next_probe = self.clock()
        while True:
            if self._check_embedded():
                return
            if self._wake.is_set() or self.clock() >= next_probe:
                self._wake.clear()
                why = await self._probe_once()
                if self._check_embedded():
                    return
                if why is None:
                    self._set(True)
                    fails = 0
                    next_probe = self.clock() + self.period_s
                else:
                    self._set(False, why)
                    next_probe = self.clock() + backoff_delays(fails + 1)[-1]
                    fails = min(fails + 1, 16)
                    down = self.clock() - (self.down_since or self.clock())
                    if self.outage_limit_s and down >= self.outage_limit_s:
                        self.on_fatal(BrokerUnavailable(
                            f"broker {self.bootstrap} unreachable for {down:.0f} s (limit "
                            f"DPSTREAM_BROKER_OUTAGE_LIMIT_S={self.outage_limit_s:.0f}; last "
                            f"error: {why}); exiting. Check the broker address and that it "
                            "runs, or raise the limit"))
                        return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.2)


async def check_broker(bootstrap: str, security: Mapping[str, Any],
                       timeout_s: float = 10.0) -> None:
    """Raise :class:`BrokerUnavailable` (one line, naming the address and the fix) if
    no broker answers at ``bootstrap`` within ``timeout_s``."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**{**for_kind(security, "admin"), "bootstrap_servers": bootstrap,
                                   "request_timeout_ms": int(timeout_s * 1000)})
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
    except Exception as exc:
        raise BrokerUnavailable(
            f"cannot reach the broker at {bootstrap} ({type(exc).__name__}"
            f"{': ' + str(exc) if str(exc) else ''}); check --broker / DPSTREAM_BROKER and "
            "that the broker runs") from None
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
