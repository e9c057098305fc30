"""Every error dpstream raises, in one hierarchy (catch :class:`DPStreamError` for all).

The sketches define the base and the specification errors (:mod:`sketches.errors`, which
never imports the worker); the worker adds its own below them. Both are importable from
here::

    DPStreamError                    base of every dpstream error
    ├── SpecError (ValueError)       invalid topology/settings/spec: names the field and the fix
    │   └── ForeignCheckpoint        a checkpoint or claim of another deployment (two writers)
    ├── IncompatibleSpecError        merge/restore across specs that do not match
    ├── HorizonExceededError         an update past a counter's horizon
    ├── SerializationError           bytes that are not a valid state or envelope
    ├── PrivacyError                 a request that would weaken the stated guarantee
    ├── BadRecord                    one record cannot be counted: it is dead-lettered with
    │                                its ``reason`` (never escapes the decoders)
    ├── HeldRecordsFailed            records held for the watermark failed when applied
    │                                (handled by the poison guard: docs/OPERATIONS.md)
    ├── Fenced                       another writer claimed the partition: stop publishing it
    └── BrokerError                  the Kafka side
        ├── BrokerUnavailable        unreachable beyond the outage limit (or the embedded
        │                            broker died)
        └── BrokerStartError         the embedded broker did not start (also a RuntimeError)

The command line prints a :class:`DPStreamError` as one line ``dpstream: <message>`` and
exits with status 2; anything else is a bug and keeps its traceback.

May import: ``sketches`` only (the bottom of the worker, beside ``config``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sketches.errors import (
    DPStreamError,
    HorizonExceededError,
    IncompatibleSpecError,
    PrivacyError,
    SerializationError,
    SpecError,
)

__all__ = [
    "BadRecord", "BrokerError", "BrokerStartError", "BrokerUnavailable", "DPStreamError",
    "Fenced", "ForeignCheckpoint", "HeldRecordsFailed", "HorizonExceededError",
    "IncompatibleSpecError", "PrivacyError", "SerializationError", "SpecError",
]


class BadRecord(DPStreamError):
    """One record (or row) cannot be counted; ``reason`` is its dead-letter reason.

    >>> str(BadRecord("wrong_type", "item must be a string")), BadRecord("late", "").reason
    ('item must be a string', 'late')
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


class HeldRecordsFailed(DPStreamError):
    """Applying records held for the watermark raised (a mechanism or plug-in fault).

    The records were read in *earlier* batches than the one being processed (or none, when
    a timer drained them), so the poison guard must count ``records``, not the current
    batch: :func:`worker.runtime.poison.process_guarded` and the worker's timer reset the
    partition to its checkpoint and suspect exactly these offsets.
    """

    def __init__(self, topic: str, partition: int, records: Sequence[Any],
                 cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.topic, self.partition, self.records = topic, partition, list(records)


class ForeignCheckpoint(SpecError):
    """A checkpoint (or claim) of another deployment: restoring it would make two writers."""


class Fenced(DPStreamError):
    """Another writer claimed the partition after this store's claim: stop writing it.

    ``deployment`` is the claimant's deployment id; the checkpoint just written is void
    and its pending releases are never published by this store's owner."""

    def __init__(self, topology: str, partition: int, deployment: str, ours: str,
                 claim: int, owner: int) -> None:
        self.topology, self.partition, self.deployment = topology, partition, deployment
        self.ours, self.claim, self.owner = ours, claim, owner
        super().__init__(
            f"topology {topology} partition {partition}: deployment {deployment!r} claimed "
            f"the partition (claim at checkpoint offset {claim}) after this worker's claim "
            f"({owner}, deployment {ours!r}); this worker stops writing and publishing it"
            + ("" if deployment == ours else
               f" (deployment {ours!r} was taken over: stop it; docs/OPERATIONS.md "
               "\"Blue/green\")"))


class BrokerError(DPStreamError):
    """The Kafka side failed (the broker, or the embedded broker's process)."""


class BrokerUnavailable(BrokerError):
    """The broker stayed unreachable beyond the configured outage limit, or the
    embedded broker died (its in-memory data is gone)."""


class BrokerStartError(BrokerError, RuntimeError):
    """The embedded broker did not start or did not answer in time."""
