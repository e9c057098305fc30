"""Shared checkers of the import rules (sketches/ and worker/), run on source text.

Every module under a root is parsed with :mod:`ast` (no import is executed),
relative imports are resolved against the module's package, and ``from pkg
import name`` counts as an import of ``pkg.name`` when that is a module. The
rule tests (tests/unit/sketches/test_import_rule.py,
tests/unit/worker/test_layers.py) also run these checkers on synthetic module
graphs, so each is known to fail on the violation it looks for.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path


def read_tree(root: Path) -> dict[str, str]:
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
