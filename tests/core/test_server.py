"""The embedded ZooKeeper's ports (zklock/server.py)."""

from __future__ import annotations

import socket

from zklock.server import ephemeral_ports, free_port, port_free


def test_free_ports_lie_outside_the_range_the_kernel_hands_out():
    """A server binds its port seconds after free_port chose it (a ZooKeeper member binds it
    again after each restart): no outgoing connection or port-0 bind may take it meanwhile."""
    low, high = ephemeral_ports()
    ports = {free_port() for _ in range(20)}
    assert all(not low <= p <= high for p in ports), (low, high, ports)
    assert all(port_free("127.0.0.1", p) for p in ports)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", next(iter(ports))))
        taken.listen(1)
        assert not port_free("127.0.0.1", taken.getsockname()[1])
