"""zklock's engine extension: every command Spark runs is locked, whatever API sent it.

The test session's SparkSession is built with zklock.spark.configure (the extension is in
spark.sql.extensions) and its engine lock client takes locks under conftest.ENGINE_ROOT.
Here a test makes its own manager the engine's lock client for a while (``enforce``), on the
test's root, where another holder keeps X on the table: each write path is denied after its
retries and the table is unchanged; without the holder each runs and takes exactly the
locks EXPLAIN LOCKS shows.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest
from conftest import PYTHON, Latch, lock_nodes, raises_lock_error, spark_line, wait_for
from pyspark.sql import SparkSession

from zklock.errors import LockNotAcquired, UnsupportedStatement
from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.spark import enforce, lock_error
from zklock.spark.lock_client import engine_of

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@contextmanager
def no_lock_client(spark):
    """The application's JVM without a lock client for the block (as one that never called
    enforce() and made no LockingSession)."""
    engine = engine_of(spark)
    previous = engine.install(None, None, None)
    try:
        yield
    finally:
        engine.install(previous, None, None)


def count(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def message(exc: BaseException) -> str:
    """The first line of what the engine refused with (a Java exception through py4j)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    return text.strip().splitlines()[0]


def helper_library_write(table: str) -> None:
    """What a helper library does: its own getOrCreate(), then a write."""
    SparkSession.builder.getOrCreate().createDataFrame([(9, "lib")], "id INT, name STRING") \
        .write.insertInto(table)


def pandas_on_spark_write(table: str) -> None:
    import pyspark.pandas as ps

    if spark_line() >= (4, 0):  # Spark 4.0 turns ANSI on by default; 3.5 has no such option
        ps.set_option("compute.fail_on_ansi_mode", False)
    ps.DataFrame({"id": [9], "name": ["pandas"]}).to_table(table, mode="append")


def write_paths(spark):
    """Every way a pipeline writes outside a LockingSession: (label, write of ``table``)."""
    return [
        ("plain session", lambda t: spark.sql(f"INSERT INTO {t} VALUES (9, 'plain')")),
        ("SparkSession.active()",
         lambda t: SparkSession.active().sql(f"INSERT INTO {t} VALUES (9, 'active')")),
        ("a helper's own getOrCreate()", helper_library_write),
        ("pandas-on-Spark", pandas_on_spark_write),
        ("SparkSession(sc)",
         lambda t: SparkSession(spark.sparkContext).sql(f"INSERT INTO {t} VALUES (9, 'sc')")),
    ]


def test_enforce_builds_its_manager_from_the_applications_spark_conf(spark, db, zk_hosts,
                                                                      root, make_manager):
    """``enforce(spark)`` with no manager reads ``spark.zklock.*`` from the application's
    conf, as a LockingSession does: here its quorum, root and retries."""
    conf = {"spark.zklock.zookeeper.quorum": zk_hosts, "spark.zklock.root": root,
            "spark.zklock.lock.retries": "0"}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        client = enforce(spark)
    finally:
        for key in conf:
            spark.conf.unset(key)
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(f"{db}.dim"), Mode.EXCLUSIVE)])
    try:
        assert client.manager.root == root and client.manager.settings.retries == 0
        with pytest.raises(Exception) as caught:
            spark.sql(f"INSERT INTO {db}.dim SELECT * FROM {db}.dim")
        assert "lock not acquired" in message(caught.value)
    finally:
        held.release()
        client.close()
        client.manager.close()


def test_every_write_path_is_denied_while_another_holds_x(spark, db, make_manager):
    table = f"{db}.dim"
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(table), Mode.EXCLUSIVE)], query_id="holder")
    before = count(spark, table)
    with enforce(spark, make_manager(retries=1, retry_interval=0.05)):
        for label, write in write_paths(spark):
            with pytest.raises(Exception) as caught:
                write(table)
            text = message(caught.value)
            assert "lock not acquired" in text and "held in X" in text, (label, text)
            assert "query holder" in text, (label, text)
    held.release()
    assert count(spark, table) == before


def table_location(spark, table: str) -> str:
    return spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where(
        "col_name = 'Location'").collect()[0].data_type


