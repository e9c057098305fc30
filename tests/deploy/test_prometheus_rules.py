"""deploy/prometheus: promtool check config, check rules and the rule unit tests."""

from __future__ import annotations

from tests.support.deploy import DEPLOY, run, tool

PROM = DEPLOY / "prometheus"


def test_promtool_check_config() -> None:
    out = run(tool("promtool"), "check", "config", "prometheus.yml", cwd=PROM)
    assert "SUCCESS" in out.stdout + out.stderr


def test_promtool_rule_unit_tests() -> None:
    """Every alert fires in its case (counters also on their first event) and only then."""
    out = run(tool("promtool"), "test", "rules", "tests/alerts_test.yml", cwd=PROM)
    assert "SUCCESS" in out.stdout + out.stderr


def test_every_alert_has_a_unit_test() -> None:
    import yaml

    alerts = {r["alert"] for g in yaml.safe_load((PROM / "rules" / "alerts.yml").read_text())
              ["groups"] for r in g["rules"]}
    tests = yaml.safe_load((PROM / "tests" / "alerts_test.yml").read_text())["tests"]
    fired = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])
             if t["exp_alerts"]}
    assert alerts == fired, f"alerts without a firing test: {sorted(alerts - fired)}"
    assert len(alerts) >= 10
