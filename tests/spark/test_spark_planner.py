"""EXPLAIN LOCKS against a real SparkSession and real tables: Hive's lock table and beyond.

The ``shared_db`` fixture (never modified: EXPLAIN takes and runs nothing)
holds orders and archive (partitioned by ds, hr), events (by ds), dim and
staging (unpartitioned) and the view day1 (orders join dim, ds pinned).
Partitions of orders: ds=2024-01-01/hr=1 and ds=2024-01-02/hr=1.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.errors import ParseException

from zklock.errors import ZkLockError
from zklock.locks.objects import LockObject

P1 = "ds=2024-01-01/hr=1"
P2 = "ds=2024-01-02/hr=1"


def explain(locking, sql: str) -> list[str]:
    return [f"{r.object}:{r.mode}" for r in locking.sql(f"EXPLAIN LOCKS {sql}").collect()]


def table_locks(d: str, table: str, mode: str = "S") -> list[str]:
    return [f"{d}:S", f"{d}.{table}:{mode}"]


SEED_ROWS = [
    # select .. T1 partition P1 | S on T1, T1.P1
    ("SELECT * FROM {d}.orders WHERE ds = '2024-01-01' AND hr = 1",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S"]),
    # insert into T2(partition P2) select .. T1 partition P1 | S on T2, T1, T1.P1 and X on T2.P2
    ("INSERT INTO {d}.events PARTITION (ds='2024-05-01') SELECT id FROM {d}.orders"
     " WHERE ds = '2024-01-01' AND hr = 1",
     ["{d}:S", "{d}.events:S", "{d}.events/ds=2024-05-01:X", "{d}.orders:S",
      "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S"]),
    # insert into T2(partition P.Q) select .. T1 partition P1
    #   | S on T2, T2.P, T1, T1.P1 and X on T2.P.Q
    ("INSERT INTO {d}.archive PARTITION (ds='2024-01-01', hr=1) SELECT id, amt FROM {d}.orders"
     " WHERE ds = '2024-01-01' AND hr = 1",
     ["{d}:S", "{d}.archive:S", "{d}.archive/ds=2024-01-01:S", f"{{d}}.archive/{P1}:X",
      "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S"]),
    # alter table T1 rename T2 | X on T1 (zklock also takes X on the new name)
    ("ALTER TABLE {d}.dim RENAME TO {d}.dim2", ["{d}:S", "{d}.dim:X", "{d}.dim2:X"]),
    ("ALTER TABLE {d}.dim ADD COLUMNS (x INT)", ["{d}:S", "{d}.dim:X"]),
    ("ALTER TABLE {d}.dim REPLACE COLUMNS (x INT)", ["{d}:S", "{d}.dim:X"]),
    ("ALTER TABLE {d}.dim CHANGE COLUMN name name STRING COMMENT 'c'", ["{d}:S", "{d}.dim:X"]),
    ("ALTER TABLE {d}.orders ADD PARTITION (ds='2024-09-09', hr=9)",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-09-09:S", "{d}.orders/ds=2024-09-09/hr=9:X"]),
    ("ALTER TABLE {d}.orders DROP PARTITION (ds='2024-01-01', hr=1)",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:X"]),
    ("ALTER TABLE {d}.dim SET SERDEPROPERTIES ('a'='b')", ["{d}:S", "{d}.dim:S"]),
    ("ALTER TABLE {d}.dim SET SERDE 'org.example.Serde'", ["{d}:S", "{d}.dim:S"]),
    ("ALTER TABLE {d}.dim SET TBLPROPERTIES ('a'='b')", ["{d}:S", "{d}.dim:X"]),
    ("DROP TABLE {d}.dim", ["{d}:S", "{d}.dim:X"]),
]

MORE = [
    # views resolve to base tables (and the view itself); the view's filter pins ds
    ("SELECT * FROM {d}.day1",
     ["{d}:S", "{d}.day1:S", "{d}.dim:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S",
      f"{{d}}.orders/{P1}:S"]),
    # CTE, union, IN-subquery
    ("WITH c AS (SELECT id FROM {d}.dim) SELECT id FROM c UNION ALL"
     " SELECT id FROM {d}.staging WHERE id IN (SELECT id FROM {d}.events)",
     ["{d}:S", "{d}.dim:S", "{d}.events:S", "{d}.staging:S"]),
    # join: the filter on o.ds pins orders; an unpinned partitioned table locks what exists
    ("SELECT * FROM {d}.orders o JOIN {d}.archive a ON o.id = a.id WHERE o.ds = '2024-01-02'",
     ["{d}:S", "{d}.archive:S", "{d}.orders:S", "{d}.orders/ds=2024-01-02:S",
      f"{{d}}.orders/{P2}:S"]),
    # unpinned read: every partition it scans
    ("SELECT count(*) FROM {d}.orders",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S",
      "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"]),
    # IN on a partition column; a pinned partition that does not exist yet is still locked
    ("SELECT * FROM {d}.orders WHERE ds IN ('2024-01-01', '2031-01-01') AND hr = 1",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S",
      "{d}.orders/ds=2031-01-01:S", "{d}.orders/ds=2031-01-01/hr=1:S"]),
    # a filter above a LIMIT does not pin what the scan reads
    ("SELECT * FROM (SELECT * FROM {d}.orders LIMIT 5) WHERE ds = '2024-01-01'",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S",
      "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"]),
    # backticks and mixed case
    ("SELECT * FROM `{d}`.`ORDERS` WHERE DS = '2024-01-02' AND Hr = 1",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"]),
    # dynamic partitions: X on the table
    ("INSERT INTO {d}.orders PARTITION (ds, hr) SELECT id, amt, '2024-03-01', hr"
     " FROM {d}.staging", ["{d}:S", "{d}.orders:X", "{d}.staging:S"]),
    ("INSERT INTO {d}.orders SELECT id, amt, '2024-03-01', hr FROM {d}.staging",
     ["{d}:S", "{d}.orders:X", "{d}.staging:S"]),
    # mixed: X on the known static prefix
    ("INSERT OVERWRITE {d}.orders PARTITION (ds='2024-03-01', hr) SELECT id, amt, hr"
     " FROM {d}.staging",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-03-01:X", "{d}.staging:S"]),
    # a static value is normalised as Spark stores it (hr is an int)
    ("INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr='01') VALUES (9, 9.0)",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:X"]),
    ("INSERT OVERWRITE {d}.dim SELECT 5, 'five'", ["{d}:S", "{d}.dim:X"]),
    ("CREATE TABLE {d}.c2 AS SELECT * FROM {d}.dim", ["{d}:S", "{d}.c2:X", "{d}.dim:S"]),
    ("CREATE TABLE {d}.c3 (a INT) USING parquet", ["{d}:S", "{d}.c3:X"]),
    ("CREATE VIEW {d}.v2 AS SELECT * FROM {d}.orders",
     ["{d}:S", "{d}.orders:S", "{d}.v2:X"]),
    ("ALTER VIEW {d}.day1 AS SELECT * FROM {d}.dim", ["{d}:S", "{d}.day1:X", "{d}.dim:S"]),
    ("DROP VIEW {d}.day1", ["{d}:S", "{d}.day1:X"]),
    ("TRUNCATE TABLE {d}.dim", ["{d}:S", "{d}.dim:X"]),
    ("TRUNCATE TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1)",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:X"]),
    ("LOAD DATA LOCAL INPATH '/tmp/none' INTO TABLE {d}.events PARTITION (ds='x')",
     ["{d}:S", "{d}.events:S", "{d}.events/ds=x:X"]),
    ("MSCK REPAIR TABLE {d}.orders", ["{d}:S", "{d}.orders:X"]),
    ("ALTER TABLE {d}.orders RECOVER PARTITIONS", ["{d}:S", "{d}.orders:X"]),
    ("ALTER TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1) RENAME TO"
     " PARTITION (ds='2024-01-01', hr=2)",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:X",
      "{d}.orders/ds=2024-01-01/hr=2:X"]),
    ("ALTER TABLE {d}.dim UNSET TBLPROPERTIES ('a')", ["{d}:S", "{d}.dim:X"]),
    ("DROP DATABASE {d} CASCADE", ["{d}:X"]),
    ("CREATE DATABASE {d}_new", ["{d}_new:X"]),
    ("ANALYZE TABLE {d}.orders PARTITION (ds='2024-01-01', hr=1) COMPUTE STATISTICS",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S"]),
    ("ANALYZE TABLE {d}.dim COMPUTE STATISTICS", ["{d}:S", "{d}.dim:S"]),
    ("CACHE TABLE {d}.dim", ["{d}:S", "{d}.dim:S"]),
    ("DELETE FROM {d}.dim WHERE id = 1", ["{d}:S", "{d}.dim:X"]),
    ("UPDATE {d}.dim SET name = 'x' WHERE id = 1", ["{d}:S", "{d}.dim:X"]),
    ("MERGE INTO {d}.dim t USING {d}.staging s ON t.id = s.id WHEN MATCHED THEN DELETE",
     ["{d}:S", "{d}.dim:X", "{d}.staging:S"]),
]

MORE += [
    # WITH ... INSERT: the target is below the CTE definitions
    ("WITH c AS (SELECT id, amt, hr FROM {d}.staging) INSERT OVERWRITE {d}.orders"
     " PARTITION (ds='2024-04-01', hr) SELECT id, amt, hr FROM c",
     ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-04-01:X", "{d}.staging:S"]),
    # a one-part new name stays in the old table's database
    ("ALTER TABLE {d}.dim RENAME TO dim3", ["{d}:S", "{d}.dim:X", "{d}.dim3:X"]),
]

NO_LOCKS = ["SET spark.sql.shuffle.partitions=2", "SHOW TABLES", "DESCRIBE {d}.dim",
            "SELECT 1", "SHOW DATABASES", "CREATE TEMPORARY VIEW tv_zk AS SELECT 1 AS x"]


@pytest.mark.parametrize("sql,expected", SEED_ROWS + MORE,
                         ids=[s[:60] for s, _ in SEED_ROWS + MORE])
def test_explain_locks(locking, shared_db, sql, expected):
    assert explain(locking, sql.format(d=shared_db)) == [e.format(d=shared_db) for e in expected]


@pytest.mark.parametrize("sql", NO_LOCKS)
def test_statements_without_tables_take_no_locks(locking, shared_db, sql):
    assert explain(locking, sql.format(d=shared_db)) == []


def test_use_takes_no_lock_and_sets_the_database_for_later_names(locking, shared_db, spark):
    assert explain(locking, f"USE {shared_db}") == []
    locking.sql(f"USE {shared_db}")
    try:
        assert explain(locking, "SELECT * FROM dim") == [f"{shared_db}:S", f"{shared_db}.dim:S"]
    finally:
        locking.sql("USE default")


def test_temp_view_resolves_to_its_base_tables(locking, shared_db, spark):
    locking.sql(f"CREATE OR REPLACE TEMPORARY VIEW tv_dim AS SELECT * FROM {shared_db}.dim")
    assert explain(locking, "SELECT * FROM tv_dim") == [f"{shared_db}:S", f"{shared_db}.dim:S"]


@pytest.mark.parametrize("sql", [
    "ALTER TABLE {d}.dim CONCATENATE",  # Hive lock-table rows Spark SQL has no form for
    "ALTER TABLE {d}.dim TOUCH",
    "ALTER TABLE {d}.dim SET FILEFORMAT parquet",
    "SELEC * FROM {d}.dim",
])
def test_statements_spark_cannot_parse_raise_its_parse_error(locking, shared_db, sql):
    with pytest.raises(ParseException):
        locking.sql(f"EXPLAIN LOCKS {sql.format(d=shared_db)}")


def test_explain_notes_when_the_analyzer_rejects(locking, shared_db):
    plan = locking.explain_locks(f"ALTER TABLE {shared_db}.dim REPLACE COLUMNS (x INT)")
    assert plan.rows() == [(shared_db, "S"), (f"{shared_db}.dim", "X")]
    assert plan.notes and "REPLACE COLUMNS" in plan.notes[0]


def test_planner_is_spark_not_text(locking, shared_db):
    """A table name inside a string literal or a comment is not a table read."""
    sql = f"SELECT '{shared_db}.orders' AS s, id FROM {shared_db}.dim -- {shared_db}.orders"
    assert explain(locking, sql) == [f"{shared_db}:S", f"{shared_db}.dim:S"]


def test_filter_above_a_partial_dedup_does_not_pin(locking, shared_db):
    df = locking.table(f"{shared_db}.orders").dropDuplicates(["id"]).where("ds = '2024-01-01'")
    names = [t.obj.name for t in locking.planner.plan_dataframe(df)]
    assert f"{shared_db}.orders/{P2}" in names  # the scan reads every partition


def test_identifier_expression_is_refused_not_unlocked(locking, shared_db):
    from zklock import InvalidArguments

    locking.spark.sql("DECLARE OR REPLACE VARIABLE zk_tbl STRING DEFAULT 'x.y'")
    with pytest.raises(InvalidArguments, match="IDENTIFIER"):
        locking.sql("DROP TABLE IDENTIFIER(zk_tbl)")


def test_spark_statements_zklock_does_not_own_pass_through(locking, spark):
    assert locking.sql(r"SELECT r'C:\' AS p").collect()[0].p == "C:\\"
    (row,) = locking.sql("SET spark.sql.shuffle.partitions=3").collect()
    assert (row.key, row.value) == ("spark.sql.shuffle.partitions", "3")
    spark.conf.unset("spark.sql.shuffle.partitions")


def dataframes(spark, d: str) -> list:
    """DataFrames whose read locks are checked in classic sessions and over Connect."""
    orders = spark.table(f"{d}.orders")
    return [
        orders,
        orders.where("ds = '2024-01-01'"),
        orders.dropDuplicates(["id"]).where("ds = '2024-01-01'"),
        orders.where("ds IN ('2024-01-02', 'x') AND hr = 1"),
        orders.join(spark.table(f"{d}.dim"), "id").where("hr = 1"),
        spark.table(f"{d}.day1").select("id"),
        spark.range(3),
        spark.sql(f"SELECT * FROM {d}.events WHERE ds = '2024-05-05'"),
    ]


#: What an action on each of :func:`dataframes` locks (``{d}`` is the database).
DATAFRAME_LOCKS = [
    ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S",
     "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"],
    ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S"],
    ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S", f"{{d}}.orders/{P1}:S",
     "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"],
    ["{d}:S", "{d}.orders:S", "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S",
     "{d}.orders/ds=x:S", "{d}.orders/ds=x/hr=1:S"],
    ["{d}:S", "{d}.dim:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S",
     f"{{d}}.orders/{P1}:S", "{d}.orders/ds=2024-01-02:S", f"{{d}}.orders/{P2}:S"],
    ["{d}:S", "{d}.day1:S", "{d}.dim:S", "{d}.orders:S", "{d}.orders/ds=2024-01-01:S",
     f"{{d}}.orders/{P1}:S"],
    [],
    ["{d}:S", "{d}.events:S", "{d}.events/ds=2024-05-05:S"],
]


def names(targets) -> list[str]:
    return [f"{t.obj.name}:{t.mode.value}" for t in targets]


def test_dataframe_actions_lock_what_they_read(locking, spark, shared_db):
    for df, expected in zip(dataframes(spark, shared_db), DATAFRAME_LOCKS):
        assert names(locking.planner.plan_dataframe(df)) == [e.format(d=shared_db)
                                                             for e in expected]


def test_the_statement_kind_says_whether_spark_runs_it_in_sql(locking, shared_db):
    kinds = {sql: locking.planner.plan_sql(sql.format(d=shared_db)).is_command
             for sql in ["SELECT * FROM {d}.dim", "WITH c AS (SELECT 1) SELECT * FROM c",
                         "INSERT INTO {d}.dim VALUES (1, 'a')", "SHOW TABLES",
                         "CACHE TABLE {d}.dim", "EXECUTE IMMEDIATE 'SELECT 1'", "VALUES (1)"]}
    assert kinds == {"SELECT * FROM {d}.dim": False,
                     "WITH c AS (SELECT 1) SELECT * FROM c": False,
                     "INSERT INTO {d}.dim VALUES (1, 'a')": True, "SHOW TABLES": True,
                     "CACHE TABLE {d}.dim": True, "EXECUTE IMMEDIATE 'SELECT 1'": True,
                     "VALUES (1)": False}


def test_an_integral_partition_value_is_read_as_spark_reads_it(locking, shared_db):
    """Once two planners drifted here: Python's read ASCII digits only, Java's any Unicode
    digit. Spark's cast reads ASCII digits, so a value of other digits names no partition
    zklock can know: the lock stops at the prefix before it (more, never less)."""
    d = shared_db
    arabic_one = "\u0661"
    assert explain(locking, f"INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr='{arabic_one}')"
                   " VALUES (9, 9.0)") == [f"{d}:S", f"{d}.orders:S",
                                           f"{d}.orders/ds=2024-01-01:X"]
    assert explain(locking, f"INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr=' +01 ')"
                   " VALUES (9, 9.0)") == [f"{d}:S", f"{d}.orders:S",
                                           f"{d}.orders/ds=2024-01-01:S",
                                           f"{d}.orders/{P1}:X"]


def test_partition_names_hive_escapes_are_listed_back(locking, spark, db):
    """Partitions whose names Hive escapes come back from the catalog as their values, and
    an insert into a temporary view over a table's files writes that table."""
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {db}.dim").where("col_name = 'Location'"
                                                                     ).collect()[0].data_type
    locking.sql(f"CREATE OR REPLACE TEMPORARY VIEW tv_files USING parquet"
                f" OPTIONS (path '{location}')")
    values = ["a/b%c=d", "caf\u00e9 \u2603", "x'y\"z", "tab\there", "\U0001f600",
              "arrow -> b"]
    for value in values:
        literal = value.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"ALTER TABLE {db}.orders ADD PARTITION (ds='{literal}', hr=5)")
    rows = locking.explain_locks(f"SELECT * FROM {db}.orders WHERE hr = 5").rows()
    listed = {obj for obj, _ in rows}
    for value in values:
        assert LockObject(db, "orders", (("ds", value), ("hr", "5"))).name in listed
    assert (f"{db}.dim", "X") in locking.explain_locks(
        "INSERT INTO tv_files SELECT 5, 'five'").rows()


