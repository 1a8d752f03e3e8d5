"""Failure: a holder killed with SIGKILL, session expiry, connection loss mid-create."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from conftest import PYTHON, lock_nodes, wait_for

from zklock import LockLost, LockNotAcquired
from zklock.locks.lockset import State
from zklock.testing import expire_session
from zklock.testing.proxy import FaultProxy

HOLDER = """
import sys, time
from zklock import LockManager
m = LockManager(hosts=sys.argv[1], root=sys.argv[2], session_timeout=2, retries=0)
m.acquire([("db.t/ds=1", "X")], query_id="victim")
print("held", flush=True)
time.sleep(600)  # the subject: holds its lock until the test SIGKILLs it
"""


def test_sigkilled_holder_locks_vanish_after_session_timeout(zk_hosts, root, make_manager):
    proc = subprocess.Popen([PYTHON, "-c", HOLDER, zk_hosts, root], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        mgr = make_manager()
        assert any(r.data.query_id == "victim" for r in mgr.show(extended=True))
        with pytest.raises(LockNotAcquired, match="victim"):
            mgr.acquire([("db.t/ds=1", "S")])
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        assert wait_for(lambda: mgr.show() == [], timeout=15)
        assert time.monotonic() - killed < 2 * 2 + 3  # session timeout plus server tick slack
        with mgr.acquire([("db.t/ds=1", "X")]):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_session_expiry_gives_lock_lost_and_runs_callback(make_manager, zk_hosts, zk, root):
    a = make_manager()
    held = a.acquire([("db.t", "X")])
    seen = []
    fired = threading.Event()
    held.on_lost(lambda s: (seen.append(s), fired.set()))
    held.check()
    expire_session(a.client, zk_hosts)
    assert fired.wait(10)
    assert seen == [held] and not held.is_valid and held.state is State.LOST
    with pytest.raises(LockLost) as err:
        held.check()
    assert "db.t" in str(err.value)
    late = []
    held.on_lost(late.append)  # registering after the loss calls back at once
    assert late == [held]
    # the ephemeral nodes went with the session, and nobody sees the set as held
    assert wait_for(lambda: lock_nodes(zk, root) == [])
    b = make_manager()
    with b.acquire([("db.t", "X")]):
        pass
    held.release()  # harmless after the loss


def test_connection_loss_mid_create_leaves_no_orphan(make_manager, zk_server, zk, root):
    host, port = zk_server.connect.split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        a = make_manager(hosts=proxy.connect, session_timeout=4)
        proxy.cut_after(b"q-cut")  # cut right after the create multi reaches the server
        with a.acquire([("db.t/p=1", "X"), ("db.u", "S")], query_id="q-cut") as held:
            assert proxy.cut_count == 1
            nodes = lock_nodes(zk, root)
            assert len(nodes) == len(held.held) == 4  # exactly one node per object
            assert sorted(nodes) == sorted(h.node_path for h in held.held)
        assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=5)
    finally:
        proxy.close()


def test_suspension_marks_set_lost_by_default(make_manager, zk_server, zk, root):
    host, port = zk_server.connect.split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        a = make_manager(hosts=proxy.connect, session_timeout=4)
        held = a.acquire([("db.t", "X")])
        fired = threading.Event()
        held.on_lost(lambda s: fired.set())
        proxy.drop_all()
        assert fired.wait(10)
        with pytest.raises(LockLost, match="suspended"):
            held.check()
        # once reconnected, the nodes of the lost set are removed so others can proceed
        assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=10)
    finally:
        proxy.close()


def test_reconnect_rechecks_nodes_when_not_losing_on_suspend(make_manager, zk_server):
    host, port = zk_server.connect.split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        a = make_manager(hosts=proxy.connect, session_timeout=4, lose_on_suspend=False)
        held = a.acquire([("db.t", "X")])
        proxy.drop_all()
        assert wait_for(lambda: held.state is State.SUSPENDED, timeout=5) or held.is_valid
        assert wait_for(lambda: held.is_valid, timeout=10)
        held.check()
        held.release()
    finally:
        proxy.close()


def test_unreachable_zookeeper_fails_fast():
    from zklock import LockManager, ZooKeeperUnavailable
    from zklock.servers.ports import free_port

    t0 = time.monotonic()
    with pytest.raises(ZooKeeperUnavailable, match="cannot reach ZooKeeper"):
        LockManager(hosts=f"127.0.0.1:{free_port()}", connect_timeout=1)
    assert time.monotonic() - t0 < 5
