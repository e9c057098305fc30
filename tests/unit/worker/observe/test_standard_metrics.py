"""Issue 23: the worker's endpoint serves the standard process, platform and GC metrics
(the memory model is checked against ``process_resident_memory_bytes``)."""

from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from worker.observe.metrics import Metrics


def test_process_platform_and_gc_metrics_are_served() -> None:
    m = Metrics()
    port = m.serve("127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        m.close()
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total",
                 "process_open_fds", "python_info", "python_gc_objects_collected_total"):
        assert name in samples, name
    assert samples["process_resident_memory_bytes"].value > 1e6
    assert samples["python_info"].labels["implementation"]
    # several workers in one process (tests) each have their own registry
    assert Metrics().value("process_resident_memory_bytes") is not None


def test_a_registry_that_already_has_them_is_accepted() -> None:
    r = CollectorRegistry()
    ProcessCollector(registry=r)
    m = Metrics(r)  # no "Duplicated timeseries" error
    assert m.value("python_gc_objects_collected_total", generation="0") is not None
