"""deploy/grafana: the committed dashboard JSON (and every generated copy) equals the
generator's output, and the dashboard has the panels operators need."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.deploy import DEPLOY, ROOT

pytest.importorskip("grafana_foundation_sdk", reason="pip install -e '.[deploy]'")

REQUIRED = ["Throughput", "Batch latency", "Consumer lag per partition", "Release latency",
            "Releases per shard", "Dead letters by reason", "Sketch memory",
            "Checkpoint bytes written", "Checkpoint latency", "Privacy per topology",
            "Epoch progress", "Memory: RSS and sketch model", "CPU", "Open file descriptors",
            "Python GC"]


def test_committed_files_equal_the_generator_output() -> None:
    out = subprocess.run([sys.executable, str(DEPLOY / "generate.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_dashboard_panels_and_queries() -> None:
    dash = json.loads((DEPLOY / "grafana" / "dpstream.json").read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    titles = [p["title"] for p in panels]
    assert set(REQUIRED) <= set(titles), set(REQUIRED) - set(titles)
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    for p in panels:
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}"
    # issue 23: one worker or all, per Prometheus job and instance, in every panel
    names = [v["name"] for v in dash["templating"]["list"]]
    assert {"job", "instance", "topology"} <= set(names), names
    for p in panels:
        for t in p["targets"]:
            assert 'job=~"$job"' in t["expr"] and 'instance=~"$instance"' in t["expr"], \
                (p["title"], t["expr"])
    exprs_all = " ".join(t["expr"] for p in panels for t in p["targets"])
    for metric in ("process_resident_memory_bytes", "dpstream_sketch_memory_bytes",
                   "process_cpu_seconds_total", "process_open_fds",
                   "python_gc_collections_total"):
        assert metric in exprs_all, metric
    info = next(p for p in panels if p["title"] == "Privacy per topology")
    exprs = " ".join(t["expr"] for t in info["targets"])
    for label in ("relation", "unit", "dpstream_privacy_epsilon_per_epoch",
                  "dpstream_privacy_delta_per_epoch"):
        assert label in exprs
