"""``dpstream plan``: what a topology will release, at what error, memory and time.

May import: every layer below it (``config``, ``ingest``, ``release``, ``observe``,
``engine``). No Kafka client.
"""