def more_write_paths(spark, table: str):
    """What a demanding user tries next: every one is a write of ``table``."""
    rows = spark.createDataFrame([(9, "more")], "id INT, name STRING")
    location = table_location(spark, table)
    # Spark 4.0 drops an existing table in the catalog before saveAsTable's overwrite runs
    # any command, where no engine can lock it (docs/spark.md, "Spark versions")
    overwrite = [("saveAsTable overwrite",
                  lambda: rows.write.mode("overwrite").saveAsTable(table))]
    return [
        *(overwrite if spark_line() >= (4, 1) else []),
        ("parquet files into the table's directory",
         lambda: rows.write.mode("append").parquet(location)),
        *([("a SQL script",
            lambda: spark.sql(f"BEGIN INSERT INTO {table} VALUES (9, 's'); END"))]
          if spark_line() >= (4, 1) else []),
        ("TRUNCATE", lambda: spark.sql(f"TRUNCATE TABLE {table}")),
        ("ALTER TABLE", lambda: spark.sql(f"ALTER TABLE {table} ADD COLUMNS (note STRING)")),
        ("CREATE OR REPLACE VIEW of it", lambda: spark.sql(
            f"CREATE OR REPLACE VIEW {table} AS SELECT 1 AS id")),
        ("catalog.createTable over its path",
         lambda: spark.catalog.createTable(f"{table}_twin", path=location)),
    ]


def test_more_write_paths_are_denied_too(spark, db, make_manager):
    table = f"{db}.dim"
    held = make_manager().acquire([(LockObject.parse(table), Mode.EXCLUSIVE)],
                                  query_id="holder")
    before = count(spark, table)
    with enforce(spark, make_manager()):
        for label, write in more_write_paths(spark, table):
            with pytest.raises(Exception) as caught:
                write()
            text = message(caught.value)
            assert "lock not acquired" in text and "query holder" in text, (label, text)
    held.release()
    assert count(spark, table) == before


