"""The conformance corpus: every statement kind of Spark SQL's reference, and what zklock does.

Each row is a statement of the reference's sections (data definition, data manipulation,
data retrieval, auxiliary, scripting) run through EXPLAIN LOCKS on real tables. Its
expected outcome, the locks in acquisition order or a refusal, is the lock table in
docs/spark.md: this test compares the two, so the documentation is the specification
and cannot drift. ``ZKLOCK_WRITE_CORPUS=1`` rewrites the table from what the planner does
now (review the diff before committing it).

The ``shared_db`` fixture's tables: orders and archive (partitioned by ds, hr; orders has
ds=2024-01-01/hr=1 and ds=2024-01-02/hr=1), events (by ds), dim, staging, the view day1.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from conftest import Latch, lock_nodes, spark_line, wait_for

from zklock.errors import UnsupportedStatement
from zklock.locks.locknode import LockNodeName

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
#: Statement forms a Spark line does not have are absent from its run (docs/spark.md's
#: version table), by the words they are written with and the line that brought them: SQL
#: scripts need Spark 4.1 (4.0's are under development); session variables, EXECUTE
#: IMMEDIATE, SQL functions and CALL need 4.0.
SINCE = {"BEGIN ": (4, 1), "VARIABLE": (4, 0), "SET VAR ": (4, 0), "EXECUTE IMMEDIATE": (4, 0),
         " RETURNS ": (4, 0), "CALL ": (4, 0)}


def absent(template: str) -> bool:
    """Does the installed Spark lack what ``template`` is written with?"""
    return any(word in template and spark_line() < line for word, line in SINCE.items())


#: Does this run leave statements out (so the docs' table is not rewritten from it)?
PARTIAL = any(spark_line() < line for line in SINCE.values())
BEGIN, END = "<!-- corpus:begin -->", "<!-- corpus:end -->"
D = "db"  # how the test database is written in the document

CORPUS: list[tuple[str, str]] = [
    # ---- data definition ------------------------------------------------------
    ("DDL", "CREATE DATABASE db_new"),
    ("DDL", "ALTER DATABASE {d} SET DBPROPERTIES ('k'='v')"),
    ("DDL", "ALTER DATABASE {d} SET LOCATION '/tmp/zk-corpus-db'"),
    ("DDL", "COMMENT ON DATABASE {d} IS 'c'"),
    ("DDL", "DROP DATABASE {d} CASCADE"),
    ("DDL", "CREATE TABLE {d}.t_new (id INT) USING parquet"),
    ("DDL", "CREATE TABLE {d}.t_new USING parquet AS SELECT * FROM {d}.dim"),
    ("DDL", "CREATE TABLE {d}.t_new LIKE {d}.dim"),
    ("DDL", "CREATE OR REPLACE TABLE {d}.t_new (id INT) USING parquet"),
    ("DDL", "REPLACE TABLE {d}.dim USING parquet AS SELECT * FROM {d}.staging"),
    ("DDL", "ALTER TABLE {d}.dim RENAME TO {d}.dim2"),
    ("DDL", "ALTER TABLE {d}.dim ADD COLUMNS (x INT)"),
    ("DDL", "ALTER TABLE {d}.dim DROP COLUMNS (name)"),
    ("DDL", "ALTER TABLE {d}.dim RENAME COLUMN name TO label"),
    ("DDL", "ALTER TABLE {d}.dim ALTER COLUMN name COMMENT 'c'"),
    ("DDL", "ALTER TABLE {d}.dim REPLACE COLUMNS (x INT)"),
    ("DDL", "ALTER TABLE {d}.orders ADD PARTITION (ds='2024-09-09', hr=9)"),
    ("DDL", "ALTER TABLE {d}.orders DROP PARTITION (ds='2024-01-01', hr=1)"),
    ("DDL", "ALTER TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1)"
            " RENAME TO PARTITION (ds='2024-01-03', hr=1)"),
    ("DDL", "ALTER TABLE {d}.orders RECOVER PARTITIONS"),
    ("DDL", "ALTER TABLE {d}.dim SET TBLPROPERTIES ('k'='v')"),
    ("DDL", "ALTER TABLE {d}.dim UNSET TBLPROPERTIES ('k')"),
    ("DDL", "ALTER TABLE {d}.dim SET SERDEPROPERTIES ('k'='v')"),
    ("DDL", "ALTER TABLE {d}.dim SET LOCATION '/tmp/zk-corpus-t'"),
    ("DDL", "ALTER TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1)"
            " SET LOCATION '/tmp/zk-corpus-p'"),
    ("DDL", "COMMENT ON TABLE {d}.dim IS 'c'"),
    ("DDL", "CREATE VIEW {d}.v_new AS SELECT * FROM {d}.orders WHERE ds = '2024-01-01'"),
    ("DDL", "CREATE TEMPORARY VIEW tv_corpus AS SELECT * FROM {d}.dim"),
    ("DDL", "ALTER VIEW {d}.day1 AS SELECT * FROM {d}.dim"),
    ("DDL", "ALTER VIEW {d}.day1 SET TBLPROPERTIES ('k'='v')"),
    ("DDL", "DROP VIEW {d}.day1"),
    ("DDL", "DROP TABLE {d}.dim"),
    ("DDL", "TRUNCATE TABLE {d}.dim"),
    ("DDL", "TRUNCATE TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1)"),
    ("DDL", "MSCK REPAIR TABLE {d}.orders"),
    ("DDL", "CREATE FUNCTION f_corpus AS 'org.example.F'"),
    ("DDL", "CREATE TEMPORARY FUNCTION tf_corpus(x INT) RETURNS INT RETURN x + 1"),
    ("DDL", "DROP FUNCTION IF EXISTS f_corpus"),
    ("DDL", "DECLARE VARIABLE v_corpus INT DEFAULT 1"),
    ("DDL", "DROP TEMPORARY VARIABLE IF EXISTS v_corpus"),
    ("DDL", "USE {d}"),
    # ---- data manipulation ----------------------------------------------------
    ("DML", "INSERT INTO {d}.dim VALUES (3, 'three')"),
    ("DML", "INSERT OVERWRITE {d}.dim SELECT * FROM {d}.dim WHERE id > 1"),
    ("DML", "INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr=2) SELECT id, amt"
            " FROM {d}.staging"),
    ("DML", "INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr) SELECT id, amt, hr"
            " FROM {d}.staging"),
    ("DML", "INSERT OVERWRITE {d}.orders PARTITION (ds, hr) SELECT id, amt, '2024-07-07', hr"
            " FROM {d}.staging"),
    ("DML", "INSERT INTO {d}.dim BY NAME SELECT 4 AS id, 'four' AS name"),
    ("DML", "INSERT INTO {d}.dim REPLACE WHERE id = 1 SELECT 1, 'one'"),
    ("DML", "FROM {d}.staging INSERT INTO {d}.dim SELECT id, 'm'"
            " INSERT INTO {d}.events PARTITION (ds='2024-08-08') SELECT id"),
    ("DML", "WITH s AS (SELECT * FROM {d}.staging) INSERT INTO {d}.dim SELECT id, 'w' FROM s"),
    ("DML", "INSERT OVERWRITE DIRECTORY '/tmp/zk-corpus-dir' USING parquet"
            " SELECT * FROM {d}.dim"),
    ("DML", "LOAD DATA LOCAL INPATH '/tmp/zk-corpus-in' INTO TABLE {d}.dim"),
    ("DML", "LOAD DATA LOCAL INPATH '/tmp/zk-corpus-in' OVERWRITE INTO TABLE {d}.orders"
            " PARTITION (ds='2024-01-01', hr=1)"),
    ("DML", "DELETE FROM {d}.dim WHERE id = 1"),
    ("DML", "UPDATE {d}.dim SET name = 'x' WHERE id = 1"),
    ("DML", "MERGE INTO {d}.dim t USING {d}.staging s ON t.id = s.id"
            " WHEN MATCHED THEN UPDATE SET name = 'm' WHEN NOT MATCHED THEN INSERT *"),
    # ---- data retrieval -------------------------------------------------------
    ("query", "SELECT * FROM {d}.orders WHERE ds = '2024-01-01' AND hr = 1"),
    ("query", "SELECT * FROM {d}.orders WHERE ds IN ('2024-01-01', '2024-01-02') AND hr = 1"),
    ("query", "SELECT count(*) FROM {d}.orders"),
    ("query", "SELECT * FROM {d}.day1"),
    ("query", "SELECT * FROM {d}.dim d JOIN {d}.staging s ON d.id = s.id"),
    ("query", "SELECT id FROM {d}.dim UNION ALL SELECT id FROM {d}.staging"),
    ("query", "SELECT * FROM {d}.dim WHERE id IN (SELECT id FROM {d}.staging)"),
    ("query", "WITH c AS (SELECT * FROM {d}.dim) SELECT * FROM c"),
    ("query", "SELECT 1"),
    ("query", "EXPLAIN SELECT * FROM {d}.dim"),
    ("query", "EXPLAIN INSERT INTO {d}.dim VALUES (1, 'x')"),
    # ---- auxiliary ------------------------------------------------------------
    ("aux", "ANALYZE TABLE {d}.dim COMPUTE STATISTICS"),
    ("aux", "ANALYZE TABLE {d}.orders PARTITION (ds='2024-01-01') COMPUTE STATISTICS"),
    ("aux", "ANALYZE TABLE {d}.dim COMPUTE STATISTICS FOR COLUMNS id"),
    ("aux", "ANALYZE TABLES IN {d} COMPUTE STATISTICS"),
    ("aux", "CACHE TABLE {d}.dim"),
    ("aux", "CACHE TABLE c_corpus AS SELECT * FROM {d}.staging"),
    ("aux", "UNCACHE TABLE IF EXISTS {d}.dim"),
    ("aux", "CLEAR CACHE"),
    ("aux", "REFRESH TABLE {d}.dim"),
    ("aux", "REFRESH '/tmp/zk-corpus'"),
    ("aux", "REFRESH FUNCTION abs"),
    ("aux", "DESCRIBE DATABASE {d}"),
    ("aux", "DESCRIBE TABLE {d}.dim"),
    ("aux", "DESCRIBE FUNCTION abs"),
    ("aux", "DESCRIBE QUERY SELECT * FROM {d}.dim"),
    ("aux", "SHOW COLUMNS IN {d}.dim"),
    ("aux", "SHOW CREATE TABLE {d}.dim"),
    ("aux", "SHOW DATABASES"),
    ("aux", "SHOW FUNCTIONS"),
    ("aux", "SHOW PARTITIONS {d}.orders"),
    ("aux", "SHOW TABLE EXTENDED IN {d} LIKE 'dim'"),
    ("aux", "SHOW TABLES IN {d}"),
    ("aux", "SHOW TBLPROPERTIES {d}.dim"),
    ("aux", "SHOW VIEWS IN {d}"),
    ("aux", "ADD JAR '/tmp/zk-corpus.jar'"),
    ("aux", "LIST JARS"),
    ("aux", "ADD FILE '/tmp/zk-corpus.txt'"),
    ("aux", "LIST FILES"),
    ("aux", "SET spark.sql.shuffle.partitions=2"),
    ("aux", "RESET spark.sql.shuffle.partitions"),
    ("aux", "SET VAR v_corpus_set = (SELECT max(id) FROM {d}.dim)"),
    ("aux", "EXECUTE IMMEDIATE 'INSERT INTO {d}.dim SELECT 5, \"five\"'"),
    ("aux", "EXECUTE IMMEDIATE 'SELECT * FROM {d}.staging'"),
    ("aux", "CALL system.no_such_procedure()"),
    # ---- SQL scripting ---------------------------------------------------------
    ("script", "BEGIN INSERT INTO {d}.dim SELECT 6, 'six'; SELECT * FROM {d}.staging; END"),
    ("script", "BEGIN DECLARE n INT DEFAULT 0; WHILE n < 2 DO SET n = n + 1;"
               " INSERT INTO {d}.events PARTITION (ds='2024-06-06') SELECT n; END WHILE; END"),
    ("script", "BEGIN IF (SELECT count(*) FROM {d}.dim) > 0 THEN DELETE FROM {d}.dim;"
               " ELSE TRUNCATE TABLE {d}.staging; END IF; END"),
    ("script", "BEGIN FOR r AS SELECT id FROM {d}.staging DO"
               " INSERT INTO {d}.dim SELECT r.id, 'f'; END FOR; END"),
    ("script", "BEGIN DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SELECT 1; END;"
               " DROP TABLE {d}.dim; END"),
    ("script", "BEGIN CREATE TEMPORARY VIEW tv_script AS SELECT * FROM {d}.orders;"
               " INSERT INTO {d}.staging SELECT id, amt, hr FROM tv_script; END"),
    ("script", "BEGIN DECLARE s STRING DEFAULT 'SELECT 1'; EXECUTE IMMEDIATE s; END"),
]


def outcome(locking, sql: str) -> str:
    """What zklock does with ``sql``: its locks as ``object:mode ...``, or a refusal."""
    try:
        rows = locking.explain_locks(sql).rows()
    except UnsupportedStatement as exc:
        return "refused: " + str(exc).split(";")[0]
    except Exception as exc:  # Spark's own error (no such procedure ...): nothing runs
        return "Spark error: " + type(exc).__name__
    return " ".join(f"{o}:{m}" for o, m in rows) or "none"


def render(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| kind | statement | locks (acquisition order), or what happens |", "|---|---|---|"]
    for kind, sql, result in rows:
        lines.append(f"| {kind} | `{sql}` | {result} |")
    return "\n".join(lines)


def documented() -> dict[str, str]:
    """statement -> documented outcome, read from the table in docs/spark.md."""
    text = DOC.read_text()
    body = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    out = {}
    for line in body.strip().splitlines()[2:]:
        _kind, sql, result = (c.strip() for c in line.strip().strip("|").split(" | ", 2))
        out[sql.strip("`")] = result
    return out


def test_corpus_matches_the_lock_table_in_docs(locking, shared_db, spark):
    if not absent("VARIABLE"):
        spark.sql("DECLARE OR REPLACE VARIABLE v_corpus_set INT")
    rows = []
    for kind, template in CORPUS:
        if absent(template):
            continue
        sql = template.format(d=shared_db)
        result = outcome(locking, sql).replace(shared_db, D)
        rows.append((kind, template.format(d=D), result))
    if os.environ.get("ZKLOCK_WRITE_CORPUS") and not PARTIAL:
        text = DOC.read_text()
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        DOC.write_text(f"{head}{BEGIN}\n{render(rows)}\n{END}{tail}")
    expected = documented()
    mismatches = [(sql, result, expected.get(sql)) for _, sql, result in rows
                  if expected.get(sql) != result]
    assert not mismatches, "\n".join(f"{s}\n  planner: {r}\n  docs:    {e}"
                                     for s, r, e in mismatches)


def test_every_write_in_the_corpus_locks_or_is_refused(locking, shared_db):
    """No DDL/DML statement of the corpus runs without an X lock, except those that only
    change session-local state or paths outside the catalog."""
    # session-local objects, paths outside the catalog, and SET SERDEPROPERTIES (S in
    # Hive's own lock table)
    local = ("db_new", "TEMPORARY", "FUNCTION", "VARIABLE", "USE ", "DIRECTORY", "SERDEPROP")
    for kind, template in CORPUS:
        if kind not in ("DDL", "DML") or any(w in template for w in local) or absent(template):
            continue
        result = outcome(locking, template.format(d=shared_db))
        assert ":X" in result or result.startswith(("refused", "Spark error")), template


TAKEN = [
    "INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr=2) SELECT slow_corpus(id), amt"
    " FROM {d}.staging",
    "FROM {d}.staging INSERT INTO {d}.dim SELECT slow_corpus(id), 'm'"
    " INSERT INTO {d}.events PARTITION (ds='2024-08-08') SELECT id",
    "BEGIN INSERT INTO {d}.dim SELECT slow_corpus(id), 's' FROM {d}.staging; END",
    "EXECUTE IMMEDIATE 'INSERT INTO {d}.dim SELECT slow_corpus(id), \"e\" FROM {d}.staging'",
]
TAKEN = [t for t in TAKEN if not absent(t)]


@pytest.mark.parametrize("template", TAKEN)
def test_explain_agrees_with_what_is_taken(template, make_locking, db, zk, root, spark,
                                          tmp_path):
    """EXPLAIN LOCKS lists exactly the lock nodes a statement holds while it runs."""
    # the statement holds its locks until the test has read them, however slow the machine
    locking = make_locking()
    latch = Latch(locking, tmp_path / "latch", name="slow_corpus")
    sql = template.format(d=db)
    planned = sorted(f"{o}:{m}" for o, m in locking.explain_locks(sql).rows())
    held: list[str] = []

    def read_held() -> bool:  # one multi takes the set; a read may straddle it, so read again
        held[:] = sorted(node_object(path, root) for path in lock_nodes(zk, root))
        return held == planned
    assert planned
    runner = threading.Thread(target=locking.sql, args=(sql,))
    runner.start()
    try:
        seen = wait_for(read_held, timeout=60)
    finally:
        latch.open()
        runner.join(timeout=120)
    assert seen, (held, planned)


def node_object(path: str, root: str) -> str:
    """``/root/db/t/ds=1/write-...`` -> ``db.t/ds=1:X``."""
    obj, _, leaf = path[len(root) + 1:].rpartition("/")
    mode = LockNodeName.parse(leaf).mode.value
    return f"{obj.replace('/', '.', 1)}:{mode}"
