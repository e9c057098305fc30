"""Mutation testing of the privacy-critical modules (``make mutate`` / ``make mutate-fast``).

Runs mutmut (3.7, the ``dev`` extra; configuration: ``[tool.mutmut]`` in pyproject.toml)
module by module, so an interrupted or time-boxed run keeps every finished module's
results in ``mutants/``, then prints the score table (scripts/mutation_report.py).

Per mutant, mutmut runs only the unit tests and doctests that call the mutated function
(golden snapshots deselected: ``-m "not golden"``), in a forked child, one at a time
(``--jobs``; the default 1 leaves the other core to everyone else).

Usage::

    python scripts/mutate.py                      # every privacy-critical module
    python scripts/mutate.py --modules worker/ingest/event_time.py sketches/core/keyed_prf.py
    python scripts/mutate.py --changed-vs main    # those changed vs main (git diff)
    python scripts/mutate.py --fresh --write results/mutation.md   # the committed score

Code mutmut cannot mutate (every method of a decorated class, i.e. all dataclasses, and
decorated functions) is covered by the hand-written mutants of
``scripts/mutation_manual.toml``, run after the module's mutmut mutants.

Message text is not mutated (``do_not_mutate_patterns``: lines that are only a string
literal, ``raise X("...``, ``log.x(``): it is not privacy semantics, and the tests
match on the field a message names, not its wording.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_report

ROOT = Path(__file__).resolve().parent.parent

mutant_glob = mutation_report.mutant_glob


def manual_mutants(module: str) -> list[dict[str, object]]:
    doc = tomllib.loads((ROOT / "scripts" / "mutation_manual.toml").read_text())
    return [m for m in doc.get("mutant", []) if m["module"] == module]


def run_manual(module: str) -> None:
    """Apply each hand-written mutant of ``module`` to its mutants/ copy, run its tests."""
    path = ROOT / "mutants" / "manual-results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    target = ROOT / "mutants" / module
    for m in manual_mutants(module):
        key = f"manual:{m['id']}"
        src = target.read_text()
        old, new = str(m["old"]), str(m["new"])
        if src.count(old) != 1:
            print(f"   {key}: `old` found {src.count(old)} times in {target}", file=sys.stderr)
            results[key] = None
            continue
        target.write_text(src.replace(old, new))
        try:
            # MUTANT_UNDER_TEST empty: mutmut's trampolines call the original functions
            env = dict(os.environ, MUTANT_UNDER_TEST="")
            cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                   "--doctest-modules", "-m", "not golden", "--timeout=300",
                   *map(str, m["tests"]), module]  # type: ignore[call-overload]
            rc = subprocess.run(cmd, cwd=ROOT / "mutants", env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=1800).returncode
        finally:
            target.write_text(src)
        results[key] = 1 if rc == 1 else (0 if rc == 0 else None)
        print(f"   {key}: {'killed' if rc == 1 else 'SURVIVED' if rc == 0 else f'error {rc}'}",
              flush=True)
        path.write_text(json.dumps(results, indent=1, sort_keys=True))


def changed_modules(ref: str) -> list[str]:
    """Privacy-critical modules this branch changed (committed or not) since it left ``ref``
    (``git diff --name-only $(git merge-base ref HEAD)``: changes merged into ``ref`` since
    then are not this branch's)."""
    base = subprocess.run(["git", "merge-base", ref, "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    out = subprocess.run(["git", "diff", "--name-only", base, "--"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    return [m for m in mutation_report.modules() if m in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", nargs="+", help="module paths (default: all of only_mutate)")
    ap.add_argument("--changed-vs", metavar="REF", help="only modules changed vs this git ref")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--fresh", action="store_true", help="delete mutants/ first")
    ap.add_argument("--write", metavar="MD", help="write the table into this file's block")
    ap.add_argument("--survivors", action="store_true",
                    help="re-run only the surviving and not yet run mutants of the modules (after"
                         " adding tests: a test added can kill a survivor, never revive a killed"
                         " mutant)")
    ap.add_argument("--manual-only", action="store_true",
                    help="only the hand-written mutants (scripts/mutation_manual.toml)")
    args = ap.parse_args(argv)
    mods = args.modules or mutation_report.modules()
    if args.changed_vs:
        mods = [m for m in changed_modules(args.changed_vs) if m in mods]
        if not mods:
            print(f"no privacy-critical module changed vs {args.changed_vs}: nothing to mutate")
            return 0
    unknown = [m for m in mods if m not in mutation_report.modules()]
    if unknown:
        print(f"not in [tool.mutmut] only_mutate: {unknown}", file=sys.stderr)
        return 2
    if args.fresh and not args.manual_only:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    else:  # tests are copied once: refresh them so edited tests count
        shutil.rmtree(ROOT / "mutants" / "tests", ignore_errors=True)
        if args.manual_only:
            shutil.copytree(ROOT / "tests", ROOT / "mutants" / "tests")
    for mod in mods:
        if args.manual_only:
            if manual_mutants(mod):
                print(f"== {mod} (manual mutants)", flush=True)
                run_manual(mod)
            continue
        t0 = time.monotonic()
        names = [mutant_glob(mod)]
        if args.survivors:
            res = mutation_report.results(mod) or {}
            names = sorted(m for m, c in res.items()
                           if (c is None or c in mutation_report.SURVIVED)
                           and not m.startswith("manual:")
                           and m not in mutation_report.equivalents())
        what = f"{len(names)} survivors or not run" if args.survivors else names[0]
        print(f"== {mod} ({what})", flush=True)
        rc = 0
        if names:
            rc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children",
                                 str(args.jobs), *names], cwd=ROOT,
                                stdout=subprocess.DEVNULL).returncode
        print(f"   mutmut exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
        if manual_mutants(mod):
            run_manual(mod)
    report = ["--survivors"] + (["--write", args.write] if args.write else [])
    return mutation_report.main(report)


if __name__ == "__main__":
    sys.exit(main())
