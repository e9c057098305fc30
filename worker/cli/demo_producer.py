"""``python -m worker.cli.demo_producer``: the demo producer from the command line.

Produces synthetic network-monitoring flow records
(:mod:`worker.kafka.demo_producer`, which documents the data and the encodings)
until ``--events`` are sent or Ctrl-C; the compose deployment runs it.
"""

from __future__ import annotations

import argparse
import asyncio

from worker.kafka.demo_producer import ENCODINGS, ITEM_FIELDS, run_producer


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.cli.demo_producer --broker HOST:PORT --topic netflow [...]``."""
    ap = argparse.ArgumentParser(prog="python -m worker.cli.demo_producer",
                                 description="Produce synthetic network-monitoring flow records.")
    ap.add_argument("--broker", required=True, help="host:port of the Kafka cluster")
    ap.add_argument("--topic", default="netflow")
    ap.add_argument("--events", type=int, default=None, help="how many (default: forever)")
    ap.add_argument("--rate", type=float, default=None, help="events/s (default: max)")
    ap.add_argument("--encoding", choices=ENCODINGS, default="json")
    ap.add_argument("--item-field", choices=ITEM_FIELDS, default="src_ip",
                    help="the item column of columnar messages")
    ap.add_argument("--routers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        n = asyncio.run(run_producer(args.broker, args.topic, events=args.events,
                                     rate=args.rate, encoding=args.encoding, seed=args.seed,
                                     routers=args.routers, item_field=args.item_field))
    except KeyboardInterrupt:
        return 130
    print(f"produced {n} events to {args.topic}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
