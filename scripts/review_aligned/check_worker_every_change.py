"""Worker: release.every_ticks edited mid-epoch (5 -> 4 -> 1) on a default lazy_cms
(blt_int, aligned rounds), zero noise. The checkpointed mechanism keeps round_ticks=5; every
release counts exactly the events of the ticks before the last *round* boundary at or before
its slot boundary (never an event of a later tick), and states lag_bound_ticks = 5."""
import asyncio
import json

from tests.support.checkpoints import TOPO
from tests.support.engine import Clock, MemSink, MemStore
from worker.config.mechanism_loader import load_mechanisms
from worker.config.topology import parse_topology
from worker.engine.engine import Engine

load_mechanisms()


def topo(every):
    text = TOPO.format(eps=1.0, cap=1, mech="lazy_cms", params="{depth: 2, width: 16}",
                       tick_ms=100, noise="zero", extra="", shards="shards: {allowed: [r1]}",
                       epoch_ticks=60)
    return parse_topology(text.replace("every_ticks: 5", f"every_ticks: {every}"))


store, clock = MemStore(), Clock(1_000_002.0)  # an epoch boundary (60 ticks of 100 ms = 6 s)
start = int(clock.t * 1000)
counts = {}  # tick -> events
off = [0]


def phase(every, ticks, until_tick):
    eng = Engine([topo(every)], store, MemSink(), clock=clock)

    async def go():
        await eng.assign([("in", 0)])
        for k in ticks:
            now = start + 100 * k
            clock.t = now / 1000
            recs = []
            for j in range(k + 1):
                recs.append((off[0], b"r1", json.dumps({"r": "r1", "i": "a", "u": f"u{k}-{j}"})
                             .encode(), now))
                off[0] += 1
            counts[k] = k + 1
            await eng.process_batch("in", 0, recs)
        clock.t = (start + 100 * until_tick) / 1000
        eng.log_end("in", 0, start + 100 * until_tick)
        await eng.on_timer()

    asyncio.run(go())
    st = next(iter(next(iter(eng.parts.values())).shards.values())) if eng.parts else None
    rels = [json.loads(v) for t, _, v, *_ in eng.sink.sent if t == "out"]
    return eng, st, rels


bad = 0
for every, ticks, until in ((5, range(0, 8), 8), (4, range(8, 15), 15), (1, range(15, 19), 19)):
    eng, st, rels = phase(every, ticks, until)
    spec_r = eng.specs["views"].round_ticks
    mech_r = st.mechanism.spec.round_ticks if st is not None else None
    print(f"every_ticks={every}: topology spec round_ticks={spec_r}, running mechanism "
          f"round_ticks={mech_r}, counter={st.mechanism.spec.counter if st else None}")
    for r in rels:
        b = (int(r["published_at"]) - start) // 100  # the slot boundary (tick)
        closed = b // 5 * 5
        exact = sum(v for t, v in counts.items() if t < closed)
        got = sum(r["payload"]["matrix"][0])
        ok = got == exact and r["payload"]["lag_bound_ticks"] == 5
        bad += not ok
        print(f"  release at tick {b:2d}: row total {got:3d}, exact before round boundary "
              f"{closed:2d}: {exact:3d}, before the slot boundary: "
              f"{sum(v for t, v in counts.items() if t < b):3d}, lag_bound_ticks "
              f"{r['payload']['lag_bound_ticks']}, seq {r['seq']}  {'ok' if ok else 'MISMATCH'}")
print("mismatches:", bad)
