"""The ``arrow`` encoding end to end: the same events as JSON give the same releases.

One worker runs four topologies on the embedded broker: the same demo-producer
events go to a JSON topic and to an Arrow topic (IPv4 items as uint32, weights
as float64), once under the exact-count test mechanism (released items and
weighted counts compared exactly) and once under LazyCMS with zero noise (the
released matrices compared exactly: the Arrow path hashes the dotted-quad text
of a uint32 address exactly as the JSON path hashes the string). A malformed
Arrow message in the Arrow topic becomes a dead letter and the worker goes on.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.kafka import create_topic, latest_by_shard, produce, read_all
from worker.kafka.demo_producer import NetmonGenerator, arrow_messages, json_messages

pytestmark = pytest.mark.broker

TOPOLOGY = """\
name: {name}
production: false
input:
  topic: {name}-in
  partitions: 2
  encoding: {encoding}
  fields: {{shard: router, item: src_ip{weight}}}
mechanism:
  name: {mechanism}
  params: {params}
privacy:
  eps: 1.0
  delta: 1.0e-6
  tick_ms: 200
  epoch_ticks: 100000
noise:
  kind: zero
  allow_insecure_noise: true
release:
  every_ticks: 2
  topic: {name}-out
dead_letter:
  topic: {name}-dlq
"""

MECHANISMS = {"x": ("test_exact_counts", {}, True),  # weighted: packets
              "c": ("lazy_cms", {"depth": 2, "width": 64, "hash_seed": 3}, False)}


def _total(doc: dict[str, Any]) -> float:
    p = doc["payload"]
    return float(sum(p["counts"].values())) if "counts" in p else float(sum(p["matrix"][0]))


def test_arrow_releases_equal_json_releases(broker, workers, tmp_path: Path, unique) -> None:
    ev = NetmonGenerator(routers=4, seed=5).chunk(3000)
    routers = [str(r) for r in np.unique(ev["router"].astype(str))]
    want = {True: {r: float(ev["packets"][ev["router"] == r].sum()) for r in routers},
            False: {r: float(np.count_nonzero(ev["router"] == r)) for r in routers}}
    paths = []
    for m, (mech, params, weighted) in MECHANISMS.items():
        for enc in ("json", "arrow"):
            name = f"{unique}{m}{enc}"
            path = tmp_path / f"{name}.yaml"
            path.write_text(TOPOLOGY.format(name=name, encoding=enc, mechanism=mech,
                                            params=json.dumps(params),
                                            weight=", weight: packets" if weighted else ""))
            paths.append(path)
            asyncio.run(create_topic(broker.bootstrap, f"{name}-in", 2))
    args: list[str] = []
    for p in paths:
        args += ["--topology", str(p)]
    proc = workers.start(paths[0], group=unique, args=("--no-faust", *args[2:]))
    json_msgs = json_messages(ev)
    for m, (_, _, weighted) in MECHANISMS.items():
        arrow_msgs = arrow_messages(ev, "src_ip", weight=weighted)
        bad = [(b"r0", b"ARROW1\x00\x00garbage"), (b"r1", arrow_msgs[0][1][:-40])]
        asyncio.run(produce(broker.bootstrap, f"{unique}{m}json-in", json_msgs))
        asyncio.run(produce(broker.bootstrap, f"{unique}{m}arrow-in", bad + arrow_msgs))

    for m, (_, _, weighted) in MECHANISMS.items():
        def complete(msgs: list[Any], w: dict[str, float] = want[weighted]) -> bool:
            latest = latest_by_shard(msgs)
            return all(r in latest and _total(latest[r]) == n for r, n in w.items())

        out_json = asyncio.run(read_all(broker.bootstrap, f"{unique}{m}json-out", complete, 90,
                                        give_up=lambda: proc.poll() is not None))
        out_arrow = asyncio.run(read_all(broker.bootstrap, f"{unique}{m}arrow-out", complete,
                                         90, give_up=lambda: proc.poll() is not None))
        assert complete(out_json) and complete(out_arrow), workers.logs()
        lj, la = latest_by_shard(out_json), latest_by_shard(out_arrow)
        field = "counts" if m == "x" else "matrix"  # the released state (not its tick)
        for r in routers:
            assert la[r]["payload"][field] == lj[r]["payload"][field], (m, r)
        if m == "x":  # released items are the dotted-quad text, as in JSON
            assert all(k.startswith("10.") for k in la["r0"]["payload"]["counts"])
        dlq = asyncio.run(read_all(broker.bootstrap, f"{unique}{m}arrow-dlq",
                                   lambda d: len(d) >= 2, 30))
        assert sorted(json.loads(d.value)["reason"] for d in dlq) == ["malformed_arrow"] * 2
    assert proc.poll() is None, workers.logs()
    assert workers.terminate(proc) == 0, workers.logs()
