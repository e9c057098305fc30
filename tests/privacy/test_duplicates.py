"""privacy_audit.duplicates: the check the one-writer tests (issue 19) run over release
topics. Real envelopes (worker.release.envelope) of one topology: byte-identical copies are
re-publications, a second payload under one (topology, shard, epoch, seq) is a conflict."""

from __future__ import annotations

import tests.integration.exact_mechanism  # noqa: F401  (registers test_exact_counts)
from privacy_audit import conflicting_releases, duplicate_report
from privacy_audit.duplicates import release_id
from tests.support.engine import topo
from worker.release.envelope import envelope_bytes


def _env(shard: str, seq: int, counts: dict[str, int], epoch: int = 7) -> bytes:
    return envelope_bytes(topo(), shard, epoch=epoch, seq=seq, rounds=seq, final=False,
                          payload={"counts": counts}, published_at_ms=1000 * seq)


def test_identical_copies_are_not_conflicts_and_different_payloads_are() -> None:
    a0, a1, b0 = _env("r1", 0, {"x": 1}), _env("r1", 1, {"x": 2}), _env("r2", 0, {"y": 1})
    assert release_id(a0) == ("t", "r1", 7, 0)
    assert release_id(a0.decode()) == release_id({"topology": "t", "shard": "r1", "epoch": 7,
                                                  "seq": 0})
    assert conflicting_releases([a0, a1, b0, a0, b0]) == []
    report = duplicate_report([a0, a1, b0, a0, b0])
    assert (report.releases, report.identical, report.conflicting) == (3, 2, [])
    other = _env("r1", 1, {"x": 3})  # a second noise draw of (t, r1, 7, 1)
    twice = _env("r1", 1, {"x": 4})
    report = duplicate_report([a0, a1, other, twice, other])
    assert report.conflicting == [("t", "r1", 7, 1)]
    assert report.variants == {("t", "r1", 7, 1): 3} and report.identical == 1
    assert "1 ids with different payloads" in str(report) and "3 variants" in str(report)
    # the same (shard, seq) in another epoch is another release
    assert conflicting_releases([a1, _env("r1", 1, {"x": 9}, epoch=8)]) == []
