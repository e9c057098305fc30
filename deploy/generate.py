"""Write every generated file under deploy/ (``--check``: fail if one differs).

- deploy/grafana/dpstream.json: the dashboard, from deploy/grafana/dashboard.py
  (grafana-foundation-sdk);
- the copies that Helm and kustomize ship (both only read files inside their own
  directory): the dashboard, the Prometheus rules (deploy/prometheus/rules) and the
  default topology (topologies/netmon.yaml).

``python deploy/generate.py`` after editing a source; tests/deploy checks that the
committed files equal this output.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent
ROOT = DEPLOY.parent
CHART = DEPLOY / "helm" / "dpstream" / "files"
K8S = DEPLOY / "k8s" / "files"
RULES = DEPLOY / "prometheus" / "rules"
DEFAULT_TOPOLOGY = ROOT / "topologies" / "netmon.yaml"


def dashboard_json() -> str:
    """The dashboard JSON from the generator module (loaded by path: deploy/ is no package)."""
    spec = importlib.util.spec_from_file_location("dpstream_dashboard",
                                                  DEPLOY / "grafana" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.render())


def outputs() -> dict[Path, str]:
    """Every generated path and its content."""
    dash = dashboard_json()
    out = {DEPLOY / "grafana" / "dpstream.json": dash,
           CHART / "dashboards" / "dpstream.json": dash,
           K8S / "dashboards" / "dpstream.json": dash}
    for rule in sorted(RULES.glob("*.yml")):
        out[CHART / "rules" / rule.name] = rule.read_text()
        out[K8S / "rules" / rule.name] = rule.read_text()
    topo = DEFAULT_TOPOLOGY.read_text()
    out[CHART / "topologies" / DEFAULT_TOPOLOGY.name] = topo
    out[K8S / "topologies" / DEFAULT_TOPOLOGY.name] = topo
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = p.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale and args.check:
        print("stale generated files (run `python deploy/generate.py`): "
              + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
