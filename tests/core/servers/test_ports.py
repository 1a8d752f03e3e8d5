"""Ports for the servers zklock starts (zklock/servers/ports.py)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import zklock.servers.ports
from zklock.servers.ports import ephemeral_ports, free_port, port_free


def test_free_ports_lie_outside_the_range_the_kernel_hands_out():
    """A server binds its port seconds after free_port chose it (a ZooKeeper member binds it
    again after each restart): no outgoing connection or port-0 bind may take it meanwhile,
    nor another free_port call of this process (an ensemble takes nine before any binds)."""
    low, high = ephemeral_ports()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(not low <= p <= high for p in ports), (low, high, ports)
    assert all(port_free("127.0.0.1", p) for p in ports)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[0]))
        taken.listen(1)
        assert not port_free("127.0.0.1", ports[0])


@pytest.mark.parametrize("kernel_range, lies", [
    ((1024, 50000), lambda p: p > 50000),                 # no room below: above it
    ((20000, 65535), lambda p: 12000 <= p < 20000),       # no room above: below it
    ((1024, 65000), lambda p: True),                      # no room at all: the kernel's pick
])
def test_free_port_goes_where_the_ephemeral_range_leaves_room(kernel_range, lies, monkeypatch):
    monkeypatch.setattr(zklock.servers.ports, "ephemeral_ports", lambda: kernel_range)
    port = free_port()
    assert lies(port) and port_free("127.0.0.1", port)


TAKE_PORTS = """
import sys
import zklock.servers.ports as ports
ports.SPARE_PORTS = 1000
ports.ephemeral_ports = lambda: (20000, 60999)
print(" ".join(str(ports.free_port()) for _ in range(700)), flush=True)
sys.stdin.readline()
"""


def test_no_two_processes_are_handed_one_port(monkeypatch):
    """Test workers and a compatibility run pick ports side by side: a port another process
    was handed is never handed out here while that process lives, and is once it exits."""
    monkeypatch.setattr(zklock.servers.ports, "SPARE_PORTS", 1000)
    monkeypatch.setattr(zklock.servers.ports, "ephemeral_ports", lambda: (20000, 60999))
    other = subprocess.Popen([sys.executable, "-c", TAKE_PORTS], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        theirs = {int(p) for p in other.stdout.readline().split()}
        assert len(theirs) == 700 and all(19000 <= p < 20000 for p in theirs)
        mine = {free_port() for _ in range(100)}
        assert len(mine) == 100 and not mine & theirs
    finally:
        other.communicate("done\n", timeout=30)
    after = {free_port() for _ in range(100)}  # from the 200 left and their 700
    assert after & theirs


def test_without_a_usable_directory_this_process_still_never_repeats_a_port(monkeypatch,
                                                                            tmp_path):
    """Where reservations cannot be shared (the directory cannot be made), a process keeps
    its own picks apart and out of the ephemeral range as before."""
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(zklock.servers.ports, "RESERVATIONS", tmp_path / "file" / "ports")
    low, high = ephemeral_ports()
    picked = [free_port() for _ in range(30)]
    assert len(set(picked)) == 30 and all(not low <= p <= high for p in picked)
