"""The scheduler against a real ZooKeeper and a real local SparkSession.

Services here run in the test process (each with its own ZooKeeper
session, sharing the session's SparkSession); the multi-process
exactly-once test is in test_scheduler_processes.py.
"""

from __future__ import annotations

import pytest
from conftest import ADMIN, wait_for
from zklock.scheduler.admin import NotAuthorized
from zklock.scheduler.model import State
from zklock.scheduler.store import Fenced, SchedulerStore

from zklock.errors import InvalidArguments
from zklock.testing import expire_session

SLOW = "SELECT max(id) FROM range(0, 400000000000)"  # minutes of work: only cancellation ends it


def sleep_sql(ms: int) -> str:
    """A statement that takes ``ms`` in a Spark task (Thread.sleep through java_method)."""
    return f"SELECT java_method('java.lang.Thread', 'sleep', CAST({ms} AS BIGINT))"


def executions(session, name=None):
    return session.scheduled_queries().executions(name)


def states(session, name):
    return [e.state for e in executions(session, name)]


def ended(states_of_runs: list[str]) -> bool:
    """Has every run ended (none INITED or EXECUTING), and is there one?"""
    return bool(states_of_runs) and not any(State(x).active for x in states_of_runs)


def idle(session, name):
    q = session.scheduled_queries().get(name)
    return q.active_execution is None


def test_create_alter_drop_through_sql(admin_session):
    s = admin_session
    out = s.sql("CREATE SCHEDULED QUERY q1 CRON '0 */5 * * * *' TIMEZONE 'Europe/Paris'"
                " AS SELECT 1").collect()
    assert out[0]["result"] == "created"
    row = s.sql("SELECT * FROM sysdb.scheduled_queries WHERE schedule_name = 'q1'").collect()[0]
    assert (row["enabled"], row["timezone"], row["user"], row["owner"], row["query"]) == (
        True, "Europe/Paris", ADMIN, ADMIN, "SELECT 1")
    assert row["next_execution"] is not None and row["active_execution_id"] is None
    s.sql("ALTER SCHEDULED QUERY q1 DISABLE")
    assert not s.scheduled_queries().get("q1").enabled
    s.sql("ALTER SCHEDULED QUERY q1 EVERY 10 MINUTES OFFSET BY '00:02'")
    s.sql("ALTER SCHEDULED QUERY q1 DEFINED AS SELECT 2")
    q = s.scheduled_queries().get("q1")
    assert q.query == "SELECT 2" and q.parsed_schedule.kind == "every"
    with pytest.raises(InvalidArguments, match="already exists"):
        s.sql("CREATE SCHEDULED QUERY q1 EVERY 1 HOUR AS SELECT 1")
    s.sql("DROP SCHEDULED QUERY q1")
    assert s.sql("SELECT * FROM sysdb.scheduled_queries WHERE schedule_name = 'q1'").count() == 0
    with pytest.raises(InvalidArguments, match="no scheduled query 'q1'"):
        s.sql("DROP SCHEDULED QUERY q1")


def test_bad_statement_and_schedule_are_refused_with_a_pointer(admin_session):
    s = admin_session
    with pytest.raises(InvalidArguments, match="does not parse"):
        s.sql("CREATE SCHEDULED QUERY bad CRON '* * * * *' AS SELEC 1 FROM")
    with pytest.raises(InvalidArguments, match="position"):
        s.sql("CREATE SCHEDULED QUERY bad CRON '61 * * * *' AS SELECT 1")
    with pytest.raises(InvalidArguments, match="position"):
        s.sql("CREATE SCHEDULED QUERY bad EVERY 3 FORTNIGHTS AS SELECT 1")
    with pytest.raises(InvalidArguments):
        s.sql("CREATE SCHEDULED QUERY bad CRON '* * * * *' TIMEZONE 'Mars/Olympus' AS SELECT 1")
    with pytest.raises(InvalidArguments, match="one thing"):
        s.sql("ALTER SCHEDULED QUERY bad ENABLE DISABLE")
    assert s.scheduled_queries().list() == []


