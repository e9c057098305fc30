"""deploy/helm and deploy/k8s: rendered offline and validated by real tools.

- the chart is linted (strict) and rendered by helm-python-sdk (Helm v4's Go SDK in a
  bundled library; no helm binary, no cluster);
- ``kubernetes-validate --strict`` checks every core object of the chart (several value
  sets) and of ``kubectl kustomize deploy/k8s`` against the Kubernetes 1.37 schemas;
- kubernetes-validate has no schemas for the CRDs (ServiceMonitor, PrometheusRule,
  ScaledObject, TriggerAuthentication): they are validated by node against the
  schemas the kubernetes-models packages compile from the KEDA and Prometheus Operator
  CRDs (tests/deploy/crd, pinned by package-lock.json; types, enums, required fields),
  the PrometheusRule's rules go through ``promtool check rules``, and their fields
  are checked here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy import CHART, DEPLOY, ROOT, run, tool

helm = pytest.importorskip("helm_python", reason="pip install -e '.[deploy]'")

ALL_ON = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
          "grafanaDashboard": {"enabled": True}, "keda": {"enabled": True, "maxReplicas": 10}}
SASL_TLS = {"kafka": {"securityProtocol": "SASL_SSL",
                      "sasl": {"mechanism": "SCRAM-SHA-512", "username": "u", "password": "p"},
                      "tls": {"ca": "-----BEGIN CERTIFICATE-----", "cert": "c", "key": "k"}}}
CRDS = {"ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication"}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name="dp", namespace="dpstream")
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def kubernetes_validate(docs: list[dict[str, Any]], tmp_path: Path, name: str) -> str:
    core = [d for d in docs if d["kind"] not in CRDS]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(core))
    out = run(tool("kubernetes-validate"), "--strict", str(path))
    text = out.stdout + out.stderr
    assert "passed" in text and "fail" not in text.lower(), text
    assert text.count("passed for resource") == len(core), text
    return text


def validate_crds(docs: list[dict[str, Any]], tmp_path: Path) -> str:
    crd_dir = Path(__file__).parent / "crd"
    if not (crd_dir / "node_modules" / "@kubernetes-models").exists():
        import os

        msg = "npm ci --prefix tests/deploy/crd (make test and .ci/run do it)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    path = tmp_path / "crs.json"
    path.write_text(json.dumps([d for d in docs if d["kind"] in CRDS]))
    return run(tool("node"), str(crd_dir / "validate.mjs"), str(path)).stdout


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def test_custom_resources_match_their_crd_schemas(tmp_path: Path) -> None:
    docs = render({**ALL_ON, **SASL_TLS})
    out = validate_crds(docs, tmp_path)
    assert sorted(line.split()[1].split("/")[0] for line in out.splitlines()) == sorted(CRDS)
    # the validator can fail: a wrongly typed field is refused
    bad = [d for d in docs if d["kind"] == "ScaledObject"]
    bad[0]["spec"]["maxReplicaCount"] = "four"
    with pytest.raises(pytest.fail.Exception, match="maxReplicaCount must be integer"):
        validate_crds(bad, tmp_path)


def test_helm_lint_strict() -> None:
    for values in ({}, {**ALL_ON, **SASL_TLS}):
        report = helm.lint(str(CHART), values, strict=True)
        errors = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        assert not errors, errors


@pytest.mark.parametrize("name,values", [("default", {}), ("all-on", ALL_ON),
                                         ("sasl-tls", {**ALL_ON, **SASL_TLS})])
def test_chart_renders_valid_kubernetes_objects(name: str, values: dict[str, Any],
                                                tmp_path: Path) -> None:
    docs = render(values)
    kubernetes_validate(docs, tmp_path, name)
    kinds = by_kind(docs)
    for kind in ("Deployment", "ConfigMap", "Service", "PodDisruptionBudget", "NetworkPolicy"):
        assert kind in kinds, kind
    assert ("ScaledObject" in kinds) == bool(values)


def test_deployment_probes_group_and_grace() -> None:
    dep = by_kind(render({}))["Deployment"][0]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["DPSTREAM_GROUP_ID"] == "dpstream" and env["DPSTREAM_ASSIGNMENT"] == "group"
    assert env["DPSTREAM_EMBEDDED_BROKER"] == "false"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert pod["securityContext"]["runAsNonRoot"] is True
    # memory model: 256 + 8 shards * 8 MiB * 3 copies
    assert c["resources"]["requests"]["memory"] == "448Mi"
    assert c["resources"]["limits"]["memory"] == "448Mi"
    from worker.config.settings import Settings

    fields = {f"DPSTREAM_{f.upper()}" for f in Settings.__dataclass_fields__}
    assert set(env) <= fields, set(env) - fields


def test_sasl_tls_come_from_the_secret() -> None:
    kinds = by_kind(render({**ALL_ON, **SASL_TLS}))
    secret = kinds["Secret"][0]
    assert secret["stringData"]["sasl-password"] == "p"
    assert secret["stringData"]["sasl-mechanism"] == "scram_sha512"  # KEDA's spelling
    c = kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in c["env"]
            if "valueFrom" in e}
    assert refs == {"DPSTREAM_SASL_USERNAME": secret["metadata"]["name"],
                    "DPSTREAM_SASL_PASSWORD": secret["metadata"]["name"]}
    auth = kinds["TriggerAuthentication"][0]
    assert {p["key"] for p in auth["spec"]["secretTargetRef"]} <= set(secret["stringData"])


def test_bad_values_fail_with_the_field_name() -> None:
    with pytest.raises(Exception, match=r"kafka\.securityProtocol"):
        render({"kafka": {"securityProtocol": "TLS"}})
    with pytest.raises(Exception, match=r"kafka\.sasl\.username"):
        render({"kafka": {"securityProtocol": "SASL_PLAINTEXT"}})


def test_keda_is_capped_at_the_partition_count() -> None:
    topo = yaml.safe_load((ROOT / "topologies" / "netmon.yaml").read_text())
    with helm.Chart.load(str(CHART)) as chart:
        assert chart.values["topologies"]["inputPartitions"] == topo["input"]["partitions"]
    so = by_kind(render(ALL_ON))["ScaledObject"][0]["spec"]
    assert so["maxReplicaCount"] == topo["input"]["partitions"]  # 10 asked, 4 partitions
    so = by_kind(render({"keda": {"enabled": True, "maxReplicas": 3}}))["ScaledObject"][0]
    assert so["spec"]["maxReplicaCount"] == 3
    assert so["spec"]["triggers"][0]["metadata"]["consumerGroup"] == "dpstream"
    dep = by_kind(render(ALL_ON))["Deployment"][0]
    assert "replicas" not in dep["spec"]  # KEDA owns the replica count


def test_prometheus_rule_and_dashboard_match_deploy(tmp_path: Path) -> None:
    kinds = by_kind(render(ALL_ON))
    rule = kinds["PrometheusRule"][0]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    run(tool("promtool"), "check", "rules", str(path))
    want = [yaml.safe_load((DEPLOY / "prometheus" / "rules" / f).read_text())["groups"]
            for f in ("recording.yml", "alerts.yml")]
    assert rule["spec"]["groups"] == want[0] + want[1]
    dash = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard"))
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dash["data"]["dpstream.json"] == (DEPLOY / "grafana" / "dpstream.json").read_text()
    sm = kinds["ServiceMonitor"][0]["spec"]
    assert sm["endpoints"][0]["port"] == "metrics"


def test_network_policy_keeps_metrics_operator_only() -> None:
    kinds = by_kind(render({}))
    np = kinds["NetworkPolicy"][0]["spec"]
    assert np["policyTypes"] == ["Ingress"]
    (rule,) = np["ingress"]
    assert rule["ports"] == [{"port": 9108, "protocol": "TCP"}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]
    assert kinds["Service"][0]["spec"]["type"] == "ClusterIP"


def test_kustomize_output_is_valid(tmp_path: Path) -> None:
    try:
        out = run(tool("kubectl"), "kustomize", str(DEPLOY / "k8s"))
    except subprocess.TimeoutExpired:  # pragma: no cover
        pytest.fail("kubectl kustomize timed out")
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kubernetes_validate(docs, tmp_path, "kustomize")
    kinds = by_kind(docs)
    dep = kinds["Deployment"][0]["spec"]["template"]["spec"]
    chart = by_kind(render({}))["Deployment"][0]["spec"]["template"]["spec"]
    for key in ("readinessProbe", "livenessProbe", "startupProbe", "resources",
                "securityContext"):
        assert dep["containers"][0][key] == chart["containers"][0][key], key
    assert dep["terminationGracePeriodSeconds"] == chart["terminationGracePeriodSeconds"]


def test_client_settings_reach_the_worker_env() -> None:
    """Issue 22: isolation level, client.id, static membership and the TLS key password."""
    kafka = {**SASL_TLS["kafka"], "clientId": "billing-{role}", "staticMembership": True,
             "isolationLevel": "read_uncommitted",
             "tls": {**SASL_TLS["kafka"]["tls"], "keyPassword": "kp"}}
    kinds = by_kind(render({**ALL_ON, "kafka": kafka}))
    c = kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["DPSTREAM_ISOLATION_LEVEL"]["value"] == "read_uncommitted"
    assert env["DPSTREAM_CLIENT_ID"]["value"] == "billing-{role}"
    assert env["DPSTREAM_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.name"
    ref = env["DPSTREAM_SSL_KEY_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref["key"] == "tls-key-password"
    assert kinds["Secret"][0]["stringData"]["tls-key-password"] == "kp"
    default = by_kind(render({}))["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    names = {e["name"]: e.get("value") for e in default["env"]}
    assert names["DPSTREAM_ISOLATION_LEVEL"] == "read_committed"
    assert "DPSTREAM_GROUP_INSTANCE_ID" not in names