def test_a_locking_session_and_the_plain_session_never_write_at_once(
        spark, db, make_locking, make_manager, tmp_path):
    """Two writers of one partition, in two threads: one through a LockingSession, one
    through the plain session (locked by the engine). Each row a write produces records when
    it was written; the writes' rows never interleave."""
    marks = str(tmp_path / "marks")
    # each waits out the other's whole write: up to 2 minutes, for a loaded machine
    locking = make_locking(retries=6000, retry_interval=0.02)
    for session in (spark, locking):
        session.udf.register("zk_mark", lambda who, i: (open(marks, "a").write(
            f"{who} {time.time():.6f}\n"), i)[1], "bigint")
    insert = f"INSERT INTO {db}.events PARTITION (ds='both') SELECT zk_mark('{{}}', id) FROM" \
             " range(0, 6, 1, 2)"
    errors = []

    def writer(run) -> None:
        try:
            for _ in range(3):
                run()
        except Exception as exc:  # reported below
            errors.append(exc)

    with enforce(spark, make_manager(retries=6000, retry_interval=0.02)):
        threads = [threading.Thread(target=writer, args=(lambda: locking.sql(
                       insert.format("session")),)),
                   threading.Thread(target=writer, args=(lambda: spark.sql(
                       insert.format("plain")),))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    with open(marks) as f:
        order = [line.split()[0] for line in sorted(f, key=lambda ln: float(ln.split()[1]))]
    runs = [len(list(group)) for _, group in itertools.groupby(order)]
    assert sorted(set(order)) == ["plain", "session"] and len(order) == 36
    assert all(n % 6 == 0 for n in runs), order  # whole writes, one after the other


def grants(path) -> list[list[list[str]]]:
    with open(path) as f:
        return [e["locks"] for e in map(json.loads, f) if e["event"] == "grant"]


def test_without_contention_each_path_takes_the_locks_explain_locks_shows(
        spark, db, make_manager, make_locking, tmp_path):
    table = f"{db}.dim"
    log = tmp_path / "events.jsonl"
    manager = make_manager(event_log=str(log))
    expected = [list(r) for r in make_locking().explain_locks(
        f"INSERT INTO {table} VALUES (9, 'x')").rows()]
    before = count(spark, table)
    with enforce(spark, manager):
        for _label, write in write_paths(spark):
            write(table)
    manager.events.flush()
    taken = grants(log)
    assert len(taken) == len(write_paths(spark))
    for locks in taken:
        assert locks == expected
    assert count(spark, table) == before + len(taken)


def test_sql_commands_take_what_explain_locks_shows(spark, db, make_manager, make_locking,
                                                     tmp_path):
    log = tmp_path / "events.jsonl"
    manager = make_manager(event_log=str(log))
    statements = [
        f"INSERT INTO {db}.orders PARTITION (ds='2024-03-01', hr=2) SELECT id, amt FROM"
        f" {db}.staging",
        f"CREATE TABLE {db}.copy AS SELECT * FROM {db}.dim",
        f"INSERT INTO {db}.dim SELECT id, name FROM {db}.day1",  # a permanent view
        f"INSERT INTO {db}.copy SELECT * FROM {db}.dim WHERE id IN"
        f" (SELECT id FROM {db}.staging)",  # a subquery
        f"CREATE OR REPLACE VIEW {db}.day2 AS SELECT * FROM {db}.dim",
        f"ALTER TABLE {db}.orders ADD PARTITION (ds='2024-03-02', hr=1)",
        f"TRUNCATE TABLE {db}.staging",
        f"DROP TABLE {db}.copy",
    ]
    locking = make_locking()
    expected = []
    with enforce(spark, manager):
        for sql in statements:
            expected.append([list(r) for r in locking.explain_locks(sql).rows()])
            spark.sql(sql)
    manager.events.flush()
    assert grants(log) == expected


def test_a_command_without_a_lock_client_is_refused_in_one_line(spark, db):
    table = f"{db}.dim"
    before = count(spark, table)
    with no_lock_client(spark):
        with pytest.raises(Exception) as caught:
            spark.sql(f"INSERT INTO {table} VALUES (9, 'x')")
    text = message(caught.value)
    assert text.startswith(f"zklock: refused InsertIntoHadoopFsRelationCommand on {table}:")
    assert "no lock client runs in this process" in text
    assert count(spark, table) == before


def test_a_persistent_view_is_locked_and_a_temporary_one_is_not_however_written(spark, db):
    """Spark analyzes both into one command; the engine tells them apart by the statement as
    written (on Spark 3.5, by parsing its text again: comments, spaces and a final ';'
    around it change nothing)."""
    with no_lock_client(spark):
        with pytest.raises(Exception) as caught:
            spark.sql(f"  -- the day's view\n CREATE OR REPLACE VIEW {db}.v9 AS SELECT 1 AS a ;")
        assert message(caught.value).startswith(f"zklock: refused CreateViewCommand on {db}.v9")
        spark.sql("/* scratch */ CREATE OR REPLACE TEMPORARY VIEW tv9 AS SELECT 1 AS a;")
    assert not spark.catalog.tableExists(f"{db}.v9")
    assert spark.table("tv9").count() == 1
    if spark_line() >= (4, 0):  # SQL functions came with 4.0, which analyses their bodies in
        # the calling statement's context
        spark.sql(f"CREATE OR REPLACE FUNCTION {db}.f9() RETURNS INT RETURN 1")
        with no_lock_client(spark):
            with pytest.raises(Exception) as caught:
                spark.sql(f"CREATE OR REPLACE VIEW {db}.v10 AS SELECT {db}.f9() AS a")
            assert "needs locks" in message(caught.value)
        assert not spark.catalog.tableExists(f"{db}.v10")


def test_refuse_mode_refuses_commands_outside_a_locking_session(spark, db, make_locking):
    table = f"{db}.dim"
    before = count(spark, table)
    locking = make_locking()
    spark.conf.set("spark.zklock.engine.mode", "refuse")
    try:
        with pytest.raises(Exception) as caught:
            spark.range(1).selectExpr("CAST(id AS INT) AS id", "'r' AS name") \
                .write.insertInto(table)
        assert "spark.zklock.engine.mode=refuse" in message(caught.value)
        locking.sql(f"INSERT INTO {table} VALUES (10, 'wrapped')")  # its locks cover it
        locking.createDataFrame([(11, "its writer")], "id INT, name STRING") \
            .write.insertInto(table)  # the session's own write: locked by its manager
    finally:
        spark.conf.unset("spark.zklock.engine.mode")
    assert count(spark, table) == before + 2


def test_what_locks_nothing_needs_no_lock_client(spark, db, tmp_path):
    """Session commands, and files written outside every table, run as they are (a read of
    a table needs its locks: test_engine_reads.py)."""
    with no_lock_client(spark):
        spark.sql("SET spark.sql.shuffle.partitions=2")
        assert spark.sql(f"SHOW TABLES IN {db}").count() > 0
        spark.range(3).write.parquet(str(tmp_path / "out"))
        spark.sql(f"CREATE TEMPORARY VIEW engine_tv AS SELECT * FROM {db}.dim")
        spark.catalog.dropTempView("engine_tv")
    assert spark.read.parquet(str(tmp_path / "out")).count() == 3


def test_a_statement_inside_a_holding_block_whose_nodes_are_gone_does_not_run(
        spark, db, make_locking, zk, root):
    """The engine checks, as the fenced commit does, that a block's lock nodes still exist
    and cover a statement run inside it: here another client removes them in the block."""
    from zklock.errors import LockLost

    table = f"{db}.dim"
    locking = make_locking()
    df = locking.table(table)
    rows = count(spark, table)  # the plain session: not inside the block (its thread's)
    # the block itself ends with the loss: its locks went while it ran
    with pytest.raises(LockLost, match="deleted by another client"):
        with locking.holding(df) as held:
            with raises_lock_error(UnsupportedStatement, match="do not cover"):
                locking.sql(f"INSERT INTO {table} VALUES (11, 'not covered')")  # S is not X
            assert df.count() == rows  # covered: nothing more is taken
            for path in held.node_paths:
                zk.delete(path)
            assert wait_for(lambda: not held.is_valid, timeout=30)  # the session learns it
            with raises_lock_error(LockLost):
                df.count()  # the engine checks the block's nodes: gone
    assert lock_nodes(zk, root) == []


def test_denial_message_is_one_line_and_names_the_holder(spark, db, make_manager):
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(f"{db}.orders"), Mode.SHARED)], query_id="reader")
    try:
        with enforce(spark, make_manager()), pytest.raises(Exception) as caught:
            spark.sql(f"DROP TABLE {db}.orders")
        assert "\n" not in message(caught.value).strip()
        assert "query reader" in message(caught.value)
        assert not isinstance(caught.value, LockNotAcquired)  # Spark's error, zklock's words
    finally:
        held.release()


