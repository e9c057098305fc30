"""The dashboard in a real browser: headless Chromium against a running worker.

A `dpstream run` worker (subprocess, session broker) runs three topologies fed
by the demo producer (`python -m worker.cli.demo_producer`, subprocess): LazyHH
heavy sources and a LazyCMS prefix sketch (secure noise, like the demo's, but
eps 4 and a smaller event bound so that heavy hitters pass the threshold
within seconds). A zero-noise release (``"private": false``) written to a
third topic must raise the NOT PRIVATE banner, and its HTML-like item label
must appear as text, not markup. `dpstream dashboard` (subprocess) follows the
release topics and the worker's metrics. Chromium loads the page
(`--dump-dom` after a virtual-time budget, so the polling script has run) and
the test asserts what a user must see: heavy hitters with their estimates,
the budget, the query answer, throughput and the banner.

Then the worker is stopped: the page must raise the staleness banner (its
releases stopped, its metrics endpoint stopped answering, each with how long),
polled in Chromium until a deadline.

`DPSTREAM_UPDATE_SCREENSHOT=1` also writes results/dashboard.png and
results/dashboard_stale.png.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import CHROMIUM
from tests.support.browser import chromium as _chromium
from tests.support.kafka import create_topic, produce
from worker.kafka.embedded import EmbeddedBroker, free_port

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

HH = """\
name: {u}-hh
production: false
input: {{topic: {u}-in, partitions: 2, encoding: json, fields: {{shard: router, item: src_ip}}}}
mechanism:
  name: lazy_hh
  params: {{k: 10, k_tilde: 64, event_horizon: 2000000, output_every: 1}}
privacy: {{eps: 4.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 500,
          epoch_ticks: 10000000}}
noise: {{kind: secure}}
release: {{every_ticks: 2, topic: {u}-hh-out, partitions: 1}}
dead_letter: {{topic: {u}-dlq}}
"""
CMS = """\
name: {u}-{suffix}
production: false
input: {{topic: {u}-in, partitions: 2, encoding: json, fields: {{shard: router, item: dst_prefix}}}}
mechanism:
  name: lazy_cms
  params: {{depth: 4, width: 1024, hash_seed: 7}}
privacy: {{eps: 4.0, delta: 1.0e-6, relation: add_remove, clock: tick, tick_ms: 500,
          epoch_ticks: 10000000}}
noise: {noise}
release: {{every_ticks: 2, topic: {u}-{suffix}-out, partitions: 1}}
dead_letter: {{topic: {u}-{suffix}-dlq}}
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


async def _topics(bootstrap: str) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return sorted(await admin.list_topics())
    finally:
        await admin.close()


