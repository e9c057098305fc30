"""/healthz and /readyz: the pure probe functions and their HTTP endpoints next to /metrics."""

from __future__ import annotations

import types
import urllib.error
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from worker.observe.health import Probe, liveness, readiness
from worker.observe.metrics import Metrics

READY = {"started": True, "stopping": False, "failed": None, "broker_connected": True,
         "rebalancing": False}


def state(**changes: Any) -> SimpleNamespace:
    return SimpleNamespace(**{**READY, **changes})


def test_ready_only_when_every_condition_holds() -> None:
    assert readiness(state()) == Probe(True, "ready")
    for field, bad in [("started", False), ("stopping", True), ("failed", RuntimeError("x")),
                       ("broker_connected", False), ("rebalancing", True)]:
        probe = readiness(state(**{field: bad}))
        assert not probe.ok, field
        assert probe.reason != "ready"


def test_live_unless_failed() -> None:
    assert liveness(state(rebalancing=True, started=False)).ok
    assert liveness(state(failed=ValueError("boom"))) == Probe(False, "failed: ValueError")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def served() -> Any:
    m = Metrics()
    box = {"state": state(rebalancing=True)}
    port = m.serve("127.0.0.1", 0, live=lambda: liveness(box["state"]),
                   ready=lambda: readiness(box["state"]))
    yield m, box, f"http://127.0.0.1:{port}"
    m.close()


def test_endpoints_follow_the_worker_state(served: Any) -> None:
    _m, box, base = served
    status, body = _get(base + "/readyz")
    assert status == 503 and body.startswith("rebalancing")
    assert _get(base + "/healthz") == (200, "alive\n")
    assert "dpstream_worker_ready 0.0" in _get(base + "/metrics")[1]
    box["state"] = state()
    assert _get(base + "/readyz") == (200, "ready\n")
    assert "dpstream_worker_ready 1.0" in _get(base + "/metrics")[1]
    box["state"] = state(failed=RuntimeError("x"))
    assert _get(base + "/healthz")[0] == 503
    assert _get(base + "/readyz")[0] == 503


def test_metrics_endpoint_still_serves_the_registry(served: Any) -> None:
    m, _box, base = served
    m.events_in.labels(topology="t").inc(5)
    status, body = _get(base + "/metrics")
    assert status == 200
    assert 'dpstream_events_in_total{topology="t"} 5.0' in body


def test_close_frees_the_port() -> None:
    m = Metrics()
    port = m.serve("127.0.0.1", 0)
    m.close()
    again = Metrics()
    assert again.serve("127.0.0.1", port) == port
    again.close()


def test_worker_readiness_follows_the_rebalance() -> None:
    """A real Worker (fake engine, no broker): not ready until its partitions are restored."""
    import asyncio

    from aiokafka import TopicPartition

    from tests.support.consume import FakeConsumer, FakeEngine
    from tests.support.consume import make_worker as _worker
    from worker.runtime.worker import listener_for as _Listener

    tp = TopicPartition("in", 0)
    w = _worker(FakeEngine(restored_at=3))
    w.consumer = FakeConsumer(w, [])  # type: ignore[assignment]
    assert w.readiness().reason.startswith("starting")  # start() has not completed
    w.started = True
    assert w.readiness().reason.startswith("rebalancing")  # group mode: no assignment yet
    asyncio.run(_Listener(w).on_partitions_assigned({tp}))
    assert w.readiness() == Probe(True, "ready")
    asyncio.run(_Listener(w).on_partitions_revoked({tp}))
    assert not w.readiness().ok
    w.watch = types.SimpleNamespace(connected=False)  # type: ignore[assignment]
    asyncio.run(_Listener(w).on_partitions_assigned({tp}))
    assert w.readiness() == Probe(False, "broker not connected")
    w.watch = None
    w.request_stop()
    assert w.readiness() == Probe(False, "stopping")
    assert w.liveness().ok


def test_run_refuses_to_start_an_embedded_broker_when_forbidden(monkeypatch: Any,
                                                               capsys: Any) -> None:
    """The container image sets DPSTREAM_EMBEDDED_BROKER=false: no broker is an error."""
    from worker.cli.main import main

    monkeypatch.delenv("DPSTREAM_BROKER", raising=False)
    monkeypatch.setenv("DPSTREAM_EMBEDDED_BROKER", "false")
    assert main(["run", "--no-faust", "--topology", "topologies/netmon.yaml"]) == 2
    err = capsys.readouterr().err
    assert "DPSTREAM_BROKER: no broker configured" in err
