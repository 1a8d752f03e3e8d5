"""Local server processes zklock starts (ZooKeeper, a Spark Connect server): alive, and stop.

Both are started as children of the process that asks, or found again by the pid they
recorded, so a stop works on a child (reaped with ``poll``) and on a process this one
did not start (checked with signal 0 and ``/proc``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Optional


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs: a zombie, dead but not yet reaped, is not running.

    Linux shows a process's first thread as a zombie as soon as that thread has exited,
    while the process's other threads may still run: a SIGKILLed JVM's take a moment to
    end under load, and the last one to end closes the process's sockets. So a zombie
    first thread with other threads left is still running, and a caller that binds the
    dead server's port again waits for them."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        if state(pid) != "Z":
            return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except FileNotFoundError:  # reaped since signal 0, or a system without /proc
        return not os.path.isdir("/proc/self")
    except OSError:  # signal 0 said it is there
        return True


def state(pid: int) -> str:
    """The state letter Linux's /proc gives ``pid``'s first thread (R, S, D, Z...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[-1].split()[0]


def wait_exit(pid: int, wait: float, proc: Optional[subprocess.Popen] = None) -> bool:
    """Wait up to ``wait`` seconds for ``pid`` to end; ``proc`` when it is our child."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc is not None and proc.pid == pid:
            if proc.poll() is not None:
                return True
        elif not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def terminate(pid: int, wait: float, proc: Optional[subprocess.Popen] = None) -> None:
    """SIGTERM (after SIGCONT, in case it was paused), then SIGKILL after ``wait`` seconds."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
    if not wait_exit(pid, wait, proc):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        wait_exit(pid, 10, proc)
