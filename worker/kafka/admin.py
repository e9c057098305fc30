"""Topic administration: the topics a worker needs, declared and checked on the broker.

Before it consumes, the worker (:mod:`worker.runtime.lifecycle`) makes sure the
broker holds every topic its topologies name, with the partition counts and
configs dpstream relies on:

- every topic is declared with an explicit partition count: the input topics
  with the topology's ``input.partitions``, release topics with
  ``release.partitions``, the dead-letter topics with one partition and the
  checkpoint topic compacted, with one partition (:func:`declare_topics`); a
  topic that exists already is left as it is;
- event-time input topics are declared ``LogAppendTime`` and release topics
  ``CreateTime`` (:func:`worker.ingest.event_time.topic_configs`), and the
  timestamp types the broker reports (:func:`describe_timestamp_types`) are
  judged by :func:`worker.ingest.event_time.check_timestamp_types`;
- an input topic that exists with another partition count than the topology
  says is refused (:func:`check_partitions`): shard routing
  (:mod:`worker.ingest.routing`) depends on the count.

:func:`client_options` are a client's arguments
(:mod:`worker.kafka.client_config`: bootstrap servers, ``client.id``, security, tuning).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from sketches.errors import SpecError
from worker.config.settings import Settings
from worker.config.topology import Topology
from worker.ingest.event_time import TIMESTAMP_TYPE, check_timestamp_types, topic_configs
from worker.ingest.repartition import repartition_topic
from worker.kafka.client_config import aiokafka_kwargs

log = logging.getLogger(__name__)


def client_options(settings: Settings, role: str = "admin") -> dict[str, Any]:
    """Keyword arguments of the aiokafka client playing ``role``
    (:func:`worker.kafka.client_config.aiokafka_kwargs`)."""
    return aiokafka_kwargs(settings, role)


def wanted_topics(settings: Settings, topologies: Sequence[Topology]
                  ) -> dict[str, tuple[int, dict[str, str]]]:
    """``{topic: (partitions, configs)}`` of every topic the worker declares.

    Topologies sharing an input topic merge their configs into the one topic.
    """
    wanted: dict[str, tuple[int, dict[str, str]]] = {
        settings.checkpoint_topic: (1, {"cleanup.policy": "compact"})}
    for t in topologies:
        input_cfg, release_cfg = topic_configs(t)  # LogAppendTime / CreateTime
        prev = wanted.get(t.input.topic, (0, {}))[1]  # topologies sharing the topic
        wanted[t.input.topic] = (t.input.partitions, {**prev, **input_cfg})
        # internal: records forwarded to their shard's partition (same partition count;
        # the frame carries the source timestamp, so no timestamp config is needed)
        wanted[repartition_topic(t.input.topic)] = (t.input.partitions, {})
        wanted[t.release.topic] = (t.release.partitions, release_cfg)
        wanted[t.dead_letter_topic] = (1, {})
    return wanted


async def declare_topics(settings: Settings, topologies: Sequence[Topology]) -> None:
    """Create the topics of :func:`wanted_topics` that do not exist; check timestamp types.

    Raises
    ------
    SpecError
        A production topology's topic reports the wrong ``message.timestamp.type``.
    """
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        for name, (n, cfg) in wanted_topics(settings, topologies).items():
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(name, n, 1, topic_configs=cfg)])
        topics = [x for t in topologies for x in (t.input.topic, t.release.topic)]
        check_timestamp_types(topologies, await describe_timestamp_types(admin, topics))
    finally:
        await admin.close()


async def describe_timestamp_types(admin: Any, topics: Iterable[str]) -> dict[str, str | None]:
    """``{topic: message.timestamp.type or None}`` as the broker reports it (describe_configs)."""
    out: dict[str, str | None] = {}
    for topic in sorted(set(topics)):
        out[topic] = None
        try:
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)])
        except Exception as exc:  # a broker without DescribeConfigs: reported as unknown
            log.debug("describe_configs(%s) failed: %r", topic, exc)
            continue
        for resp in responses:
            for res in resp.resources:
                for entry in res[4]:
                    if entry[0] == TIMESTAMP_TYPE:
                        out[topic] = str(entry[1])
    return out


async def check_partitions(consumer: AIOKafkaConsumer, topologies: Sequence[Topology]) -> None:
    """Refuse an input topic whose partition count is not the topology's ``input.partitions``.

    The consumer's metadata may not know a topic created a moment ago: it is
    refreshed (up to 50 times) until the topic shows partitions. aiokafka has no
    public call for that refresh; its client's ``force_metadata_update`` is used.

    Raises
    ------
    SpecError
        The counts differ (the message names the topology, the topic and both counts).
    """
    for t in topologies:
        for topic in (t.input.topic, repartition_topic(t.input.topic)):
            parts = consumer.partitions_for_topic(topic)
            for _ in range(50):
                if parts:
                    break
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(topic)
            if parts and len(parts) != t.input.partitions:
                raise SpecError(
                    f"{t.source}: input.partitions: topic {topic!r} has {len(parts)} "
                    f"partitions, the topology says {t.input.partitions}; make them equal"
                    + ("" if topic == t.input.topic else
                       " (the internal repartition topic: delete it while no worker runs, "
                       "the workers create it again)"))
