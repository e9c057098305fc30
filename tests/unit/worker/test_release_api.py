"""One envelope module and one reader API (issue 21): every reader takes the same
arguments in the same order, and the record key is built and split by one pair."""

from __future__ import annotations

import inspect

import pytest

from worker.dashboard.state import DashboardState
from worker.kafka.release_reader import ConfluentReleaseReader, ReleaseReader
from worker.release import envelope, reader
from worker.release.envelope import release_key, split_release_key
from worker.release.reader import ReleaseIndex, ReleaseView

API = ("shards", "latest", "query", "heavy_hitters")


@pytest.mark.parametrize("cls", [ReleaseIndex, ReleaseReader, ConfluentReleaseReader,
                                 DashboardState])
def test_every_reader_has_the_protocols_signatures(cls: type) -> None:
    for name in API:
        want = list(inspect.signature(getattr(ReleaseView, name)).parameters)
        got = list(inspect.signature(getattr(cls, name)).parameters)
        assert got == want, f"{cls.__name__}.{name}{got}: the reader API is {want}"


def test_readers_are_release_views() -> None:
    assert isinstance(ReleaseIndex(), ReleaseView)
    assert isinstance(DashboardState(), ReleaseView)
    assert isinstance(ConfluentReleaseReader("127.0.0.1:1", "t"), ReleaseView)


@pytest.mark.parametrize("topology,shard", [("views", "acme"), ("t", "a/b"), ("t", "")])
def test_release_key_round_trips(topology: str, shard: str) -> None:
    assert split_release_key(release_key(topology, shard)) == (topology, shard)


def test_the_schema_version_is_assigned_once() -> None:
    assert envelope.KNOWN_VERSIONS[-1] == envelope.SCHEMA_VERSION
    assert not hasattr(reader, "SCHEMA_VERSION")
