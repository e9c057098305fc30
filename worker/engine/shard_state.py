"""Per-shard worker state: one mechanism per epoch, its clock, seq and unit caps.

A :class:`ShardState` belongs to one ``(topology, partition, shard)``. It holds
the current epoch's mechanism (built through the ``sketches.core.base`` registry,
never by class name), the epoch number, the next release ``seq`` of the epoch,
the epoch progress in rounds and, for user-level privacy, the *exact* number
of contributions of every privacy unit in this ``(shard, epoch)``.

Clocks (SEMANTICS.md §2 and 3)

- ``tick``: ``global_tick = now_ms // tick_ms`` (wall clock, data-independent);
  ``epoch = global_tick // epoch_ticks``; the mechanism sees the local tick
  ``global_tick - epoch * epoch_ticks`` and ``advance_to`` pushes empty ticks.
- ``arrival`` (relation ``replace`` only): the epoch is ``events // epoch_events``.

This module contains no DP maths: it only counts, caps and calls the
mechanism. The unit counts are private; they live in the checkpoint only.

Examples
--------
>>> counts: dict[str, int] = {}
>>> cap_mask(np.array(["u1", "u2", "u1", "u1"], dtype=object), counts, cap=2).tolist()
[True, True, True, False]
>>> sorted(counts.items())
[('u1', 2), ('u2', 1)]
>>> cap_mask(np.array(["a", "a\\x00"], dtype=object), {}, cap=1).tolist()  # never merged
[True, True]
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sketches.core.base import Capabilities, lookup
from sketches.errors import SerializationError
from worker.config.topology import Topology

STATE_MAGIC = b"DPSS"
STATE_VERSION = 2
"""Version 2 adds ``params`` (the epoch's privacy block, :mod:`worker.release.epoch_params`);
version 1 states restore with ``params`` None (the engine checks them)."""


def cap_mask(units: np.ndarray, counts: dict[str, int], cap: int) -> np.ndarray:
    """Boolean mask keeping each unit's contributions while its exact count < ``cap``.

    Updates ``counts`` in place (arrival order decides which contributions are
    kept). Exact: no sampling or sketching, so units never interact.
    """
    n = units.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    # Exact equality on the Python strings: a fixed-width numpy string dtype
    # (``astype(str)``) drops trailing NULs and would merge distinct units.
    lst = units.tolist()
    keys_list = sorted(set(lst))
    code = {k: i for i, k in enumerate(keys_list)}
    inverse = np.fromiter(map(code.__getitem__, lst), dtype=np.int64, count=n)
    keys = np.array(keys_list, dtype=object)
    prior = np.fromiter((counts.get(k, 0) for k in keys.tolist()), dtype=np.int64,
                        count=len(keys))
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse, minlength=len(keys))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, sizes)
    keep = prior[inverse] + rank < cap
    new = np.minimum(prior + sizes, cap)
    counts.update(zip(keys.tolist(), new.tolist(), strict=True))
    return keep


@dataclass
class ShardState:
    """State of one shard of one topology on one input partition.

    Attributes
    ----------
    epoch
        Current epoch number (tick clock: from the wall clock; arrival: by events).
    seq
        Sequence number the next release of this epoch gets.
    rounds
        Closed rounds of the epoch (ticks closed by ``advance_to``, or events).
    released_slot
        Index ``local_tick // every_ticks`` of the last scheduled release.
    unit_counts
        Exact contributions per privacy unit in this (shard, epoch): private.
    params
        The privacy block the epoch's mechanism was built with
        (:func:`worker.release.epoch_params.epoch_params`): the cap applied and the
        guarantee every release of the epoch states. None only right after
        restoring a version-1 state (the engine fills it in or refuses).
    """

    topology: Topology
    shard: str
    partition: int
    epoch: int
    mechanism: Any
    seq: int = 0
    rounds: int = 0
    released_slot: int = 0
    events_in_epoch: int = 0
    unit_counts: dict[str, int] = field(default_factory=dict)
    oldest_unreleased_ms: float | None = None
    params: dict[str, Any] | None = None
    changed: bool = True
    """Changed since the last checkpoint (not serialized): incremental checkpoints write
    only these. Set by :meth:`apply`, :meth:`advance` and :meth:`touch`."""

    def touch(self) -> None:
        """Mark the state changed (a release drew noise / moved ``seq``; a new epoch)."""
        self.changed = True

    # ---- clock -------------------------------------------------------------
    def tick_of(self, now_ms: int) -> tuple[int, int]:
        """``(epoch, local_tick)`` of wall-clock time ``now_ms`` (tick clock)."""
        g = now_ms // self.topology.privacy.tick_ms
        e = g // self.topology.privacy.epoch_ticks
        return int(e), int(g - e * self.topology.privacy.epoch_ticks)

    @property
    def capabilities(self) -> Capabilities:
        """What the mechanism declares beyond the base contract (its registry entry): a
        tick clock (``advance_to``), the privacy units (e.g. PAMG's per-unit sets)."""
        return lookup(self.topology.mechanism).capabilities

    @property
    def is_tick(self) -> bool:
        """True for the tick clock."""
        return self.topology.privacy.clock == "tick"

    def room(self) -> int:
        """Arrival clock: events the current epoch can still take."""
        return self.topology.horizon - self.events_in_epoch

    def advance(self, local_tick: int) -> None:
        """Tick clock: close every tick before ``local_tick`` of the current epoch."""
        local_tick = min(local_tick, self.topology.horizon)
        if local_tick > self.rounds:
            if self.capabilities.tick_clock:  # windowed mechanisms may have no clock
                self.mechanism.advance_to(local_tick)
            self.rounds = local_tick
            self.changed = True

    # ---- ingestion ---------------------------------------------------------
    def apply(self, items: np.ndarray, units: np.ndarray | None, weights: np.ndarray | None,
              local_tick: int, now_ms: float, limit: int | None = None) -> tuple[int, int]:
        """Add a batch of this shard's events; return ``(capped, over_limit)`` drop counts.

        ``capped``: events the exact unit cap dropped. ``over_limit``: events
        beyond ``limit`` events per epoch (the mechanism's public event bound),
        truncated at the exact event position after the cap. Tick clock: every
        event belongs to ``local_tick``. Arrival clock: the caller guarantees
        ``len(items) <= room()``.
        """
        dropped = over = 0
        if items.shape[0]:
            self.changed = True  # unit counts, the event count or the mechanism move
        if units is not None:
            cap = int(self.params["unit_cap"]) if self.params else self.topology.privacy.unit_cap
            keep = cap_mask(units, self.unit_counts, cap)
            dropped = int(keep.shape[0] - np.count_nonzero(keep))
            if dropped:
                items, units = items[keep], units[keep]
                weights = None if weights is None else weights[keep]
        if limit is not None and self.events_in_epoch + items.shape[0] > limit:
            room = max(0, limit - self.events_in_epoch)
            over = int(items.shape[0] - room)
            items = items[:room]
            units = None if units is None else units[:room]
            weights = None if weights is None else weights[:room]
        n = items.shape[0]
        if n == 0:
            return dropped, over
        extra = ({"units": units} if units is not None and self.capabilities.takes_units
                 else {})
        if self.is_tick:
            self.advance(local_tick)
            ticks = np.full(n, local_tick, dtype=np.int64)
            self.mechanism.update_batch(items, ticks=ticks, weights=weights, **extra)
        else:
            self.mechanism.update_batch(items, ticks=None, weights=weights, **extra)
        self.events_in_epoch += n
        if not self.is_tick:
            self.rounds = self.events_in_epoch
        if self.oldest_unreleased_ms is None:
            self.oldest_unreleased_ms = now_ms
        return dropped, over

    # ---- serialization -----------------------------------------------------
    def to_bytes(self) -> bytes:
        """Versioned binary state: ``DPSS`` u16 version, u32+JSON meta, u64+mechanism bytes.

        The JSON meta holds the clock, seq, epoch, the exact unit counts and the
        epoch's privacy block ``params`` (version 2).
        """
        meta = {
            "topology": self.topology.name, "shard": self.shard, "partition": self.partition,
            "epoch": self.epoch, "seq": self.seq, "rounds": self.rounds,
            "released_slot": self.released_slot, "events_in_epoch": self.events_in_epoch,
            "mechanism": self.topology.mechanism,
            "units": list(self.unit_counts.keys()), "unit_counts": list(self.unit_counts.values()),
            "params": self.params,
        }
        mb = json.dumps(meta, separators=(",", ":")).encode()
        mech = self.mechanism.to_bytes()
        return b"".join([STATE_MAGIC, struct.pack("<HI", STATE_VERSION, len(mb)), mb,
                         struct.pack("<Q", len(mech)), mech])

    @classmethod
    def from_bytes(cls, data: bytes, topology: Topology, mechanism_from_bytes: Any,
                   noise_for: Any) -> ShardState:
        """Inverse of :meth:`to_bytes`.

        ``mechanism_from_bytes`` is the registry's loader; ``noise_for(shard,
        epoch)`` gives the noise source for draws *after* the restore (noise
        already drawn is part of the mechanism bytes and is never redrawn).
        """
        view = memoryview(data)
        if bytes(view[:4]) != STATE_MAGIC:
            raise SerializationError("shard state: bad magic; not a dpstream shard state")
        version, mlen = struct.unpack_from("<HI", view, 4)
        if version not in (1, STATE_VERSION):
            raise SerializationError(f"shard state: unknown version {version}; "
                                     f"this worker reads versions 1 and {STATE_VERSION}")
        pos = 10
        meta = json.loads(bytes(view[pos:pos + mlen]))
        pos += mlen
        (blen,) = struct.unpack_from("<Q", view, pos)
        pos += 8
        if pos + blen != len(data):
            raise SerializationError("shard state: truncated mechanism bytes")
        if meta["topology"] != topology.name or meta["mechanism"] != topology.mechanism:
            raise SerializationError(
                f"{topology.source}: mechanism.name: the checkpointed shard state belongs to "
                f"topology {meta['topology']!r} / mechanism {meta['mechanism']!r}, not "
                f"{topology.name!r} / {topology.mechanism!r}; set mechanism.name back, or give "
                "the topology a new `name` to start fresh state")
        mech = mechanism_from_bytes(bytes(view[pos:]),
                                    noise_for(meta["shard"], int(meta["epoch"])))
        return cls(topology, meta["shard"], int(meta["partition"]), int(meta["epoch"]), mech,
                   int(meta["seq"]), int(meta["rounds"]), int(meta["released_slot"]),
                   int(meta["events_in_epoch"]),
                   dict(zip(meta["units"], meta["unit_counts"], strict=True)),
                   params=meta.get("params"))
