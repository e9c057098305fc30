"""``dpstream validate`` and ``dpstream plan``: check and plan topologies, no broker.

``validate`` loads and checks topology files (exit 2 on the first error, which
names the file, the field and the fix); ``plan`` prints each topology's stated
guarantee, noise sigma, error bounds, detection times, memory and what-ifs
(:mod:`worker.plan.plan`).
"""

from __future__ import annotations

import argparse
from typing import Any

from sketches.errors import SpecError
from worker.config.settings import Settings


def add_parsers(sub: Any) -> None:
    """Register ``validate`` and ``plan`` on the ``dpstream`` subparsers."""
    val = sub.add_parser("validate", help="check topology files without a broker")
    val.add_argument("topology", nargs="+", help="topology file or directory")
    val.set_defaults(func=cmd_validate)
    pl = sub.add_parser("plan", help="sigma, error bounds, detection times, memory and "
                        "what-ifs of topologies, before running them (no broker)")
    pl.add_argument("topology", nargs="+", help="topology file or directory")
    pl.add_argument("--rate", type=float, default=None, help="events per second on the input "
                    "topic, spread evenly over the shards (default: no rate; bounds only)")
    pl.add_argument("--shards", type=int, default=None, help="shards the rate spreads over "
                    "(default: the size of shards.allowed, else 1)")
    pl.add_argument("--share", type=float, action="append", default=None,
                    help="traffic share of an example item, e.g. 0.05 (repeatable; default "
                    "0.01, 0.05, 0.10)")
    pl.add_argument("--json", action="store_true", help="machine-readable JSON")
    pl.set_defaults(func=cmd_plan)


def cmd_validate(args: argparse.Namespace) -> int:
    """``dpstream validate``: load and check topologies; no broker needed.

    The checks are run's start-up checks (:func:`worker.engine.startup.load_checked`:
    topics, budgets, sampler range, production rules, ``DPSTREAM_MEMORY_LIMIT_BYTES``),
    so a topology validate passes is one ``run`` starts with, under the same environment.
    """
    from worker.engine.composition import describe, topic_totals
    from worker.engine.startup import load_checked

    topos = load_checked(Settings.from_env(), args.topology)  # what `run` would refuse
    totals = topic_totals(topos)
    for t in topos:
        print(f"ok {t.source}: topology {t.name!r}, mechanism {t.mechanism}, "
              f"eps {t.privacy.eps}, delta {t.privacy.delta}, input {t.input.topic} "
              f"({t.input.partitions} partitions), releases on {t.release.topic}")
    for total in totals.values():  # sequential composition per input topic
        print(describe(total))
    print("next: `dpstream plan TOPOLOGY --rate EVENTS_PER_S` shows the noise, the error "
          "bounds and detection times these releases will have, and which knob changes them")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """``dpstream plan``: print each topology's plan (worker.plan.plan); no broker needed."""
    import glob
    import json
    import os

    from worker.config.mechanism_loader import load_mechanisms
    from worker.config.topology import load_topology
    from worker.engine.composition import describe, topic_totals
    from worker.plan.plan import DEFAULT_SHARES, plan, render

    shares = tuple(args.share or DEFAULT_SHARES)
    if args.rate is not None and not args.rate > 0:
        raise SpecError(f"--rate: must be > 0 events per second, got {args.rate}")
    if any(not 0 < s <= 1 for s in shares):
        raise SpecError(f"--share: each share must be in (0, 1], got {list(shares)}; "
                        "e.g. --share 0.05 for 5% of the traffic")
    if args.shards is not None and args.shards < 1:
        raise SpecError(f"--shards: must be >= 1, got {args.shards}")
    load_mechanisms(Settings.from_env().plugins)
    # every file on its own (unlike `run`, two plans may share a topology name: a user
    # compares alternatives of one topology)
    files = [f for path in args.topology for f in (
        sorted(glob.glob(os.path.join(path, "*.yaml")) + glob.glob(os.path.join(path, "*.yml")))
        if os.path.isdir(path) else [path])]
    if not files:
        raise SpecError(f"topology: no *.yaml files in {args.topology}; name topology files")
    topos = [load_topology(f) for f in files]
    plans = plan(topos, rate=args.rate, shares=shares, shards=args.shards)
    # what the topologies spend together, per input topic and unit, if run together
    by_key = topic_totals(topos)
    for t, p in zip(topos, plans, strict=True):
        p["topic_total"] = by_key[t.input.topic].to_json()
    totals = [t for t in by_key.values() if len(t.shares) > 1 or t.budget]
    if args.json:
        print(json.dumps(plans, indent=2, default=str, allow_nan=False))
    else:
        print(render(plans), end="")
        for total in totals:
            print(f"== composition: {describe(total)}")
    return 0
