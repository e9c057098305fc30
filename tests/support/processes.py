"""Environment and polling helpers for tests that run workers as processes."""

from __future__ import annotations

import os
import time

from tests.support.kafka import PLUGIN, ROOT


def worker_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DPSTREAM_BROKER"}
    env.update({"DPSTREAM_PLUGINS": PLUGIN, "PYTHONPATH": str(ROOT),
                "DPSTREAM_METRICS_PORT": "0", "DPSTREAM_LOG_LEVEL": "INFO"})
    env.update(extra)
    return env


def wait_for(cond, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False

