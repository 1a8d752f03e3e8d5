"""Leases on a real ZooKeeper: the lease API with HDFS's soft and hard limits."""

from __future__ import annotations

import subprocess
import time

import pytest
from conftest import PYTHON, lock_nodes, wait_for

from zklock import (
    ExceedsMaxLeaseTime,
    InvalidArguments,
    LeaseAlreadyExists,
    LeaseNotFound,
    LeaseRenewer,
    LockLost,
    LockNotAcquired,
)


def test_grab_is_all_or_none_and_lists_seed_000_fields(make_manager, zk, root):
    a, b = make_manager(), make_manager()
    first = a.grab_lease([("sales.orders/ds=1", "X")], duration_s=60, holder="backfill")
    with pytest.raises(LeaseAlreadyExists, match="backfill|lease"):
        b.grab_lease([("sales.customers", "X"), ("sales.orders/ds=1", "S")], duration_s=60)
    assert not any("customers" in n for n in lock_nodes(zk, root))  # nothing half-taken
    (lease,) = a.list_lease()
    assert lease.lease_id == first and lease.holder == "backfill"
    assert ("sales.orders/ds=1", "x") in lease.objects and ("sales", "s") in lease.objects
    assert lease.end_ms - lease.start_ms == 60_000
    assert lease.start_utc.endswith("Z")
    second = b.grab_lease([("sales.customers", "S")], duration_s=60)
    assert second > first  # ids come from ZooKeeper's zxid: unique and increasing
    assert [x.lease_id for x in a.list_lease(["sales.customers"])] == [second]


@pytest.mark.parametrize("kw", [dict(duration_s=0), dict(duration_s=-1),
                                dict(duration_s="soon"), dict(duration_s=10, wait_s="x")])
def test_bad_input(manager, kw):
    with pytest.raises(InvalidArguments):
        manager.grab_lease([("db.t", "X")], **kw)
    with pytest.raises(InvalidArguments):
        manager.grab_lease([], duration_s=10)
    with pytest.raises(InvalidArguments):
        manager.grab_lease([("db.t", "Z")], duration_s=10)


def test_leases_and_implicit_locks_block_each_other(make_manager):
    a, b = make_manager(), make_manager()
    lease = a.grab_lease([("db.t", "X")], duration_s=60)
    with pytest.raises(LockNotAcquired, match="lease"):
        b.acquire([("db.t/ds=1", "S")])
    a.drop_lease(lease)
    with b.acquire([("db.t", "S")]):
        with pytest.raises(LeaseAlreadyExists):
            a.grab_lease([("db.t", "X")], duration_s=60)


def test_wait_lets_a_grab_through_when_the_holder_finishes(make_manager):
    a, b = make_manager(), make_manager()
    held = a.acquire([("db.t", "X")])
    import threading
    threading.Timer(0.5, held.release).start()
    t0 = time.monotonic()
    b.grab_lease([("db.t", "X")], duration_s=30, wait_s=10)
    assert 0.4 < time.monotonic() - t0 < 5


def test_soft_limit_lets_a_contender_in_and_the_old_lease_cannot_extend(make_manager):
    a, b = make_manager(), make_manager()
    old = a.grab_lease([("db.t", "X")], duration_s=3)
    with pytest.raises(LeaseAlreadyExists):
        b.grab_lease([("db.t", "X")], duration_s=30)
    # past its soft limit on ZooKeeper's clock, the one leases are judged by
    assert wait_for(lambda: a.list_lease() == [], 30, step=0.1)
    new = b.grab_lease([("db.t", "X")], duration_s=30)  # past the soft limit: treated as absent
    with pytest.raises(LockLost, match="taken over"):
        a.extend_lease(old)
    assert [x.lease_id for x in a.list_lease()] == [new]  # only live ones
    # the expired one stays until recovered or reaped
    assert {x.lease_id for x in a.list_lease(include_expired=True)} == {old, new}


