"""Liveness and readiness of a worker, from its public state (``/healthz``, ``/readyz``).

Kubernetes probes (deploy/helm, deploy/k8s) and the ``dpstream_worker_ready``
gauge use these two functions; the HTTP side lives in :mod:`worker.observe.metrics`.

- **Live** (``/healthz``): the process serves and the worker has not failed.
  A failed worker exits anyway; a liveness failure only restarts a process
  that is stuck after a failure.
- **Ready** (``/readyz``): started, connected to the broker, the consumer
  group's assignment received and every assigned partition restored from its
  checkpoint and seeked (i.e. not rebalancing), not failed, not stopping. A
  worker that the group gave no partition (more workers than partitions) is
  ready: it is an idle standby and a rollout must not wait for it.

Both take any object with the attributes of :class:`WorkerState` (the
:class:`worker.runtime.worker.Worker` has them), so they are pure and tested without a
broker.

Examples
--------
>>> from types import SimpleNamespace
>>> state = SimpleNamespace(started=True, stopping=False, failed=None,
...                         broker_connected=True, rebalancing=False)
>>> readiness(state)
Probe(ok=True, reason='ready')
>>> readiness(SimpleNamespace(**{**vars(state), "rebalancing": True})).reason
'rebalancing: partitions not yet assigned and restored from checkpoints'
>>> liveness(state).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class WorkerState(Protocol):
    """The public worker state that liveness and readiness read."""

    started: bool
    """``Worker.start`` completed (clients connected, topics declared, subscribed)."""
    @property
    def broker_connected(self) -> bool:
        """The Kafka clients reach the broker (:class:`worker.kafka.broker_watch.BrokerWatch`)."""
        ...

    rebalancing: bool
    """From a revocation (or the start in group mode) until the assigned
    partitions are restored and seeked."""
    failed: BaseException | None

    @property
    def stopping(self) -> bool:
        """A stop was requested (signal, failure, time limit)."""
        ...


@dataclass(frozen=True)
class Probe:
    """A probe's answer: ``ok`` and a one-line reason (the HTTP body)."""

    ok: bool
    reason: str


def liveness(state: WorkerState) -> Probe:
    """``/healthz``: alive unless the worker failed."""
    if state.failed is not None:
        return Probe(False, f"failed: {type(state.failed).__name__}")
    return Probe(True, "alive")


def readiness(state: WorkerState) -> Probe:
    """``/readyz``: connected, assigned and restored, not rebalancing (see the module doc)."""
    if state.failed is not None:
        return Probe(False, f"failed: {type(state.failed).__name__}")
    if state.stopping:
        return Probe(False, "stopping")
    if not state.started:
        return Probe(False, "starting: connecting to the broker and declaring topics")
    if not state.broker_connected:
        return Probe(False, "broker not connected")
    if state.rebalancing:
        return Probe(False, "rebalancing: partitions not yet assigned and restored "
                     "from checkpoints")
    return Probe(True, "ready")
