"""Pure tests of kafka.broker_watch, runtime.poison bookkeeping, metrics hygiene, CLI errors."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.support.engine import Clock, MemSink, MemStore, ev, topo
from worker.cli.main import build_parser, main
from worker.engine.engine import Engine
from worker.ingest.decode import REASONS
from worker.kafka.broker_watch import BrokerUnavailable, BrokerWatch
from worker.observe.metrics import Metrics


def _watch(probe_results: list[bool], *, limit: float, embedded=None):
    fatal: list[BaseException] = []
    changes: list[bool] = []
    now = [0.0]

    async def probe() -> bool:
        ok = probe_results.pop(0) if probe_results else False
        if not ok:
            raise ConnectionError("refused")
        return True

    w = BrokerWatch(probe, "b:1", outage_limit_s=limit, on_fatal=fatal.append,
                    embedded_exit=embedded, on_change=changes.append, period_s=0.01,
                    clock=lambda: now[0])
    return w, fatal, changes, now


def test_outage_sets_not_ready_then_exits_after_the_limit() -> None:
    w, fatal, changes, now = _watch([True, False], limit=30)

    async def run() -> None:
        task = asyncio.create_task(w.run())
        for _ in range(400):
            await asyncio.sleep(0.005)
            now[0] += 0.5
            if fatal:
                break
        task.cancel()

    asyncio.run(run())
    assert changes[:1] == [False] and not w.connected
    assert isinstance(fatal[0], BrokerUnavailable)
    assert "DPSTREAM_BROKER_OUTAGE_LIMIT_S=30" in str(fatal[0])


def test_reconnect_restores_readiness_and_zero_limit_waits_forever() -> None:
    w, fatal, changes, now = _watch([True, False, False, True], limit=0)

    async def run() -> None:
        task = asyncio.create_task(w.run())
        for _ in range(200):
            await asyncio.sleep(0.005)
            now[0] += 20
        task.cancel()

    asyncio.run(run())
    assert changes[:2] == [False, True]
    assert fatal == []


def test_embedded_broker_death_is_fatal_at_once_and_named() -> None:
    w, fatal, _, _ = _watch([True] * 100, limit=300, embedded=lambda: "killed by signal 9")
    asyncio.run(asyncio.wait_for(w.run(), 5))
    assert "embedded broker" in str(fatal[0]) and "in-memory data" in str(fatal[0])
    assert "killed by signal 9" in str(fatal[0])


def test_error_series_exist_at_zero_and_revoked_gauges_go() -> None:
    m = Metrics()
    eng = Engine([topo()], MemStore(), MemSink(), m, clock=Clock(1_000_000.0))
    for reason in REASONS:
        assert m.value("dpstream_dead_letters_total", topology="t", reason=reason) == 0.0
        assert m.value("dpstream_decode_errors_total", topology="t", reason=reason) == 0.0
    for name in ("events_in", "contributions_dropped", "events_over_horizon"):
        assert m.value(f"dpstream_{name}_total", topology="t") == 0.0

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x")])
        await eng.on_timer()
        assert m.value("dpstream_epoch", topology="t", shard="r1") is not None
        m.lag.labels(topology="t", partition="0").set(5)
        await eng.revoke([("in", 0)])
        m.forget_partition("t", 0)

    asyncio.run(run())
    assert m.value("dpstream_epoch", topology="t", shard="r1") is None
    assert m.value("dpstream_sketch_memory_bytes", topology="t", shard="r1") is None
    assert m.value("dpstream_consumer_lag_messages", topology="t", partition="0") is None


def test_metrics_port_in_use_is_one_clear_line(capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["demo", "--no-faust", "--metrics-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"127.0.0.1:{port}" in err and "--metrics-port" in err


def test_validate_checks_topologies_without_a_broker(capsys, tmp_path) -> None:
    assert main(["validate", "topologies/netmon.yaml"]) == 0
    assert "ok topologies/netmon.yaml" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ninput: {topic: a}\n")
    assert main(["validate", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert build_parser().parse_args(["demo", "--metrics-port", "0"]).metrics_port == 0


@pytest.mark.parametrize("attempts", [1, 3])
def test_poison_guard_isolates_then_gives_up(attempts: int) -> None:
    from worker.runtime.poison import PoisonGuard

    g = PoisonGuard(attempts)
    recs = [(o, None, b"v", 0) for o in range(10, 14)]
    g.failed("in", 0, recs)
    assert [len(c) for c in g.plan("in", 0, recs)] == [1, 1, 1, 1]
    out = [g.failed("in", 0, [recs[2]]) for _ in range(attempts)]
    assert out[-1] == 12 and all(o is None for o in out[:-1])
    g.forget("in", 0)
    assert [len(c) for c in g.plan("in", 0, recs)] == [4]
