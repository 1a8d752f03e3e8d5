"""The metrics endpoint (zklock/observe/metrics.py): where it binds, and a port that is taken."""

from __future__ import annotations

import logging
import socket
import urllib.request

from zklock.servers.ports import free_port


def test_a_taken_port_is_one_warning_not_a_failed_manager(make_manager, caplog):
    with socket.socket() as other:  # another process's server on the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="zklock"):
            manager = make_manager(metrics_port=port)
        with manager.acquire([("m.taken", "X")]):
            pass
    warned = [r.getMessage() for r in caplog.records if "metrics not served" in r.getMessage()]
    assert len(warned) == 1 and str(port) in warned[0], warned


def test_the_endpoint_binds_the_configured_address(make_manager):
    port = free_port()
    make_manager(metrics_port=port, metrics_bind="0.0.0.0")
    # 127.0.0.2 is this host (Linux's loopback is 127/8), and not 127.0.0.1's bind
    text = urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=10).read()
    assert b"zklock_locks_held" in text