def test_a_plain_session_gets_typed_errors(spark, db, make_manager):
    """The engine's refusal is a Spark QueryExecutionException whose condition names the
    outcome, which PySpark converts: never a raw Py4JJavaError."""
    from pyspark.errors import QueryExecutionException

    holder = make_manager()
    with holder.acquire([(f"{db}.dim", "X")], query_id="typed"):
        with enforce(spark, make_manager()), pytest.raises(QueryExecutionException) as caught:
            spark.table(f"{db}.dim").collect()
    condition = getattr(caught.value, "getCondition", None) or caught.value.getErrorClass
    assert condition() == "ZKLOCK_LOCK_DENIED"  # PySpark 3.5 names it getErrorClass
    assert caught.value.getSqlState() == "55P03"
    assert isinstance(lock_error(caught.value), LockNotAcquired)


def test_an_rdd_save_into_a_tables_files_is_refused(spark, db, tmp_path):
    """RDD saves never reach the SQL engine; zklock's committer refuses one into a catalog
    table's directory (it would write the table without its X lock). Elsewhere it commits."""
    table = f"{db}.dim"
    before = count(spark, table)
    rdd = spark.sparkContext.parallelize(["x"], 1)
    with pytest.raises(Exception) as caught:
        rdd.saveAsTextFile(table_location(spark, table) + "/rdd-out")
    assert "zklock: refused an RDD save to" in message_anywhere(caught.value)
    assert f"the files of {table} without its X lock" in message_anywhere(caught.value)
    rdd.saveAsTextFile(str(tmp_path / "rdd-out"))
    assert (tmp_path / "rdd-out" / "_SUCCESS").exists()
    assert count(spark, table) == before


