"""The engine: per-shard state, the schedule, checkpoint-then-publish and restore.

Pure with respect to Kafka: it talks to a checkpoint store and a release sink
through the protocols of :mod:`~worker.engine.partition`, so every rule is tested
in memory. Also the privacy accounting per input topic
(:mod:`~worker.engine.composition`) and the memory model.

May import: ``sketches``, ``worker.config``, ``worker.ingest``, ``worker.release``,
``worker.observe``. No Kafka client.
"""
