"""Helpers for testing against a real ZooKeeper: fault proxy, session expiry."""

from __future__ import annotations

import signal
import subprocess
import time

from kazoo.client import KazooClient, KazooState


def expire_session(client: KazooClient, hosts: str, wait: float = 20.0) -> None:
    """Expire ``client``'s session on the server (as kazoo's own test harness does).

    A second client joins the same session and closes it; the server then
    ends the session, and the original client sees it expired when it next
    talks to the server.
    """
    session_id, password = client.client_id
    lost = []

    def listener(state: str) -> None:
        if state == KazooState.LOST:
            lost.append(state)

    client.add_listener(listener)
    other = KazooClient(hosts=hosts, client_id=(session_id, password),
                        timeout=client._session_timeout / 1000.0)
    other.start(timeout=wait)
    other.stop()
    other.close()
    deadline = time.monotonic() + wait
    while not lost and time.monotonic() < deadline:
        try:
            client.exists("/")  # provoke the server to tell us
        except Exception:
            pass
        time.sleep(0.05)
    client.remove_listener(listener)
    if not lost:
        raise TimeoutError("session did not expire")


def terminate(*procs: subprocess.Popen, wait: float = 30.0) -> None:
    """SIGTERM the processes still running, then SIGKILL those that outlive ``wait``."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