def message_anywhere(exc: BaseException) -> str:
    """The messages of a Java exception and its causes (Spark wraps a failed job commit)."""
    java = getattr(exc, "java_exception", None)
    out = []
    while java is not None and len(out) < 10:
        out.append(str(java.getMessage()))
        java = java.getCause()
    return "\n".join(out) or str(exc)


def test_engine_locks_are_seen_and_lost_as_a_wrappers_are(spark, db, make_manager, zk,
                                                            tmp_path):
    """While a plain-session INSERT runs, its locks show with the statement and the user;
    when another client deletes its lock node, its Spark jobs are cancelled and the command
    fails with the loss, and nothing it wrote becomes visible."""
    from conftest import wait_for

    table = f"{db}.events"
    # its task waits on a latch opened only after the command has ended: the job is still
    # running when the node is deleted, however slowly this machine runs the test
    latch = Latch(spark, tmp_path / "latch")
    insert = (f"INSERT INTO {table} PARTITION (ds='slow') SELECT {latch.name}(CAST(id AS INT))"
              " FROM range(0, 40, 1, 1)")
    manager = make_manager(user="etl-user")
    before = count(spark, table)
    failure = []

    def run() -> None:
        try:
            spark.sql(insert)
        except Exception as exc:  # expected: the locks are lost
            failure.append(exc)

    with enforce(spark, manager):
        writer = threading.Thread(target=run)
        writer.start()
        try:
            shown = []
            assert wait_for(lambda: shown.extend(r for r in manager.show(table, extended=True)
                                                 if r.mode is Mode.EXCLUSIVE) or shown,
                            timeout=60), "the INSERT's X lock did not show within 60 s"
            held = shown[0]
            assert held.object == f"{table}/ds=slow" and held.data.user == "etl-user"
            assert held.data.query == insert and held.data.query_id.startswith("zklock-")
            assert held.data.app == spark.sparkContext.applicationId
            # while its job runs (a task has reached the latch): a loss before the job is
            # submitted is the commit fence's to catch, not a cancel's
            assert wait_for(latch.reached, 60), "the INSERT's task did not start within 60 s"
            zk.delete(held.node)  # another client removes it: the lock is lost
            writer.join(timeout=90)
        finally:
            latch.open()
            writer.join(timeout=60)
    assert failure and "zklock: locks lost while" in message(failure[0])
    assert "its Spark jobs were cancelled" in message(failure[0])
    assert count(spark, table) == before


def test_a_commands_release_comes_after_it_returns_and_before_this_processs_next_request(
        spark, db, make_manager, zk, root) -> None:
    """A command that completed with its nodes in place returns before its release
    (Releases.java): the release goes to the lock client a moment later, or with its next
    acquire. A request this process makes right after (the same manager's acquire, another
    manager's, a listing) first lets it go: none ever meets the command's own locks."""
    table = f"{db}.events"
    manager, other = make_manager(), make_manager()
    before = count(spark, table)
    totals = lambda: json.loads(str(engine_of(spark).lockTotals()))  # noqa: E731
    start = totals()
    with enforce(spark, manager):
        for i in range(5):
            spark.sql(f"INSERT INTO {table} PARTITION (ds='r{i}') VALUES (1)")
            assert manager.show(table) == []  # listed after the release, never before
            spark.sql(f"INSERT INTO {table} PARTITION (ds='r{i}') VALUES (2)")
            other.acquire([(table, "X")]).release()  # retries=0: a lingering lock would deny
            spark.sql(f"INSERT INTO {table} PARTITION (ds='r{i}') VALUES (3)")
            manager.acquire([(table, "X")]).release()
            spark.sql(f"INSERT INTO {table} PARTITION (ds='r{i}') VALUES (4)")
            spark.sql(f"INSERT INTO {table} PARTITION (ds='r{i}') VALUES (5)")  # its
            # grant carried the previous one's release: no denial by its own predecessor
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)
    assert count(spark, table) == before + 25
    # Spark's metrics system says so too: every command's end was released after it returned
    end = totals()
    ended = end["statementEnd"] - start.get("statementEnd", 0)
    assert ended >= 25, (start, end)
    assert end["releasesAfterReturn"] - start.get("releasesAfterReturn", 0) == ended, (start, end)