def test_recover_lease_drops_only_expired_holders(make_manager):
    a = make_manager()
    stale = a.grab_lease([("db.t", "X")], duration_s=3)
    fresh = a.grab_lease([("db.u", "X")], duration_s=60)
    assert a.recover_lease("db.t") == []  # not expired yet
    # past its soft limit on ZooKeeper's clock, the one leases are judged by
    assert wait_for(lambda: [x.lease_id for x in a.list_lease()] == [fresh], 30, step=0.1)
    assert a.recover_lease("db.t") == [stale]
    assert [x.lease_id for x in a.list_lease()] == [fresh]


def test_reaper_removes_only_what_is_past_the_hard_limit(make_manager, zk, root):
    a = make_manager(lease_hard_limit_s=4.0)
    gone = a.grab_lease([("db.t/ds=1", "X")], duration_s=0.2)
    live = a.grab_lease([("db.u", "S")], duration_s=60)
    # it ends about 4.8 s after gone: the first reap that takes anything takes gone alone
    # unless this thread stalls for 4.8 s between two reaps
    kept_expired = a.grab_lease([("db.v", "S")], duration_s=5.0)
    reaped: list[int] = []
    assert wait_for(lambda: reaped.extend(a.reap_leases()) or reaped, 30) == [gone]
    assert {x.lease_id for x in a.list_lease(include_expired=True)} == {live, kept_expired}
    # kept_expired ends, and stays (expired, short of the hard limit) until it passes it
    assert wait_for(lambda: [x.lease_id for x in a.list_lease()] == [live], 30)
    assert kept_expired in {x.lease_id for x in a.list_lease(include_expired=True)}
    assert wait_for(lambda: a.reap_leases() == [kept_expired], 30)
    assert all("/db/t" not in n for n in lock_nodes(zk, root))


def test_lease_survives_its_process_an_implicit_lock_does_not(make_manager, zk_hosts, root):
    code = ("import sys; from zklock import LockManager;"
            "m = LockManager(hosts=sys.argv[1], root=sys.argv[2], session_timeout=2, retries=0);"
            "print(m.grab_lease([('db.t', 'X')], duration_s=120));"
            "m.acquire([('db.u', 'X')]); m.client.stop()")
    out = subprocess.run([PYTHON, "-c", code, zk_hosts, root], capture_output=True, text=True,
                         check=True)
    lease_id = int(out.stdout.strip())
    mgr = make_manager()
    assert [x.lease_id for x in mgr.list_lease()] == [lease_id]
    assert [r.object for r in mgr.show() if not r.explicit] == []
    with mgr.acquire([("db.u", "X")]):
        pass
    with pytest.raises(LeaseAlreadyExists):
        mgr.grab_lease([("db.t", "S")], duration_s=5)


def test_extend_within_and_past_the_maximum(make_manager):
    a = make_manager(max_lease_s=8)
    with pytest.raises(ExceedsMaxLeaseTime):
        a.grab_lease([("db.t", "X")], duration_s=9)
    lease_id = a.grab_lease([("db.t", "X")], duration_s=2)
    before = a.list_lease()[0]
    # ZooKeeper's clock (the one an extension reads) has moved on since the grab
    assert wait_for(lambda: a.leases.now_ms() > before.start_ms, 30)
    # ends 2 s after now, a little after the start (up to 8 s: a stall of under 6 s fits)
    after = a.extend_lease(lease_id)
    assert after.end_ms > before.end_ms and after.start_ms == before.start_ms

    def refused() -> bool:  # an extension that still fits is one more renewal: harmless
        try:
            a.extend_lease(lease_id)
        except ExceedsMaxLeaseTime:
            return True
        return False
    # from about 6 s after the start, now + 2 s ends past the 8 s maximum
    assert wait_for(refused, 30, step=0.2), "extensions past the maximum were not refused"
    assert a.list_lease()[0].end_ms - before.start_ms <= 8000


def test_drop_and_unknown_ids(make_manager, zk, root):
    a = make_manager()
    lease_id = a.grab_lease([("db.t/ds=1", "X"), ("db.t/ds=2", "S")], duration_s=30)
    a.drop_lease(lease_id, ["db.t/ds=1"])  # objs narrows the search; parents still found
    assert lock_nodes(zk, root) == []
    with pytest.raises(LeaseNotFound):
        a.drop_lease(lease_id)
    with pytest.raises(LeaseNotFound):
        a.extend_lease(12345)
    with pytest.raises(InvalidArguments):
        a.drop_lease("seven")