def test_security_rules(make_locking, sched_conf):
    admin = make_locking(**sched_conf)
    bob = make_locking(**{**sched_conf, "user": "bob"})
    with pytest.raises(NotAuthorized, match="only scheduler admins"):
        bob.sql("CREATE SCHEDULED QUERY b1 EVERY 1 HOUR AS SELECT 1")
    with pytest.raises(NotAuthorized, match="impersonation is off"):
        admin.sql("CREATE SCHEDULED QUERY a1 EVERY 1 HOUR EXECUTED AS 'bob' AS SELECT 1")
    imp = make_locking(**{**sched_conf, "scheduler_impersonation": True})
    imp.sql("CREATE SCHEDULED QUERY a1 EVERY 1 HOUR EXECUTED AS 'bob' AS SELECT 1")
    assert imp.scheduled_queries().get("a1").executed_as == "bob"
    with pytest.raises(NotAuthorized, match="belongs to 'alice'"):
        bob.sql("ALTER SCHEDULED QUERY a1 DISABLE")
    with pytest.raises(NotAuthorized, match="belongs to 'alice'"):
        bob.sql("DROP SCHEDULED QUERY a1")
    # an owner who is no longer an admin still manages their own query
    carol_admin = make_locking(**{**sched_conf, "user": "carol", "scheduler_admins": "carol"})
    carol_admin.sql("CREATE SCHEDULED QUERY c1 EVERY 1 HOUR AS SELECT 1")
    carol = make_locking(**{**sched_conf, "user": "carol"})
    carol.sql("ALTER SCHEDULED QUERY c1 DISABLE")
    with pytest.raises(NotAuthorized, match="impersonation is off"):
        carol.sql("ALTER SCHEDULED QUERY c1 EXECUTED AS 'bob'")
    admin.sql("DROP SCHEDULED QUERY c1")  # admins drop anyone's
    admin.sql("DROP SCHEDULED QUERY a1")


def test_run_now_and_the_user_is_recorded(admin_session, make_scheduler, make_manager):
    s = admin_session
    s.sql("CREATE SCHEDULED QUERY nightly CRON '0 3 * * *' DISABLED"
          " AS LOCK DATABASE sysq SHARED FOR 1 MINUTE")
    service = make_scheduler()
    # the leader's first pass has read every query and claimed what was due (it claims, and
    # waits for the claims' results, before it first sets its housekeeping time)
    assert wait_for(lambda: service.leader is not None
                    and service.leader._next_housekeeping > 0, timeout=20)
    assert executions(s, "nightly") == []  # disabled and not due
    s.sql("ALTER SCHEDULED QUERY nightly EXECUTE")
    assert wait_for(lambda: states(s, "nightly") == ["FINISHED"], timeout=20)
    e = executions(s, "nightly")[0]
    assert e.manual and e.executed_as == ADMIN and e.executor
    assert e.start - e.trigger_time < 10000  # started promptly (with room for CI's load)
    leases = make_manager().list_lease()
    assert [x.user for x in leases] == [ADMIN]  # the lock it took records the user
    row = s.sql("SELECT * FROM sysdb.scheduled_executions").collect()[0]
    assert (row["state"], row["user"], row["schedule_name"]) == ("FINISHED", ADMIN, "nightly")
    assert row["executor_query_id"].startswith("zklock-sq-")


@pytest.fixture
def zk_proxy(zk_hosts):
    """A fault proxy in front of the test ZooKeeper; closed after the services using it
    (request it before make_scheduler) have stopped."""
    from zklock.testing.proxy import FaultProxy

    host, port = zk_hosts.split(",")[0].rsplit(":", 1)
    proxy = FaultProxy((host, int(port)))
    yield proxy
    proxy.close()


def test_connection_loss_at_a_runs_first_progress_write_does_not_fail_it(
        zk_proxy, admin_session, make_scheduler):
    """The first progress write of a run (it records the fencing token) is cut off after
    ZooKeeper applied it: the executor reconnects, finds its write landed, runs the
    statement and records FINISHED; a failover alone never fails a run."""
    import re

    s = admin_session
    s.sql("CREATE SCHEDULED QUERY once CRON '0 3 * * *' DISABLED AS SELECT 1")
    # progress every 20 s: within the test only the run's first progress write has a token
    service = make_scheduler(hosts=zk_proxy.connect, scheduler_progress_interval=20,
                             scheduler_progress_timeout=60)
    assert wait_for(lambda: service.is_leader, timeout=20)  # it leads, through the proxy
    # the take writes EXECUTING with no token yet; the first progress write has one
    zk_proxy.cut_when(lambda data: b'"state":"EXECUTING"' in data
                      and re.search(rb'"fencing_token":[0-9]', data) is not None)
    s.sql("ALTER SCHEDULED QUERY once EXECUTE")
    # the run's end: its one execution in an ended state (not merely "not EXECUTING": the
    # query reads idle, and its execution INITED, in the instant before the leader hands it
    # out, and a wait that took that for the end asserted before anything ran)
    assert wait_for(lambda: idle(s, "once") and ended(states(s, "once")), timeout=30)
    assert zk_proxy.cut_count == 1
    assert states(s, "once") == ["FINISHED"]


