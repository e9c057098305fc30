"""A Faust user's app with dpstream inside: one process, one lifecycle.

The user's own agent (``to_dpstream``) reads flow records from the exporters'
topic, keeps what the business logic wants (here: everything), and hands them
to a dpstream topology in batches through a feed (the **agent path**). The
same process also runs a topology that dpstream consumes directly from a
topic (the **batch path**, the fast one). Metrics and the dashboard are served
on the app's own web server under ``/dpstream/``.

Run it against a broker (``dpstream run`` with no broker prints how to start
the embedded one; any Kafka works)::

    EXAMPLE_BROKER=127.0.0.1:9092 python examples/faust_app.py worker -l info
    # then: python -m worker.cli.demo_producer --broker 127.0.0.1:9092 --topic netflow
    # and open http://127.0.0.1:6066/dpstream/

Environment (all optional): ``EXAMPLE_BROKER`` (host:port), ``EXAMPLE_WEB_PORT``
(6066), ``EXAMPLE_SOURCE_TOPIC`` (the agent's source, ``netflow``),
``EXAMPLE_TOPOLOGIES`` (comma-separated files or directories, default
``examples/topologies``), ``EXAMPLE_FEED_TOPOLOGY`` (the topology the agent
feeds, ``faust-agent-dst-prefixes``), ``EXAMPLE_APP_ID`` (``netops``),
``EXAMPLE_DATADIR`` (Faust's data directory, ``netops-data``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import faust

from worker.runtime.faust_host import add_dpstream

HERE = Path(__file__).resolve().parent
BROKER = os.environ.get("EXAMPLE_BROKER", "127.0.0.1:9092")
SOURCE = os.environ.get("EXAMPLE_SOURCE_TOPIC", "netflow")
FEED = os.environ.get("EXAMPLE_FEED_TOPOLOGY", "faust-agent-dst-prefixes")
TOPOLOGIES = os.environ.get("EXAMPLE_TOPOLOGIES", str(HERE / "topologies")).split(",")

app = faust.App(
    os.environ.get("EXAMPLE_APP_ID", "netops"),
    broker=f"kafka://{BROKER}",
    store="memory://",
    web_host="127.0.0.1",
    web_port=int(os.environ.get("EXAMPLE_WEB_PORT", "6066")),
    broker_session_timeout=6.0,       # short group joins on the embedded broker
    broker_heartbeat_interval=1.0,
    consumer_auto_offset_reset="earliest",
    datadir=os.environ.get("EXAMPLE_DATADIR", "netops-data"),
)

# dpstream's topologies join the app: started after the app's services, stopped
# (with a final checkpoint) before it exits, metrics + dashboard on app.web.
dp = add_dpstream(app, TOPOLOGIES)

flows = app.topic(SOURCE, value_serializer="raw")


@app.agent(flows)
async def to_dpstream(stream: faust.StreamT[bytes]) -> None:
    """The user's agent: JSON flow records in, columnar batches per router out."""
    feed = dp.feed(FEED)
    async for values in stream.take(5000, within=0.2):
        by_router: dict[str, list[str]] = defaultdict(list)
        for raw in values:
            doc = json.loads(raw)
            if isinstance(doc.get("item"), list):      # already a columnar batch
                await feed.send_columnar(str(doc["shard"]), doc["item"])
                continue
            by_router[str(doc["router"])].append(str(doc["dst_prefix"]))
        await feed.send_columnar_many(by_router)   # one message per router, acked together


if __name__ == "__main__":
    app.main()
