"""The import rule of ``sketches/`` (docs/ARCHITECTURE.md), enforced on the real tree.

Layers, bottom to top: ``core`` (with :mod:`sketches.errors`) < ``privacy`` <
``counters`` < {``continual``, ``windowed``} < the package root ``sketches``
(the public API). A module may import its own layer and any layer below;
``continual`` and ``windowed`` never import each other; there is no import
cycle between modules (``TYPE_CHECKING`` and function-level imports count:
they are how a helper reaches back into the class that imports it);
``sketches`` never imports Kafka clients, Faust or the worker; and no module
reads a private attribute (``obj._name``, ``obj`` not ``self``) of an object
whose class lives in another module.

Every module under ``sketches/`` is parsed with :mod:`ast` (no import is
executed), relative imports are resolved against the module's package, and
``from pkg import name`` counts as an import of ``pkg.name`` when that is a
module. The checker is also run on synthetic module graphs below, so it is
known to fail on each kind of violation.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.import_rules import (
    cycles,
    foreign_private_reads,
    import_graph,
    read_tree,
)

ROOT = Path(__file__).resolve().parents[3] / "sketches"

#: layer of each top-level part of ``sketches``, with its rank (higher imports lower)
LAYERS: dict[str, tuple[str, int]] = {
    "sketches.errors": ("core", 0),
    "sketches.core": ("core", 0),
    "sketches.privacy": ("privacy", 1),
    "sketches.counters": ("counters", 2),
    "sketches.continual": ("continual", 3),
    "sketches.windowed": ("windowed", 3),
}
API = ("api", 4)  # the package root: re-exports the public API, imports everything
FORBIDDEN = ("kafka", "faust", "aiokafka", "confluent_kafka", "mode", "worker")


def layer_of(module: str) -> tuple[str, int] | None:
    if module == "sketches":
        return API
    for prefix, layer in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def violations(graph: Mapping[str, set[str]]) -> list[str]:
    """Every broken rule in ``graph``, as readable sentences (empty: the rule holds)."""
    found = []
    for mod in sorted(graph):
        src_layer = layer_of(mod)
        if src_layer is None:
            found.append(f"{mod}: not in any layer; move it under one of {sorted(LAYERS)}")
            continue
        for dep in sorted(graph[mod]):
            top = dep.split(".")[0]
            if top in FORBIDDEN:
                found.append(f"{mod} imports {dep}: sketches never imports Kafka/Faust/worker")
                continue
            if top != "sketches":
                continue
            dep_layer = layer_of(dep)
            if dep_layer is None:
                continue  # reported on its own line as a module outside every layer
            if dep_layer[1] > src_layer[1]:
                found.append(f"{mod} ({src_layer[0]}) imports {dep} ({dep_layer[0]}): "
                             "a layer may import only its own layer and those below")
            elif dep_layer[1] == src_layer[1] and dep_layer[0] != src_layer[0]:
                found.append(f"{mod} ({src_layer[0]}) imports {dep} ({dep_layer[0]}): "
                             "continual and windowed never import each other")
    found.extend(f"import cycle: {' -> '.join(c)}" for c in cycles(graph))
    return found


# --------------------------------------------------------------------------- the real tree


def test_sketches_tree_follows_the_import_rule() -> None:
    graph = import_graph(read_tree(ROOT))
    assert "sketches.core.base" in graph and len(graph) > 40  # the parser saw the tree
    assert violations(graph) == []


def test_no_module_reads_private_attributes_of_another_modules_objects() -> None:
    assert foreign_private_reads(read_tree(ROOT)) == []


def test_every_subpackage_says_what_it_may_import() -> None:
    for init in sorted(ROOT.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if init.parent != ROOT:
            assert "import" in doc.lower(), f"{init}: docstring must state what it may import"


# --------------------------------------------------------------------------- synthetic graphs

CLEAN = {
    "sketches": "from sketches.continual.a import A\nfrom sketches.windowed.b import B\n",
    "sketches.errors": "",
    "sketches.core": '"""doc"""',
    "sketches.core.noise": "import numpy as np\nfrom sketches.errors import SpecError\n",
    "sketches.privacy": "from sketches.privacy.cal import calibrate\n",
    "sketches.privacy.cal": "from sketches.core import noise\n",
    "sketches.counters": "",
    "sketches.counters.tree": "from sketches.privacy import calibrate\n",
    "sketches.continual": "",
    "sketches.continual.a": "from .helper import h\nfrom sketches.counters.tree import T\n",
    "sketches.continual.helper": "from ..core.noise import N\n",
    "sketches.windowed": "",
    "sketches.windowed.b": "from sketches.counters import tree\n",
}


def _check(**changes: str) -> list[str]:
    sources = dict(CLEAN)
    sources.update({k.replace("__", "."): v for k, v in changes.items()})
    return violations(import_graph(sources))


def test_synthetic_clean_graph_passes() -> None:
    graph = import_graph(CLEAN)
    assert graph["sketches.continual.helper"] == {"sketches.core.noise"}  # relative, 2 levels
    assert graph["sketches.windowed.b"] == {"sketches.counters.tree"}  # from pkg import module
    assert violations(graph) == []


@pytest.mark.parametrize(("changes", "expect"), [
    # a layer imports upwards, hidden behind TYPE_CHECKING
    ({"sketches__core__noise": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from sketches.privacy.cal import X\n"},
     "sketches.core.noise (core) imports sketches.privacy.cal (privacy)"),
    # continual reaches into windowed through a relative import inside a function
    ({"sketches__continual__a": "def f():\n    from ..windowed.b import B\n"},
     "continual and windowed never import each other"),
    ({"sketches__windowed__b": "import sketches.continual.a\n"},
     "continual and windowed never import each other"),
    # a mechanism module imports the package root (which imports every mechanism)
    ({"sketches__counters__tree": "import sketches\n"}, "(counters) imports sketches (api)"),
    # the helper imports the class that imports it (cycle within one layer)
    ({"sketches__continual__helper": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from sketches.continual.a import A\n"},
     "import cycle: sketches.continual.a -> sketches.continual.helper -> sketches.continual.a"),
    ({"sketches__core__noise": "from aiokafka import AIOKafkaConsumer\n"},
     "imports aiokafka: sketches never imports Kafka/Faust/worker"),
    ({"sketches__privacy__cal": "from worker.runtime.worker import run\n"},
     "imports worker.runtime.worker"),
    ({"sketches__stray": "x = 1\n"}, "sketches.stray: not in any layer"),
])
def test_checker_fails_on_each_kind_of_violation(changes: dict[str, str], expect: str) -> None:
    found = _check(**changes)
    assert any(expect in v for v in found), found


def test_private_read_checker_fails_on_a_helper_reaching_into_the_sketch() -> None:
    sources = {
        "sketches.continual.sk": "class Sketch:\n    def __init__(self):\n"
                                 "        self._last = {}\n",
        "sketches.continual.helper": "def payload(hh):\n    return hh._last\n",
        "sketches.continual.ok": "class A:\n    def __init__(self):\n        self._x = 1\n"
                                 "    def same(self, other):\n        return other._x\n",
    }
    found = foreign_private_reads(sources)
    assert len(found) == 1 and found[0].startswith("sketches.continual.helper:2: hh._last")
