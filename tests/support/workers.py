"""Worker processes of the integration tests and scripts (PID-tracked), and their topology."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.kafka import (
    PLUGIN,
    ROOT,
)

TOPOLOGY = """\
name: {name}
production: false
input:
  topic: {name}-in
  partitions: {partitions}
  encoding: {encoding}
  max_message_bytes: {max_message_bytes}
  fields: {{shard: router, item: src{unit_field}}}
{shards}mechanism:
  name: {mechanism}
  params: {params}
privacy:
  eps: 1.0
  delta: 1.0e-6
  tick_ms: {tick_ms}
  epoch_ticks: {epoch_ticks}
{unit_cap}noise:
  kind: zero
  allow_insecure_noise: true
release:
  every_ticks: {every_ticks}
  topic: {name}-out
dead_letter:
  topic: {name}-dlq
"""


class WorkerProcs:
    """Worker subprocesses started by one test; all are killed at teardown."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap, self.log_dir = bootstrap, log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, topology: Path, *, group: str, assignment: str = "group",
              crash_points: str = "", extra_env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.update({
            "DPSTREAM_BROKER": self.bootstrap, "DPSTREAM_GROUP_ID": group,
            "DPSTREAM_ASSIGNMENT": assignment, "DPSTREAM_METRICS_PORT": "0",
            "DPSTREAM_PLUGINS": PLUGIN, "DPSTREAM_CRASH_POINTS": crash_points,
            "DPSTREAM_CHECKPOINT_TOPIC": f"{group}-checkpoints",
            "DPSTREAM_LOG_LEVEL": "INFO", "PYTHONPATH": str(ROOT),
        })
        env.update(extra_env or {})
        log = open(self.log_dir / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "run", "--topology",
                                 str(topology), *args], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def kill9(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def terminate(self, proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        return proc.wait(timeout=timeout)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-4000:]
                         for p in sorted(self.log_dir.glob("worker-*.log")))

    def full_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")
                         for p in sorted(self.log_dir.glob("worker-*.log")))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

