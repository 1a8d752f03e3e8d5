"""Fenced commit: a Spark write whose locks were lost never commits.

zklock's committers check, in commitJob, that every lock node of the statement's
set still exists (CommitFence.java). The commit is held back just before that point
by the tests' own subclass of zklock's commit protocol (tests/held_commits.py), the
locks are lost meanwhile, and the commit must be refused: LockLost, the
table unchanged, no lock node left. A write whose locks are held commits through
the check, and a ZooKeeper that does not answer fails the commit, closed.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import diagnostics
import pytest
from conftest import lock_nodes, wait_for
from held_commits import AT_COMMIT, AT_SETUP, CONF, HeldWrite
from kazoo.exceptions import NoAuthError

from zklock import LockLost
from zklock.auth import Credentials
from zklock.spark import lock_error
from zklock.spark.protocol import Fence, Property
from zklock.testing import expire_session

#: How the engine marks its own statement's nodes (EngineGuard.ENGINE_HELD).
ENGINE_HELD = "zklock.engine.held"


def count(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def data_files(spark, table: str) -> list[str]:
    """The table's visible data files (Spark skips ``_``/``.`` paths, so do we)."""
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    root = Path(location.collect()[0].data_type.removeprefix("file:"))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and not any(part[0] in "_." for part in p.relative_to(root).parts))


def test_a_write_under_zklock_commits_through_the_check(make_locking, db, spark, root, zk):
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    locking = make_locking()

    def fence(x: int) -> str:
        return TaskContext.get().getLocalProperty(Property.FENCE_NODES) or ""
    locking.udf.register("fence_nodes", udf(fence, "string", useArrow=False))
    before = count(spark, f"{db}.dim")
    locking.sql(f"INSERT INTO {db}.dim SELECT 7, fence_nodes(1)")
    assert count(spark, f"{db}.dim") == before + 1
    nodes = spark.sql(f"SELECT name FROM {db}.dim WHERE id = 7").collect()[0].name.split("\n")
    assert len(nodes) == 2 and all(n.startswith(f"{root}/{db}") for n in nodes)
    assert {n.rsplit("/", 2)[-2] for n in nodes} == {db, "dim"}
    assert wait_for(lambda: lock_nodes(zk, root) == [])  # the release is not waited for
    assert spark.sparkContext.getLocalProperty(Property.FENCE_NODES) is None
    # the same committers without zklock's properties (a write not under zklock): no check
    spark.sql(f"INSERT INTO {db}.dim VALUES (8, 'plain')")
    assert count(spark, f"{db}.dim") == before + 2


def test_commit_is_refused_once_the_session_expired(make_locking, db, spark, zk_hosts, zk,
                                                     root, tmp_path):
    locking = make_locking(conf=CONF)
    before = (count(spark, f"{db}.dim"), data_files(spark, f"{db}.dim"))

    def write() -> None:
        locking.sql(f"INSERT INTO {db}.dim SELECT CAST(id AS INT), 'x' FROM range(20)")
    with HeldWrite(spark, tmp_path, write) as held:
        # every task is done, the job commit waits: nothing left for the cancel to stop
        assert lock_nodes(zk, root)
        expire_session(locking.manager.client, zk_hosts)
        assert wait_for(lambda: lock_nodes(zk, root) == [])
        error = held.release()
    assert isinstance(error, LockLost), error
    assert Fence.REFUSED in str(error) and "refused" in error.reason
    assert f"{db}.dim" in error.objects
    assert (count(spark, f"{db}.dim"), data_files(spark, f"{db}.dim")) == before
    assert wait_for(lambda: lock_nodes(zk, root) == [])
    assert wait_for(lambda: locking.manager.client.connected, timeout=20)
    locking.sql(f"INSERT INTO {db}.dim VALUES (9, 'nine')")  # and the session goes on
    assert count(spark, f"{db}.dim") == before[0] + 1