def test_force_drop_everything_and_implicit_break_lock(make_manager, zk, root):
    a, b = make_manager(), make_manager()
    a.grab_lease([("db.t", "X")], duration_s=30)
    a.grab_lease([("db.u", "S")], duration_s=30)
    held = b.acquire([("db.v", "X")])
    assert a.force_drop_lease([]) == 4  # two leases, each with its database node
    assert a.list_lease() == [] and held.is_valid
    assert a.force_drop_lease(["db.v"], include_implicit=True) >= 1
    assert [n for n in lock_nodes(zk, root) if "/v/" in n] == []


def test_renewer_keeps_leases_alive_then_stops(make_manager):
    a, b = make_manager(), make_manager()
    lease_id = a.grab_lease([("db.t", "X")], duration_s=3, holder="etl")
    lost = []
    with LeaseRenewer(a, "etl", on_lost=lambda i, e: lost.append(i)) as renewer:
        # four renewals 1.5 s apart: the lease has outlived twice its duration
        assert wait_for(lambda: renewer.renewals >= 4, 60), renewer.renewals
        with pytest.raises(LeaseAlreadyExists):
            b.grab_lease([("db.t", "X")], duration_s=5)
        a.drop_lease(lease_id, holder="etl")  # a named holder acts as that holder
        assert wait_for(lambda: not renewer.running, 30), "no lease left, yet it runs"
    assert lost == []


def test_renewer_reports_a_lease_taken_over(make_manager):
    a, b = make_manager(), make_manager()
    lease_id = a.grab_lease([("db.t", "X")], duration_s=0.5, holder="slow")
    # past its soft limit on ZooKeeper's clock, the one leases are judged by
    assert wait_for(lambda: a.list_lease() == [], 30)
    b.grab_lease([("db.t", "X")], duration_s=30)
    renewer = LeaseRenewer(a, "slow")
    assert renewer.renew_once() is None or lease_id in renewer.lost
    assert lease_id in renewer.lost


SKEWED = """
import sys, time
real = time.time
time.time = lambda: real() + float(sys.argv[3])  # this client's clock is off
from zklock import LockManager, LeaseAlreadyExists
m = LockManager(hosts=sys.argv[1], root=sys.argv[2], retries=0)
try:
    m.grab_lease([("db.t", "X")], duration_s=30)
    print("stole")
except LeaseAlreadyExists:
    print("denied")
lease = m.list_lease()[0]
print(lease.end_ms - lease.start_ms)
"""


@pytest.mark.parametrize("offset", [3600, -3600])
def test_a_skewed_client_clock_neither_steals_nor_overstays(make_manager, zk_hosts, root, offset):
    a = make_manager()
    a.grab_lease([("db.t", "X")], duration_s=60)
    out = subprocess.run([PYTHON, "-c", SKEWED, zk_hosts, root, str(offset)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    verdict, span = out.stdout.split()
    assert verdict == "denied" and int(span) == 60000  # judged on ZooKeeper's clock


def test_concurrent_grabs_never_give_two_conflicting_live_leases(zk_hosts, root, make_manager):
    code = """
import sys, time
from zklock import LockManager, LeaseAlreadyExists
m = LockManager(hosts=sys.argv[1], root=sys.argv[2], retries=0, retry_interval=0.01)
for i in range(15):
    try:
        lid = m.grab_lease([("db.t/ds=1", "X")], duration_s=30)
        start = time.time()
        time.sleep(0.01)  # pacing: the holder keeps its lease a moment
        end = time.time()
        m.drop_lease(lid, ["db.t/ds=1"])
        print(start, end, flush=True)
    except LeaseAlreadyExists:
        pass
"""
    procs = [subprocess.Popen([PYTHON, "-c", code, zk_hosts, root], stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]
    spans = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        spans += [tuple(map(float, line.split())) for line in out.splitlines()]
    spans.sort()
    assert len(spans) >= 4
    # held intervals (grant returned .. before drop) of one exclusive lease never overlap
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert make_manager().list_lease() == []
