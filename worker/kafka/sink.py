"""The engine's release sink on Kafka: a producer's buffered sends and an explicit flush.

:class:`worker.engine.engine.Engine` publishes releases and dead letters through
a sink with ``publish`` and ``flush`` (checkpoint first, publish second, then
flush before the next checkpoint); :class:`KafkaSink` is that sink over an
aiokafka producer. Its producer runs with idempotence disabled and ``acks=all``
(:mod:`worker.runtime.lifecycle`): crash consistency comes from checkpoints.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer


class KafkaSink:
    """Engine sink over an aiokafka producer: buffered sends, explicit flush."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer
        self._futures: list[asyncio.Future[Any]] = []

    async def publish(self, topic: str, key: bytes, value: bytes,
                      timestamp_ms: int | None = None, partition: int | None = None) -> None:
        """Send one record (not yet acknowledged: see :meth:`flush`)."""
        self._futures.append(await self.producer.send(topic, key=key, value=value,
                                                      timestamp_ms=timestamp_ms,
                                                      partition=partition))

    async def publish_batch(self, topic: str, partition: int,
                            records: list[tuple[bytes, bytes]]) -> None:
        """Send ``(key, value)`` records to one partition in as few record batches as the
        producer's batch size allows (the repartition topic's forwards: ~5x cheaper per
        record than :meth:`publish`); in order, not yet acknowledged (see :meth:`flush`)."""
        batch = self.producer.create_batch()
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=None) is None:
                if batch.record_count():
                    self._futures.append(await self.producer.send_batch(
                        batch, topic, partition=partition))
                    batch = self.producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    # larger than an empty batch: the producer's own path (its size checks)
                    self._futures.append(await self.producer.send(
                        topic, key=key, value=value, partition=partition))
        if batch.record_count():
            self._futures.append(await self.producer.send_batch(batch, topic,
                                                                partition=partition))

    async def flush(self) -> None:
        """Wait for the acknowledgement of every record sent since the last flush."""
        futures, self._futures = self._futures, []
        if futures:
            await asyncio.gather(*futures)
