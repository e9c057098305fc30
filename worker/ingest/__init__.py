"""Ingest: from record bytes to validated events, and where each event belongs.

Decoders per encoding (:mod:`~worker.ingest.decode` dispatches to JSON,
:mod:`~worker.ingest.fast_json`, :mod:`~worker.ingest.columnar`,
:mod:`~worker.ingest.arrow`), the dead-letter vocabulary
(:mod:`~worker.ingest.records`), event time and watermarks
(:mod:`~worker.ingest.event_time`) and shard placement
(:mod:`~worker.ingest.routing`).

May import: ``sketches`` and ``worker.config``. No Kafka client.
"""
