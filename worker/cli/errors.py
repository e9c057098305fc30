"""One-line errors of the ``dpstream`` commands: ``dpstream: <what>; <fix>``, exit 2.

Every command checks what it depends on before it starts anything: the broker
answers (:func:`check_reachable`, with the Kafka client's own connection log
lines silenced: the one line says it) and the ports it serves on are free
(:func:`check_port`). :func:`one_line` turns what is left (a
:class:`~sketches.errors.DPStreamError`, a port taken after the check, a Kafka
client's connection error) into the one line, exit code 2, no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

from sketches.errors import DPStreamError

EXIT_ERROR = 2
KAFKA_LOGGERS = ("aiokafka", "kafka")


@contextlib.contextmanager
def quiet_kafka_logs() -> Iterator[None]:
    """Silence the Kafka clients' own loggers (their connection errors) for a while."""
    loggers = [logging.getLogger(name) for name in KAFKA_LOGGERS]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, before, strict=True):
            lg.setLevel(level)


def check_reachable(bootstrap: str, security: dict[str, Any], timeout_s: float = 10.0) -> None:
    """Raise a one-line :class:`~worker.kafka.broker_watch.BrokerUnavailable` unless a
    broker answers at ``bootstrap`` (address, then ``--broker``/``DPSTREAM_BROKER``)."""
    from worker.kafka.broker_watch import check_broker

    with quiet_kafka_logs():
        asyncio.run(check_broker(bootstrap, security, timeout_s))


def port_taken_message(host: str, port: int, what: str, fix: str) -> str:
    """``<what> port host:port is already in use; <fix>``."""
    return f"{what} port {host}:{port} is already in use (another process listens there); {fix}"


def check_port(host: str, port: int, what: str, fix: str) -> None:
    """Raise a one-line :class:`DPStreamError` if ``host:port`` cannot be listened on.

    The probe sets ``SO_REUSEADDR`` like the servers do, so connections of an
    earlier process in TIME-WAIT do not count as taken. Port 0 is never taken.
    """
    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise DPStreamError(port_taken_message(host, port, what, fix)) from None
            raise DPStreamError(f"{what} address {host}:{port}: {exc.strerror or exc}; "
                                f"{fix}") from None


def describe(exc: BaseException) -> str | None:
    """The one line for an error a command should not end with a traceback on, else None."""
    if isinstance(exc, DPStreamError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return (f"{exc.strerror or 'address already in use'}: a port this command serves "
                "on is taken; pass a free port (see the command's --help)")
    mod = type(exc).__module__ or ""
    if mod.startswith(("aiokafka", "kafka", "confluent_kafka", "cimpl")):
        return (f"the Kafka client failed ({type(exc).__name__}: {exc}); check --broker / "
                "DPSTREAM_BROKER and that the broker runs")
    return None


def one_line(fn: Callable[[], int]) -> int:
    """Run a command; a known error ends as one line ``dpstream: ...`` on stderr, exit 2
    (Ctrl-C: 130). Anything else is a bug and keeps its traceback."""
    try:
        return int(fn() or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        line = describe(exc)
        if line is None:
            raise
        print(f"dpstream: {line}", file=sys.stderr, flush=True)
        return EXIT_ERROR