def _worker_counts(metrics_url: str) -> dict[str, dict[str, float]]:
    """Per topology: releases published, events in, messages in, events over the
    epoch's bound, timer errors (the worker's own metrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    names = {"dpstream_releases_published_total": "releases",
             "dpstream_events_in_total": "events_in",
             "dpstream_messages_in_total": "messages_in",
             "dpstream_events_over_horizon_total": "over_horizon",
             "dpstream_timer_errors_total": "timer_errors"}
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if smp.name in names and smp.labels.get("topology"):
                row = out.setdefault(smp.labels["topology"], {})
                row[names[smp.name]] = row.get(names[smp.name], 0.0) + smp.value
    return out


def _diagnosis(bootstrap: str, unique: str, metrics_url: str, state: Any) -> str:
    """What a future failure needs explained: which of the test's topics exist on
    the broker, what the worker released, what the dashboard follower says."""
    lines = []
    try:
        present = [t for t in asyncio.run(_topics(bootstrap)) if t.startswith(unique)]
        lines.append(f"topics on the broker: {present}")
    except Exception as exc:  # the diagnosis must not hide the failure
        lines.append(f"topics: {exc!r}")
    try:
        lines.append(f"worker metrics per topology: {_worker_counts(metrics_url)}")
    except Exception as exc:
        lines.append(f"worker metrics: {exc!r}")
    if isinstance(state, dict):
        view = state.get("view") or {}
        lines.append(f"dashboard follower_error: {state.get('follower_error')!r}; "
                     f"records seen {view.get('seen')}; shards per topology: "
                     + str({t['topology']: [(c['shard'], c.get('seq'))
                                            for c in t.get('shards', [])]
                            for t in view.get('topologies', [])}))
    else:
        lines.append(f"dashboard state: {state!r}")
    return "\n".join(lines)


def test_dashboard_in_headless_chromium(broker: EmbeddedBroker, unique: str,
                                        tmp_path: Path) -> None:
    if CHROMIUM is None:  # fail under CI (.ci/run installs it), skip on a developer's machine
        msg = "chromium is not installed (.ci/run installs it: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    topo_dir = tmp_path / "topologies"
    topo_dir.mkdir()
    (topo_dir / "hh.yaml").write_text(HH.format(u=unique))
    (topo_dir / "cms.yaml").write_text(CMS.format(u=unique, suffix="cms",
                                                  noise="{kind: secure}"))
    # a zero-noise release as the envelope states it (docs/RELEASES.md: "private": false
    # and the noise kind), written straight to its topic
    zero = {"schema_version": 1, "topology": f"{unique}-zero", "shard": "r0", "epoch": 1,
            "seq": 0, "final": False, "mechanism": "lazy_hh", "eps": 1.0, "delta": 1e-6,
            "relation": "add_remove", "unit": "event", "unit_cap": 1, "clock": "tick",
            "rounds": 1, "horizon": 10, "published_at": int(time.time() * 1000),
            "private": False, "noise_kind": "zero", "error_bound": None,
            "payload": {"kind": "heavy_hitters", "threshold": 1.0,
                        "items": [{"item": "10.9.9.9", "estimate": 5},
                                  # labels are public but anyone producing events may
                                  # shape them: the page must show them as text
                                  {"item": '<img src=x id="xss">', "estimate": 4}]}}
    # a windowed release (dyadic_quantiles' payload shape): the last window's table
    window = {"schema_version": 1, "topology": f"{unique}-win", "shard": "all", "epoch": 7,
              "seq": 0, "final": True, "mechanism": "dyadic_quantiles", "eps": 1.0,
              "delta": 1e-6, "relation": "add_remove", "unit": "event", "unit_cap": 1,
              "clock": "tick", "rounds": 60, "horizon": 60,
              "published_at": int(time.time() * 1000), "private": True, "noise_kind": "secure",
              "payload": {"kind": "quantiles", "bits": 32, "n_estimate": 1234.0,
                          "quantiles": [{"phi": 0.5, "value": 80},
                                        {"phi": 0.99, "value": 1500}],
                          "error_bound": {"beta": 0.05, "rank_noise_abs_max": 40.0}}}
    asyncio.run(create_topic(broker.bootstrap, f"{unique}-zero-out", 1))
    asyncio.run(produce(broker.bootstrap, f"{unique}-zero-out",
                        [(b"z/r0", json.dumps(zero).encode()),
                         (b"w/all", json.dumps(window).encode())]))
    metrics_port, dash_port = free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), DPSTREAM_BROKER=broker.bootstrap,
               DPSTREAM_GROUP_ID=f"{unique}-g", DPSTREAM_CHECKPOINT_TOPIC=f"{unique}-ck",
               DPSTREAM_LOG_LEVEL="INFO")
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with open(tmp_path / f"{name}.log", "wb") as log:
            procs.append(subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))

    def logs() -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:]
                         for p in sorted(tmp_path.glob("*.log")))

    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    base = f"http://127.0.0.1:{dash_port}/"

    def wait(what: str, seconds: float, ready: Callable[[], Any]) -> Any:
        """Poll ``ready`` until it returns a truthy value; on the deadline, fail with
        the diagnosis (topics, worker releases, follower state) and the logs."""
        deadline = time.monotonic() + seconds
        last: Any = None
        while time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), f"a process exited\n{logs()}"
            try:
                got = ready()
            except OSError as exc:  # not serving yet
                last = exc
            else:
                if got:
                    return got
            time.sleep(0.5)
        state: Any = last
        with contextlib.suppress(OSError):
            state = _get(base + "api/state")
        pytest.fail(f"{what}: not within {seconds:g} s\n"
                    f"{_diagnosis(broker.bootstrap, unique, metrics_url, state)}\n{logs()}")

    try:
        # The dashboard starts first and follows the zero topic before the worker has
        # declared its release topics: those appear later (the path that once left the
        # page "waiting for topic(s)" for good, issue #11).
        start("dashboard", "-m", "worker.cli.main", "dashboard", "--topology", str(topo_dir),
              "--topic", f"{unique}-zero-out",
              "--port", str(dash_port), "--metrics-url", metrics_url)
        worker_topics = sorted([f"{unique}-cms-out", f"{unique}-hh-out"])
        wait("the dashboard follows the zero topic and waits for the worker's", 60,
             lambda: _get(base + "api/state")["follower_error"]
             == f"waiting for topic(s) {worker_topics}")
        start("worker", "-m", "worker.cli.main", "run", "--no-faust", "--topology", str(topo_dir),
              "--metrics-port", str(metrics_port))
        # the producer starts once the worker has declared the input topic and owns its
        # partitions (/readyz; the metrics endpoint answers before the topics exist):
        # auto-creation would pick a partition count of its own
        wait("the worker's /readyz", 60, lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{metrics_port}/readyz", timeout=2))
        start("producer", "-m", "worker.cli.demo_producer", "--broker", broker.bootstrap,
              "--topic", f"{unique}-in", "--rate", "20000", "--routers", "2")

        def ready() -> Any:
            state = _get(base + "api/state")
            topos = {t["topology"]: t for t in state["view"]["topologies"]}
            hh = [i for c in topos.get(f"{unique}-hh", {}).get("shards", [])
                  for i in c["heavy_hitters"]["items"]]
            rate = (state["metrics"].get(f"{unique}-hh") or {}).get("events_per_s")
            ok = (hh and f"{unique}-zero" in topos and f"{unique}-cms" in topos
                  and f"{unique}-win" in topos and rate is not None)
            return (topos, hh) if ok else None

        topos, hh = wait("heavy hitters, the sketch and the zero topology on the dashboard",
                         180, ready)
        shard = next(c["shard"] for c in topos[f"{unique}-hh"]["shards"]
                     if c["heavy_hitters"]["items"])
        top = max((i for c in topos[f"{unique}-hh"]["shards"] if c["shard"] == shard
                   for i in c["heavy_hitters"]["items"]), key=lambda i: i["estimate"])
        assert top["low"] is not None and top["low"] <= top["estimate"] <= top["high"]
        # the API's query answer (post-processing of the latest matrix)
        probe = "93.184.216.0/24"
        answer = _get(f"{base}api/query?topology={unique}-cms&shard=r0&item={probe}")
        assert answer["estimate"] > 0 and answer["series"] and answer["private"] is True

        # the hand-written topics release once: refresh them, so that the page is not
        # (rightly) calling them stopped when the wait above was long
        for doc in (zero, window):
            doc["seq"] = int(doc["seq"]) + 1
            doc["published_at"] = int(time.time() * 1000)
        asyncio.run(produce(broker.bootstrap, f"{unique}-zero-out",
                            [(b"z/r0", json.dumps(zero).encode()),
                             (b"w/all", json.dumps(window).encode())]))
        url = (f"{base}?topology={unique}-cms&shard=r0&query={probe}")
        dom = _chromium("--virtual-time-budget=8000", "--dump-dom", url).stdout.decode()
        assert 'class="hh-item"' in dom, dom[-3000:]
        # the page renders the releases of its own moment: an item of the list read before
        # or after it (under load a release in between can change the list)
        after = ready()
        shown = hh + (after[1] if after else [])
        assert top["item"] in dom or any(i["item"] in dom for i in shown), dom[-3000:]
        # the budget: epsilon and delta per epoch, relation, unit
        assert "ε = <b>4.0</b> per epoch" in dom or "ε = <b>4</b> per epoch" in dom, dom[:3000]
        assert "δ = <b>1.00e-6</b>" in dom and "add_remove" in dom
        assert "releases published <b>" in dom and "this epoch" in dom
        assert "epoch progress" in dom
        # the query box answered from the released matrix, with its error bound
        assert f"{probe} on r0: <b>" in dom and "true count in [" in dom
        # the zero-noise topology raises the banner, the others are not flagged
        assert 'id="not-private"' in dom and f"releases of {unique}-zero" in dom
        assert f"releases of {unique}-hh" not in dom
        assert f"releases of {unique}-win" not in dom
        # the windowed release: its last window as a table
        assert "last window (quantiles)" in dom and "n_estimate" in dom
        assert "error bound: beta 0.0500 · rank_noise_abs_max 40.0" in dom, dom[-3000:]
        assert '<td class="n">0.990</td><td class="n">1,500</td>' in dom, dom[-3000:]
        assert "events/s" in dom and "messages/s read" in dom
        assert "releases published by this worker" in dom
        assert '&lt;img src=x id="xss"&gt;' in dom, dom[-3000:]   # a text node
        assert "<img" not in dom                                     # no element
        shot = (ROOT / "results" / "dashboard.png"
                if os.environ.get("DPSTREAM_UPDATE_SCREENSHOT") else tmp_path / "dashboard.png")
        res = _chromium("--virtual-time-budget=8000", "--window-size=1280,1900",
                        f"--screenshot={shot}", f"{base}?topology={unique}-cms&shard=r0"
                        f"&query={probe}&select={unique}-hh:{shard}")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", res.stderr[-2000:]
        # operator-grade: the page's accessibility scaffolding
        assert 'aria-live="assertive"' in dom and 'role="tablist"' in dom
        assert '<main id="main"' in dom and 'aria-label="Topologies"' in dom
        assert "Operations history (all workers)" in dom and "All shards" in dom
        assert "hashing collisions" in dom  # LazyCMS states eta: the collision term
        assert 'id="stale-banner"' not in dom or f"Releases of {unique}-hh" not in dom

        # the worker stops: releases and its metrics endpoint stop; the page must say so
        worker = procs[1]
        worker.terminate()
        worker.wait(timeout=60)
        procs.remove(worker)
        worker_name = f"127.0.0.1:{metrics_port}"
        expected = [f"Releases of {unique}-hh stopped", f"Releases of {unique}-cms stopped",
                    f"Worker {worker_name} stopped answering"]
        deadline = time.monotonic() + 90
        stale_dom = ""
        while not all(e in stale_dom for e in expected):
            assert time.monotonic() < deadline, (
                f"no stale banner in the page within 90 s after the worker stopped\n"
                f"{_get(base + 'api/state').get('health')}\n{stale_dom[:3000]}")
            stale_dom = _chromium("--virtual-time-budget=3000", "--dump-dom",
                                  base).stdout.decode()
        assert 'id="stale-banner"' in stale_dom and ", for " in stale_dom
        assert '<span class="down">down</span> for' in stale_dom  # the workers table
        shot = (ROOT / "results" / "dashboard_stale.png"
                if os.environ.get("DPSTREAM_UPDATE_SCREENSHOT") else tmp_path / "stale.png")
        res = _chromium("--virtual-time-budget=3000", "--window-size=1280,1400",
                        f"--screenshot={shot}", base)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", res.stderr[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