def test_end_to_end_insert_every_two_seconds(admin_session, make_scheduler, db):
    s = admin_session
    s.sql(f"CREATE SCHEDULED QUERY ingest EVERY 2 SECONDS AS"
          f" INSERT INTO {db}.events PARTITION (ds='sched') VALUES (1)")
    make_scheduler()
    assert wait_for(lambda: states(s, "ingest").count("FINISHED") >= 4, timeout=40)
    s.sql("ALTER SCHEDULED QUERY ingest DISABLE")
    assert wait_for(lambda: idle(s, "ingest"), timeout=20)
    finished = [e for e in executions(s, "ingest") if e.state == "FINISHED"]
    assert all(e.state in ("FINISHED",) for e in executions(s, "ingest"))
    rows = s.sql(f"SELECT count(*) AS n FROM {db}.events WHERE ds = 'sched'").collect()[0]["n"]
    assert rows == len(finished)
    # trigger times are two seconds apart, each claimed once
    triggers = [e.trigger_time for e in finished]
    assert len(set(triggers)) == len(triggers)
    assert all(t % 2000 == 0 for t in triggers)
    # each started soon after it could: at its trigger, or when the run before it ended (a
    # run is never started beside the one before; one slower than 2 s leaves its next owed)
    runs = sorted(finished, key=lambda e: e.trigger_time)
    latencies = [runs[0].start - runs[0].trigger_time]
    latencies += [e.start - max(e.trigger_time, before.end) for before, e in zip(runs, runs[1:])]
    # a bound of two trigger periods: a loaded machine delays a start, never by that much
    assert max(latencies) < 4000, latencies


def test_no_overlap_and_one_owed_run(admin_session, make_scheduler):
    s = admin_session
    s.sql(f"CREATE SCHEDULED QUERY busy EVERY 1 SECOND AS {sleep_sql(2500)}")
    make_scheduler(pool_size=3)
    make_scheduler(pool_size=3)
    assert wait_for(lambda: states(s, "busy").count("FINISHED") >= 4, timeout=60)
    s.sql("ALTER SCHEDULED QUERY busy DISABLE")
    assert wait_for(lambda: idle(s, "busy"), timeout=30)
    runs = [e for e in executions(s, "busy") if e.start is not None]
    runs.sort(key=lambda e: e.start)
    for a, b in zip(runs, runs[1:]):
        assert a.end <= b.start, (a.id, b.id)  # never two at once
    # runs outlast the 1 s period, so later runs stand for several merged triggers
    assert sum(e.merged for e in runs) > len(runs)


def test_global_parallel_limit_holds(admin_session, make_scheduler):
    """Three executors of one run each (three slots in all) under a global limit of two: at
    most two runs at once. One slot each makes the spread certain, where larger pools let
    whichever executor hears of the queue first take every run: while one executor runs,
    the second run the limit allows can only go to another."""
    s = admin_session
    for i in range(6):
        s.sql(f"CREATE SCHEDULED QUERY p{i} EVERY 1 SECOND AS {sleep_sql(1200)}")
    for _ in range(3):
        make_scheduler(pool_size=1, scheduler_max_parallel=2)
    assert wait_for(lambda: len([e for e in executions(s) if e.state == "FINISHED"]) >= 10,
                    timeout=90)
    for i in range(6):
        s.sql(f"ALTER SCHEDULED QUERY p{i} DISABLE")
    assert wait_for(lambda: all(idle(s, f"p{i}") for i in range(6)), timeout=30)
    events = []
    for e in executions(s):
        if e.start is not None:
            events += [(e.start, 1), (e.end, -1)]
    level = peak = 0
    for _, step in sorted(events, key=lambda x: (x[0], x[1])):
        level += step
        peak = max(peak, level)
    assert peak <= 2
    assert len({e.executor for e in executions(s) if e.executor}) >= 2  # the limit is global


