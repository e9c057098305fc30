"""Mutation testing of the privacy-critical modules (``make mutate`` / ``make mutate-fast``).

Runs mutmut (3.7, the ``dev`` extra; configuration: ``[tool.mutmut]`` in pyproject.toml)
module by module, so an interrupted or time-boxed run keeps every finished module's
results in ``mutants/``, then prints the score table (scripts/mutation_report.py).

Per mutant, mutmut runs only the unit tests and doctests that call the mutated function
(golden snapshots deselected: ``-m "not golden"``), in a forked child, one at a time
(``--jobs``; the default 1 leaves the other core to everyone else).

Usage::

    python scripts/mutate.py                      # every privacy-critical module
    python scripts/mutate.py --modules worker/event_time.py sketches/core/keyed_prf.py
    python scripts/mutate.py --changed-vs main    # those changed vs main (git diff)
    python scripts/mutate.py --fresh --write results/mutation.md   # the committed score

Message text is not mutated (``do_not_mutate_patterns``: lines that are only a string
literal, ``raise X("...``, ``log.x(``): it is not privacy semantics, and the tests
match on the field a message names, not its wording.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_report

ROOT = Path(__file__).resolve().parent.parent

SCOPE = {
    # the decoders' dead-letter path: the dead-letter record (the rest of decode_common is
    # field extraction, outside the privacy-critical set)
    "worker/decode_common.py": "xǁDeadLetterǁ*",
}


def mutant_glob(module: str) -> str:
    dotted = module.removesuffix(".py").replace("/", ".")
    return f"{dotted}.{SCOPE.get(module, '*')}"


def changed_modules(ref: str) -> list[str]:
    out = subprocess.run(["git", "diff", "--name-only", ref, "--"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    return [m for m in mutation_report.modules() if m in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", nargs="+", help="module paths (default: all of only_mutate)")
    ap.add_argument("--changed-vs", metavar="REF", help="only modules changed vs this git ref")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--fresh", action="store_true", help="delete mutants/ first")
    ap.add_argument("--write", metavar="MD", help="write the table into this file's block")
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
    if args.fresh:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    else:  # tests are copied once: refresh them so edited tests count
        shutil.rmtree(ROOT / "mutants" / "tests", ignore_errors=True)
    for mod in mods:
        t0 = time.monotonic()
        print(f"== {mod} ({mutant_glob(mod)})", flush=True)
        rc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children",
                             str(args.jobs), mutant_glob(mod)], cwd=ROOT,
                            stdout=subprocess.DEVNULL).returncode
        print(f"   mutmut exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
    report = ["--survivors"] + (["--write", args.write] if args.write else [])
    return mutation_report.main(report)


if __name__ == "__main__":
    sys.exit(main())
