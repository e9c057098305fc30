"""Memory model (issue 12, target 3): per-shard bytes from the spec, checked against the real
state, and the start-up refusal of topologies whose worst case exceeds the configured limit."""

from __future__ import annotations

import pytest

from sketches import ZeroNoise, lookup
from sketches.errors import SpecError
from worker.config.mechanism_loader import load_mechanisms
from worker.config.settings import Settings
from worker.config.topology import parse_topology
from worker.engine.memory_model import check_memory_limit, shard_bytes, worst_case_bytes

TOPO = """
name: {name}
input: {{topic: in, partitions: 2, fields: {{shard: r, item: i}}}}
{shards}
mechanism: {{name: {mech}, params: {params}}}
privacy: {{eps: 1.0, delta: 1.0e-6, tick_ms: 1000, epoch_ticks: 3600}}
noise: {{kind: zero, allow_insecure_noise: true}}
release: {{every_ticks: 60, topic: out}}
dead_letter: {{topic: dlq}}
"""


def topo(mech: str = "lazy_cms", params: str = "{depth: 4, width: 1024}", shards: str = "",
         name: str = "t") -> object:
    load_mechanisms()
    return parse_topology(TOPO.format(mech=mech, params=params, shards=shards, name=name))


PRIV = {"eps": 1.0, "delta": 1e-6}


@pytest.mark.parametrize("mech,params", [
    ("lazy_cms", {"depth": 4, "width": 1024, "horizon": 3600, "clock": "tick",
                  "relation": "add_remove", **PRIV}),
    ("lazy_cs", {"depth": 3, "width": 512, "horizon": 600, "clock": "tick",
                 "relation": "add_remove", **PRIV}),
    ("punctual_cms", {"depth": 2, "width": 64, "horizon": 1000, **PRIV}),
    ("cms", {"depth": 4, "width": 256, "release_exact": True}),
    ("dp_cms", {"depth": 3, "width": 128, **PRIV}),
])
def test_spec_memory_model_matches_the_measured_state(mech: str, params: dict) -> None:
    """spec.memory_bytes() is within [measured, 1.25 x measured] of a real sketch's
    memory_bytes() after updates and (continual) the whole horizon: never an underestimate."""
    import numpy as np

    load_mechanisms()
    entry = lookup(mech)
    spec = entry.build_spec(params)
    sk = entry.build(spec, ZeroNoise())
    if hasattr(sk, "advance_to"):
        sk.update_batch(np.arange(100), ticks=np.zeros(100, np.int64))
        sk.advance_to(params["horizon"])
    else:
        sk.update_batch(np.arange(100))
    sk.release()  # query caches exist after a release
    measured = sk.memory_bytes()
    assert measured <= spec.memory_bytes() <= 1.25 * measured + 64


def test_plan_and_the_limit_use_the_same_function() -> None:
    from worker.plan.plan import memory, probe

    t = topo()
    assert memory(probe(t))["per_shard_bytes"] == shard_bytes(t)[0] > 4 * 1024 * 8


def test_closed_set_over_the_limit_is_refused_naming_the_numbers_and_the_fix() -> None:
    t = topo(shards="shards: {allowed: [a, b, c, d]}")
    per = shard_bytes(t)[0]
    assert worst_case_bytes([t], max_open_shards=0)[0] == 4 * per
    check_memory_limit([t], limit=4 * per, max_open_shards=0)  # exactly fits
    with pytest.raises(SpecError) as e:
        check_memory_limit([t], limit=4 * per - 1, max_open_shards=0)
    msg = str(e.value)
    assert "DPSTREAM_MEMORY_LIMIT_BYTES" in msg and f"{4 * per:,}" in msg
    assert "4 shards" in msg and "width" in msg


def test_open_set_needs_a_stated_shard_bound_when_a_limit_is_set() -> None:
    t = topo()
    check_memory_limit([t], limit=0, max_open_shards=0)  # no limit: nothing checked
    with pytest.raises(SpecError, match="DPSTREAM_MAX_OPEN_SHARDS"):
        check_memory_limit([t], limit=1 << 40, max_open_shards=0)
    per = shard_bytes(t)[0]
    check_memory_limit([t], limit=10 * per, max_open_shards=10)
    with pytest.raises(SpecError, match="open shard set"):
        check_memory_limit([t], limit=10 * per, max_open_shards=11)


def test_settings_read_the_limit_from_the_environment() -> None:
    s = Settings.from_env({"DPSTREAM_MEMORY_LIMIT_BYTES": "1000",
                           "DPSTREAM_MAX_OPEN_SHARDS": "7"})
    assert (s.memory_limit_bytes, s.max_open_shards) == (1000, 7)
    assert Settings().memory_limit_bytes == 0  # default: no limit


def test_the_worker_refuses_to_start_over_the_limit(tmp_path) -> None:
    """create_worker (what `dpstream run` calls) applies the limit before any Kafka client."""
    from worker.runtime.worker import create_worker

    path = tmp_path / "t.yaml"
    # the tree pinned: the byte count below is its state over 60 rounds aligned to the
    # releases (blt_int, the default where it wins, is 425,984 bytes a shard)
    path.write_text(TOPO.format(mech="lazy_cms", params="{depth: 4, width: 1024, counter: tree}",
                                shards="shards: {allowed: [a, b]}", name="big"))
    ok = Settings(broker="127.0.0.1:1", memory_limit_bytes=1 << 30)
    assert create_worker(ok, [str(path)]).topologies[0].name == "big"
    tight = Settings(broker="127.0.0.1:1", memory_limit_bytes=500_000)
    with pytest.raises(SpecError, match=r"big: 2 shards \(closed shard set\) x 294,912 bytes"):
        create_worker(tight, [str(path)])


@pytest.mark.parametrize("item_kind", ["int", "str"])
def test_pmg_worst_case_bounds_a_window_of_adversarial_items(item_kind: str) -> None:
    """PMGSpec.memory_bytes_for(max_item_bytes) is never below the sketch's own measure,
    however many distinct longest-possible items a window receives (k keys at most)."""
    import numpy as np

    load_mechanisms()
    entry = lookup("pmg")
    spec = entry.build_spec({"k": 64, "item_kind": item_kind, **PRIV})
    sk = entry.build(spec, ZeroNoise())
    rng = np.random.default_rng(7)
    peak = 0
    for _ in range(20):
        if item_kind == "str":
            items = np.array([bytes(rng.integers(97, 123, 1024, dtype=np.uint8)).decode()
                              for _ in range(200)], dtype=object)
        else:
            items = rng.integers(0, 1 << 62, 200)
        sk.update_batch(items)
        peak = max(peak, sk.memory_bytes())
    bound = spec.memory_bytes_for(1024)
    assert peak <= bound <= 1.25 * peak + 8 * (4 * 64 + 64)


def test_pmg_memory_limit_counts_the_worst_case() -> None:
    """The start-up limit and `dpstream plan` use the worst case, not the window's start
    (an empty sketch measures 16 k bytes; k str keys of 1 KiB need ~66x that)."""
    load_mechanisms()
    t = topo("pmg", "{k: 64, item_kind: str}", "shards: {allowed: [a, b]}")
    per, source = shard_bytes(t)
    assert "worst case" in source
    assert per == 16 * 64 + 8 * (4 * 64 + 64) + 64 * (t.input.max_item_bytes + 33)
    check_memory_limit([t], limit=2 * per, max_open_shards=0)
    with pytest.raises(SpecError, match="worst-case"):
        check_memory_limit([t], limit=2 * per - 1, max_open_shards=0)
