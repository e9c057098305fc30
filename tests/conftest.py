"""Suite-wide settings: Faust's data directory goes to a temporary path, not the cwd.

Faust creates ``<app id>-data`` in the working directory unless ``FAUST_DATADIR`` says
otherwise (the container image sets it to /var/lib/dpstream, Dockerfile). Every worker the
tests start, in process or as a subprocess (which inherits the environment), would leave
an empty ``*-faust-data`` directory in the repository root; the session hook below fails
the run if one appears there anyway.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_DATA = tempfile.mkdtemp(prefix="dpstream-test-faust-")
os.environ["FAUST_DATADIR"] = os.path.join(_DATA, "{conf.name}-data")
_BEFORE = {p.name for p in ROOT.glob("*-data")}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_DATA, ignore_errors=True)
    left = sorted({p.name for p in ROOT.glob("*-data")} - _BEFORE)
    if left:
        session.config.get_terminal_writer().line(
            f"tests left Faust data directories in {ROOT}: {', '.join(left)} "
            "(FAUST_DATADIR must point elsewhere: tests/conftest.py)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under mutmut (``make mutate``) only: mutmut 3.7, the last release that installs next
    to faust-streaming's ``click<8.4`` pin, reads ``item._nodeid``, which pytest 9 renamed
    to ``nodeid``; without this its test-to-function map fails to build."""
    if "MUTANT_UNDER_TEST" in os.environ:
        for item in items:
            if not hasattr(item, "_nodeid"):
                item._nodeid = item.nodeid  # type: ignore[attr-defined]


@pytest.fixture(autouse=True, scope="session")
def _no_cached_results_under_a_mutant() -> None:
    """Under mutmut, in the child that runs one mutant: empty every ``functools`` cache of
    ``sketches``/``worker``. The child is forked from a process that ran the unmutated code,
    so a cached sigma (``analytic_gaussian_sigma``), noise table or BLT column would
    otherwise be served without ever calling the mutated function (a false survivor)."""
    if os.environ.get("MUTANT_UNDER_TEST", "") in ("", "stats", "fail", "list_all_tests",
                                                    "mutant_generation"):
        return
    import sys

    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("sketches", "worker")):
            continue
        for obj in list(vars(module).values()):
            clear = getattr(obj, "cache_clear", None)
            if callable(clear):
                clear()
