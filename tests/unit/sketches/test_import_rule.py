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


def read_tree(root: Path = ROOT) -> dict[str, str]:
    """Source of every module under ``root``, keyed by dotted module name."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join(parts)] = path.read_text()
    return sources


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> every module it imports anywhere in its body (resolved, absolute)."""
    packages = {name for name, src in sources.items() if _is_package(name, sources)}
    graph: dict[str, set[str]] = {}
    for name, src in sources.items():
        own_package = name if name in packages else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = own_package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    edges.add(sub if sub in sources else base)
        edges.discard(name)
        graph[name] = edges
    return graph


def _is_package(name: str, sources: Mapping[str, str]) -> bool:
    return any(other.startswith(name + ".") for other in sources)


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


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One witness cycle per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graphs are a few dozen modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(_witness(graph, sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def _witness(graph: Mapping[str, set[str]], comp: list[str]) -> list[str]:
    """A concrete cycle through the first module of a strongly connected component."""
    members, start = set(comp), comp[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(graph[path[-1]] & members)
        if start in nxt and len(path) > 1:
            return [*path, start]
        step = next((n for n in nxt if n not in seen), None)
        if step is None:  # dead end inside the component: fall back to the member list
            return [*comp, comp[0]]
        path.append(step)
        seen.add(step)


def foreign_private_reads(sources: Mapping[str, str]) -> list[str]:
    """``obj._name`` on an object other than ``self``/``cls`` when no class of the same
    module defines ``_name``: a module reaching into another module's object."""
    found = []
    for mod, src in sorted(sources.items()):
        tree = ast.parse(src)
        own: set[str] = set()
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    own.add(node.name)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    own.add(node.target.id)
                elif isinstance(node, ast.Assign):
                    own.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                      and isinstance(node.value, ast.Name) and node.value.id == "self"):
                    own.add(node.attr)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                continue
            base = ast.unparse(node.value)
            if base in ("self", "cls") or base.split(".")[0] in ("np", "numpy"):
                continue
            if node.attr not in own:
                found.append(f"{mod}:{node.lineno}: {base}.{node.attr} reads a private "
                             "attribute of another module's object; pass it explicitly")
    return found


# --------------------------------------------------------------------------- the real tree


def test_sketches_tree_follows_the_import_rule() -> None:
    graph = import_graph(read_tree())
    assert "sketches.core.base" in graph and len(graph) > 40  # the parser saw the tree
    assert violations(graph) == []


def test_no_module_reads_private_attributes_of_another_modules_objects() -> None:
    assert foreign_private_reads(read_tree()) == []


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
