"""ZooKeeper unavailable: every entry point fails fast and clearly; long-lived parts resume."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from conftest import wait_for
from zklock.cli.main import cli

from zklock import LockManager, ZooKeeperUnavailable
from zklock.config import Settings
from zklock.servers.ports import free_port
from zklock.servers.zookeeper import ZkServer
from zklock.testing.proxy import FaultProxy


def dead_hosts() -> str:
    return f"127.0.0.1:{free_port()}"


def test_every_entry_point_fails_within_the_connect_timeout(spark, shared_db):
    hosts = dead_hosts()
    t0 = time.monotonic()
    # each gives up after the configured 1 s (the message says so), not the default 5 s; the
    # bounds below leave a loaded machine room around it
    with pytest.raises(ZooKeeperUnavailable, match="cannot reach ZooKeeper.* within 1s"):
        LockManager(hosts=hosts, connect_timeout=1)
    assert time.monotonic() - t0 < 10

    from zklock.spark import LockingSession

    session = LockingSession(spark.newSession(), hosts=hosts, connect_timeout=1)
    t0 = time.monotonic()
    with pytest.raises(ZooKeeperUnavailable, match="within 1s"), session.errors():
        session.sql(f"SELECT * FROM {shared_db}.dim").collect()  # locked in the engine
    assert time.monotonic() - t0 < 10
    session.close()

    for args in (["show"], ["waits"], ["lease", "list"], ["schedule", "list"],
                 ["scheduler", "status"]):
        t0 = time.monotonic()
        out = CliRunner().invoke(cli, ["--zk", hosts, *args],
                                 env={"ZKLOCK_CONNECT_TIMEOUT": "1s"})
        assert out.exit_code == 1 and "within 1s" in out.output, (args, out.output)
        assert "Traceback" not in out.output
        assert time.monotonic() - t0 < 10, args

    from zklock.scheduler.service import SchedulerService

    t0 = time.monotonic()
    with pytest.raises(ZooKeeperUnavailable, match="within 1s"):
        SchedulerService(Settings.resolve({"hosts": hosts, "connect_timeout": 1}), runner=None)
    assert time.monotonic() - t0 < 10


#: A client that must outlive a restart: ZooKeeper gives the sessions it restores one
#: session timeout from its start; 15 s is margin for a loaded machine (the server's
#: maximum here is 20 s). Its calls give up after 6 s (operation_timeout), so the tests
#: wait out a short outage, not three session timeouts.
RESTART_GRACE = dict(session_timeout=15, operation_timeout=6)


@pytest.fixture
def own_server(tmp_path):
    """A ZooKeeper of the test's own, to stop and start again on the same port."""
    srv = ZkServer(tmp_path / "zk", port=free_port(), tick_time_ms=500, force_sync=False)
    srv.start(wait=90)
    yield srv
    srv.stop()


class GatedServer:
    """``own_server`` behind a proxy that lets clients in only while the server serves.

    ZooKeeper 3.8 binds its client port before it serves. A connection it closes in that
    window hits a NullPointerException and is never closed (ZOOKEEPER-5051), so kazoo waits
    one session timeout for an answer, and the session restored at start has expired by
    then. That is ZooKeeper's startup bug, not the outage these tests are about; CI's
    loaded machine hit it. The gate models a server that returns when it serves."""

    def __init__(self, server: ZkServer) -> None:
        self.server = server
        self.proxy = FaultProxy((server.host, server.port))

    @property
    def connect(self) -> str:
        return self.proxy.connect

    def stop(self) -> None:
        self.proxy.refuse = True
        self.server.stop()

    def start(self) -> None:
        self.server.start(wait=90)
        self.proxy.refuse = False


@pytest.fixture
def gated_server(own_server):
    gate = GatedServer(own_server)
    yield gate
    gate.proxy.close()


