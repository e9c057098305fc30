"""A real Prometheus server scrapes a real worker; every dashboard query and recording rule
must parse and return data, and the dashboard is rendered from the answers.

The worker is ``dpstream demo`` (Faust-hosted, both demo topologies, the demo producer)
against the embedded broker, plus a few malformed input records so the dead-letter
series exist. Prometheus (Debian package ``prometheus``) runs on 127.0.0.1 with the
rules of deploy/prometheus and a 1 s scrape/evaluation interval. Everything is polled
with deadlines. The PNG goes to the test's tmp dir; with ``DPSTREAM_UPDATE_RESULTS=1``
it also replaces results/dashboard_prometheus.png.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.render_dashboard import render
from tests.support.deploy import DEPLOY, ROOT, tool
from worker.kafka.embedded import free_port

pytestmark = [pytest.mark.broker, pytest.mark.slow]

RATE_INTERVAL = "30s"             # Grafana's $__rate_interval for a 1 s scrape, generously
DEADLINE = 180.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, random below the ephemeral range (:func:`free_port`): a
    fixed range scanned from its start gave two concurrent runs the same port."""
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def http(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def poll(what: str, check: Callable[[], Any], deadline: float, alive: Callable[[], str]) -> Any:
    """Call ``check`` until it returns a truthy value; fail at the deadline or if a process died."""
    end = time.monotonic() + deadline
    last: Any = None
    while time.monotonic() < end:
        last = check()
        if last:
            return last
        dead = alive()
        if dead:
            pytest.fail(f"{what}: {dead}")
        time.sleep(0.5)  # pacing between polls; the loop ends on the condition, not the time
    pytest.fail(f"{what}: not reached within {deadline:.0f}s (last: {last!r})")


def substitute(expr: str) -> str:
    """Grafana's variables as the dashboard would send them (all jobs, instances,
    topologies)."""
    for var in ("$topology", "$instance", "$job"):
        expr = expr.replace(var, ".*")
    return expr.replace("$__rate_interval", RATE_INTERVAL)


class Prom:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        status, body = http(f"{self.base}/{path}?{urllib.parse.urlencode(params)}")
        if status == 0:
            return {"status": "down"}
        doc: dict[str, Any] = json.loads(body)
        if doc["status"] != "success":
            pytest.fail(f"{path} {params}: {doc.get('errorType')}: {doc.get('error')}")
        return doc

    def instant(self, expr: str) -> list[dict[str, Any]]:
        doc = self.get("query", query=expr)
        return list(doc.get("data", {}).get("result", []))


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:  # only ours, by PID
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def dashboard_targets(dash: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(p, t) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def test_prometheus_scrapes_a_real_worker(tmp_path: Path,
                                          procs: list[subprocess.Popen[bytes]]) -> None:
    prometheus = tool("prometheus")
    from tests.support.kafka import produce
    from worker.kafka.embedded import EmbeddedBroker

    metrics_port, prom_port = free_ports(2)
    dash = json.loads((DEPLOY / "grafana" / "dpstream.json").read_text())
    rules_dir = DEPLOY / "prometheus" / "rules"
    loaded = [r for f in sorted(rules_dir.glob("*.yml"))
              for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]]
    recorded = [r["record"] for r in loaded if "record" in r]
    n_alerts = sum("alert" in r for r in loaded)
    assert n_alerts >= 12  # the rules file really holds the alerts (12 on 2026-11-23)

    with EmbeddedBroker() as broker:
        group = "deploy" + uuid.uuid4().hex[:8]
        env = {**os.environ, "DPSTREAM_BROKER": broker.bootstrap, "DPSTREAM_GROUP_ID": group,
               "DPSTREAM_CHECKPOINT_TOPIC": f"{group}-checkpoints",
               "DPSTREAM_METRICS_PORT": str(metrics_port), "DPSTREAM_LOG_LEVEL": "INFO",
               "PYTHONPATH": str(ROOT)}
        worker_log = tmp_path / "worker.log"
        with open(worker_log, "wb") as log:
            worker = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "demo",
                                       "--rate", "3000"], cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT)
        procs.append(worker)

        def worker_alive() -> str:
            if worker.poll() is not None:
                return f"worker exited {worker.returncode}:\n{worker_log.read_text()[-3000:]}"
            return ""

        # /readyz: connected, partitions assigned and restored, not rebalancing
        base = f"http://127.0.0.1:{metrics_port}"
        poll("worker /readyz", lambda: http(base + "/readyz")[0] == 200, 90, worker_alive)
        assert http(base + "/healthz") == (200, "alive\n")

        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(f) for f in sorted(rules_dir.glob("*.yml"))],
            "scrape_configs": [{"job_name": "dpstream",
                                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_log = tmp_path / "prometheus.log"
        with open(prom_log, "wb") as log:
            server = subprocess.Popen(
                [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                stdout=log, stderr=subprocess.STDOUT)
        procs.append(server)
        t_start = time.time()

        def alive() -> str:
            if server.poll() is not None:
                return f"prometheus exited {server.returncode}:\n{prom_log.read_text()[-3000:]}"
            return worker_alive()

        prom = Prom(prom_port)
        poll("first scrape", lambda: prom.get("query", query="up").get("data", {})
             .get("result"), 60, alive)
        # malformed input records after scraping began: their series first appear already
        # at 20, the case the dead-letter alert must catch without a previous sample
        asyncio.run(produce(broker.bootstrap, "netflow", [(b"r1", b"{not json")] * 20))

        exprs = {(p["id"], t["refId"]): substitute(t["expr"]) for p, t in dashboard_targets(dash)}

        def empty_queries() -> list[str]:
            missing = [e for e in exprs.values() if not prom.instant(e)]
            missing += [r for r in recorded if not prom.instant(r)]
            return missing

        poll("every dashboard query and recording rule returns data",
             lambda: not empty_queries(), DEADLINE, alive)

        rules = prom.get("rules")["data"]["groups"]
        bad = [(r["name"], r.get("lastError")) for g in rules for r in g["rules"]
               if r["health"] != "ok"]
        assert not bad, bad
        assert sum(len(g["rules"]) for g in rules) == len(recorded) + n_alerts

        dead = prom.instant("sum by (topology) (dpstream_dead_letters_total)")
        assert len(dead) == 2 and {float(r["value"][1]) for r in dead} == {20.0}  # both read it
        def firing() -> set[str]:
            alerts = prom.get("alerts")["data"]["alerts"]
            return {a["labels"]["topology"] for a in alerts
                    if a["labels"]["alertname"] == "DpstreamDeadLetters"
                    and a["state"] == "firing"}

        poll("DpstreamDeadLetters fires for both topologies", lambda: len(firing()) == 2, 30,
             alive)
        ready = prom.instant("dpstream_worker_ready")
        assert [float(r["value"][1]) for r in ready] == [1.0]

        # history for the panels: 40 scrapes of the throughput, then render them
        throughput = next(p["id"] for p in dash["panels"] if p["title"] == "Throughput")
        poll("40 s of history", lambda: max((len(r["values"]) for r in prom.get(
            "query_range", query=exprs[(throughput, "A")], start=t_start, end=time.time(),
            step=1)["data"]["result"]), default=0) >= 40, 90, alive)
        results: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for (pid, ref), expr in exprs.items():
            panel = next(p for p in dash["panels"] if p["id"] == pid)
            if panel["type"] == "timeseries":
                doc = prom.get("query_range", query=expr, start=t_start, end=time.time(),
                               step=1)
                results[(pid, ref)] = doc["data"]["result"]
            else:
                results[(pid, ref)] = prom.instant(expr)
            assert results[(pid, ref)], (panel["title"], expr)
        rss_kib = next(int(line.split()[1]) for line in
                       Path(f"/proc/{worker.pid}/status").read_text().splitlines()
                       if line.startswith("VmRSS:"))
        png = tmp_path / "dashboard_prometheus.png"
        render(dash, results, png, subtitle=f"\ndpstream demo at 3k events/s, worker RSS "
               f"{rss_kib / 1024:.0f} MiB, Prometheus {prometheus_version(prometheus)}")
        assert png.stat().st_size > 10_000
        if os.environ.get("DPSTREAM_UPDATE_RESULTS") == "1":
            shutil.copy(png, ROOT / "results" / "dashboard_prometheus.png")
        print(f"worker RSS {rss_kib / 1024:.0f} MiB; {len(exprs)} dashboard queries, "
              f"{len(recorded)} recording rules answered")

        # graceful stop: SIGTERM checkpoints and exits 0
        os.kill(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, worker_log.read_text()[-3000:]
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def prometheus_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    first = (out.stdout or out.stderr).splitlines()[0]
    return first.split()[2] if len(first.split()) > 2 else first
