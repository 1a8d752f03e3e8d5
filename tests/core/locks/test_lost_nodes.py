"""A lock whose node is gone is lost, whoever deleted it; removed object nodes never wedge a
client. Against a real ZooKeeper, with a plain kazoo client playing the operator with zkCli,
Hive's clean-up or a buggy tool."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import NodeChecks, lock_nodes, wait_for

from zklock import LockNotAcquired
from zklock.errors import LockLost
from zklock.testing.chaos import DELETE_DETECT_S


def detect(lockset, delete) -> float:
    """Seconds from ``delete()`` until ``lockset`` knows it is lost (and ran on_lost)."""
    told = threading.Event()
    lockset.on_lost(lambda s: told.set())
    started = time.monotonic()
    delete()
    assert told.wait(10), "the holder was never told"
    return time.monotonic() - started


def test_a_deleted_node_is_a_lost_lock(make_manager, zk, root):
    holder, other = make_manager(), make_manager()
    lockset = holder.acquire([("db.t", "X")], query_id="first")
    node = next(p for p in lockset.node_paths if "/t/" in p)
    took = detect(lockset, lambda: zk.delete(node))
    assert took < DELETE_DETECT_S
    assert not lockset.is_valid
    with pytest.raises(LockLost, match="deleted by another client"):
        lockset.check()
    # the first holder knows it lost the lock before anyone else could be granted it
    second = other.acquire([("db.t", "X")], query_id="second")
    assert second.is_valid and not lockset.is_valid
    second.release()
    lockset.release()  # a lost set's release deletes what is left and never raises


def test_an_admins_force_drop_loses_a_live_holders_set(make_manager, root):
    holder, admin = make_manager(), make_manager()
    lockset = holder.acquire([("db.t/ds=1", "X")])
    took = detect(lockset, lambda: admin.force_drop_lease(["db.t"], include_implicit=True))
    assert took < DELETE_DETECT_S
    with pytest.raises(LockLost):
        lockset.check()


def test_the_holders_own_release_is_not_a_loss(make_manager):
    mgr = make_manager()
    lockset = mgr.acquire([("db.t", "S"), ("db.u", "X")])
    lost = threading.Event()
    lockset.on_lost(lambda s: lost.set())
    lockset.release()
    assert not lost.wait(DELETE_DETECT_S)


def test_a_data_change_is_not_a_loss(make_manager, zk, monkeypatch):
    mgr = make_manager()
    lockset = mgr.acquire([("db.t", "X")])
    checks = NodeChecks(mgr, monkeypatch)
    node = lockset.node_paths[-1]
    zk.set(node, b'{"note": "touched by a tool"}')
    # a negative check, made on evidence rather than a pause: wait until the watcher has
    # read the nodes after the change and acted on what it read (about two NODE_CHECK_S)
    since = checks.mark()
    assert wait_for(lambda: checks.judged_since(since), timeout=10), checks.reads
    assert lockset.is_valid
    took = detect(lockset, lambda: zk.delete(node))  # the watch was set again after the change
    assert took < DELETE_DETECT_S


def test_after_the_whole_root_is_deleted_the_same_manager_acquires_at_once(make_manager, zk,
                                                                           root):
    mgr = make_manager()
    mgr.acquire([("db.t/ds=1", "X")]).release()
    zk.delete(root, recursive=True)
    started = time.monotonic()
    with mgr.acquire([("db.t/ds=1", "X"), ("other.x", "S")]) as again:
        assert again.is_valid
        assert lock_nodes(zk, root)
    assert time.monotonic() - started < 5
    lockset = mgr.acquire([("db.t", "S")])
    zk.delete(root, recursive=True)  # deleted under a held set: lost, and acquiring works
    assert wait_for(lambda: not lockset.is_valid, timeout=5)
    mgr.acquire([("db.t", "X")]).release()


def test_object_nodes_removed_between_attempts_are_created_again(make_manager, zk, root):
    """Hive deletes an object node once it is empty; a create racing that removal is
    retried, within bounded time."""
    mgr, other = make_manager(), make_manager(retries=0)
    for _ in range(5):
        mgr.acquire([("db.t/ds=1/hr=2", "S")]).release()
        if zk.exists(f"{root}/db/t/ds=1/hr=2"):
            zk.delete(f"{root}/db/t/ds=1", recursive=True)
    with mgr.acquire([("db.t/ds=1/hr=2", "X")]):
        with pytest.raises(LockNotAcquired):
            other.acquire([("db.t/ds=1/hr=2", "S")])
