"""Fail closed: every statement form that writes a table takes its locks, or does not run.

Each form is tried twice on real tables with a real ZooKeeper: with another holder keeping
X on the target (denied or refused, table unchanged, no node left) and without contention
(it runs, and takes exactly the locks EXPLAIN LOCKS shows).
"""

from __future__ import annotations

import pytest
from conftest import lock_nodes, wait_for

from zklock import LockNotAcquired
from zklock.errors import UnsupportedStatement
from zklock.spark import nodes


def count(spark, table: str) -> int:
    spark.catalog.refreshTable(table)
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def explain(locking, sql: str) -> list[tuple[str, str]]:
    return locking.explain_locks(sql).rows()


# ---- forms that used to write unlocked, under contention -------------------------------
def multi_insert(db: str) -> str:
    return (f"FROM {db}.staging INSERT INTO {db}.dim SELECT id, 'x'"
            f" INSERT INTO {db}.events PARTITION (ds='2024-02-01') SELECT id")


CONTENDED = {
    "multi-insert": (multi_insert, "dim"),
    "execute immediate literal": (
        lambda db: f"EXECUTE IMMEDIATE 'INSERT INTO {db}.dim SELECT 9, ''nine'''", "dim"),
    "execute immediate expression": (
        lambda db: f"EXECUTE IMMEDIATE 'INSERT INTO {db}.dim ' || 'SELECT 9, ''nine'''", "dim"),
    "script": (lambda db: f"BEGIN INSERT INTO {db}.dim SELECT 9, 'nine'; END", "dim"),
    "script with control flow": (
        lambda db: f"BEGIN DECLARE x INT DEFAULT 0; WHILE x < 2 DO SET x = x + 1;"
                   f" INSERT INTO {db}.dim SELECT x, 'loop'; END WHILE; END", "dim"),
    "with cte insert": (
        lambda db: f"WITH s AS (SELECT id FROM {db}.staging) INSERT INTO {db}.dim"
                   " SELECT id, 'c' FROM s", "dim"),
    "insert overwrite directory into a table's location": (None, "dim"),
}


@pytest.mark.parametrize("form", sorted(CONTENDED))
def test_contended_forms_are_denied_and_leave_the_table(form, locking, make_manager, db, spark,
                                                        zk, root):
    build, table = CONTENDED[form]
    if build is None:
        location = spark.sql(f"DESCRIBE TABLE EXTENDED {db}.{table}").where(
            "col_name = 'Location'").collect()[0].data_type
        sql = (f"INSERT OVERWRITE DIRECTORY '{location}' USING parquet"
               f" SELECT 9 AS id, 'nine' AS name")
    else:
        sql = build(db)
    before = count(spark, f"{db}.{table}")
    other = make_manager()
    with other.acquire([(f"{db}.{table}", "X")], query_id="holder-1"):
        with pytest.raises(LockNotAcquired, match="holder-1"):
            locking.sql(sql)
        assert count(spark, f"{db}.{table}") == before
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=5)


def test_multi_insert_takes_one_set_with_every_target(locking, db, spark):
    rows = explain(locking, multi_insert(db))
    assert (f"{db}.dim", "X") in rows
    assert (f"{db}.events/ds=2024-02-01", "X") in rows
    assert (f"{db}.events", "S") in rows
    assert (f"{db}.staging", "S") in rows
    before = count(spark, f"{db}.dim")
    locking.sql(multi_insert(db))
    assert count(spark, f"{db}.dim") == before + 1
    assert count(spark, f"{db}.events") == 1


def test_execute_immediate_plans_its_text_from_literal_variable_and_expression(locking, db):
    inner = f"INSERT INTO {db}.events PARTITION (ds='2024-03-01') SELECT id FROM {db}.staging"
    want = explain(locking, inner)
    assert explain(locking, "EXECUTE IMMEDIATE '" + inner.replace("'", "''") + "'") == want
    locking.sql("DECLARE OR REPLACE VARIABLE zk_stmt STRING")
    locking.sql("SET VAR zk_stmt = '" + inner.replace("'", "''") + "'")
    assert explain(locking, "EXECUTE IMMEDIATE zk_stmt") == want
    assert explain(locking, "EXECUTE IMMEDIATE zk_stmt || ''") == want
    locking.sql("EXECUTE IMMEDIATE zk_stmt")
    assert locking.sql(f"SELECT count(*) AS n FROM {db}.events").collect()[0].n == 1


def test_execute_immediate_with_unknowable_text_is_refused(locking, db, zk, root):
    with pytest.raises(UnsupportedStatement, match="reads tables"):
        locking.sql(f"EXECUTE IMMEDIATE (SELECT max(name) FROM {db}.dim)")
    with pytest.raises(UnsupportedStatement, match="inside a SQL script"):
        locking.sql("BEGIN DECLARE s STRING DEFAULT 'SELECT 1'; EXECUTE IMMEDIATE s; END")
    assert lock_nodes(zk, root) == []


def test_script_locks_the_union_of_its_statements_for_the_whole_script(locking, db, spark):
    script = (f"BEGIN DECLARE n INT DEFAULT 0;"
              f" IF (SELECT count(*) FROM {db}.dim) > 0 THEN"
              f"   INSERT INTO {db}.events PARTITION (ds='2024-04-01') SELECT id FROM {db}.staging;"
              f" ELSE DELETE FROM {db}.dim WHERE id = 1; END IF;"
              f" FOR r AS SELECT id FROM {db}.staging DO SET n = n + r.id; END FOR;"
              f" END")
    rows = explain(locking, script)
    assert (f"{db}.events/ds=2024-04-01", "X") in rows
    assert (f"{db}.dim", "X") in rows  # the branch not taken is locked too
    assert (f"{db}.staging", "S") in rows
    locking.sql(script)
    assert count(spark, f"{db}.events") == 1


def test_unknown_command_is_refused_by_default_and_locked_when_asked(
        make_locking, db, spark, monkeypatch, zk, root, make_manager):
    # pretend this Spark has a command zklock never classified: TRUNCATE TABLE's node
    monkeypatch.delitem(nodes.NODE_KINDS, "TruncateTable")
    monkeypatch.delitem(nodes.NODE_KINDS, "TruncateTableCommand")
    strict = make_locking()
    before = count(spark, f"{db}.staging")
    with pytest.raises(UnsupportedStatement, match="TruncateTable.*zklock.unknown.statements"):
        strict.sql(f"TRUNCATE TABLE {db}.staging")
    assert count(spark, f"{db}.staging") == before
    assert lock_nodes(zk, root) == []
    lenient = make_locking(unknown_statements="lock")
    assert explain(lenient, f"TRUNCATE TABLE {db}.staging") == [(db, "S"),
                                                                 (f"{db}.staging", "X")]
    other = make_manager()
    with other.acquire([(f"{db}.staging", "S")], query_id="reader-1"):
        with pytest.raises(LockNotAcquired, match="reader-1"):
            lenient.sql(f"TRUNCATE TABLE {db}.staging")
    lenient.sql(f"TRUNCATE TABLE {db}.staging")
    assert count(spark, f"{db}.staging") == 0


@pytest.mark.parametrize("sql", [
    "CALL system.noop()",
])
def test_writes_zklock_never_locks_are_refused(locking, sql, zk, root):
    with pytest.raises(Exception) as info:
        locking.sql(sql)
    assert lock_nodes(zk, root) == []
    assert info.type is UnsupportedStatement or "PROCEDURE" in str(info.value).upper()
