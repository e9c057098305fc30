"""The release timer survives a non-broker exception (pure, no broker).

One partition whose release path raises (a mechanism's ``release()``, a sink
error) must not stop the releases of the others nor the timer: the error is
counted in ``dpstream_timer_errors_total`` and that partition's releases are
made and published on a later round, none skipped. Exceptions the driver
declares as its own (``reraise``: broker errors) still reach it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from tests.support.engine import Clock, MemSink, MemStore, ev
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.engine.engine import Engine

TOPO = """
name: {name}
input: {{topic: in, partitions: 1, fields: {{shard: r, item: i}}}}
mechanism: {{name: test_exact_counts, params: {{}}}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 100, epoch_ticks: 50}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 5, topic: out-{name}}}
dead_letter: {{topic: dlq}}
"""
T0 = 1_000_000.0  # an epoch start (tick 10_000_000 = 200_000 * 50)


def topo(name: str) -> Any:
    load_mechanisms()
    return parse_topology(TOPO.format(name=name))


class FlakySink(MemSink):
    """Raises ``error`` on every publish to ``topic`` while ``error`` is set."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic, self.error = topic, None

    async def publish(self, topic: str, key: bytes, value: bytes,
                      timestamp_ms: int | None = None) -> None:
        if topic == self.topic and self.error is not None:
            raise self.error
        await super().publish(topic, key, value, timestamp_ms)


def seqs(sink: MemSink, topic: str) -> list[tuple[int, int]]:
    return [(json.loads(v)["epoch"], json.loads(v)["seq"])
            for t, _, v, _ in sink.sent if t == topic]


def test_one_failing_partition_neither_stops_the_others_nor_loses_releases() -> None:
    clock, sink = Clock(T0), FlakySink("out-a")
    eng = Engine([topo("a"), topo("b")], MemStore(), sink, clock=clock)  # "a" comes first

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x")])
        sink.error = RuntimeError("sink bug")
        for _ in range(3):  # three rounds, each across a slot boundary
            clock.t += 0.5
            await eng.on_timer()  # old code: raised here, and "b" never released
        assert seqs(sink, "out-a") == []
        assert seqs(sink, "out-b") == [(200_000, k) for k in range(3)]
        assert eng.metrics.value("dpstream_timer_errors_total", topology="a") == 3
        assert eng.metrics.value("dpstream_timer_errors_total", topology="b") == 0
        sink.error = None
        await eng.on_timer()  # the queued releases go out, in order, none skipped

    asyncio.run(run())
    assert seqs(sink, "out-a") == [(200_000, k) for k in range(3)]
    first = json.loads(next(v for t, _, v, _ in sink.sent if t == "out-a"))
    assert first["payload"]["counts"] == {"x": 1}


def test_a_release_that_raised_is_made_again_not_skipped() -> None:
    """The slot whose ``release()`` raised is released on the next round (old code
    marked the slot released before making it, so it was skipped for good)."""
    clock, sink = Clock(T0), MemSink()
    eng = Engine([topo("a")], MemStore(), sink, clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x")])
        mech = eng.parts[("a", 0)].shards["r1"].mechanism
        real, calls = mech.release, []

        def flaky() -> dict[str, Any]:
            calls.append(1)
            if len(calls) == 1:
                raise ValueError("mechanism bug")
            return real()

        mech.release = flaky
        clock.t += 0.55  # slot 1's boundary (tick 5) passed
        await eng.on_timer()
        assert seqs(sink, "out-a") == []
        await eng.on_timer()

    asyncio.run(run())
    rel = [json.loads(v) for t, _, v, _ in sink.sent if t == "out-a"]
    assert [(r["seq"], r["published_at"]) for r in rel] == [(0, (10_000_000 + 5) * 100)]
    assert eng.metrics.value("dpstream_timer_errors_total", topology="a") == 1


def test_the_drivers_own_errors_still_reach_it() -> None:
    clock, sink = Clock(T0), FlakySink("out-a")
    eng = Engine([topo("a"), topo("b")], MemStore(), sink, clock=clock, reraise=(OSError,))

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(0, "r1", "x")])
        sink.error = ConnectionResetError("broker gone")
        clock.t += 0.55
        with pytest.raises(ConnectionResetError):
            await eng.on_timer()
        sink.error = None
        await eng.on_timer()  # retried: the releases were kept

    asyncio.run(run())
    assert seqs(sink, "out-a") == [(200_000, 0)] and seqs(sink, "out-b") == [(200_000, 0)]
    assert eng.metrics.value("dpstream_timer_errors_total", topology="a") == 0


def test_events_over_the_bound_are_logged_once_a_minute_not_per_batch(
        caplog: pytest.LogCaptureFixture) -> None:
    """At 20k events/s past LazyHH's event bound every batch drops events: the
    warning names the first drop of an epoch, then at most one line a minute with
    the running count (the metric counts every event)."""
    load_mechanisms()
    t = parse_topology(TOPO.format(name="h").replace(
        "{name: test_exact_counts, params: {}}",
        "{name: lazy_hh, params: {k: 2, k_tilde: 4, event_horizon: 10, hash_seed: 1}}"))
    clock = Clock(T0)
    eng = Engine([t], MemStore(), MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        for b in range(5):  # 5 batches of 7 events: 25 over the bound of 10, one epoch
            await eng.process_batch("in", 0, [ev(7 * b + k, "r1", f"i{k}") for k in range(7)])
            clock.t += 0.001
        clock.t += 6.0  # the next epoch (50 ticks of 100 ms): its first drop is logged
        for b in range(5, 7):
            await eng.process_batch("in", 0, [ev(7 * b + k, "r1", f"i{k}") for k in range(7)])

    caplog.set_level("WARNING", logger="worker.engine.engine")
    asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if "event bound" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "epoch 200000" in lines[0] and "epoch 200001" in lines[1]
    assert eng.metrics.value("dpstream_events_over_horizon_total", topology="h") == 29
