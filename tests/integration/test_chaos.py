"""A short run of scripts/chaos.py (worker kills, pauses, bad records, a broker kill)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.kafka import ROOT

pytestmark = pytest.mark.broker


def test_short_chaos_run_passes(tmp_path) -> None:
    out = tmp_path / "chaos.md"
    run = subprocess.run([sys.executable, "scripts/chaos.py", "--phases", "1", "--rounds", "3",
                          "--events-per-round", "400", "--seed", "2", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    text = out.read_text()
    assert "PASS" in text and "events lost 0" in text and "counted twice 0" in text
