"""zklock.servers.process: stopping the local servers zklock starts, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import wait_for

from zklock.servers.ports import port_free
from zklock.servers.process import pid_alive, state, terminate


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
                                 "time.sleep(60)"],  # the subject: alive until killed
                                stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    terminate(stubborn.pid, 0.5, stubborn)
    assert stubborn.wait(5) == -9


def test_a_gone_or_zombie_process_is_not_alive():
    child = subprocess.Popen(["true"])
    # exited, not reaped: a zombie
    assert wait_for(lambda: not pid_alive(child.pid), timeout=5, step=0.01)
    child.wait()


def test_a_process_whose_first_thread_exited_runs_until_its_last_thread_ends():
    """How a SIGKILLed JVM looks for a moment: its first thread is a zombie while another
    still holds the server's socket. It is alive until the socket is closed."""
    holder = subprocess.Popen([sys.executable, "-c",
                               "import ctypes, socket, threading, time\n"
                               "s = socket.socket()\n"
                               "s.bind(('127.0.0.1', 0))\n"
                               "s.listen()\n"
                               "print(s.getsockname()[1], flush=True)\n"
                               "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                               "ctypes.CDLL(None).pthread_exit(None)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(holder.stdout.readline())
        assert wait_for(lambda: state(holder.pid) == "Z", timeout=5, step=0.01)
        assert pid_alive(holder.pid) and not port_free("127.0.0.1", port)
    finally:
        holder.kill()
        holder.wait(5)
        holder.stdout.close()
    assert not pid_alive(holder.pid) and port_free("127.0.0.1", port)
