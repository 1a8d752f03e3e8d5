"""A lease belongs to its process (HDFS's DFSClient_<id>), SHOW/DROP FORCE LEASE *, RECOVER
LEASE, list_lease hiding expired leases, and hard-limit reaping without a scheduler."""

from __future__ import annotations

import json
import signal
import subprocess
import threading

import pytest
from click.testing import CliRunner
from conftest import PYTHON, wait_for
from zklock.cli.main import cli

from zklock import LeaseNotFound, LeaseRenewer, NotLeaseHolder

GRAB = """
import sys, time
from zklock import LockManager, LeaseRenewer
m = LockManager(hosts=sys.argv[1], root=sys.argv[2], retries=0, session_timeout=2)
lease_id = m.grab_lease([(sys.argv[3], "X")], duration_s=float(sys.argv[4]))
print(lease_id, m.lease_holder, flush=True)
if sys.argv[5] == "renew":
    with LeaseRenewer(m):
        sys.stdin.readline()  # renews until told to stop
"""


def grab_in_process(zk_hosts, root, obj, duration, renew=False):
    """Another OS process of the same user grabs a lease: (process, lease id, its holder)."""
    proc = subprocess.Popen([PYTHON, "-c", GRAB, zk_hosts, root, obj, str(duration),
                             "renew" if renew else "once"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lease_id, holder = proc.stdout.readline().split()
    return proc, int(lease_id), holder


def end_of(mgr, lease_id: int) -> int:
    """When the lease ends now (ms, ZooKeeper's clock), renewed or not."""
    (lease,) = [x for x in mgr.list_lease(include_expired=True) if x.lease_id == lease_id]
    return lease.end_ms


def cli_run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_two_processes_of_one_user_hold_distinct_leases(make_manager, zk_hosts, root):
    mine = make_manager()
    proc, theirs, their_holder = grab_in_process(zk_hosts, root, "db.t", 1.0)
    proc.wait(30)
    assert their_holder != mine.lease_holder  # same OS user, different process
    user = mine.settings.effective_user
    assert their_holder.startswith(f"{user}@") and mine.lease_holder.startswith(f"{user}@")
    own = mine.grab_lease([("db.u", "X")], duration_s=3.0)
    first_end = end_of(mine, own)
    # the renewer of this process renews this process's lease only
    with LeaseRenewer(mine) as renewer:
        # both leases would have ended without renewal (theirs ends first)
        assert wait_for(lambda: mine.leases.now_ms() > first_end, 30, step=0.1)
        assert wait_for(lambda: renewer.renewals >= 2, 30), renewer.renewals
        # theirs ended, unrenewed (a renewer that lagged past the end renews it again)
        assert wait_for(lambda: [x.lease_id for x in mine.list_lease()] == [own], 30), \
            mine.list_lease(include_expired=True)
    assert {x.lease_id for x in mine.list_lease(include_expired=True)} == {own, theirs}
    # drop and extend act on one's own leases only
    with pytest.raises(NotLeaseHolder, match=f"held by {their_holder}"):
        mine.drop_lease(theirs)
    with pytest.raises(NotLeaseHolder):
        mine.extend_lease(theirs)
    assert mine.drop_lease(theirs, holder=their_holder).lease_id == theirs  # as that holder
    mine.drop_lease(own)


def test_a_renewing_process_keeps_its_lease_while_another_cannot_drop_it(make_manager, zk_hosts,
                                                                         root):
    proc, theirs, holder = grab_in_process(zk_hosts, root, "db.t", 2.0, renew=True)
    try:
        other = make_manager()
        # past the end it has now on ZooKeeper's clock: only renewals over there keep it
        # (a lapse is live once renewed)
        first_end = end_of(other, theirs)
        assert wait_for(lambda: other.leases.now_ms() > first_end, 30, step=0.1)
        assert wait_for(lambda: [x.lease_id for x in other.list_lease()] == [theirs], 5)
        with pytest.raises(NotLeaseHolder):
            other.drop_lease(theirs)
        out = cli_run("--zk", zk_hosts, "--root", root, "lease", "drop", str(theirs))
        assert out.exit_code == 1 and f"held by {holder}" in out.output
        assert "Traceback" not in out.output
    finally:
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        proc.wait(30)
    assert other.force_drop_lease(["db.t"]) == 2  # admin force-drop acts on anyone's


def test_unlock_drops_only_the_callers_own_leases(make_locking, db, zk_hosts, root):
    """UNLOCK in one process does not drop a lease of the same user in another."""
    proc, theirs, _ = grab_in_process(zk_hosts, root, f"{db}.dim", 60)
    proc.wait(30)
    session = make_locking()
    with pytest.raises(LeaseNotFound, match="no lease of"):
        session.sql(f"UNLOCK TABLE {db}.dim")
    assert [r.lease_id for r in session.sql(f"SHOW LEASE {db}.dim").collect()] == [theirs]
    other = make_locking(lease_holder="ops-b")  # a holder named in the settings
    part = f"{db}.orders PARTITION (ds='1', hr=1)"
    other.sql(f"LOCK TABLE {part} SHARED FOR 1 MINUTES")
    session.sql(f"LOCK TABLE {part} SHARED FOR 1 MINUTES")
    (row,) = other.sql(f"UNLOCK TABLE {part}").collect()
    (left,) = [r for r in session.sql(f"SHOW LEASE {db}.orders").collect()]
    assert left.holder == session.manager.lease_holder and left.lease_id != row.lease_id
    with pytest.raises(LeaseNotFound):
        other.sql(f"UNLOCK TABLE {part}")
    session.sql(f"UNLOCK TABLE {part}")
    assert [r.lease_id for r in session.sql("SHOW LEASES").collect()] == [theirs]


def test_show_and_drop_force_lease_star_mean_every_lease(make_locking, db):
    admin = make_locking()
    admin.sql(f"LOCK TABLE {db}.dim EXCLUSIVE FOR 1 MINUTES")
    admin.sql(f"LOCK DATABASE {db} SHARED FOR 1 MINUTES")
    assert len(admin.sql("SHOW LEASE *").collect()) == 2
    assert len(admin.sql("SHOW LEASES").collect()) == 2
    (row,) = admin.sql("DROP FORCE LEASE *").collect()
    assert row.dropped_nodes == 3 and admin.sql("SHOW LEASE *").collect() == []
    with pytest.raises(Exception, match="cannot be mixed"):
        admin.sql(f"DROP FORCE LEASE {db}.dim, *")


def test_recover_lease_in_sql_and_the_cli(make_locking, make_manager, db, zk_hosts, root):
    session = make_locking()
    mgr = make_manager()
    stale = mgr.grab_lease([(f"{db}.dim", "X")], duration_s=10)
    live = mgr.grab_lease([(f"{db}.orders", "X")], duration_s=60)
    # not expired yet (10 s: room for a Spark statement on a loaded machine)
    assert session.sql(f"RECOVER LEASE {db}.dim").collect() == []
    # once it has ended, an expired lease is hidden from the live ones
    assert wait_for(lambda: [x.lease_id for x in mgr.list_lease()] == [live], 60)
    out = cli_run("--zk", zk_hosts, "--root", root, "lease", "list", "--all", "--json")
    assert {r["lease_id"] for r in json.loads(out.output)} == {stale, live}
    assert [r.lease_id for r in session.sql(f"RECOVER LEASE {db}.dim").collect()] == [stale]
    stale2 = mgr.grab_lease([(f"{db}.events", "X")], duration_s=0.3)
    # past its soft limit on ZooKeeper's clock, the one leases are judged by
    assert wait_for(lambda: [x.lease_id for x in mgr.list_lease()] == [live], 30)
    out = cli_run("--zk", zk_hosts, "--root", root, "lease", "recover", f"{db}.events")
    assert out.output.strip() == f"recovered 1 lease(s): {stale2}"
    out = cli_run("--zk", zk_hosts, "--root", root, "lease", "recover", "bad name")
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert [x.lease_id for x in mgr.list_lease(include_expired=True)] == [live]


REAP = ["-m", "zklock.cli.main", "lease", "reap", "--every", "200ms", "--hard-limit", "300ms"]


def test_reaping_runs_without_a_scheduler_and_one_reaper_leads(make_manager, zk_hosts, root):
    env = {"ZKLOCK_ZK": zk_hosts, "ZKLOCK_ROOT": root, "ZKLOCK_SESSION_TIMEOUT": "2",
           "PATH": "/usr/bin:/bin"}
    reapers = [subprocess.Popen([PYTHON, *REAP], env=env, stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    lines: dict[int, list[str]] = {p.pid: [] for p in reapers}
    readers = [threading.Thread(target=lambda p=p: lines[p.pid].extend(iter(p.stdout.readline,
                                                                            "")), daemon=True)
               for p in reapers]
    for reader in readers:
        reader.start()
    mgr = make_manager()
    try:
        lease_id = mgr.grab_lease([("db.t", "X")], duration_s=0.2)
        assert wait_for(lambda: mgr.list_lease(include_expired=True) == [], timeout=60), \
            "the first lease was not reaped within 60 s"
        # the one holding <root>/.reaper reaps; once the other has stood by (its first
        # round may come late on a loaded machine), stop the first: the other takes over
        leader = mgr.client.get(f"{root}/.reaper")[0].decode()
        first = next(p for p in reapers if leader.endswith(f":{p.pid}"))
        other = next(p for p in reapers if p is not first)
        assert wait_for(lambda: any("standby:" in ln for ln in lines[other.pid]), timeout=60), \
            f"the second reaper did not stand by within 60 s: {lines[other.pid]}"
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        second = mgr.grab_lease([("db.u", "S")], duration_s=0.2)
        assert wait_for(lambda: mgr.list_lease(include_expired=True) == [], timeout=60), \
            "the second reaper did not reap within 60 s of the first one's stop"
    finally:
        for p in reapers:
            p.send_signal(signal.SIGTERM)
        for p in reapers:
            p.wait(60)
        for reader in readers:
            reader.join(60)
    text = "\n".join(ln for p in reapers for ln in lines[p.pid])
    assert f"reaped 1 lease(s): {lease_id}" in text and f"reaped 1 lease(s): {second}" in text
