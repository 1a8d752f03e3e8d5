"""LockingSession on a real SparkSession, real tables and a real ZooKeeper."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import Latch, lock_nodes, raises_lock_error, wait_for
from diagnostics import EVENT_LOG
from pyspark.errors import ParseException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zklock import LockLost, LockNotAcquired
from zklock.observe.events import read_events
from zklock.spark import LockingSession
from zklock.testing import expire_session


def count(spark, table: str, where: str = "true") -> int:
    spark.catalog.refreshTable(table)
    return spark.sql(f"SELECT count(*) AS n FROM {table} WHERE {where}").collect()[0].n


def test_wraps_the_session(locking, spark):
    assert locking.version == spark.version
    assert locking.catalog.currentDatabase() == spark.catalog.currentDatabase()
    assert locking.spark.sparkContext is spark.sparkContext  # a session of its own
    df = locking.sql("SELECT 1 AS x")
    assert isinstance(df, DataFrame)
    assert df.collect()[0].x == 1


def test_insert_denied_while_partition_is_held_and_table_unchanged(locking, make_manager, db,
                                                                   spark, zk, root):
    other = make_manager()
    before = count(spark, f"{db}.orders")
    with other.acquire([(f"{db}.orders/ds=2024-01-01/hr=1", "X")], query_id="backfill-7"):
        with raises_lock_error(LockNotAcquired, match="backfill-7"):
            locking.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=1)"
                        " VALUES (5, 5.0)")
        assert count(spark, f"{db}.orders") == before
        # another partition of the same table is free
        locking.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=2) VALUES (6, 6.0)")
    assert count(spark, f"{db}.orders") == before + 1
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


def test_command_holds_locks_for_exactly_the_call(locking, make_manager, db, spark, tmp_path):
    watcher = make_manager()
    seen = []
    latch = Latch(locking, tmp_path / "latch")  # X is held until the test has seen it
    sql = (f"INSERT INTO {db}.events PARTITION (ds='busy')"
           f" SELECT {latch.name}(CAST(id AS INT)) FROM range(6)")
    t = threading.Thread(target=locking.sql, args=(sql,))
    t.start()
    try:
        assert wait_for(lambda: bool(seen.extend(r for r in watcher.show(extended=True)
                                                 if r.mode.value == "X") or seen), 60), \
            "the statement's X lock did not show within 60 s"
    finally:
        latch.open()
        t.join()
    held = seen[0]
    assert held.object == f"{db}.events/ds=busy"
    assert held.data.query.startswith("INSERT INTO") and held.data.query_id.startswith("zklock-")
    assert held.data.app == locking.sparkContext.applicationId  # which Spark application
    assert wait_for(lambda: watcher.show() == [], timeout=30)


def test_reader_is_denied_during_insert_overwrite(make_locking, db, spark, tmp_path):
    writer, reader = make_locking(), make_locking()
    watcher = writer.manager
    client = reader.manager.client  # its ZooKeeper session opens now, before the race
    assert client.connected
    writer.sql(f"INSERT INTO {db}.events PARTITION (ds='a') VALUES (0)")
    latch = Latch(writer, tmp_path / "latch")  # X is held until both denials are in
    sql = (f"INSERT OVERWRITE {db}.events PARTITION (ds='a')"
           f" SELECT {latch.name}(CAST(id AS INT)) FROM range(8)")
    errors = []
    t = threading.Thread(target=lambda: _capture(errors, writer.sql, sql))
    t.start()
    try:
        assert wait_for(lambda: any(r.mode.value == "X" for r in watcher.show()), 60), \
            "the overwrite's X lock did not show within 60 s"
        with raises_lock_error(LockNotAcquired, match="held in X"):
            reader.sql(f"SELECT * FROM {db}.events WHERE ds = 'a'").collect()
        with raises_lock_error(LockNotAcquired):
            reader.table(f"{db}.events").count()  # an unpinned read locks the partitions it scans
    finally:
        latch.open()
        t.join()
    assert errors == [], [str(getattr(e, 'java_exception', e)) for e in errors]
    assert reader.sql(f"SELECT count(*) AS n FROM {db}.events WHERE ds = 'a'").collect()[0].n == 8


def _capture(errors: list, fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # recorded for the test thread
        errors.append(exc)


def test_lock_loss_cancels_the_job_and_leaves_the_table(make_locking, db, spark, zk_hosts, zk,
                                                        root, tmp_path):
    locking = make_locking()
    before = count(spark, f"{db}.dim")
    # its tasks wait for a latch that opens only after 120 s: the job ends sooner only if
    # it is cancelled
    latch = Latch(locking, tmp_path / "latch")
    sql = f"INSERT INTO {db}.dim SELECT {latch.name}(CAST(id AS INT)), 'x' FROM range(60)"

    def expire_when_held():
        if wait_for(lambda: bool(lock_nodes(zk, root)) and latch.reached(), 60):
            expire_session(locking.manager.client, zk_hosts)
    killer = threading.Thread(target=expire_when_held)
    killer.start()
    started = time.monotonic()
    try:
        with raises_lock_error(LockLost) as info:
            locking.sql(sql)
    finally:
        elapsed = time.monotonic() - started
        killer.join()
        latch.open()
    assert f"{db}.dim" in info.value.objects
    assert elapsed < 90, f"the job was not cancelled ({elapsed:.1f} s)"
    assert count(spark, f"{db}.dim") == before
    # the session recovers: kazoo opens a new ZooKeeper session
    assert wait_for(lambda: locking.manager.client.connected, timeout=20)
    locking.sql(f"INSERT INTO {db}.dim VALUES (9, 'nine')")
    assert count(spark, f"{db}.dim") == before + 1


def test_a_lock_node_deleted_by_another_client_cancels_the_statement(make_locking, db, spark,
                                                                     zk, root, tmp_path):
    """An operator's zkCli, Hive's clean-up or a force-drop deletes the table's lock node
    while the statement runs: the session learns it (a watch), cancels the job and raises
    LockLost, and nothing it wrote is published."""
    locking = make_locking()
    before = count(spark, f"{db}.dim")
    latch = Latch(locking, tmp_path / "latch")  # opens after 120 s: only a cancel ends it sooner
    sql = f"INSERT INTO {db}.dim SELECT {latch.name}(CAST(id AS INT)), 'x' FROM range(60)"

    def delete_when_held():
        if wait_for(lambda: any("/dim/write-" in n for n in lock_nodes(zk, root))
                    and latch.reached(), 60):
            zk.delete(next(n for n in lock_nodes(zk, root) if "/dim/write-" in n))
    killer = threading.Thread(target=delete_when_held)
    killer.start()
    started = time.monotonic()
    try:
        with raises_lock_error(LockLost, match="deleted by another client") as info:
            locking.sql(sql)
    finally:
        elapsed = time.monotonic() - started
        killer.join()
        latch.open()
    assert f"{db}.dim" in info.value.objects
    assert elapsed < 90, f"the job was not cancelled ({elapsed:.1f} s)"
    assert count(spark, f"{db}.dim") == before
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=10)


def test_dataframe_actions_lock_and_derived_frames_too(locking, make_manager, db):
    other = make_manager()
    df = locking.table(f"{db}.orders")
    derived = [
        df.filter(F.col("ds") == "2024-01-01"),
        df.groupBy("ds").agg(F.sum("amt").alias("total")),
        df.join(locking.read.table(f"{db}.dim"), "id"),
        df.na.fill(0),
        locking.sql(f"SELECT * FROM {db}.orders"),
    ]
    assert all(isinstance(d, DataFrame) for d in derived)
    with other.acquire([(f"{db}.orders/ds=2024-01-01/hr=1", "X")]):
        for d in derived:
            with raises_lock_error(LockNotAcquired):
                d.collect()
        with raises_lock_error(LockNotAcquired):
            df.count()
        with raises_lock_error(LockNotAcquired):
            list(df.toLocalIterator())
        # a read pinned to another partition does not conflict
        assert df.filter("ds = '2024-01-02'").count() == 1
    assert [len(d.collect()) > 0 for d in derived] == [True] * 5
    assert wait_for(lambda: other.show() == [], timeout=30)


def test_writers_lock_their_target(locking, make_manager, db, spark):
    other = make_manager()
    src = locking.table(f"{db}.staging")
    with other.acquire([(f"{db}.dim", "S")]):
        with raises_lock_error(LockNotAcquired):
            src.select("id", F.lit("n").alias("name")).write.insertInto(f"{db}.dim")
        with raises_lock_error(LockNotAcquired):  # on 4.0 locked whole (it drops first)
            src.write.mode("overwrite").saveAsTable(f"{db}.dim")
    with other.acquire([(f"{db}.staging", "X")]):
        with raises_lock_error(LockNotAcquired):  # the sources are read under S
            src.write.saveAsTable(f"{db}.copy")
    src.select("id", F.lit("n").alias("name")).write.insertInto(f"{db}.dim")
    src.writeTo(f"{db}.copy2").create()
    assert count(spark, f"{db}.dim") == 3
    assert count(spark, f"{db}.copy2") == 1


def test_fencing_token_is_a_local_property_of_the_jobs(locking, db, spark):
    from pyspark import TaskContext

    @F.udf("string")
    def token(_):
        return TaskContext.get().getLocalProperty("zklock.locks.fencing.token")

    rows = locking.table(f"{db}.dim").select(token("id").alias("t")).collect()
    tokens = {int(r.t) for r in rows}
    assert len(tokens) == 1 and tokens.pop() > 0
    assert spark.sparkContext.getLocalProperty("zklock.locks.fencing.token") is None


def test_show_locks_in_all_forms_and_sysdb_locks(locking, make_manager, db):
    other = make_manager()
    with other.acquire([(f"{db}.orders/ds=2024-01-01/hr=1", "X"), (f"{db}.dim", "S")],
                       query_id="q-42", query="INSERT INTO orders ..."):
        everything = locking.sql("SHOW LOCKS").collect()
        assert {(r.object, r.mode) for r in everything} >= {
            (db, "S"), (f"{db}.orders", "S"), (f"{db}.orders/ds=2024-01-01/hr=1", "X"),
            (f"{db}.dim", "S")}
        table = locking.sql(f"SHOW LOCKS {db}.orders").collect()
        assert [(r.object, r.mode) for r in table] == [
            (f"{db}.orders", "S"), (f"{db}.orders/ds=2024-01-01", "S"),
            (f"{db}.orders/ds=2024-01-01/hr=1", "X")]
        part = locking.sql(f"SHOW LOCKS {db}.orders PARTITION (ds='2024-01-01', hr=1) EXTENDED")
        (row,) = part.collect()
        assert (row.object, row.mode, row.query_id, row.lock_type) == (
            f"{db}.orders/ds=2024-01-01/hr=1", "X", "q-42", "implicit")
        assert row.query == "INSERT INTO orders ..." and row.acquired_at is not None
        assert set(part.columns) >= {"object", "mode", "user", "host", "query_id", "query",
                                     "acquired_at", "lock_type"}
        dbrows = locking.sql(f"SHOW LOCKS DATABASE {db}").collect()
        assert len(dbrows) == 5
        view = locking.sql(f"SELECT object, mode, query_id FROM sysdb.locks"
                           f" WHERE object LIKE '{db}.orders%' ORDER BY object").collect()
        assert [r.query_id for r in view] == ["q-42"] * 3
        assert locking.table("sysdb.locks").columns == part.columns
    assert locking.sql(f"SHOW LOCKS {db}.orders").collect() == []


@pytest.mark.parametrize("sql", [
    "SHOW LOCKS db.t PARTITION (ds=",
    "SHOW LOCKS a.b.c.d",
    "SHOW LOCKS db.t PARTITION ds='1'",
    "SHOW LOCKS 'x'",
    "SET zklock.nonsense=1",
    "SET zklock.lock.retries=many",
])
def test_bad_zklock_sql_gets_a_clear_error(locking, sql):
    from zklock import InvalidArguments

    with pytest.raises(InvalidArguments):
        locking.sql(sql)


def test_bad_sql_raises_sparks_error_and_leaves_nothing(locking, db, zk, root):
    with pytest.raises(ParseException):
        locking.sql(f"INSERT INTO {db}.dim VALUE (1, 'x')")
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        locking.sql(f"INSERT INTO {db}.nope VALUES (1)")
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


def test_set_zklock_support_concurrency_false_turns_locking_off(make_locking, make_manager, db,
                                                                spark):
    locking = make_locking()
    other = make_manager()
    with other.acquire([(f"{db}.dim", "X")]):
        with raises_lock_error(LockNotAcquired):
            locking.sql(f"INSERT INTO {db}.dim VALUES (7, 'seven')")
        (row,) = locking.sql("SET zklock.support.concurrency=false").collect()
        assert (row.key, row.value) == ("zklock.support.concurrency", "false")
        locking.sql(f"INSERT INTO {db}.dim VALUES (7, 'seven')")
        locking.sql("SET zklock.support.concurrency=true")
        with raises_lock_error(LockNotAcquired):
            locking.table(f"{db}.dim").count()
    assert count(spark, f"{db}.dim") == 3


def test_settings_come_from_spark_conf(spark, zk_hosts, root):
    keys = {"spark.zklock.zookeeper.quorum": zk_hosts, "spark.zklock.root": root,
            "spark.zklock.lock.retries": "3", "spark.zklock.lock.retryInterval": "250ms"}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        session = LockingSession(spark)
        try:
            assert session.settings.hosts == zk_hosts and session.settings.root == root
            assert session.settings.retries == 3 and session.settings.retry_interval == 0.25
            assert session.manager.root == root
        finally:
            session.close()
        explicit = LockingSession(spark, retries=0)
        assert explicit.settings.retries == 0
        explicit.close()
    finally:
        for k in keys:
            spark.conf.unset(k)


def test_work_inside_a_local_iterator_loop_still_locks(locking, make_manager, db):
    other = make_manager()
    with other.acquire([(f"{db}.dim", "S")]):
        rows = locking.table(f"{db}.staging").toLocalIterator()
        next(rows)
        with raises_lock_error(LockNotAcquired):  # the loop body is not inside the iterator's lock
            locking.sql(f"INSERT INTO {db}.dim VALUES (8, 'eight')")
        list(rows)


def test_path_writes_lock_their_sources(locking, make_manager, db, tmp_path):
    other = make_manager()
    src = locking.table(f"{db}.staging")
    with other.acquire([(f"{db}.staging", "X")]):
        with raises_lock_error(LockNotAcquired):
            src.write.parquet(str(tmp_path / "out"))
    src.write.parquet(str(tmp_path / "out"))


def test_if_not_exists_on_an_existing_object_takes_s_and_does_not_wait(locking, make_manager,
                                                                        db, spark):
    """The usual "make sure it exists" at a job's start: S while readers and writers of the
    table hold it, X only when it will create something."""
    create_t = f"CREATE TABLE IF NOT EXISTS {db}.dim (id INT, name STRING) USING parquet"
    create_db = f"CREATE DATABASE IF NOT EXISTS {db}"
    assert (f"{db}.dim", "S") in locking.explain_locks(create_t).rows()
    assert locking.explain_locks(create_db).rows() == [(db, "S")]
    assert (f"{db}.fresh", "X") in locking.explain_locks(
        f"CREATE TABLE IF NOT EXISTS {db}.fresh (id INT) USING parquet").rows()
    assert locking.explain_locks(f"CREATE DATABASE IF NOT EXISTS {db}_fresh").rows() == [
        (f"{db}_fresh", "X")]
    other = make_manager()
    with other.acquire([(f"{db}.dim", "S")], query_id="reader"):
        locking.sql(create_t)  # does not wait for the reader
        locking.sql(create_db)


def test_if_not_exists_planned_on_a_table_dropped_since_takes_x(make_locking, make_manager,
                                                                 db, spark):
    """Fail closed, in Spark's engine: a CREATE ... IF NOT EXISTS planned in S while the table
    existed, dropped while it waited for the grant, is planned again under its locks; it now
    needs X, and asks for it before the create runs."""
    sql = f"CREATE TABLE IF NOT EXISTS {db}.staging (id INT, amt DOUBLE, hr INT) USING parquet"
    locking = make_locking(retries=None, timeout=120)
    assert (f"{db}.staging", "S") in locking.explain_locks(sql).rows()
    other = make_manager()
    errors: list = []

    def events() -> list[dict]:
        return [e for e in read_events([str(EVENT_LOG)])
                if e.get("query_id") not in (None, "dropper")
                and [f"{db}.staging", "S"] in e.get("locks", [])]
    with other.acquire([(f"{db}.staging", "X")], query_id="dropper"):
        t = threading.Thread(target=lambda: _capture(errors, locking.sql, sql))
        t.start()
        assert wait_for(lambda: any(e["event"] == "denial" for e in events()), 60)
        spark.sql(f"DROP TABLE {db}.staging")  # the plain session locks on the engine's root
    t.join(120)
    assert errors == [] and spark.catalog.tableExists(f"{db}.staging")
    grants = [e for e in read_events([str(EVENT_LOG)]) if e["event"] == "grant"
              and [f"{db}.staging", "X"] in e["locks"] and e["query_id"] != "dropper"]
    assert grants, "the create did not ask for X once the table was gone"



def test_a_sessions_own_explicit_locks_cover_its_statements(make_locking, make_manager, db,
                                                            spark, zk, root):
    """LOCK TABLE ... EXCLUSIVE, then the session reads and writes the table: its statements
    do not wait for its own lease (as a Hive session's do not for its own explicit locks);
    another session's still do, and so does this one's once the lease is gone."""
    locking, other = make_locking(), make_locking()
    table = f"{db}.dim"
    locking.sql(f"LOCK TABLE {table} EXCLUSIVE FOR 10 MINUTES")
    rows = locking.table(table).count()  # a read: S on dim, under its own X lease
    locking.sql(f"INSERT INTO {table} VALUES (31, 'own')")  # a write: X on dim
    with locking.holding(locking.table(table)):
        assert locking.table(table).count() == rows + 1
    with raises_lock_error(LockNotAcquired, match="lease"):
        other.table(table).count()
    with raises_lock_error(LockNotAcquired):
        make_manager().acquire([(table, "S")], query_id="another-manager")
    locking.sql(f"UNLOCK TABLE {table}")
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)
    with make_manager().acquire([(table, "X")], query_id="after-the-lease"):
        with raises_lock_error(LockNotAcquired, match="after-the-lease"):
            locking.table(table).count()  # its lease is gone: it waits like anyone


def test_one_locking_session_per_spark_session(make_locking, zk_hosts, root):
    """A LockingSession is the lock client of its SparkSession's statements: a second one
    over the same SparkSession is refused (it would silently take the first one's
    statements); once the first is closed, another may wrap it."""
    from zklock.errors import InvalidArguments

    first = make_locking()
    with pytest.raises(InvalidArguments, match="wrapped by a LockingSession already"):
        LockingSession(first.spark, hosts=zk_hosts, root=root)
    first.close()
    again = LockingSession(first.spark, hosts=zk_hosts, root=root)
    again.close()
