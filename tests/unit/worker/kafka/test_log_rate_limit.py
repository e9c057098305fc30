"""Issue 23: the Kafka-client log rate limiter must never break logging.

Its summary record (``... (N similar lines suppressed ...)``) goes through real
handlers: the standard formatter and Faust's ``mode`` formatter, which rewrites
``record.args`` before formatting. A summary record left with ``args=None``
crashed the latter ("--- Logging error --- TypeError") with the summary visible
only inside the traceback.
"""

from __future__ import annotations

import io
import logging
import uuid

import pytest

from worker.kafka.broker_watch import RateLimitedLog


def _handlers() -> list[tuple[logging.Handler, io.StringIO]]:
    from mode.utils.logging import ExtensionFormatter  # what a Faust-hosted worker uses

    out = []
    for fmt in (logging.Formatter("%(levelname)s %(name)s: %(message)s"),
                ExtensionFormatter(fmt="%(levelname)s %(name)s: %(message)s")):
        buf = io.StringIO()
        h = logging.StreamHandler(buf)
        h.setFormatter(fmt)
        out.append((h, buf))
    return out


@pytest.mark.parametrize("args", [("node-1", OSError(111, "Connect call failed")),
                                  ({"node": "node-1"},)],
                         ids=["tuple", "mapping"])
def test_summary_is_a_proper_log_line_through_real_handlers(capsys, args) -> None:
    lg = logging.getLogger(f"aiokafka.test.{uuid.uuid4().hex}")
    lg.propagate, lg.level = False, logging.DEBUG
    handlers = _handlers()
    for h, _ in handlers:
        lg.addHandler(h)
    now = [0.0]
    lg.addFilter(RateLimitedLog(interval_s=30, clock=lambda: now[0]))
    template = ("Unable connect to %(node)s: down" if isinstance(args[0], dict)
                else "Unable connect to %s: %s")
    try:
        for t in (0.0, 1.0, 2.0, 3.0, 31.0, 32.0, 62.0):
            now[0] = t
            lg.error(template, *args)
    finally:
        for h, _ in handlers:
            lg.removeHandler(h)
    err = capsys.readouterr().err
    assert "Logging error" not in err and "TypeError" not in err, err
    for _, buf in handlers:
        lines = buf.getvalue().splitlines()
        assert len(lines) == 3, lines
        assert all(line.startswith(f"ERROR {lg.name}: Unable connect to node-1") for line in lines)
        assert lines[1].endswith("(3 similar lines suppressed in the last 30 s)"), lines
        assert lines[2].endswith("(1 similar lines suppressed in the last 30 s)"), lines
