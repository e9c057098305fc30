"""The runtime: the worker process that hosts the engine on Kafka (and in Faust).

May import: every layer below (``config`` ... ``kafka``, ``dashboard``).
"""
