"""Duplicate releases: one release id, two different payloads (issue 19).

A release is identified by ``(topology, shard, epoch, seq)``. dpstream publishes each
at least once: after a crash the restored checkpoint's pending releases are published
again **byte for byte**, so readers may see the same bytes twice and deduplicate by the
id (docs/RELEASES.md). Two *different* envelopes under one id are two noise draws of
the same release: a reader who averages them halves the noise variance, and the
privacy loss of that release doubles (docs/PRIVACY.md "One writer per release"). That
is what a second writer (a zombie worker, a second deployment restoring the first
one's checkpoint) produced before issue 19; the integration tests run this check over
everything a release topic received.

Examples
--------
>>> a = b'{"topology":"t","shard":"r","epoch":1,"seq":0,"payload":{"c":1}}'
>>> b = b'{"topology":"t","shard":"r","epoch":1,"seq":0,"payload":{"c":2}}'
>>> c = b'{"topology":"t","shard":"r","epoch":1,"seq":1,"payload":{"c":2}}'
>>> conflicting_releases([a, a, c])
[]
>>> report = duplicate_report([a, a, b, c])
>>> report.conflicting, report.identical, report.releases
([('t', 'r', 1, 0)], 1, 2)
>>> report.variants[('t', 'r', 1, 0)]
2
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DuplicateReport", "ReleaseId", "conflicting_releases", "duplicate_report",
           "release_id"]

ReleaseId = tuple[str, str, int, int]


def release_id(envelope: bytes | str | dict[str, Any]) -> ReleaseId:
    """``(topology, shard, epoch, seq)`` of a release envelope (bytes, text or parsed)."""
    doc = envelope if isinstance(envelope, dict) else json.loads(envelope)
    return (str(doc["topology"]), str(doc["shard"]), int(doc["epoch"]), int(doc["seq"]))


@dataclass
class DuplicateReport:
    """What a list of published envelopes holds, per release id.

    ``releases``: distinct ids; ``identical``: extra byte-identical copies (harmless
    re-publications); ``conflicting``: ids published with two or more different
    payloads, in first-seen order; ``variants``: the number of different envelopes of
    each conflicting id."""

    releases: int = 0
    identical: int = 0
    conflicting: list[ReleaseId] = field(default_factory=list)
    variants: dict[ReleaseId, int] = field(default_factory=dict)

    def __str__(self) -> str:
        head = (f"{self.releases} releases, {self.identical} byte-identical re-publications, "
                f"{len(self.conflicting)} ids with different payloads")
        return head + "".join(f"\n  {rid}: {self.variants[rid]} variants"
                              for rid in self.conflicting[:20])


def duplicate_report(envelopes: Iterable[bytes | str]) -> DuplicateReport:
    """Group envelopes (raw bytes as published; their bytes are compared) by release id."""
    seen: dict[ReleaseId, set[bytes]] = {}
    report = DuplicateReport()
    for env in envelopes:
        raw = env.encode() if isinstance(env, str) else bytes(env)
        rid = release_id(raw)
        got = seen.setdefault(rid, set())
        if raw in got:
            report.identical += 1
            continue
        got.add(raw)
        if len(got) == 2:
            report.conflicting.append(rid)
    report.releases = len(seen)
    report.variants = {rid: len(seen[rid]) for rid in report.conflicting}
    return report


def conflicting_releases(envelopes: Iterable[bytes | str]) -> list[ReleaseId]:
    """Release ids published with different payloads (must be empty)."""
    return duplicate_report(envelopes).conflicting