def test_scheduler_and_renewer_resume_when_zookeeper_returns(gated_server, spark):
    """Through the gate: a client that reconnects in ZooKeeper's bind-before-serve window
    would wait out its 4 s session (see GatedServer), which is not the outage tested here."""
    from zklock.scheduler.admin import ScheduledQueries
    from zklock.scheduler.ddl import parse_scheduled_ddl
    from zklock.scheduler.runner import SparkRunner
    from zklock.scheduler.service import SchedulerService
    from zklock.scheduler.store import SchedulerStore

    from zklock.leases.renewer import LeaseRenewer
    from zklock.manager import connect

    conf = dict(hosts=gated_server.connect, user="alice", scheduler_admins="alice",
                session_timeout=4, scheduler_quiet_period=0, scheduler_progress_interval=0.2,
                scheduler_progress_timeout=10)
    settings = Settings.resolve(conf)
    client = connect(settings)
    service = SchedulerService(settings, SparkRunner(spark, settings, client), client=client)
    service.start()
    admin_client = connect(settings)
    admin = ScheduledQueries(SchedulerStore(admin_client, settings), settings)
    mgr = LockManager(hosts=gated_server.connect, session_timeout=4)
    renewer = None
    try:
        admin.apply(parse_scheduled_ddl("CREATE SCHEDULED QUERY beat EVERY 1 SECOND"
                                        " AS SELECT 1"))
        lease_id = mgr.grab_lease([("db.t", "X")], duration_s=3)
        renewer = LeaseRenewer(mgr).start()
        assert wait_for(lambda: len(admin.executions("beat")) >= 2, timeout=30)
        gated_server.stop()        # every server down
        # an outage only once every client has seen it: each lost its connection
        assert wait_for(lambda: not (client.connected or admin_client.connected
                                     or mgr.client.connected), timeout=30)
        gated_server.start()       # back on the same port, same data
        back = int(time.time() * 1000)
        # the scheduler runs again without a restart ...
        assert wait_for(lambda: any(e.trigger_time > back and e.state == "FINISHED"
                                    for e in admin.executions("beat")), timeout=40)
        # ... and the renewer kept (or took up again) the lease
        assert wait_for(lambda: [x.lease_id for x in mgr.list_lease()] == [lease_id],
                        timeout=20)
        renewed = renewer.renewals
        # past the end the lease has now, on ZooKeeper's clock: only renewals keep it
        (lease,) = mgr.list_lease(include_expired=True)
        assert wait_for(lambda: mgr.leases.now_ms() > lease.end_ms, 30, step=0.1)
        assert wait_for(lambda: renewer.renewals > renewed, 30) and not renewer.lost
        assert wait_for(lambda: [x.lease_id for x in mgr.list_lease()] == [lease_id], 5)
    finally:
        if renewer is not None:
            renewer.stop()
        service.stop()
        for c in (client, admin_client):
            c.stop()
            c.close()
        mgr.close()


def test_a_release_during_an_outage_completes_when_the_session_returns(gated_server, root):
    """Released while ZooKeeper is down: no server can expire the session, which is alive
    again when the server returns, and so would its lock nodes be, held by a process that
    let go of them. The release goes through once the session is back (kazoo keeps an
    unsent request queued through the outage; a delete that gave up is retried by the
    manager on reconnect), and another client gets the lock."""
    mgr = LockManager(hosts=gated_server.connect, root=root, retries=0,
                      **RESTART_GRACE)
    other = None
    try:
        held = mgr.acquire([("outage.t", "X")])
        sid = mgr.session_id
        gated_server.stop()
        t0 = time.monotonic()
        held.release()  # waits out the outage
        assert time.monotonic() - t0 >= 5
        gated_server.start()
        assert wait_for(lambda: mgr.client.connected and mgr.session_id == sid, timeout=30)
        other = LockManager(hosts=gated_server.connect, root=root, retries=100,
                            retry_interval=0.1)
        assert other.acquire([("outage.t", "X")]).fencing_token > held.fencing_token
        assert mgr.session_id == sid  # the same session, still alive: its nodes were deleted
    finally:
        mgr.close()
        if other is not None:
            other.close()


def test_an_acquire_cut_off_by_an_outage_leaves_no_lock_behind(gated_server, root):
    """The server goes away in the middle of an acquire and stays away past the client's
    retries: the acquire fails clearly. Its create, still queued in the client, reaches
    the server when it returns, in a session that is still alive; the manager deletes
    what it made then, so nothing holds the object and another client gets it."""
    mgr = LockManager(hosts=gated_server.connect, root=root, retries=0,
                      **RESTART_GRACE)
    other = None
    try:
        mgr.acquire([("outage.u", "S")]).release()
        sid = mgr.session_id
        gated_server.stop()
        t0 = time.monotonic()
        with pytest.raises(ZooKeeperUnavailable):
            mgr.acquire([("outage.u", "X")])
        print("acquire failed after", round(time.monotonic() - t0, 1), "s")
        gated_server.start()
        assert wait_for(lambda: mgr.client.connected and mgr.session_id == sid, timeout=30)
        other = LockManager(hosts=gated_server.connect, root=root, retries=100,
                            retry_interval=0.1)
        other.acquire([("outage.u", "X")]).release()
        assert mgr.session_id == sid
        assert not other.show("outage.u")
    finally:
        mgr.close()
        if other is not None:
            other.close()