values_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
integers = st.from_regex(r"\A[ +-]?[0-9_]{0,5} ?\Z")


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ds=values_text, hr=integers)
@example(ds="k -> v\u0001w", hr="1")  # Scala's map rendering and a control character
def test_any_partition_value_gives_locks_or_one_clear_error(locking, shared_db, ds, hr):
    """Hive's escaping, Spark's value normalisation and the reading of pins, for any text:
    locks of valid objects, or zklock's or Spark's own error, never anything else."""
    from pyspark.errors import PySparkException

    d = shared_db
    for sql in [f"ALTER TABLE {d}.orders ADD PARTITION (ds={sql_string(ds)}, hr={sql_string(hr)})",
                f"INSERT INTO {d}.orders PARTITION (ds={sql_string(ds)}, hr={sql_string(hr)})"
                f" SELECT id, amt FROM {d}.staging",
                f"SELECT * FROM {d}.orders WHERE ds = {sql_string(ds)} AND hr = 1",
                f"SELECT * FROM {d}.orders WHERE ds IN ({sql_string(ds)}, 'b')"]:
        try:
            rows = locking.explain_locks(sql).rows()
        except (ZkLockError, PySparkException):
            continue
        assert rows and all(LockObject.parse(o).name == o for o, _ in rows), sql
