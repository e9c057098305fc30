"""Only ``dpstream demo`` keeps checkpoints in memory (issue 23 item 4); ``dpstream run``
and every other way of building a worker checkpoint to the broker's topic."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from worker.runtime.faust_host import create_faust_app
from worker.runtime.worker import Worker, create_worker

ROOT = Path(__file__).resolve().parents[4] / "worker"


def test_memory_checkpoints_are_off_by_default() -> None:
    for fn in (create_worker, create_faust_app, Worker.__init__):
        assert inspect.signature(fn).parameters["memory_checkpoints"].default is False


def test_only_the_demo_turns_memory_checkpoints_on() -> None:
    callers = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and any(
                        k.arg == "memory_checkpoints" and not (
                            isinstance(k.value, ast.Constant) and k.value.value is False)
                        for k in call.keywords):
                    callers.add(f"{path.relative_to(ROOT.parent)}:{fn.name}")
    # the factories pass their own argument on; the CLI's demo is the only one setting it
    assert callers == {"worker/runtime/faust_host.py:create_faust_app",
                       "worker/runtime/worker.py:create_worker",
                       "worker/runtime/worker.py:__init__",
                       "worker/cli/run.py:_demo", "worker/cli/run.py:cmd_demo"}, callers
