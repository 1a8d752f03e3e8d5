"""A session's own locks (zklock/spark/java/engine/SessionLocks.java): LOCK TABLE ...
UNLOCK TABLE in a session of the engine holds the table for the session, so that a step of
several statements (dbt's drop table + create table as select) is atomic to every other
session: a reader waits for the step and finds the new table, never none.

A real SparkSession under enforce() and a real ZooKeeper; judged by what the readers saw.
"""

from __future__ import annotations

import json
import threading

import pytest
from conftest import raises_lock_error, wait_for

from zklock.errors import LockLost, UnsupportedStatement
from zklock.locks.mode import Mode
from zklock.spark import enforce


@pytest.fixture
def locking(spark, make_manager):
    """The test's ``spark`` with a lock client on the test's root that waits."""
    with enforce(spark, make_manager(retries=2000, retry_interval=0.05)):
        yield spark


def count(session, table: str) -> int:
    return session.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def test_a_step_under_a_sessions_lock_is_atomic_to_readers(locking, db, zk, root, make_manager):
    """dbt's table materialization between a pre-hook's LOCK TABLE and a post-hook's UNLOCK
    TABLE: a reader of the model in another session waits for the step, then reads the new
    table; it never finds no table, and never the old one after the step."""
    spark = locking
    model, source = f"{db}.model", f"{db}.source"
    spark.sql(f"CREATE TABLE {source} USING parquet AS SELECT id FROM range(10)")
    spark.sql(f"CREATE TABLE {model} USING parquet AS SELECT id FROM range(3)")
    step, reader = spark.newSession(), spark.newSession()
    step.sql(f"LOCK TABLE {model} EXCLUSIVE")
    read = threading.Thread(target=lambda: seen.append(_read(reader, model)))
    seen: list[object] = []
    try:
        # the lock is the session's: held between its statements, named by its statement
        shown = make_manager().show(model, extended=True)
        assert [(r.object, r.mode) for r in shown] == [(model, Mode.EXCLUSIVE)]
        assert shown[0].data.query.startswith(f"LOCK TABLE {model} EXCLUSIVE")
        read.start()
        waits = f"{root}/.waits"
        assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
        step.sql(f"DROP TABLE {model}")  # covered by the session's X
        step.sql(f"CREATE TABLE {model} USING parquet AS SELECT id FROM {source}")  # + S on it
        assert read.is_alive()
    finally:
        step.sql(f"UNLOCK TABLE {model}")
    read.join(60)
    assert seen == [10]  # the new table, whole
    assert make_manager().show(model) == []


def _read(session, table: str) -> object:
    try:
        return count(session, table)
    except Exception as exc:  # noqa: BLE001 (what the reader met is the outcome)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


def test_a_sessions_statements_are_covered_or_take_the_rest(locking, db, make_manager):
    spark = locking
    table, other = f"{db}.t", f"{db}.u"
    spark.sql(f"CREATE TABLE {table} (id INT) USING parquet")
    spark.sql(f"CREATE TABLE {other} (id INT) USING parquet")
    session = spark.newSession()
    session.sql(f"LOCK TABLE {table} SHARED")
    try:
        session.sql(f"LOCK TABLE {table} SHARED")  # held already: nothing more
        assert count(session, table) == 0  # covered: S
        session.sql(f"INSERT INTO {other} SELECT id FROM {table}")  # X on u taken for it
        # X over the session's own S would wait on itself: refused in one line
        with raises_lock_error(UnsupportedStatement, match="this session holds .* in S"):
            session.sql(f"INSERT INTO {table} VALUES (1)")
        with raises_lock_error(UnsupportedStatement, match="holds .* in S .UNLOCK it first"):
            session.sql(f"LOCK TABLE {table} EXCLUSIVE")
    finally:
        session.sql(f"UNLOCK TABLE {table}")
    assert make_manager().show(table) == []


