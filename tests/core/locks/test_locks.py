"""The lock protocol against a real ZooKeeper."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from conftest import lock_nodes, wait_for

from zklock import LockManager, LockNotAcquired, LockSet, Mode
from zklock.errors import InvalidArguments, InvalidLockObject, LockRequestCancelled
from zklock.locks.lockset import SoleVersion
from zklock.locks.objects import LockObject

MODES = [Mode.SHARED, Mode.EXCLUSIVE]


@pytest.mark.parametrize("held, requested", list(itertools.product(MODES, MODES)))
@pytest.mark.parametrize("level", ["db", "db.t", "db.t/p=1"])
def test_compatibility_matrix(make_manager, held, requested, level):
    a, b = make_manager(), make_manager()
    with a.acquire([(level, held)]):
        if requested.compatible_with(held):
            with b.acquire([(level, requested)]) as got:
                assert got.is_valid
        else:
            with pytest.raises(LockNotAcquired) as err:
                b.acquire([(level, requested)])
            assert level in str(err.value) and held.value in str(err.value)


def test_hierarchy(make_manager):
    a, b = make_manager(), make_manager()
    with a.acquire([("db.t/ds=1", "X")]):
        # S on the table with X on one of its partitions is granted
        with b.acquire([("db.t", "S")]):
            pass
        # X on the table is denied while any partition holds a lock
        with pytest.raises(LockNotAcquired):
            b.acquire([("db.t", "X")])
        # S (or X) on a sibling partition is granted
        with b.acquire([("db.t/ds=2", "S")]):
            pass
        with b.acquire([("db.t/ds=2", "X")]):
            pass
        with pytest.raises(LockNotAcquired):
            b.acquire([("db", "X")])


def test_all_or_none_leaves_nothing_behind(make_manager, zk, root):
    a, b = make_manager(), make_manager()
    with a.acquire([("db.t/ds=5", "X")]):
        before = set(lock_nodes(zk, root))
        with pytest.raises(LockNotAcquired) as err:
            b.acquire([(f"db.t/ds={i}", "X") for i in range(10)] + [("db.u", "X")],
                      retries=2, retry_interval=0.02)
        assert "db.t/ds=5" in str(err.value)
        assert set(lock_nodes(zk, root)) == before
        assert err.value.conflicts and err.value.conflicts[0].record.data.pid > 0
    assert lock_nodes(zk, root) == []


def test_retry_succeeds_after_holder_releases(make_manager):
    a, b = make_manager(), make_manager()
    held = a.acquire([("db.t", "X")])
    threading.Timer(0.3, held.release).start()
    t0 = time.monotonic()
    with b.acquire([("db.t", "S")], retries=50, retry_interval=0.05) as got:
        assert got.is_valid
    assert time.monotonic() - t0 >= 0.25


def test_a_grant_after_a_wait_names_whom_it_waited_for(make_manager, zk, root):
    """The set names the holders of its last denial, as denials name them (the Spark engine
    shows it on the statement's plan node); a set that never waited names no one."""
    a, b = make_manager(), make_manager()
    held = a.acquire([("db.t", "X")], query_id="backfill-7")
    got: dict[str, LockSet] = {}
    waiter = threading.Thread(target=lambda: got.setdefault(
        "set", b.acquire([("db.t", "S")], retries=400, retry_interval=0.05)))
    waiter.start()
    # denied at least once: its wait record is in ZooKeeper
    assert wait_for(lambda: zk.exists(f"{root}/.waits") and zk.get_children(f"{root}/.waits"),
                    timeout=30)
    held.release()
    waiter.join(60)
    assert got["set"].attempts >= 2
    assert "db.t (S requested) is held in X by user" in got["set"].waited_for
    assert "query backfill-7" in got["set"].waited_for
    got["set"].release()
    with a.acquire([("db.t", "X")]) as unhindered:
        assert unhindered.waited_for == ""


def test_a_waiting_request_cancelled_ends_at_once_holding_nothing(make_manager, zk, root):
    """A request waiting for a holder ends when its caller cancels it (the event it was
    given, set from another thread): LockRequestCancelled while the holder holds on, no
    node of it left, no record in `zklock waits`. One cancelled before it starts makes no
    attempt, even where nothing holds the object."""
    holder, waiter = make_manager(), make_manager()
    cancelled = threading.Event()
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            waiter.acquire([("db.t", "X")], retries=100_000, retry_interval=0.5,
                           cancelled=cancelled)
        except LockRequestCancelled as exc:
            ended.append(exc)

    with holder.acquire([("db.t", "X")]) as held:
        asking = threading.Thread(target=wait)
        asking.start()
        assert wait_for(lambda: zk.exists(f"{root}/.waits") and zk.get_children(f"{root}/.waits"))
        cancelled.set()
        asking.join(30)
        assert not asking.is_alive() and held.is_valid
        assert "cancelled after" in str(ended[0]) and "db.t" in str(ended[0])
        assert wait_for(lambda: not zk.get_children(f"{root}/.waits"))  # (deleted async)
        assert wait_for(lambda: sorted(lock_nodes(zk, f"{root}/db")) == sorted(held.node_paths))
    with pytest.raises(LockRequestCancelled, match="after 0 attempt"):
        waiter.acquire([("db.t", "X")], cancelled=cancelled)
    assert not lock_nodes(zk, f"{root}/db")


def test_retries_zero_is_one_attempt(make_manager):
    a, b = make_manager(), make_manager()
    with a.acquire([("db.t", "X")]):
        t0 = time.monotonic()
        with pytest.raises(LockNotAcquired) as err:
            b.acquire([("db.t", "X")], retries=0, retry_interval=30)
        assert time.monotonic() - t0 < 15  # one attempt, never a 30 s pause
        assert "after 1 attempt" in str(err.value)


def test_a_grant_names_the_tables_its_node_is_alone_on(make_manager, unswept_hosts):
    """SoleVersion: where the set's node is a table's only child, nothing made or deleted
    there since, the grant names the table with its node's czxid and cversion; the same
    client's next grant there, with no lock between, finds the cversion 2 further. Beside
    another holder, or on a table the set writes, it names nothing."""
    a = make_manager(hosts=unswept_hosts)
    b = make_manager(hosts=unswept_hosts)
    table = LockObject.parse("db.t")
    a.acquire([("db.t", "S")]).release()  # the table's node, made by a grant that names nothing
    with a.acquire([("db.t", "S"), ("db.u/p=1", "S")]) as first:
        assert set(first.sole) == {table}  # db.u's node is made by this very grant
        v = first.sole[table]
        assert v.path == f"{a.root}/db/t"
    with a.acquire([("db.t", "S")]) as second:
        assert second.sole[table] == SoleVersion(v.path, v.czxid, v.cversion + 2)
    with b.acquire([("db.t", "S")]), a.acquire([("db.t", "S")]) as beside:
        assert beside.sole == {}
    with a.acquire([("db.t/p=1", "X")]) as writer:  # S on db.t, but it writes the table
        assert writer.sole == {}


def test_fencing_tokens_increase(make_manager):
    a = make_manager()
    tokens = []
    for _ in range(5):
        with a.acquire([("db.t/p=1", "X")]) as got:
            tokens.append(got.fencing_token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 5
    assert all(t > 0 for t in tokens)


def test_lock_data_and_show(make_manager):
    a = make_manager(query_max_length=10)
    with a.acquire([("Sales.Orders/ds=2024-01-01", "X"), ("sales.customers", "S")],
                   query_id="q-17", query="INSERT INTO sales.orders SELECT 1"):
        recs = a.show(extended=True)
        got = {(r.object, r.mode.value) for r in recs}
        assert got == {("sales", "S"), ("sales.orders", "S"), ("sales.customers", "S"),
                       ("sales.orders/ds=2024-01-01", "X")}
        r = next(r for r in recs if r.mode is Mode.EXCLUSIVE)
        d = r.to_dict()
        assert d["query_id"] == "q-17" and d["query"] == "INSERT INT..."
        assert d["kind"] == "implicit" and d["acquired_at"].endswith("Z") and d["pid"] > 0
        # show of a table includes its partitions, not its siblings or parents
        names = {r.object for r in a.show("sales.orders")}
        assert names == {"sales.orders", "sales.orders/ds=2024-01-01"}
        assert {r.object for r in a.show("sales")} >= {"sales", "sales.customers"}
        assert a.show("sales.orders/ds=2024-01-01")[0].mode is Mode.EXCLUSIVE
        assert a.show("nosuch.table") == []
    assert a.show() == []


def test_support_concurrency_off(make_manager, zk, root):
    a = make_manager(support_concurrency=False)
    got = a.acquire([("db.t", "X")])
    assert isinstance(got, LockSet) and got.is_valid and got.held == []
    got.check()
    assert lock_nodes(zk, root) == []


def test_empty_object_nodes_are_removed(make_manager, zk, root):
    a = make_manager()
    with a.acquire([("db.t/p=1", "X")]):
        assert zk.exists(f"{root}/db/t/p=1")
    assert wait_for(lambda: not zk.exists(f"{root}/db"), timeout=15, step=0.2)
    # and a create racing with that removal still succeeds
    for _ in range(20):
        with a.acquire([("db.t/p=1", "X")]):
            pass


def test_large_set_chunks_under_jute_maxbuffer(make_manager, zk, root):
    a, b = make_manager(query_max_length=2000), make_manager()
    objs = [(f"db.t/p={i}", "X") for i in range(600)]
    with a.acquire(objs, query="x" * 2000) as got:  # ~1.3 MB of lock data: several multis
        assert len(got.held) == 602
        with pytest.raises(LockNotAcquired):
            b.acquire([("db.t/p=599", "S")])
    assert lock_nodes(zk, root) == []


def test_bad_input(make_manager):
    a = make_manager()
    with pytest.raises(InvalidLockObject):
        a.acquire([("db/../etc", "X")])
    with pytest.raises(InvalidArguments):
        a.acquire([("db.t", "X")], retries=-1)
    with pytest.raises(InvalidArguments):
        LockManager(hosts="127.0.0.1:1", root="relative")


def test_accepts_started_kazoo_client(zk, root):
    mgr = LockManager(client=zk, root=root, retries=0)
    with mgr.acquire([("db.t", "S")]) as got:
        assert got.fencing_token > 0
    mgr.close()
    assert zk.connected  # not ours to stop


def test_release_is_idempotent_and_check_after_release(make_manager):
    a = make_manager()
    got = a.acquire([("db.t", "X")])
    got.release()
    got.release()
    assert not got.is_valid
    with pytest.raises(Exception, match="released"):
        got.check()


def test_large_sets_ride_out_the_container_sweep(make_manager, zk, root):
    """The server (container check every 500 ms here) deletes empty object nodes a few at a
    time; a 400-object set re-acquired while it does so must not give up."""
    from kazoo.exceptions import NoNodeError

    mgr = make_manager(retries=0)
    request = [(f"db.sweep/p={i}", "S") for i in range(400)]

    def sweeping() -> bool:  # the sweep has begun removing the empty object nodes
        try:
            return len(zk.get_children(f"{root}/db/sweep")) < len(request)
        except NoNodeError:  # all gone already
            return True
    for _ in range(5):
        with mgr.acquire(request):
            pass
        # the objects are empty now: re-acquire once the sweep is removing them
        assert wait_for(sweeping, timeout=15, step=0.02)


def test_closing_the_manager_loses_what_it_still_holds(make_manager, zk, root):
    """A set still held when its manager closes is lost (its callbacks run: a Spark command
    under it is cancelled), and its nodes go with the manager's session."""
    manager = make_manager()
    held = manager.acquire([("db1.t1", "X")])
    lost = []
    held.on_lost(lambda s: lost.append(s.lost_reason))
    manager.close()
    assert not held.is_valid
    assert lost == ["its LockManager was closed"]
    assert lock_nodes(zk, root) == []