def test_a_failing_command_releases_its_locks(spark, db, make_manager, zk, root):
    from conftest import lock_nodes, wait_for

    spark.udf.register("zk_fail", lambda i: i // 0, "bigint")
    with enforce(spark, make_manager()):
        with pytest.raises(Exception, match="nothing it wrote is in the table"):
            spark.sql(f"INSERT INTO {db}.events PARTITION (ds='f') SELECT zk_fail(id) FROM"
                      " range(1)")
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


def test_a_failed_write_is_typed_on_every_api(spark, db, make_manager, make_locking):
    """A write whose job fails in a task, through SQL, insertInto and saveAsTable: a
    LockingSession raises WriteFailed, a plain session ZKLOCK_WRITE_FAILED (Spark's error
    kept as the cause, never a raw Py4JJavaError), each naming the table and saying that
    nothing it wrote is in it; and nothing is."""
    from pyspark.errors import QueryExecutionException

    from zklock.errors import WriteFailed

    locking = make_locking()
    failing = "SELECT CAST(IF(id = 3, raise_error('a task fails'), id) AS INT) AS id," \
              " 'f' AS name FROM range(0, 8, 1, 2)"
    before = spark.table(f"{db}.dim").count()
    writes = {
        "sql": lambda s: s.sql(f"INSERT INTO {db}.dim {failing}"),
        "insertInto": lambda s: s.sql(failing).write.insertInto(f"{db}.dim"),
        "saveAsTable": lambda s: s.sql(failing).write.mode("append").saveAsTable(f"{db}.dim"),
    }
    # LockingSession.sql raises zklock's own; PySpark's writers raise PySpark's exception
    # with the condition (Spark 3.5 and 4.0's saveAsTable, locked whole from Python, zklock's)
    for api, write in writes.items():
        for session in (locking, spark):
            with enforce(spark, make_manager()), pytest.raises(
                    (QueryExecutionException, WriteFailed)) as caught:
                write(session)
            error = caught.value
            if isinstance(error, QueryExecutionException):
                condition = getattr(error, "getCondition", None) or error.getErrorClass
                assert condition() == "ZKLOCK_WRITE_FAILED", api
            assert isinstance(lock_error(error), WriteFailed), api
            assert f"{db}.dim" in str(error) and "a task fails" in str(error), api
            assert "nothing it wrote is in the table" in str(error), api
    assert spark.table(f"{db}.dim").count() == before


# ---- a LockingSession's own writes: PySpark's writers, locked in the engine as the session
def test_a_locking_sessions_writes_lock_with_its_own_manager(spark, db, make_locking,
                                                            make_manager, root, zk):
    """Two LockingSessions (each over a SparkSession of its own), on two roots: each one's
    writes are locked by its own manager (its root, its retries)."""
    from conftest import lock_nodes, wait_for

    from zklock.spark import LockingSession

    here = make_locking()
    elsewhere = make_locking(root=root + "-elsewhere")
    assert here.spark is not elsewhere.spark
    rows = here.createDataFrame([(9, "mine")], "id INT, name STRING")
    theirs = elsewhere.createDataFrame([(10, "theirs")], "id INT, name STRING")
    other = make_manager()
    before = count(spark, f"{db}.dim")
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-own"):
        with raises_lock_error(LockNotAcquired, match="holder-own"):
            rows.write.insertInto(f"{db}.dim")
        theirs.write.insertInto(f"{db}.dim")  # its root has no holder
    with other.acquire([(f"{db}.orders", "S")], query_id="holder-own"):
        with raises_lock_error(LockNotAcquired, match="holder-own"):
            here.catalog.recoverPartitions(f"{db}.orders")
    assert count(spark, f"{db}.dim") == before + 1
    assert wait_for(lambda: lock_nodes(zk, root) == [])
    assert isinstance(here, LockingSession)


def test_a_locking_session_write_whose_locks_are_lost_raises_lock_lost(spark, db, make_locking,
                                                                       zk, root, tmp_path):
    from conftest import lock_nodes, wait_for

    from zklock.errors import LockLost

    here = make_locking()
    latch = Latch(here, tmp_path / "latch")  # opened once the write has ended
    before = count(spark, f"{db}.events")
    slow = here.sql(f"SELECT {latch.name}(CAST(id AS INT)) AS id FROM range(0, 40, 1, 1)")
    failure = []

    def run() -> None:
        try:
            slow.selectExpr("id", "'lost' AS ds").write.insertInto(f"{db}.events")
        except Exception as exc:  # expected: the locks are lost
            failure.append(exc)

    writer = threading.Thread(target=run)
    writer.start()
    try:
        nodes = []
        assert wait_for(lambda: nodes.extend(n for n in lock_nodes(zk, root) if "/write-" in n)
                        or nodes, timeout=60), "the write's X lock did not show within 60 s"
        assert wait_for(latch.reached, 60), "the write's task did not start within 60 s"
        zk.delete(nodes[0])  # another client removes it while its job runs: the lock is lost
        writer.join(timeout=90)
    finally:
        latch.open()
        writer.join(timeout=60)
    assert failure and isinstance(lock_error(failure[0]), LockLost), failure
    assert count(spark, f"{db}.events") == before


HIVE_SERDE_WRITE = """
import sys
from pyspark.sql import SparkSession
from zklock.manager import LockManager
from zklock.spark import configure, enforce

hosts, root, home = sys.argv[1:4]
spark = configure(SparkSession.builder.master("local[1]").appName("zklock-hive-serde")
                  .config("spark.ui.enabled", "false")
                  .config("spark.sql.warehouse.dir", home + "/warehouse")
                  .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                          "jdbc:derby:;databaseName=" + home + "/metastore;create=true")
                  .enableHiveSupport()).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
enforce(spark, LockManager(hosts=hosts, root=root, retries=0))
spark.sql("CREATE TABLE serde_t (id INT) STORED AS TEXTFILE")
holder = LockManager(hosts=hosts, root=root)


def denied(write, table, holder_id):
    with holder.acquire([(table, "X")], query_id=holder_id):
        try:
            write()
            print("RAN")
        except Exception as exc:
            java = getattr(exc, "java_exception", None)
            print(str(java.getMessage() if java is not None else exc).strip().splitlines()[0])


denied(lambda: spark.createDataFrame([(1,)], "id INT").write.insertInto("serde_t"),
       "default.serde_t", "serde-holder")
print("ROWS", spark.table("serde_t").count())
denied(lambda: spark.sql("CREATE OR REPLACE VIEW serde_v AS SELECT 1 AS a"),
       "default.serde_v", "view-holder")
print("VIEW", spark.catalog.tableExists("serde_v"))
holder.close()
"""


def test_a_hive_serde_table_written_through_the_dataframe_api_is_locked(zk_hosts, root,
                                                                       tmp_path):
    """A Hive-format table is written by InsertIntoHiveTable, not a file-source command, and
    on Spark 3.5 the engine first sees its target already resolved to a HiveTableRelation:
    the write is still denied while another holds X. So is a persistent CREATE VIEW, which
    Spark 4.0's Hive-enabled analyzer (it drops extensions' hint rules) turns into a temporary
    view's command before the engine's first rule sees it. A real Hive-enabled Spark
    application, with its own Derby metastore."""
    out = subprocess.run([PYTHON, "-c", HIVE_SERDE_WRITE, zk_hosts, root, str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = out.stdout.strip().splitlines()[-4:]
    assert out.returncode == 0 and lines[1] == "ROWS 0" and lines[3] == "VIEW False", (
        lines, out.stderr[-2000:])
    assert "lock not acquired" in lines[0] and "serde-holder" in lines[0], lines
    assert "lock not acquired" in lines[2] and "view-holder" in lines[2], lines


CTRL_C = """
import sys
from pyspark.sql import SparkSession
from zklock.spark import configure, enforce

hosts, root, warehouse = sys.argv[1:4]
spark = configure(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                  .config("spark.sql.warehouse.dir", warehouse)).getOrCreate()
enforce(spark, hosts=hosts, root=root, retries=6000, retry_interval=0.05)  # 5 minutes
spark.sql("CREATE TABLE interrupted (id INT) USING parquet")
print("created", flush=True)
sys.stdin.readline()  # the test holds X now
try:
    spark.sql("INSERT INTO interrupted VALUES (1)")
    print("inserted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
sys.stdin.readline()  # the test released X
print("rows", spark.table("interrupted").count(), flush=True)
spark.stop()
"""


def test_ctrl_c_stops_a_statement_waiting_for_its_locks(zk, zk_hosts, root, make_manager,
                                                        tmp_path):
    """Ctrl-C in a classic application (SIGINT: PySpark cancels its jobs and raises
    KeyboardInterrupt, as zklock's handler before it does on PySpark 3.5 too) while a
    statement waits for another holder's X: its request is given up at once (its wait
    withdrawn while the holder still holds), and it writes nothing once the holder releases.
    Before, the interrupted INSERT waited on in the JVM and wrote its row after the
    release."""
    import signal

    from driven import driven
    from polling import waiting_queries

    with driven([PYTHON, "-c", CTRL_C, zk_hosts, root, str(tmp_path / "wh")], tmp_path,
                limit=300) as (app, errors):
        assert app.stdout.readline().strip() == "created", errors.read_text()[-2000:]
        holder = make_manager()
        with holder.acquire([("default.interrupted", "X")], query_id="holder-ctrl-c"):
            app.stdin.write("go\n")
            app.stdin.flush()
            assert wait_for(lambda: any("INSERT INTO interrupted" in q
                                        for q in waiting_queries(zk, root)), timeout=120)
            app.send_signal(signal.SIGINT)
            assert app.stdout.readline().strip() == "interrupted"
            assert wait_for(lambda: not waiting_queries(zk, root), timeout=60), \
                "the interrupted INSERT went on waiting"
        app.stdin.write("released\n")
        app.stdin.flush()
        assert app.stdout.readline().strip() == "rows 0"
        assert app.wait(timeout=120) == 0, errors.read_text()[-2000:]


def test_a_notebooks_interrupt_stops_a_statement_waiting_for_its_locks(zk, zk_hosts, root,
                                                                      make_manager, tmp_path):
    """A Jupyter notebook's interrupt (a real IPython kernel, interrupted as Jupyter does:
    SIGINT, while ipykernel has put Python's default handler in place of PySpark's and
    zklock's) of a cell whose statement waits for another holder's X: the cell ends with
    KeyboardInterrupt, which gives the request up (its wait withdrawn while the holder
    holds), and the statement writes nothing once the holder releases. (On PySpark 4 py4j
    also interrupts the abandoned call's JVM thread; on 3.5 only the cell's end does it.)"""
    from jupyter_client.manager import start_new_kernel
    from polling import waiting_queries

    kernel, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path),
                                      startup_timeout=120)

    def run(code: str, timeout: float = 300) -> dict:
        reply = client.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
        return reply["content"]

    try:
        setup = run(f"""
from pyspark.sql import SparkSession
from zklock.spark import configure, enforce
spark = configure(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                  .config("spark.sql.warehouse.dir", {str(tmp_path / "wh")!r})).getOrCreate()
engine = enforce(spark, hosts={zk_hosts!r}, root={root!r}, retries=6000, retry_interval=0.05)
spark.sql("CREATE TABLE in_notebook (id INT) USING parquet")
""")
        assert setup["status"] == "ok", setup
        holder = make_manager()
        with holder.acquire([("default.in_notebook", "X")], query_id="holder-notebook"):
            cell = client.execute("spark.sql('INSERT INTO in_notebook VALUES (1)')")
            assert wait_for(lambda: any("INSERT INTO in_notebook" in q
                                        for q in waiting_queries(zk, root)), timeout=120)
            kernel.interrupt_kernel()
            reply = client.get_shell_msg(timeout=60)
            assert reply["parent_header"]["msg_id"] == cell
            assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
            assert wait_for(lambda: not waiting_queries(zk, root), timeout=60), \
                "the interrupted INSERT went on waiting"
        rows = run("rows = spark.table('in_notebook').count(); assert rows == 0, rows")
        assert rows["status"] == "ok", rows
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)


def test_lock_error_keeps_zklocks_own_exception_whole() -> None:
    """A LockLost raised in Python (a script's held set) passes through lock_error as it is:
    its text names the fence's refusal, which must not turn it into a LockLost of no objects."""
    from zklock.errors import LockLost
    from zklock.spark import lock_error
    from zklock.spark.protocol import Fence

    lost = LockLost(["db.t"], f"{Fence.REFUSED} (1 of 2 lock nodes gone)")
    assert lock_error(lost) is lost