def test_auto_disable_after_consecutive_failures(admin_session, make_scheduler):
    s = admin_session
    s.sql("CREATE SCHEDULED QUERY broken EVERY 1 SECOND AS SELECT * FROM no_such_table_x")
    make_scheduler(scheduler_auto_disable_after=3)
    assert wait_for(lambda: not s.scheduled_queries().get("broken").enabled, timeout=30)
    assert wait_for(lambda: idle(s, "broken"), timeout=10)
    got = states(s, "broken")
    assert got == ["FAILED", "FAILED", "AUTO_DISABLED"]
    assert "no_such_table_x" in executions(s, "broken")[0].error_message.lower() or \
        "TABLE_OR_VIEW_NOT_FOUND" in executions(s, "broken")[0].error_message
    assert "\n" not in executions(s, "broken")[0].error_message


def test_timed_out_run_is_fenced_and_its_spark_job_cancelled(admin_session, make_scheduler,
                                                             spark):
    s = admin_session
    s.sql(f"CREATE SCHEDULED QUERY slow CRON '0 0 1 1 *' DISABLED AS {SLOW}")
    # 20 s: time for its Spark job to start on a loaded machine before the run times out
    service = make_scheduler(scheduler_max_runtime=20)
    s.sql("ALTER SCHEDULED QUERY slow EXECUTE")
    assert wait_for(lambda: states(s, "slow") == ["EXECUTING"], timeout=60)
    e = executions(s, "slow")[0]
    assert wait_for(lambda: spark.sparkContext.statusTracker().getJobIdsForGroup(
        e.executor_query_id), timeout=60), "the run's Spark job did not start within 60 s"
    assert wait_for(lambda: states(s, "slow") == ["TIMED_OUT"], timeout=60)
    # the executor saw its progress write fail and cancelled the job group
    assert wait_for(lambda: service.executor.running() == [], timeout=60)
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(e.executor_query_id)
    assert jobs and all(tracker.getJobInfo(j).status == "FAILED" for j in jobs)
    e = executions(s, "slow")[0]
    assert "scheduler_max_runtime" in e.error_message and idle(s, "slow")


def test_quiet_period_launches_nothing(admin_session, make_scheduler):
    s = admin_session
    s.sql("CREATE SCHEDULED QUERY quiet EVERY 1 SECOND AS SELECT 1")
    service = make_scheduler(scheduler_quiet_period=6)
    # whenever this thread gets to look, no run started inside the quiet period
    assert wait_for(lambda: "FINISHED" in states(s, "quiet"), timeout=60)
    first = min(e.start for e in executions(s, "quiet") if e.start)
    assert first >= service.info.quiet_until
    s.sql("ALTER SCHEDULED QUERY quiet DISABLE")


def test_leader_loses_session_stops_at_once_and_is_fenced(make_scheduler, sched_conf,
                                                         zk_hosts):
    changes: list[bool] = []
    a = make_scheduler()
    assert wait_for(lambda: a.is_leader, timeout=10)
    a.on_leadership = changes.append
    b = make_scheduler()
    token = a.election.token
    assert token is not None and not b.is_leader
    expire_session(a.client, zk_hosts)
    assert changes and changes[0] is False  # reported at once
    assert wait_for(lambda: b.is_leader, timeout=15)
    # the deposed leader's write is fenced by the version check on its (gone) node
    store = SchedulerStore(b.client, a.settings)
    with pytest.raises(Fenced) as info:
        store._commit(lambda t: (t.check(token.path, token.version),
                                 t.create(f"{store.base}/x", b"")))
    assert info.value.index == 0
    # after its session came back, the old leader stands again as a follower
    assert wait_for(lambda: a.election.node is not None and not a.is_leader, timeout=15)