def test_bad_session_lock_statements_are_refused_in_one_line(locking, db):
    session = locking.newSession()
    table = f"{db}.t"
    session.sql(f"CREATE TABLE {table} (id INT) USING parquet")
    with raises_lock_error(UnsupportedStatement, match="holds no lock on"):
        session.sql(f"UNLOCK TABLE {table}")
    with raises_lock_error(UnsupportedStatement, match="FOR <n> <unit> is a LockingSession's"):
        session.sql(f"LOCK TABLE {table} EXCLUSIVE FOR 5 MINUTES")
    with raises_lock_error(UnsupportedStatement, match="expected SHARED or EXCLUSIVE"):
        session.sql(f"LOCK TABLE {table} FOREVER")
    session.sql("CREATE TEMPORARY VIEW v AS SELECT 1 AS id")
    with raises_lock_error(UnsupportedStatement, match="temporary view"):
        session.sql("LOCK TABLE v EXCLUSIVE")


def test_a_sessions_lost_lock_fails_what_it_covers(locking, db, zk, make_manager, root):
    """A lock whose node is gone is lost, whoever removed it: the session's next statement
    under it fails with LockLost and writes nothing; UNLOCK TABLE says it was lost."""
    spark = locking
    table = f"{db}.t"
    spark.sql(f"CREATE TABLE {table} (id INT) USING parquet")
    session = spark.newSession()
    session.sql(f"LOCK TABLE {table} EXCLUSIVE")
    (record,) = make_manager().show(table)
    zk.delete(record.node)
    with raises_lock_error(LockLost):
        session.sql(f"INSERT INTO {table} VALUES (1)")
    with raises_lock_error(LockLost, match="were lost while held"):
        session.sql(f"UNLOCK TABLE {table}")
    assert count(spark, table) == 0
    with raises_lock_error(UnsupportedStatement, match="holds no lock"):
        session.sql(f"UNLOCK TABLE {table}")


def test_a_held_table_is_named_to_its_waiters(locking, db, zk, root, make_manager):
    """Who holds it, since when, why: the waiter's record names the holder's query, which
    zklock show lists with the LOCK TABLE statement."""
    spark = locking
    table = f"{db}.t"
    spark.sql(f"CREATE TABLE {table} (id INT) USING parquet")
    holder = spark.newSession()
    holder.sql(f"LOCK TABLE {table} EXCLUSIVE")
    done = threading.Event()
    threading.Thread(target=lambda: (_read(spark.newSession(), table), done.set())).start()
    waits = f"{root}/.waits"
    try:
        assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
        record = json.loads(zk.get(f"{waits}/{zk.get_children(waits)[0]}")[0])
        (held,) = make_manager().show(table, extended=True)
        assert held.data.query.startswith(f"LOCK TABLE {table} EXCLUSIVE"), held.data
        assert held.data.query_id in json.dumps(record["blockers"]), record
    finally:
        holder.sql(f"UNLOCK TABLE {table}")
    assert done.wait(60)


def test_a_reader_of_a_table_dropped_in_a_step_waits_for_the_new_one(locking, db, zk, root):
    """Spark's analysis fails on a missing table before any lock is asked for: a reader
    that comes between the step's drop and its create waits for the step's lock, then reads
    the new table (engine/MissingTables.java)."""
    spark = locking
    model = f"{db}.model"
    spark.sql(f"CREATE TABLE {model} USING parquet AS SELECT id FROM range(3)")
    step = spark.newSession()
    step.sql(f"LOCK TABLE {model} EXCLUSIVE")
    seen: list[object] = []
    read = threading.Thread(target=lambda: seen.append(_read(spark.newSession(), model)))
    try:
        step.sql(f"DROP TABLE {model}")
        read.start()
        waits = f"{root}/.waits"
        assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
        step.sql(f"CREATE TABLE {model} USING parquet AS SELECT id FROM range(5)")
    finally:
        step.sql(f"UNLOCK TABLE {model}")
    read.join(60)
    assert seen == [5]
    # a table missing once no one holds it is Spark's error, as before
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {db}.never").collect()
