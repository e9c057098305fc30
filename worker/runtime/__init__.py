"""The runtime: the worker process that hosts the engine on Kafka (and in Faust).

- :mod:`~worker.runtime.worker`: :func:`~worker.runtime.worker.create_worker` and
  the :class:`~worker.runtime.worker.Worker` facade;
- :mod:`~worker.runtime.state`: what the worker's parts share (settings, clients,
  engine, status);
- :mod:`~worker.runtime.lifecycle`: start (clients, topics, engine, tasks) and stop;
- :mod:`~worker.runtime.assignment`: owned partitions, restored and seeked
  across rebalances;
- :mod:`~worker.runtime.consume`: the consume loop;
- :mod:`~worker.runtime.timers`: the release timer (releases, lag, group offsets);
- :mod:`~worker.runtime.poison`: records that keep failing, isolated and dead-lettered;
- :mod:`~worker.runtime.faust_host`: the worker as a Faust app, or inside one.

May import: every layer below (``config`` ... ``kafka``, ``dashboard``).
"""
