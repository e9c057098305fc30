"""Observability: Prometheus metrics and the liveness/readiness probes.

May import: ``sketches`` and ``worker.config``. No Kafka client.
"""
