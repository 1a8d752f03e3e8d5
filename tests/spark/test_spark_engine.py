"""zklock's engine extension: every command Spark runs is locked, whatever API sent it.

The test session's SparkSession is built with zklock.spark.configure (the extension is in
spark.sql.extensions) and its engine lock client takes locks under conftest.ENGINE_ROOT.
Here a test makes its own manager the engine's lock client for a while (``enforce``), on the
test's root, where another holder keeps X on the table: each write path is denied after its
retries and the table is unchanged; without the holder each runs and takes exactly the
locks EXPLAIN LOCKS shows.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from pyspark.sql import SparkSession

from zklock.errors import LockNotAcquired
from zklock.mode import Mode
from zklock.objects import LockObject
from zklock.spark import enforce

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@contextmanager
def no_lock_client(spark):
    """The application's JVM without a lock client for the block (as one that never called
    enforce() and made no LockingSession)."""
    engine = spark._jvm.zklock.EngineLocks
    previous = engine.install(None)
    try:
        yield
    finally:
        engine.install(previous)


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
    finally:
        spark.conf.unset("spark.zklock.engine.mode")
    assert count(spark, table) == before + 1


def test_reads_and_session_commands_need_no_lock_client(spark, db):
    with no_lock_client(spark):
        assert count(spark, f"{db}.dim") == 2
        spark.sql("SET spark.sql.shuffle.partitions=2")
        assert spark.sql(f"SHOW TABLES IN {db}").count() > 0


def test_a_locking_session_statement_whose_nodes_are_gone_does_not_run(
        spark, db, make_locking, zk, root):
    """The engine checks, as the fenced commit does, that the statement's lock nodes still
    exist before its command runs: here a script deletes them between the wrapper's grant
    and the command (another client removing nodes)."""
    from zklock.errors import LockLost

    table = f"{db}.dim"
    locking = make_locking()
    before = count(spark, table)
    original = locking.execution.commit_staging

    def delete_nodes_then_stage(lockset):
        for path in lockset.node_paths:
            zk.delete(path)
        return original(lockset)

    locking.execution.commit_staging = delete_nodes_then_stage
    with pytest.raises(LockLost):
        locking.sql(f"INSERT INTO {table} VALUES (11, 'gone')")
    assert count(spark, table) == before


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
