"""Sharing a warehouse with Hive: zklock and Hive 2.3.10's own ZooKeeperHiveLockManager
(PySpark's jars, driven through py4j, tests/hivelocks.py) exclude each other both ways on one
real ZooKeeper, and neither side's clean-up loses a lock silently."""

from __future__ import annotations

import random
import threading
import time

import pytest
from conftest import NodeChecks, lock_nodes, wait_for
from hivelocks import HiveLocks

from zklock import LockNotAcquired
from zklock.errors import LockLost


@pytest.fixture
def hive(spark, zk_hosts, root):
    """Hive's lock manager with ``hive.zookeeper.namespace`` = the test's zklock root."""
    made = []

    def make(**kw) -> HiveLocks:
        h = HiveLocks(spark, zk_hosts, root, **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        try:
            h.close()
        except Exception:
            pass


def hive_set(obj: str, mode: str) -> list[tuple[str, str]]:
    """What Hive's Driver asks for ``obj`` (``db``, ``db/t``, ``db/t/k=v``): the object in
    ``mode``, every parent in S."""
    parts = obj.split("/")
    return [("/".join(parts[:i]), "S") for i in range(1, len(parts))] + [(obj, mode)]


def zk_name(obj: str) -> str:
    """Hive's ``db/t/ds=1`` as zklock names it: ``db.t/ds=1``."""
    parts = obj.split("/")
    return ".".join(parts[:2]) + ("/" + "/".join(parts[2:]) if len(parts) > 2 else "")


OBJECTS = ["db", "db/t", "db/t/ds=1"]


@pytest.mark.parametrize("obj", OBJECTS)
def test_a_hive_x_denies_zklock_and_a_hive_s_admits_only_s(hive, make_manager, obj):
    h, mgr = hive(), make_manager(retries=0)
    held = h.lock_all(hive_set(obj, "X"))
    assert held is not None
    for mode in ("S", "X"):
        with pytest.raises(LockNotAcquired, match="Hive's lock manager"):
            mgr.acquire([(zk_name(obj), mode)])
    if obj != "db":  # the hierarchy: a lock below takes S on the object Hive holds in X
        with pytest.raises(LockNotAcquired):
            mgr.acquire([("db.t/ds=1/hr=2", "S")])
    h.release(held)
    shared = h.lock_all(hive_set(obj, "S"))
    with mgr.acquire([(zk_name(obj), "S")]) as s:
        assert s.is_valid
    with pytest.raises(LockNotAcquired):
        mgr.acquire([(zk_name(obj), "X")])
    h.release(shared)
    mgr.acquire([(zk_name(obj), "X")]).release()


@pytest.mark.parametrize("obj", OBJECTS)
def test_with_hive_naming_hive_is_denied_by_zklock_x_and_admitted_by_zklock_s(
        hive, make_manager, obj):
    h, mgr = hive(), make_manager(node_naming="hive")
    with mgr.acquire([(zk_name(obj), "X")]):
        assert h.lock_all(hive_set(obj, "S")) is None
        assert h.lock_all(hive_set(obj, "X")) is None
        if obj != "db":
            assert h.lock_all(hive_set("db/t/ds=1/hr=2", "S")) is None
    with mgr.acquire([(zk_name(obj), "S")]):
        shared = h.lock_all(hive_set(obj, "S"))
        assert shared is not None
        h.release(shared)
        assert h.lock_all(hive_set(obj, "X")) is None
    got = h.lock_all(hive_set(obj, "X"))
    assert got is not None
    h.release(got)


def test_recipe_names_are_invisible_to_hive_which_is_why_hive_naming_exists(hive,
                                                                            make_manager):
    h, mgr = hive(), make_manager()
    with mgr.acquire([("db.t/ds=1", "X")]):
        got = h.lock_all(hive_set("db/t/ds=1", "X"))  # Hive skips read-/write- nodes
        assert got is not None
        h.release(got)


def test_each_side_lists_the_others_locks_with_their_data(hive, make_manager, zk, root):
    h, mgr = hive(), make_manager(node_naming="hive")
    held = h.lock_all(hive_set("db/t/ds=1", "X"))
    mine = mgr.acquire([("db.u", "S")], query_id="zk-q1", query="SELECT * FROM db.u")
    try:
        records = {(r.object, r.mode.value): r for r in mgr.show(extended=True)}
        hive_x = records[("db.t/ds=1", "X")]
        assert hive_x.origin == "hive" and hive_x.kind == "hive"
        assert hive_x.data.query_id.startswith("hive-") and hive_x.data.query == "hive set"
        assert hive_x.data.host  # the client IP Hive records
        assert records[("db.u", "S")].origin == "zklock"
        assert records[("db.u", "S")].data.query_id == "zk-q1"
        listed = {(name, mode): data for name, mode, data in h.locks()}
        data = listed[("db/u", "SHARED")]
        query_id, lock_time, kind, query = data.split(":")[:4]
        assert (query_id, kind, query) == ("zk-q1", "IMPLICIT", "SELECT * FROM db.u")
        assert abs(int(lock_time) / 1000 - time.time()) < 60
        assert ("db/t/ds=1", "EXCLUSIVE") in listed
    finally:
        mine.release()
        h.release(held)


def test_a_denial_names_hives_query_and_client(hive, make_manager):
    h, mgr = hive(), make_manager(retries=0)
    held = h.lock_all(hive_set("db/t", "X"))
    with pytest.raises(LockNotAcquired) as err:
        mgr.acquire([("db.t", "S")])
    assert "Hive's lock manager (query hive-" in str(err.value)
    assert "'hive set'" in str(err.value)
    h.release(held)


def test_hives_explicit_lock_table_is_a_lock_too(hive, make_manager, zk, root):
    h, mgr = hive(), make_manager(retries=0)
    held = h.lock("db/t", "X", explicit=True)  # Hive's LOCK TABLE: a persistent node
    node = next(n for n in lock_nodes(zk, root) if n.endswith(held.getPath()[-10:]))
    assert zk.exists(node).ephemeralOwner == 0
    with pytest.raises(LockNotAcquired, match="EXPLICIT"):
        mgr.acquire([("db.t", "S")])
    h.unlock(held)


@pytest.mark.parametrize("naming", ["recipe", "hive"])
def test_hives_clean_up_on_close_never_loses_a_lock_silently(hive, make_manager, zk, root,
                                                              monkeypatch, naming):
    mgr = make_manager(node_naming=naming)
    lockset = mgr.acquire([("db.t/ds=1", "X")])
    checks = NodeChecks(mgr, monkeypatch)
    h = hive(clean_extra_nodes=True)
    h.close()  # deletes every leaf of the namespace that is not a Hive lock node
    if naming == "hive":
        assert len(lock_nodes(zk, root)) == len(lockset.node_paths)  # Hive's nodes: kept
        # a negative check, made on evidence rather than a pause: wait until the watcher has
        # read the nodes after the clean-up and acted on what it read (its verdict is what
        # would tell a loss), then the set must still be held
        since = checks.mark()
        assert wait_for(lambda: checks.judged_since(since), timeout=10), checks.reads
        assert lockset.is_valid and len(lock_nodes(zk, root)) == len(lockset.node_paths)
    else:
        assert wait_for(lambda: not lockset.is_valid, timeout=10)
        with pytest.raises(LockLost, match="deleted by another client"):
            lockset.check()
    lockset.release()


def test_mixed_contention_never_overlaps_incompatible_holders(spark, zk_hosts, root,
                                                               make_manager):
    """Hive's lock manager and zklock clients (named for Hive) lock random overlapping sets
    for a while; every critical section is recorded and no two incompatible ones overlap."""
    objects = ["db/t", "db/t/p=0", "db/t/p=1", "db/u"]
    sections: list[tuple[str, str, str, float, float]] = []  # who, object, mode, start, end
    lock = threading.Lock()
    stop, cap = time.monotonic() + 5, time.monotonic() + 90
    held_by = {"hi": 0, "zk": 0}

    def going() -> bool:
        """5 s of contention, longer (up to 90 s) until each side has held locks 5 times:
        Hive's JVM clients may take seconds to start on a loaded machine."""
        now = time.monotonic()
        return now < stop or (min(held_by.values()) < 5 and now < cap)

    def record(who: str, wanted: list[tuple[str, str]], start: float, end: float) -> None:
        with lock:
            sections.extend((who, o, m, start, end) for o, m in wanted)
            held_by[who[:2]] += 1

    def hive_client(k: int) -> None:
        h = HiveLocks(spark, zk_hosts, root)  # its own instance and JVM thread
        rng = random.Random(k)
        while going():
            obj, mode = rng.choice(objects), rng.choice("SX")
            held = h.lock_all(hive_set(obj, mode))
            if held is None:
                time.sleep(0.01)  # pacing: a denied client backs off before its next try
                continue
            start = time.monotonic()
            time.sleep(rng.uniform(0.005, 0.03))  # pacing: the critical section's length
            end = time.monotonic()
            h.release(held)
            record(f"hive{k}", hive_set(obj, mode), start, end)

    def zklock_client(k: int) -> None:
        mgr = make_manager(node_naming="hive", retries=0)
        rng = random.Random(100 + k)
        while going():
            obj, mode = rng.choice(objects), rng.choice("SX")
            try:
                held = mgr.acquire([(zk_name(obj), mode)])
            except LockNotAcquired:
                time.sleep(0.01)  # pacing: a denied client backs off before its next try
                continue
            start = time.monotonic()
            time.sleep(rng.uniform(0.005, 0.03))  # pacing: the critical section's length
            end = time.monotonic()
            held.release()
            record(f"zk{k}", hive_set(obj, mode), start, end)

    threads = [threading.Thread(target=hive_client, args=(k,)) for k in range(2)]
    threads += [threading.Thread(target=zklock_client, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    kinds = {who[:2] for who, *_ in sections}
    assert kinds == {"hi", "zk"}, "both sides must have held locks"
    overlaps = []
    for i, (wa, oa, ma, sa, ea) in enumerate(sections):
        for wb, ob, mb, sb, eb in sections[i + 1:]:
            if wa != wb and oa == ob and "X" in (ma, mb) and sa < eb and sb < ea:
                overlaps.append((wa, wb, oa, ma, mb))
    assert not overlaps, overlaps[:5]
