"""One error hierarchy: every exception the worker defines lives in worker.errors."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import worker.errors as errors
from sketches.errors import DPStreamError
from tests.support.import_rules import read_tree

ROOT = Path(__file__).resolve().parents[3] / "worker"


def test_every_worker_exception_is_defined_in_worker_errors() -> None:
    defined = []
    for mod, src in read_tree(ROOT).items():
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ClassDef):
                cls = getattr(importlib.import_module(mod), node.name, None)
                if inspect.isclass(cls) and issubclass(cls, BaseException):
                    defined.append(f"{mod}.{node.name}")
    assert defined and all(d.startswith("worker.errors.") for d in defined), defined


def test_the_hierarchy_has_one_root_and_is_documented() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, DPStreamError), name
        assert name in doc, f"{name} missing from the hierarchy in worker/errors.py"
    assert issubclass(errors.BrokerStartError, RuntimeError)  # callers that caught it still do
    assert issubclass(errors.ForeignCheckpoint, errors.SpecError)
