"""Follow release topics that may not exist yet (aiokafka): the dashboard's feed.

:func:`follow_release_topics` yields every record value of the followed topics
(every partition, no consumer group, nothing committed), starting ``replay``
records before each partition's end (0: from the beginning). Topics that do not
exist yet are looked for every 0.5 s until they do, and every 10 s after that
for added partitions. What it yields goes into a reader
(:class:`worker.release.reader.ReleaseIndex`, or the dashboard's state, which
answers the same reader API).

The broker is checked every ``broker_check_s`` (an all-topics metadata
request, at most ``broker_timeout_s``): ``on_broker`` is told the error while
it fails and None once it answers, and the consumer goes on (it reconnects by
itself). Without that check a dead broker looked like a quiet topic: fetches
return nothing, and the metadata request of the partition check did not fail
within 40 s (issue 23: the page showed the last releases as current, no error,
1 min 45 s after the broker died).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from worker.kafka.client_config import for_kind

MISSING_CHECK_S = 0.5
PARTITION_CHECK_S = 10.0
BROKER_CHECK_S = 2.0
BROKER_TIMEOUT_S = 3.0
DISCOVER_TIMEOUT_S = 30.0


async def follow_release_topics(bootstrap: str, topics: Sequence[str], *, replay: int,
                                client_options: Mapping[str, Any] | None = None,
                                on_status: Callable[[str | None], None] = lambda _: None,
                                on_broker: Callable[[str | None], None] = lambda _: None,
                                broker_check_s: float = BROKER_CHECK_S,
                                broker_timeout_s: float = BROKER_TIMEOUT_S,
                                ) -> AsyncIterator[bytes]:
    """Yield the record values of ``topics`` as they arrive, forever.

    ``on_status`` is told ``"waiting for topic(s) [...]"`` while a topic is missing,
    and None once every topic is assigned. Errors (e.g. the broker is gone) are
    raised to the caller, who decides whether to retry, except those of the
    periodic broker check, which go to ``on_broker``.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    opts = dict(client_options or {})
    consumer = AIOKafkaConsumer(**{**opts, "bootstrap_servers": bootstrap, "group_id": None,
                                   "enable_auto_commit": False, "auto_offset_reset": "earliest"})
    admin = AIOKafkaAdminClient(**{**for_kind(opts, "admin"), "bootstrap_servers": bootstrap})
    try:
        await consumer.start()
        await admin.start()
        on_broker(None)
        assigned: set[Any] = set()
        next_check = 0.0
        next_broker = time.monotonic() + broker_check_s
        while True:
            if time.monotonic() > next_broker:
                next_broker = time.monotonic() + broker_check_s
                await _check_broker(admin, topics, broker_timeout_s, on_broker)
            if time.monotonic() > next_check:
                # topics may appear later (dashboard started before the worker), and
                # partitions may be added
                # bounded: a request to a dead broker can hang; the caller retries
                found = await asyncio.wait_for(_discover(admin, topics), DISCOVER_TIMEOUT_S)
                wanted = {TopicPartition(t, p) for t, parts in found.items() for p in parts}
                if wanted - assigned:
                    new = wanted - assigned
                    assigned |= new
                    consumer.assign(sorted(assigned))
                    await _position(consumer, sorted(new), replay)
                missing = [t for t in topics if not any(tp.topic == t for tp in assigned)]
                on_status(f"waiting for topic(s) {missing}" if missing else None)
                next_check = time.monotonic() + (MISSING_CHECK_S if missing
                                                 else PARTITION_CHECK_S)
            if not assigned:
                await asyncio.sleep(MISSING_CHECK_S)
                continue
            fetched = await consumer.getmany(timeout_ms=500)
            for records in fetched.values():
                for rec in records:
                    if rec.value is not None:
                        yield rec.value
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
        await consumer.stop()


async def _check_broker(admin: Any, topics: Sequence[str], timeout_s: float,
                        on_broker: Callable[[str | None], None]) -> None:
    """One metadata request within ``timeout_s``; its error (or None) to ``on_broker``."""
    try:
        await asyncio.wait_for(_discover(admin, topics), timeout_s)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        on_broker(f"no metadata answer within {timeout_s:g} s")
    except Exception as exc:  # the broker is gone or refuses: report, keep consuming
        text = str(exc)
        on_broker(text if text.startswith(type(exc).__name__) else
                  f"{type(exc).__name__}: {text}")
    else:
        on_broker(None)


async def _discover(admin: Any, topics: Sequence[str]) -> dict[str, list[int]]:
    """The partitions of each followed topic that exists now.

    An all-topics metadata request through an admin client. Not the
    consumer's metadata cache: once ``assign()`` has run, aiokafka's
    metadata requests name only the assigned topics, so a followed topic
    created after another one was assigned would never appear (the cause
    of a "waiting for topic(s)" page that never filled, issue #11). Not a
    request naming the missing topics either: that may auto-create them.
    """
    found: dict[str, list[int]] = {}
    for t in await admin.describe_topics():
        if t.get("topic") in topics and not t.get("error_code") and t.get("partitions"):
            found[t["topic"]] = sorted(int(p["partition"]) for p in t["partitions"])
    return found


async def _position(consumer: Any, tps: list[Any], replay: int) -> None:
    """Start ``replay`` records before each partition's end (0: its beginning)."""
    first = await consumer.beginning_offsets(tps)
    if not replay:
        for tp in tps:
            consumer.seek(tp, first[tp])
        return
    last = await consumer.end_offsets(tps)
    for tp in tps:
        consumer.seek(tp, max(first[tp], last[tp] - replay))
