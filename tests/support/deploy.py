"""Paths and tool runners of the deploy tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


DEPLOY = ROOT / "deploy"


CHART = DEPLOY / "helm" / "dpstream"


def tool(name: str) -> str:
    """Path of a command-line tool; missing: fail under CI (.ci/run installs it), else skip."""
    path = shutil.which(name)
    if path is None:
        venv_bin = Path(sys.executable).parent / name  # console scripts of this venv
        if venv_bin.exists():
            return str(venv_bin)
        msg = (f"{name} is not installed (Debian package 'prometheus' for promtool/prometheus; "
               "kubectl for kustomize); .ci/run installs what is missing")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def run(*cmd: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run a tool; a non-zero exit fails the test with its output."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc

