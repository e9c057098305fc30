"""One log format for the whole process: dpstream's, aiokafka's, Faust's and mode's loggers.

:func:`configure_logging` installs a single handler on the root logger (stderr)
and removes any other, so every logger of the process writes in one format:

``text`` (default)
    ``2026-01-01T12:00:00.123Z INFO worker.engine.engine: message [topology=t shard=s
    partition=3]`` (the bracket only when the fields apply).
``json`` (``DPSTREAM_LOG_FORMAT=json``)
    one JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, and ``topology``/``shard``/``partition`` where they apply, ``exc``
    for a traceback (inside the object, so a line is still one object).

The fields come from ``extra={"topology": ..., ...}`` on a logging call, else
from :func:`log_context` (a context variable: the engine sets it around the work
of one topology and partition, so every line logged inside carries them).

>>> import io, json
>>> stream = io.StringIO()
>>> _ = configure_logging("INFO", "json", stream=stream)
>>> with log_context(topology="t", partition=3):
...     logging.getLogger("demo").warning("hello %s", "you")
>>> rec = json.loads(stream.getvalue())
>>> rec["level"], rec["logger"], rec["message"], rec["topology"], rec["partition"]
('WARNING', 'demo', 'hello you', 't', 3)
>>> reset_logging()
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
import logging
import sys
from collections.abc import Iterator
from typing import IO, Any

from sketches.errors import SpecError

FORMATS = ("text", "json")
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
FIELDS = ("topology", "shard", "partition")
"""Context fields a line carries where they apply."""

KAFKA_LOGGERS = ("aiokafka", "kafka")
"""Chatty below WARNING (every connection and rebalance step): WARNING unless DEBUG."""

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "dpstream_log_context", default=None)
_HANDLER_FLAG = "_dpstream_handler"
_saved: list[tuple[list[logging.Handler], int]] = []
"""The root logger's handlers and level before the first :func:`configure_logging`."""


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Lines logged inside carry ``fields`` (``topology``, ``shard``, ``partition``)."""
    merged = {**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The context fields of ``record``: its ``extra=`` attributes, else the context's."""
    ctx = _context.get() or {}
    out = {}
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is None:
            value = ctx.get(name)
        if value is not None:
            out[name] = value
    return out


def _iso(created: float) -> str:
    t = _dt.datetime.fromtimestamp(created, tz=_dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": _iso(record.created), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        out.update(fields_of(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [topology=... shard=... partition=...]``."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_iso(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        extra = fields_of(record)
        if extra:
            line += " [" + " ".join(f"{k}={v}" for k, v in extra.items()) + "]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def check_level(level: str) -> str:
    """``level`` upper-cased if it is a logging level name, else a one-line SpecError."""
    name = str(level).strip().upper()
    if name == "WARN":
        name = "WARNING"
    if name not in LEVELS:
        raise SpecError(f"log level {level!r}: unknown; use one of {', '.join(LEVELS)} "
                        "(--log-level or DPSTREAM_LOG_LEVEL)")
    return name


def check_format(fmt: str) -> str:
    """``fmt`` lower-cased if it is a known format, else a one-line SpecError."""
    name = str(fmt).strip().lower()
    if name not in FORMATS:
        raise SpecError(f"DPSTREAM_LOG_FORMAT: unknown format {fmt!r}; use text or json")
    return name


def configure_logging(level: str = "INFO", fmt: str = "text", *,
                      stream: IO[str] | None = None) -> logging.Handler:
    """Route every logger of the process through one handler in one format.

    Removes the root logger's other handlers and the handlers libraries added to
    their own loggers (they would print a second format), lets them propagate to
    the root, and captures ``warnings`` too. Returns the handler.
    """
    lvl = logging.getLevelNamesMapping()[check_level(level)]
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if check_format(fmt) == "json" else TextFormatter())
    setattr(handler, _HANDLER_FLAG, True)
    root = logging.getLogger()
    if not _saved:
        _saved.append((list(root.handlers), root.level))
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(lvl)
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and name.split(".")[0] in ("faust", "mode",
                                                                      *KAFKA_LOGGERS):
            for h in list(lg.handlers):
                lg.removeHandler(h)
            lg.propagate = True
    for name in KAFKA_LOGGERS:
        logging.getLogger(name).setLevel(lvl if lvl <= logging.DEBUG else
                                         max(lvl, logging.WARNING))
    logging.captureWarnings(True)
    return handler


def reset_logging() -> None:
    """Undo :func:`configure_logging`: the root logger's earlier handlers and level (tests)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_FLAG, False):
            root.removeHandler(h)
    if _saved:
        handlers, level = _saved.pop()
        for h in handlers:
            if h not in root.handlers:
                root.addHandler(h)
        root.setLevel(level)
    logging.captureWarnings(False)
