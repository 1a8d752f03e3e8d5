"""Ports for the servers zklock starts: free now, bound seconds later, by nobody else.

A ZooKeeper member (bound again on the same port after each restart) or a Spark Connect
server gets its port before it starts. A port-0 bind cannot choose it: the kernel hands
the ports of its ephemeral range to every outgoing connection and port-0 bind too, so one
of them could take the port before the server binds it. So :func:`free_port` picks from
beside that range, and reserves what it picks: several processes pick side by side (test
workers, a compatibility run), and a port another process was handed may be unbound for
a while (a member killed and not yet restarted).

A reservation is an flock on a file named for the port under :data:`RESERVATIONS`. The
kernel drops it when its holder exits, however it exits, so no reservation outlives its
process and none needs cleaning up.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import threading
from pathlib import Path

#: Where free_port looks: up to this many ports beside the kernel's ephemeral range.
SPARE_PORTS = 8000
#: One file per port handed out, flocked by the process that has it. Fixed, not under
#: $TMPDIR, so processes with different temporary directories see each other's.
#: The setting naming it (a row of zklock/config.py's table, port_reservations).
RESERVATIONS_ENV = "ZKLOCK_PORT_RESERVATIONS"
DEFAULT_RESERVATIONS = "/tmp/zklock-ports"
RESERVATIONS = Path(os.environ.get(RESERVATIONS_ENV) or DEFAULT_RESERVATIONS)

_handed_out: set[int] = set()  # this process's ports: an ensemble takes nine before any binds
_reservations: list[int] = []  # their descriptors, open on purpose: closing one ends its flock
_picking = threading.Lock()


def port_free(host: str, port: int) -> bool:
    """Whether a server could bind ``port`` now (with SO_REUSEADDR, as ZooKeeper does, so
    the connections of a server that just stopped do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range for outgoing connections and port-0 binds (Linux's default
    when it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now and reserved for this process, beside the ephemeral range. Where that
    range leaves too little room, the kernel's port-0 choice it is, unreserved."""
    low, high = ephemeral_ports()
    below = range(max(1024, low - SPARE_PORTS), low)
    above = range(high + 1, min(65536, high + 1 + SPARE_PORTS))
    spare = max(below, above, key=len)
    with _picking:
        for _ in range(100 if len(spare) >= 1000 else 0):
            port = random.choice(spare)
            if port not in _handed_out and port_free(host, port) and _reserve(port):
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _reserve(port: int) -> bool:
    """Take ``port`` unless another process has it. Where reservations cannot be shared (no
    usable directory, a file system without flock), this process keeps only its own picks
    apart; a port whose file this process cannot open (another user's, say) is skipped."""
    if not _shared_directory():
        return True
    try:
        fd = _open_reservation(RESERVATIONS / str(port))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:  # flock refused by the file system: nothing to share
        os.close(fd)
        return True
    _reservations.append(fd)
    return True


def _shared_directory() -> bool:
    """Make :data:`RESERVATIONS`, writable by every user as /tmp is, unless it exists."""
    try:
        RESERVATIONS.mkdir()
        RESERVATIONS.chmod(0o1777)  # mkdir's mode is cut by the umask
    except FileExistsError:
        pass
    except OSError:
        return False
    return RESERVATIONS.is_dir() and os.access(RESERVATIONS, os.W_OK | os.X_OK)


def _open_reservation(path: Path) -> int:
    """Open the port's file read-only (flock needs no more), creating it when missing. An
    existing file is opened without O_CREAT: Linux's protected_regular refuses O_CREAT on
    another user's file in a sticky directory."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:  # another process made it meanwhile
        return os.open(path, flags)
