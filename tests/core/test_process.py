"""zklock.process: stopping the local servers zklock starts, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time

from zklock.process import pid_alive, terminate


def test_terminate_stops_a_child_and_reaps_it():
    child = subprocess.Popen(["sleep", "60"])
    assert pid_alive(child.pid)
    started = time.monotonic()
    terminate(child.pid, 5, child)
    assert child.poll() is not None and time.monotonic() - started < 5
    assert not pid_alive(child.pid)


def test_terminate_kills_a_process_that_ignores_sigterm():
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, sys, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "print('ready', flush=True)\n"
                                 "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    terminate(stubborn.pid, 0.5, stubborn)
    assert stubborn.wait(5) == -9


def test_a_gone_or_zombie_process_is_not_alive():
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while pid_alive(child.pid) and time.monotonic() < deadline:  # exited, not reaped: a zombie
        time.sleep(0.01)
    assert not pid_alive(child.pid)
    child.wait()
