"""free_port() picks ports outgoing connections cannot take first."""

from __future__ import annotations

import socket

from worker.kafka.embedded import ephemeral_floor, free_port


def test_free_port_is_bindable_and_below_the_ephemeral_range() -> None:
    floor = ephemeral_floor()
    ports = {free_port() for _ in range(20)}
    for p in ports:
        if floor > 20_000:
            assert 20_000 <= p < floor  # an outgoing connection never gets such a port
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    assert len(ports) > 10  # random: two runs that pick at once rarely agree (P ~ 1e-60)