def test_commit_is_refused_when_a_lock_node_is_deleted_under_it(make_locking, db, spark, zk,
                                                                root, tmp_path):
    """Every task is done and the job commit is held back: the session's watch on the node
    tells it of the loss, but there is no job left to cancel. The check in the committer
    (here Hadoop's, for a CSV table) is what stops the commit."""
    locking = make_locking(conf=CONF)
    spark.sql(f"CREATE TABLE {db}.notes (id INT, note STRING) USING csv")
    spark.sql(f"INSERT INTO {db}.notes VALUES (1, 'kept')")
    rows = locking.createDataFrame([(2, "lost"), (3, "lost")], "id INT, note STRING")
    with HeldWrite(spark, tmp_path, lambda: rows.write.insertInto(f"{db}.notes")) as held:
        (mine,) = [n for n in lock_nodes(zk, root) if "/notes/write-" in n]
        zk.delete(mine)
        error = lock_error(held.release())  # a DataFrame write raises Spark's error
    assert isinstance(error, LockLost), error
    assert Fence.REFUSED in error.reason and "1 of 2 lock nodes gone" in error.reason
    assert [tuple(r) for r in spark.table(f"{db}.notes").collect()] == [(1, "kept")]
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=10)


def test_the_check_passes_on_an_acl_protected_root_under_a_chroot(make_locking, db, spark,
                                                                  zk_hosts, zk, root,
                                                                  tmp_path, monkeypatch):
    """The committers' ZooKeeper client has no credentials: exists() needs none."""
    user = tmp_path / "zklock.auth"
    user.write_text("pipelines:s3cret\n")
    monkeypatch.delenv("ZKLOCK_AUTH", raising=False)
    chroot = f"/fence-{uuid.uuid4().hex[:8]}"
    zk.create(chroot)
    locking = make_locking(conf=CONF, hosts=zk_hosts + chroot, auth_file=str(user),
                           acl_admin_digest=Credentials.parse("ops:x", "test").digest)
    before = count(spark, f"{db}.dim")
    locking.sql(f"INSERT INTO {db}.dim VALUES (5, 'five')")
    assert count(spark, f"{db}.dim") == before + 1
    # and it does look there: a deleted node is seen through the chroot and the ACL
    with HeldWrite(spark, tmp_path, lambda: locking.sql(
            f"INSERT INTO {db}.dim VALUES (6, 'six')")) as held:
        with pytest.raises(NoAuthError):  # closed to clients without the credentials
            zk.get_children(chroot + root)
        owner = locking.manager  # the pipelines identity may delete its own nodes
        (mine,) = [h for h in owner.show(f"{db}.dim", extended=True) if h.mode.value == "X"]
        owner.client.delete(mine.node)
        error = held.release()
    assert isinstance(error, LockLost) and Fence.REFUSED in error.reason, error
    assert count(spark, f"{db}.dim") == before + 1


@pytest.mark.parametrize("server", ["refusing", "silent"])
def test_an_unreachable_zookeeper_fails_closed(locking, db, spark, server):
    """Set by hand on a plain Spark write (the LockingSession only put zklock's committers
    in place): no ZooKeeper answers there, and the commit is refused, closed. A silent
    server (it accepts connections, never replies) is refused after the check's timeout."""
    sc = spark.sparkContext
    before = count(spark, f"{db}.dim")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        if server == "silent":
            silent.listen(8)
        sc.setLocalProperty(Property.FENCE_ZOOKEEPER, f"127.0.0.1:{silent.getsockname()[1]}")
        sc.setLocalProperty(Property.FENCE_NODES, "/nowhere/db/t/write-i000000000000000000000000-1")
        # as the engine marks its own statement's nodes (EnclosingLocks.ENGINE_HELD)
        sc.setLocalProperty(ENGINE_HELD, "by-hand")
        started = time.monotonic()
        try:
            with pytest.raises(Exception) as info:
                spark.sql(f"INSERT INTO {db}.dim VALUES (4, 'four')")
        finally:
            sc.setLocalProperty(Property.FENCE_ZOOKEEPER, None)
            sc.setLocalProperty(Property.FENCE_NODES, None)
            sc.setLocalProperty(ENGINE_HELD, None)
        elapsed = time.monotonic() - started
    expected = "did not answer within 5000 ms" if server == "silent" else "CONNECTIONLOSS"
    assert f"{Fence.REFUSED} (ZooKeeper at 127.0.0.1:" in str(info.value)
    assert expected in str(info.value)
    assert elapsed < 20
    assert count(spark, f"{db}.dim") == before


