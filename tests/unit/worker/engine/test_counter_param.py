"""A topology's ``mechanism.params.counter`` reaches the sketch, its releases and checkpoints."""

from __future__ import annotations

import asyncio

import pytest

from sketches import query_release
from sketches.errors import SpecError
from tests.support.engine import Clock, MemSink, MemStore, ev, releases, topo
from worker.config.topology import validate_mechanism_params
from worker.engine.engine import Engine


@pytest.mark.parametrize("counter", ["blt", "sqrt"])
def test_lazy_cms_counter_param_end_to_end(counter: str) -> None:
    t = topo("lazy_cms", params=f"{{depth: 2, width: 8, counter: {counter}}}")
    validate_mechanism_params(t)
    store, clock = MemStore(), Clock(1_000_000.0)
    eng = Engine([t], store, MemSink(), clock=clock)

    async def run() -> None:
        await eng.assign([("in", 0)])
        await eng.process_batch("in", 0, [ev(k, "r1", f"i{k % 3}") for k in range(9)])
        clock.t += 0.5
        await eng.on_timer()

    asyncio.run(run())
    (rel,) = releases(eng.sink)  # type: ignore[arg-type]
    assert rel["payload"]["error_bound"]["counter"] == counter
    assert query_release(rel["payload"], ["i0", "i1", "i2"]).tolist() == [3, 3, 3]
    shard = eng.parts[("t", 0)].shards["r1"]
    assert shard.mechanism.spec.counter.value == counter


def test_sqrt_too_big_refused_at_load() -> None:
    t = topo("lazy_cms", params="{depth: 4, width: 1048576, counter: sqrt}")
    with pytest.raises(SpecError, match="counter: blt"):
        validate_mechanism_params(t)
