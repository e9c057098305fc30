"""ReleaseReader (aiokafka), the pure ReleaseIndex and the tail/query CLIs against the
real embedded broker.

Releases are written straight to a topic (deterministic matrices, no noise),
so every expected answer is exact.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from tests.support.envelopes import enc, hh_env, publish, sketch_env
from worker.cli.read import query_main, tail_main
from worker.kafka.embedded import EmbeddedBroker
from worker.kafka.release_reader import ReleaseReader
from worker.release.reader import ReleaseIndex

pytestmark = pytest.mark.broker











def test_reader_keeps_latest_and_answers_queries(broker: EmbeddedBroker, unique: str) -> None:
    values = [
        enc(sketch_env("r1", 0, {"10.0.0.0/24": 5})),
        enc(sketch_env("r1", 2, {"10.0.0.0/24": 40, "10.9.0.0/24": 7})),
        enc(sketch_env("r1", 1, {"10.0.0.0/24": 20})),     # late, older: ignored
        enc(sketch_env("r1", 2, {"10.0.0.0/24": 40, "10.9.0.0/24": 7})),  # duplicate
        enc(sketch_env("r2", 0, {"10.0.0.0/24": 3})),
        b"\xffgarbage",
        enc(dict(sketch_env("r3", 0, {}), schema_version=9)),
    ]

    async def main() -> None:
        await publish(broker.bootstrap, unique, values)
        async with ReleaseReader(broker.bootstrap, unique) as rd:
            assert await rd.catch_up() == len(values)
            assert rd.shards() == [("dst", "r1"), ("dst", "r2")]
            assert rd.rejected == 2
            assert rd.latest(None, "r1")["seq"] == 2
            assert rd.query(None, "r1", "10.0.0.0/24") == 40.0
            est = rd.query(None, "r1", ["10.0.0.0/24", "10.9.0.0/24"])
            assert est.tolist() == [40.0, 7.0]
            assert rd.query(None, "r2", "10.0.0.0/24") == 3.0
            with pytest.raises(KeyError, match="r9"):
                rd.latest(None, "r9")

    asyncio.run(main())


def test_heavy_hitters_and_int_items() -> None:
    """Pure index: heavy-hitter payloads, int item types, wrong-kind errors."""
    idx = ReleaseIndex()
    assert idx.add(enc(hh_env("r7", 0, [("10.0.0.1", 50.0), ("10.0.0.2", 12.5)])))
    assert idx.add(enc(sketch_env("r8", 0, {"17": 4}, item_type="int")))
    assert idx.heavy_hitters(None, "r7")[0] == {"item": "10.0.0.1", "estimate": 50.0}
    assert idx.query(None, "r8", "17") == 4.0 and idx.query(None, "r8", 17) == 4.0
    with pytest.raises(Exception, match="heavy_hitters"):
        idx.query(None, "r7", "10.0.0.1")
    with pytest.raises(Exception, match="estimate"):
        idx.heavy_hitters(None, "r8")


def test_query_and_tail_cli(broker: EmbeddedBroker, unique: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    values = [enc(sketch_env("r7", 0, {"10.0.0.0/24": 11, "10.1.0.0/24": 2})),
              enc(hh_env("r7", 4, [("10.0.0.1", 50.0)]))]
    asyncio.run(publish(broker.bootstrap, unique, values, partitions=1))
    rc = query_main(["--broker", broker.bootstrap, "--topic", unique, "--topology", "dst",
                     "--shard", "r7", "--json", "10.0.0.0/24", "10.1.0.0/24"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [a["estimate"] for a in out["answer"]] == [11.0, 2.0]
    assert out["release"]["epoch"] == 1 and out["release"]["seq"] == 0
    rc = query_main(["--broker", broker.bootstrap, "--topic", unique, "--topology", "hh",
                     "--shard", "r7"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "10.0.0.1\t50.0" in text and "hh/r7 epoch 1 seq 4" in text
    # several topologies share the shard: the CLI names the problem instead of guessing
    assert query_main(["--broker", broker.bootstrap, "--topic", unique, "--shard", "r7"]) == 2
    assert "pass topology" in capsys.readouterr().err
    rc = tail_main(["--broker", broker.bootstrap, "--topic", unique, "--count", "2",
                    "--seconds", "30", "--from-beginning"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hh/r7 epoch 1 seq 4")


@pytest.mark.slow
def test_reader_on_a_real_worker_release(broker: EmbeddedBroker, unique: str,
                                         make_topology: Any) -> None:
    """The dpstream worker (zero noise, LazyCMS) publishes; the reader's estimates equal
    the exact counts (3 items per shard in a 4x1024 CMS: no collision with this seed).
    Epochs of 10^7 ticks of 100 ms: an epoch roll during the test has probability < 1e-5."""
    from worker.config.settings import Settings
    from worker.runtime.worker import create_worker

    path = make_topology(mechanism="lazy_cms", tick_ms=100, every_ticks=2, epoch_ticks=10**7,
                         params={"depth": 4, "width": 1024, "hash_seed": 3})
    exact = {"r1": {"10.0.0.1": 30, "10.0.0.2": 7, "10.0.0.3": 1},
             "r2": {"10.0.0.1": 4, "10.0.0.9": 12, "10.0.0.8": 2}}
    msgs = [(r.encode(), json.dumps({"router": r, "src": ip}).encode())
            for r, counts in exact.items() for ip, c in counts.items() for _ in range(c)]

    async def main() -> None:
        settings = Settings.from_env({
            "DPSTREAM_BROKER": broker.bootstrap, "DPSTREAM_GROUP_ID": f"{unique}-g",
            "DPSTREAM_CHECKPOINT_TOPIC": f"{unique}-ck", "DPSTREAM_METRICS_PORT": "0"})
        worker = create_worker(settings, [str(path)])
        await worker.start()
        try:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                        enable_idempotence=False)
            await producer.start()
            try:
                futs = [await producer.send(f"{unique}-in", v, key=k) for k, v in msgs]
                await asyncio.gather(*futs)
            finally:
                await producer.stop()
            async with ReleaseReader(broker.bootstrap, f"{unique}-out") as rd:
                deadline = asyncio.get_running_loop().time() + 60
                while True:
                    await rd.poll(0.2)
                    done = [s for _, s in rd.shards() if sum(
                        rd.latest(None, s)["payload"]["matrix"][0]) == sum(exact[s].values())]
                    if sorted(done) == ["r1", "r2"]:
                        break
                    assert asyncio.get_running_loop().time() < deadline, rd.shards()
                for shard, counts in exact.items():
                    items = list(counts)
                    assert (rd.query(None, shard, items).tolist()
                            == [float(counts[i]) for i in items])
                    assert rd.latest(None, shard)["mechanism"] == "lazy_cms"
        finally:
            await worker.stop()

    asyncio.run(main())