def test_a_loss_between_the_grant_and_the_first_job_never_commits(make_locking, db, spark, zk,
                                                                  root, tmp_path):
    """The command is granted its locks and held before it submits any job (at its job's
    setup); its lock node is deleted by another client, and the session learns of it while
    there is no job to cancel. Then the command goes on: its job is cancelled as it starts
    (LostJobs.java), or, if it gets that far, its commit is refused by the fence (held there,
    then let go). The statement fails with LockLost either way, and nothing it wrote is
    visible."""
    from zklock.observe.events import read_events

    events = tmp_path / "events.jsonl"
    locking = make_locking(conf=CONF, event_log=str(events))
    spark.sql(f"CREATE TABLE {db}.early (id INT) USING parquet")
    fence = tmp_path / "fence-hold"
    fence.write_text("held")
    spark._jvm.java.lang.System.setProperty(AT_COMMIT, str(fence))
    try:
        write = HeldWrite(spark, tmp_path, lambda: locking.sql(
            f"INSERT INTO {db}.early SELECT CAST(id AS INT) FROM range(0, 100, 1, 4)"),
            point=AT_SETUP)
        with write:
            (mine,) = [n for n in lock_nodes(zk, root) if "/early/write-" in n]
            zk.delete(mine)
            assert wait_for(lambda: events.exists() and any(  # the session knows of it
                e["event"] == "loss" for e in read_events([str(events)])), timeout=30)
            write.file.unlink()  # the command goes on, towards its job
            wait_for(lambda: not write.thread.is_alive()
                     or Path(f"{fence}.held").exists(), timeout=60)
            reached_fence = Path(f"{fence}.held").exists()
            fence.unlink()
            error = lock_error(write.release())
    finally:
        spark._jvm.java.lang.System.clearProperty(AT_COMMIT)
    assert isinstance(error, LockLost), error
    assert (Fence.REFUSED in str(error)) if reached_fence else ("cancelled" in str(error)), (
        reached_fence, str(error))
    assert count(spark, f"{db}.early") == 0 and data_files(spark, f"{db}.early") == []


def test_a_successful_write_logs_no_warning_of_zklocks_making(locking, db, spark):
    """Hadoop's FileOutputCommitter warns, each time one is made with its clean-up skipped,
    that this "can lead to unexpected behaviors": zklock's committers clean their own
    staging and need no such setting, so a write through them (six committers per INSERT:
    the driver's and each task's) logs nothing a bare Spark would not."""
    log = diagnostics.SPARK_LOG
    start = log.stat().st_size if log.exists() else 0
    locking.sql(f"CREATE TABLE {db}.quiet (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    locking.sql(f"CREATE TABLE {db}.quiet_csv (id INT) USING csv")
    locking.sql(f"INSERT INTO {db}.quiet VALUES (1, 'a'), (2, 'b')")
    locking.sql(f"INSERT OVERWRITE {db}.quiet PARTITION (ds = 'a') VALUES (3)")
    locking.sql(f"INSERT INTO {db}.quiet_csv VALUES (1), (2)")
    assert count(spark, f"{db}.quiet") == 2 and count(spark, f"{db}.quiet_csv") == 2
    with open(log, "rb") as f:
        f.seek(start)
        lines = f.read().decode(errors="replace").splitlines()
    ours = [ln for ln in lines if " WARN " in ln
            and any(k in ln for k in ("OutputCommitter", "CommitProtocol", "zklock"))]
    assert ours == [], ours
