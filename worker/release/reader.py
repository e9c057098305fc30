"""Read published releases: one reader API, whatever carries the releases.

Releases are public (docs/RELEASES.md, envelope schema versions 1 and 2), so reading
them is post-processing and costs no privacy budget. Every reader answers the
same small protocol, :class:`ReleaseView`, always in the order ``(topology,
shard, ...)``:

- ``shards(topology=None)``: every ``(topology, shard)`` with a release;
- ``latest(topology, shard)``: the current release (highest ``(epoch, seq)``);
- ``query(topology, shard, items)``: point estimates on a sketch release;
- ``heavy_hitters(topology, shard)``: the list of a heavy_hitters release.

``topology`` may be None when only one topology publishes the shard.
:class:`ReleaseIndex` is the pure implementation (parse with
:func:`worker.release.envelope.parse_envelope`, keep the latest); the Kafka
readers in :mod:`worker.kafka.release_reader` (``ReleaseReader`` on aiokafka,
asyncio; ``ConfluentReleaseReader`` on confluent-kafka, synchronous) fill one
from a release topic. ``dpstream tail``/``query`` (:mod:`worker.cli.read`) and
the dashboard read through it.

A release may be seen twice after a worker crash (identical bytes); the index
keeps the highest ``(epoch, seq)`` per ``(topology, shard)``, so duplicates and
late copies never replace a newer release.

Examples
--------
>>> import json
>>> idx = ReleaseIndex()
>>> env = {"schema_version": 1, "topology": "hh", "shard": "r1", "epoch": 3, "seq": 2,
...        "payload": {"kind": "heavy_hitters", "items": [{"item": "10.0.0.1", "estimate": 9.0}]}}
>>> idx.add(json.dumps(env).encode())
True
>>> idx.heavy_hitters("hh", "r1")
[{'item': '10.0.0.1', 'estimate': 9.0}]
>>> idx.add(json.dumps(dict(env, seq=1)).encode())    # older: ignored
False
>>> isinstance(idx, ReleaseView), idx.shards("hh"), idx.latest(None, "r1")["seq"]
(True, [('hh', 'r1')], 2)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from sketches import query_release
from sketches.errors import SerializationError, SpecError
from worker.release.envelope import Envelope, parse_envelope

__all__ = ["ReleaseIndex", "ReleaseView"]


@runtime_checkable
class ReleaseView(Protocol):
    """The reader API: the latest release per ``(topology, shard)`` and its answers.

    Arguments always come in the order ``topology, shard[, items]``; ``topology``
    None means "the only topology publishing ``shard``". A shard without a
    release raises KeyError; a release of the wrong kind, or a shard published by
    several topologies when ``topology`` is None, raises SpecError.
    """

    def shards(self, topology: str | None = None) -> list[tuple[str, str]]:
        """Every ``(topology, shard)`` with a release (of ``topology`` if given), sorted."""
        ...

    def latest(self, topology: str | None, shard: str) -> Envelope:
        """The current release of ``topology``/``shard``."""
        ...

    def query(self, topology: str | None, shard: str, items: Any) -> Any:
        """Point estimates from the latest sketch release (one item: float; a sequence:
        array)."""
        ...

    def heavy_hitters(self, topology: str | None, shard: str) -> list[dict[str, Any]]:
        """The heavy-hitter list of the latest heavy_hitters release."""
        ...


class ReleaseIndex:
    """The latest release per ``(topology, shard)``, with point queries (a :class:`ReleaseView`)."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Envelope] = {}
        self.seen = 0
        self.rejected = 0

    def add(self, raw: bytes) -> bool:
        """Index one record value; True if it became the latest of its shard.

        Unreadable records are counted in :attr:`rejected` and skipped.
        """
        return self.add_envelope(raw) is not None

    def add_envelope(self, raw: bytes) -> Envelope | None:
        """As :meth:`add`, returning the envelope when it became the latest, else None."""
        self.seen += 1
        try:
            env = parse_envelope(raw)
        except SerializationError:
            self.rejected += 1
            return None
        return self.offer(env)

    def offer(self, env: Envelope) -> Envelope | None:
        """Keep a parsed envelope if it is newer than its shard's latest; return it if so."""
        key = (env["topology"], env["shard"])
        cur = self._latest.get(key)
        if cur is not None and (cur["epoch"], cur["seq"]) >= (env["epoch"], env["seq"]):
            return None
        self._latest[key] = env
        return env

    def shards(self, topology: str | None = None) -> list[tuple[str, str]]:
        """Every ``(topology, shard)`` with a release (of ``topology`` if given), sorted."""
        return sorted(k for k in self._latest if topology is None or k[0] == topology)

    def latest(self, topology: str | None, shard: str) -> Envelope:
        """The current release of ``shard`` (``topology`` needed only if several share it)."""
        matches = [k for k in self._latest if k[1] == shard
                   and (topology is None or k[0] == topology)]
        if not matches:
            known = ", ".join(f"{t}/{s}" for t, s in self.shards()) or "none yet"
            raise KeyError(f"no release for shard {shard!r}"
                           f"{'' if topology is None else f' of topology {topology!r}'}; "
                           f"known: {known}")
        if len(matches) > 1:
            raise SpecError(f"shard {shard!r} has releases of several topologies "
                            f"{sorted(t for t, _ in matches)}; pass topology=")
        return self._latest[matches[0]]

    def query(self, topology: str | None, shard: str, items: Any) -> Any:
        """Point query on the latest sketch release of ``shard``.

        ``items``: one item (returns a float) or a sequence (returns an array).
        String items are converted to int when the release's ``item_type`` is
        ``int``.
        """
        env = self.latest(topology, shard)
        payload = env["payload"]
        if payload.get("kind") != "sketch":
            raise SpecError(f"release of {env['topology']}/{shard} is a "
                            f"{payload.get('kind')!r} payload, not a sketch; "
                            "use heavy_hitters() for heavy_hitters payloads")
        single = isinstance(items, (str, bytes, int, np.integer))
        seq = [items] if single else list(items)
        if env.get("item_type") == "int":
            seq = [int(x) for x in seq]
        else:
            seq = [str(x) if isinstance(x, (int, np.integer)) else x for x in seq]
        out = np.asarray(query_release(payload, seq), dtype=np.float64)
        return float(out[0]) if single else out

    def heavy_hitters(self, topology: str | None, shard: str) -> list[dict[str, Any]]:
        """The heavy-hitter list of the latest heavy_hitters release of ``shard``."""
        env = self.latest(topology, shard)
        payload = env["payload"]
        if payload.get("kind") != "heavy_hitters":
            raise SpecError(f"release of {env['topology']}/{shard} is a "
                            f"{payload.get('kind')!r} payload; use query() for sketch estimates")
        return list(payload.get("items") or [])
