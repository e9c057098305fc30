"""Producing raw values for the poison-record tests."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer


async def produce_values(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                max_request_size=8_000_000)
    await producer.start()
    try:
        for k, v in records:  # one at a time: the pills land between good records
            await (await producer.send(topic, key=k, value=v))
    finally:
        await producer.stop()

