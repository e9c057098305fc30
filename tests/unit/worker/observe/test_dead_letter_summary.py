"""Every dead-letter burst is summarised at WARNING with reasons and counts, once per
interval per topology (issue 23); a fake clock drives the interval."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.observe.dead_letters import DeadLetterSummary

TEXT = """
name: o
input: {topic: in, partitions: 2, fields: {shard: r, item: i}}
mechanism: {name: lazy_cms, params: {depth: 2, width: 64}}
privacy: {eps: 1.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 1000,
          epoch_ticks: 60, time: processing}
noise: {kind: zero, allow_insecure_noise: true}
release: {every_ticks: 1, topic: out}
dead_letter: {topic: dlq}
"""


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING
            and "dead letters" in r.getMessage()]


def test_one_summary_per_interval_per_topology(caplog: pytest.LogCaptureFixture) -> None:
    t = [100.0]
    s = DeadLetterSummary(30.0, clock=lambda: t[0])
    caplog.set_level(logging.INFO)
    for _ in range(120):
        s.add("a", "bad_json", topic="a-dlq")
    for _ in range(4):
        s.add("a", "late")
    t[0] = 110.0
    s.add("b", "missing_field")
    assert s.flush_due() == [] and _warnings(caplog) == []
    t[0] = 130.0
    s.flush_due()
    (rec,) = _warnings(caplog)
    assert rec.getMessage().startswith("topology a: dead letters in the last 30 s: "
                                       "120 bad_json, 4 late (on topic a-dlq;")
    assert rec.topology == "a"  # type: ignore[attr-defined]
    t[0] = 140.0
    s.flush_due()
    assert [r.getMessage().split(":")[0] for r in _warnings(caplog)] == ["topology a",
                                                                        "topology b"]
    t[0] = 1000.0
    assert s.flush_due() == [] and s.flush() == []  # nothing new: nothing logged


def test_engine_burst_of_bad_records_yields_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    from tests.support.engine import Clock, MemSink, MemStore
    from worker.engine.engine import Engine

    load_mechanisms()
    topo = parse_topology(TEXT, "o.yaml")
    clock = Clock(1_000_000.0)
    eng = Engine([topo], MemStore(), MemSink(), clock=clock, dead_letter_log_interval_s=30)
    caplog.set_level(logging.DEBUG)

    async def go() -> None:
        await eng.assign([("in", 0)])
        bad = [(i, b"r1", b"{not json", 0) for i in range(120)]
        missing = [(120 + i, b"r1", json.dumps({"r": "r1"}).encode(), 0) for i in range(4)]
        good = [(124, b"r1", json.dumps({"r": "r1", "i": 1}).encode(), 0)]
        await eng.process_batch("in", 0, bad[:60])
        clock.t += 5
        await eng.on_timer()
        await eng.process_batch("in", 0, bad[60:] + missing + good)
        await eng.on_timer()
        assert _warnings(caplog) == []  # within the interval: nothing yet
        clock.t += 30
        await eng.on_timer()
        clock.t += 30
        await eng.on_timer()

    asyncio.run(go())
    dead = [json.loads(v)["reason"] for topic, _, v, _ in eng.sink.sent  # type: ignore[attr-defined]
            if topic == "dlq"]
    reasons = {r: dead.count(r) for r in set(dead)}
    (rec,) = _warnings(caplog)
    msg = rec.getMessage()
    assert msg.startswith("topology o: dead letters in the last 35 s: "), msg
    assert ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])) \
        in msg
    assert "120 " in msg and "4 " in msg and "on topic dlq" in msg
    debug = [r for r in caplog.records if r.getMessage().startswith("dead letter ")]
    assert debug and all(r.partition == 0 and r.topology == "o"  # type: ignore[attr-defined]
                         for r in debug)