def test_dead_executor_run_times_out(admin_session, make_scheduler, zk_hosts):
    s = admin_session
    s.sql(f"CREATE SCHEDULED QUERY orphan CRON '0 0 1 1 *' DISABLED AS {SLOW}")
    leader = make_scheduler(pool_size=1)
    assert wait_for(lambda: leader.is_leader, timeout=10)
    leader.executor.pool_size = 0  # the leader takes nothing: the other one runs it
    worker = make_scheduler(pool_size=1)
    s.sql("ALTER SCHEDULED QUERY orphan EXECUTE")
    assert wait_for(lambda: states(s, "orphan") == ["EXECUTING"], timeout=20)
    assert executions(s, "orphan")[0].executor == worker.id
    worker.client.stop()  # cut off: its executor node goes, its threads and Spark job go on
    assert wait_for(lambda: states(s, "orphan") == ["TIMED_OUT"], timeout=20)
    assert "is gone" in executions(s, "orphan")[0].error_message
    # no progress reaches ZooKeeper any more: the worker fences itself and cancels its job
    assert wait_for(lambda: worker.executor.running() == [], timeout=20)


def test_status_shows_leader_and_running(admin_session, make_scheduler):
    from zklock.scheduler.service import describe_status

    s = admin_session
    s.sql(f"CREATE SCHEDULED QUERY stat CRON '0 0 1 1 *' DISABLED AS {SLOW}")
    a = make_scheduler(scheduler_max_runtime=20)  # it runs until the status shows it
    assert wait_for(lambda: a.is_leader, timeout=10)
    s.sql("ALTER SCHEDULED QUERY stat EXECUTE")
    store = s.scheduled_queries().store

    def running() -> dict:  # the status once it shows the run (empty until then)
        st = describe_status(store)
        return st if st["executors"][0]["running"] else {}
    st = wait_for(running, timeout=60)
    assert st, "the status did not show the run within 60 s"
    assert st["leader"] == a.id and st["executors"][0]["leader"]
    assert st["executors"][0]["running"] == [executions(s, "stat")[0].id]
    assert wait_for(lambda: states(s, "stat") == ["TIMED_OUT"], timeout=60)
    assert State.TIMED_OUT.value == "TIMED_OUT"


def test_leader_reaps_leases_past_their_hard_limit(make_scheduler, make_manager):
    mgr = make_manager(lease_hard_limit_s=1)
    lease_id = mgr.grab_lease([("sales.orders", "X")], duration_s=1)
    a = make_scheduler(scheduler_reap_interval=0.5, lease_hard_limit_s=1)
    assert wait_for(lambda: a.is_leader, timeout=10)
    assert wait_for(lambda: mgr.list_lease(include_expired=True) == [], timeout=20)
    assert lease_id not in [x.lease_id for x in mgr.list_lease(include_expired=True)]


def test_drop_withdraws_a_queued_run(admin_session, make_scheduler):
    s = admin_session
    s.sql("CREATE SCHEDULED QUERY gone CRON '0 0 1 1 *' DISABLED AS SELECT 1")
    lead = make_scheduler(pool_size=0)  # leads, runs nothing: the run stays queued
    assert wait_for(lambda: lead.is_leader, timeout=10)
    s.sql("ALTER SCHEDULED QUERY gone EXECUTE")
    assert wait_for(lambda: states(s, "gone") == ["INITED"], timeout=10)
    store = s.scheduled_queries().store
    assert store.queued() == [executions(s, "gone")[0].id]
    s.sql("DROP SCHEDULED QUERY gone")
    e = executions(s)[0]
    assert e.state == "FAILED" and "dropped" in e.error_message
    assert store.queued() == []


def test_trims_by_count_and_refuses_bad_namespaces(admin_session, make_scheduler,
                                                   monkeypatch):
    import zklock.scheduler.leader as leader_mod

    monkeypatch.setattr(leader_mod, "TRIM_EVERY_S", 0.5)
    s = admin_session
    s.sql("CREATE SCHEDULED QUERY many EVERY 1 SECOND AS SELECT 1")
    first = s.scheduled_queries().get("many").next_execution
    make_scheduler(scheduler_executions_kept=3)
    # six triggers have been claimed ...
    assert wait_for(lambda: s.scheduled_queries().get("many").next_execution > first + 6000,
                    timeout=30)
    # ... but only the newest three executions are kept
    assert wait_for(lambda: len(executions(s, "many")) <= 3, timeout=10)
    assert min(e.trigger_time for e in executions(s, "many")) > first
    s.sql("ALTER SCHEDULED QUERY many DISABLE")
    with pytest.raises(InvalidArguments, match="namespace"):
        s.scheduled_queries("../escape")
