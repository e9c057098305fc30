"""Mutation score per privacy-critical module, from mutmut's results (``make mutate``).

Reads ``mutants/<module>.py.meta`` (written by ``mutmut run``), and the results of the
hand-written mutants of ``scripts/mutation_manual.toml`` (``mutants/manual-results.json``),
for every module of
``[tool.mutmut] only_mutate`` in pyproject.toml and the reviewed equivalent mutants in
``scripts/mutation_equivalent.toml`` (mutant name -> one-line reason), and prints a
markdown table: killed / survived / equivalent / not run, and the score

    score = killed / (killed + survived)    (the non-equivalent mutants that were run)

where "killed" counts a failing test run (and a timeout: the mutant made a test hang).
"no tests" (no test calls the mutated function) counts as survived. A module whose
mutants were not run (``not checked``) is reported as such, never scored as killed.

Usage::

    python scripts/mutation_report.py                 # the table (markdown) on stdout
    python scripts/mutation_report.py --survivors     # + every surviving mutant's name
    python scripts/mutation_report.py --write results/mutation.md
        # replace the block between the "mutation-table" markers of that file
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILLED = {1, 3, 36, 24, -24, 152, 255, -9, -11}  # a failing test run, a timeout, a crash
SURVIVED = {0, 33}  # the tests passed; no test calls the function
BEGIN, END = "<!-- mutation-table:begin -->", "<!-- mutation-table:end -->"
EQ_BEGIN, EQ_END = "<!-- mutation-equivalent:begin -->", "<!-- mutation-equivalent:end -->"

SCOPE = {
    # the decoders' dead-letter path: the dead-letter record (the rest of decode_common is
    # field extraction, outside the privacy-critical set)
    "worker/ingest/records.py": "xǁDeadLetterǁ*",
}


def mutant_glob(module: str) -> str:
    """The mutmut name pattern of ``module``'s mutants in scope."""
    dotted = module.removesuffix(".py").replace("/", ".")
    return f"{dotted}.{SCOPE.get(module, '*')}"


def modules() -> list[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(conf["tool"]["mutmut"]["only_mutate"])


def equivalents() -> dict[str, str]:
    path = ROOT / "scripts" / "mutation_equivalent.toml"
    if not path.exists():
        return {}
    return dict(tomllib.loads(path.read_text()).get("equivalent", {}))


def results(module: str) -> dict[str, int | None] | None:
    meta = ROOT / "mutants" / f"{module}.meta"
    if not meta.exists():
        return None
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    pattern = mutant_glob(module)
    out = {k: v for k, v in codes.items() if fnmatch.fnmatch(k, pattern)}
    # hand-written mutants of code mutmut cannot mutate (scripts/mutation_manual.toml)
    manual = tomllib.loads((ROOT / "scripts" / "mutation_manual.toml").read_text())
    done_path = ROOT / "mutants" / "manual-results.json"
    done = json.loads(done_path.read_text()) if done_path.exists() else {}
    for m in manual.get("mutant", []):
        if m["module"] == module:
            out[f"manual:{m['id']}"] = done.get(f"manual:{m['id']}")
    return out


def table(show_survivors: bool = False) -> tuple[str, list[str]]:
    eq = equivalents()
    rows = ["| module | mutants | killed | survived | equivalent | not run | score |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    survivors: list[str] = []
    tot = {"n": 0, "k": 0, "s": 0, "e": 0, "u": 0}
    for mod in modules():
        res = results(mod)
        if res is None:
            rows.append(f"| `{mod}` | - | - | - | - | all | not run |")
            continue
        n = len(res)
        e = sum(1 for m in res if m in eq)
        k = sum(1 for m, c in res.items() if m not in eq and c in KILLED)
        s_names = [m for m, c in res.items() if m not in eq and c in SURVIVED]
        u = sum(1 for m, c in res.items() if m not in eq and c not in KILLED | SURVIVED)
        survivors += sorted(s_names)
        s = len(s_names)
        run = k + s
        score = "not run" if run == 0 else f"{100.0 * k / run:.1f}%"
        if u and run:
            score += f" of {run} run ({u} not run)"
        rows.append(f"| `{mod}` | {n} | {k} | {s} | {e} | {u} | {score} |")
        for key, v in zip("nkseu", (n, k, s, e, u), strict=True):
            tot[key] += v
    if tot["k"] + tot["s"] > 0:
        scored = tot["k"] + tot["s"]
        rows.append(f"| **all mutants run** | {tot['n']} | {tot['k']} | {tot['s']} | {tot['e']} "
                    f"| {tot['u']} | {100.0 * tot['k'] / scored:.1f}% of {scored} run |")
    out = "\n".join(rows)
    if show_survivors and survivors:
        out += "\n\nSurvivors:\n" + "\n".join(f"- `{m}`" for m in survivors)
    return out, survivors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    ap.add_argument("--write", metavar="MD", help="replace the table block of this file")
    args = ap.parse_args(argv)
    text, _ = table(args.survivors)
    if args.write:
        path = Path(args.write)
        doc = path.read_text()
        eq_text = "\n".join(f"- `{name}`: {why}" for name, why in equivalents().items())
        for begin, end, body in ((BEGIN, END, text), (EQ_BEGIN, EQ_END, eq_text)):
            if begin not in doc or end not in doc:
                print(f"{path}: no {begin} ... {end} block", file=sys.stderr)
                return 2
            head, rest = doc.split(begin, 1)
            _, tail = rest.split(end, 1)
            doc = f"{head}{begin}\n{body}\n{end}{tail}"
        path.write_text(doc)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
