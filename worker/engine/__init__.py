"""The engine: per-shard state, the schedule, checkpoint-then-publish and restore.

:class:`~worker.engine.engine.Engine` is the driver's facade; behind it, one
module per concept: :mod:`~worker.engine.schedule` (ticks, epochs, when a release
is due), :mod:`~worker.engine.ingest` (batch -> decode -> shard updates),
:mod:`~worker.engine.commit` (checkpoint first, publish second; fencing),
:mod:`~worker.engine.restore` (claim, restore, repair; revoke),
:mod:`~worker.engine.timer` (the timer round, errors contained per partition),
:mod:`~worker.engine.gauges` (metrics), sharing one
:class:`~worker.engine.state.EngineState`.

Pure with respect to Kafka: it talks to a checkpoint store and a release sink
through the protocols of :mod:`~worker.engine.partition`, so every rule is tested
in memory. Also the privacy accounting per input topic
(:mod:`~worker.engine.composition`) and the memory model.

May import: ``sketches``, ``worker.config``, ``worker.ingest``, ``worker.release``,
``worker.observe``. No Kafka client.
"""
