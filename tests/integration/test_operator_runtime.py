"""The worker as an operator runs it (issue 23): a read-only working directory, a
per-user state directory, and stderr under ``DPSTREAM_LOG_FORMAT=json`` holding only
JSON lines (aiokafka's, Faust's and mode's included), with dead-letter summaries."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka import PLUGIN, ROOT, produce
from worker.kafka.embedded import EmbeddedBroker

pytestmark = pytest.mark.broker


class Proc:
    """A ``dpstream run`` subprocess whose stderr is collected by a thread."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", *args],
                                     cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pred: Callable[[str], bool], timeout: float = 90) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(pred(ln) for ln in list(self.lines)):
                return True
            if self.proc.poll() is not None:
                time.sleep(0.3)
                return any(pred(ln) for ln in list(self.lines))
            time.sleep(0.2)
        return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(timeout=10)
        return code

    def text(self) -> str:
        return "\n".join(self.lines)


def _env(broker: EmbeddedBroker, unique: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DPSTREAM_", "XDG_", "FAUST_")) and k != "NUMBA_CACHE_DIR"}
    env.update({"PYTHONPATH": str(ROOT), "DPSTREAM_BROKER": broker.bootstrap,
                "DPSTREAM_GROUP_ID": unique, "DPSTREAM_METRICS_PORT": "0",
                "DPSTREAM_PLUGINS": PLUGIN, "DPSTREAM_CHECKPOINT_TOPIC": f"{unique}-ck",
                "DPSTREAM_ASSIGNMENT": "static"})
    env.update(extra)
    return env


def test_faust_run_from_a_read_only_working_directory(
        broker: EmbeddedBroker, unique: str, make_topology: Callable[..., Path],
        tmp_path: Path) -> None:
    """cwd is /proc (read-only even for root) and HOME is unwritable: Faust's data
    directory goes to the temp-dir fallback, not the working directory (before: a Faust
    traceback creating ``<app>-data`` in the cwd)."""
    topo = make_topology()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(broker, unique, HOME="/proc/no-such-home", TMPDIR=str(tmp))
    proc = Proc(["run", "--topology", str(topo)], env, cwd="/proc")
    started = proc.wait_for(lambda ln: "worker started" in ln)
    code = proc.stop()
    assert started, proc.text()[-3000:]
    assert code == 0, proc.text()[-3000:]
    assert "Traceback" not in proc.text()
    state = tmp / f"dpstream-{os.getuid()}"
    assert (state / "faust").is_dir() and any((state / "faust").iterdir())


def test_unwritable_state_dir_is_one_line(broker: EmbeddedBroker, unique: str,
                                          make_topology: Callable[..., Path]) -> None:
    env = _env(broker, unique, DPSTREAM_STATE_DIR="/proc/no-such-dir/dpstream")
    proc = subprocess.run([sys.executable, "-m", "worker.cli.main", "run", "--topology",
                           str(make_topology())], cwd="/proc", env=env,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dpstream: no writable state directory (tried "
                               "/proc/no-such-dir/dpstream")
    assert "DPSTREAM_STATE_DIR" in lines[0]


@pytest.mark.parametrize("faust", [True, False], ids=["faust", "no-faust"])
def test_json_log_format_only_json_lines(broker: EmbeddedBroker, unique: str,
                                         make_topology: Callable[..., Path],
                                         tmp_path: Path, faust: bool) -> None:
    topo = make_topology(partitions=1)
    env = _env(broker, unique, DPSTREAM_LOG_FORMAT="json", DPSTREAM_LOG_INTERVAL_S="1",
               DPSTREAM_STATE_DIR=str(tmp_path / "state"))
    flags = [] if faust else ["--no-faust"]
    proc = Proc(["run", "--log-level", "DEBUG", *flags, "--topology", str(topo)], env,
                cwd=str(ROOT))
    try:
        assert proc.wait_for(lambda ln: "worker started" in ln), proc.text()[-3000:]
        bad: list[tuple[bytes | None, bytes]] = [(b"r1", b"{not json")] * 50
        asyncio.run(produce(broker.bootstrap, f"{unique}-in", bad))
        assert proc.wait_for(lambda ln: "dead letters in the last" in ln), \
            proc.text()[-3000:]
    finally:
        code = proc.stop()
    assert code == 0, proc.text()[-3000:]
    records: list[dict[str, Any]] = []
    for ln in proc.lines:
        if not ln.strip():
            continue
        try:
            records.append(json.loads(ln))
        except ValueError:
            pytest.fail(f"not a JSON line on stderr: {ln!r}")
    for r in records:
        assert {"time", "level", "logger", "message"} <= set(r), r
    loggers = {r["logger"].split(".")[0] for r in records}
    assert {"worker", "aiokafka"} <= loggers, loggers
    if faust:
        assert loggers & {"faust", "mode"}, loggers
    (summary, *_) = [r for r in records if "dead letters in the last" in r["message"]]
    assert summary["level"] == "WARNING" and summary["topology"] == unique
    assert "50 " in summary["message"]
    lines = [r for r in records if r["message"].startswith("dead letter ")]
    assert lines and all(r["topology"] == unique and r["partition"] == 0 for r in lines)
