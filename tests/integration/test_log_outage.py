"""Issue 23: the Kafka-client log rate limiter through a real broker freeze.

The broker is frozen with SIGSTOP (as in ``test_broker_faults``) under a
Faust-hosted worker (whose log formatter rewrites ``record.args``), with a
1 s rate-limit interval so that summaries come within seconds. A freeze alone
makes the Kafka client log a few distinct lines per request timeout (40 s), so
once the worker has seen the outage the frozen broker is killed, as a
supervisor would: the client then logs the same connection error many times a
second, which is what the limiter summarises. The worker's output must hold
the summary as a proper log line and never a ``--- Logging error ---`` (which
every summary caused before).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.support.kafka import ROOT
from tests.support.processes import wait_for as _wait
from tests.support.processes import worker_env as _env
from worker.kafka.embedded import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker

# a summary line in either log format: "2026-11-27T16:10:40.985Z ERROR ..." (one format) or
# "2026-11-27 16:10:40,985 [pid] ERROR ..." (Faust's)
SUMMARY = re.compile(r"^\S+ (?:\S+ )?(?:\[\S+\] )?\S*(?:WARNING|ERROR)\S* "
                     r".*similar lines suppressed in the last 1 s\)", re.M)


def test_rate_limited_summary_is_a_log_line_during_a_freeze(make_topology, tmp_path,
                                                             unique) -> None:
    b = EmbeddedBroker()
    b.start()
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    proc = None
    try:
        env = _env(DPSTREAM_BROKER=b.bootstrap, DPSTREAM_METRICS_PORT=str(free_port()),
                   DPSTREAM_GROUP_ID=unique, DPSTREAM_LOG_INTERVAL_S="1",
                   DPSTREAM_BROKER_OUTAGE_LIMIT_S="0")
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "run", "--faust",
                                     "--topology", str(make_topology(partitions=1))],
                                    cwd=ROOT, env=env, stdout=o, stderr=e)

        def text() -> str:
            return out.read_text(errors="replace") + err.read_text(errors="replace")

        assert _wait(lambda: "worker started" in text(), 90), text()[-3000:]
        assert b.pid is not None
        os.kill(b.pid, signal.SIGSTOP)
        try:
            assert _wait(lambda: "unreachable" in text(), 30, step=0.2), text()[-3000:]
        finally:
            b.stop()  # SIGTERM stays pending while stopped; stop() then kills it
        found = _wait(lambda: SUMMARY.search(text()) is not None
                      or "Logging error" in text(), 60, step=0.2)
        stderr = err.read_text(errors="replace")
        assert "Logging error" not in stderr, stderr[-4000:]
        assert "Logging error" not in text(), text()[-4000:]
        assert found, text()[-4000:]
        assert proc.poll() is None, text()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        b.stop()
