"""LockPlanner.java (what the Spark Connect plugin plans with) against planner.py, statement by
statement, on the real ``shared_db`` warehouse.

Both planners run in the same local SparkSession: planner.py through py4j, LockPlanner.java
loaded from the plugin jar into the same JVM. Every statement of the conformance corpus
(tests/test_spark_corpus.py) and every case of tests/test_spark_planner.py must give the same
locks in the same order, or the same refusal, or the same Spark error. The node table the
jar carries must be nodes.py's.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_spark_corpus import CORPUS
from test_spark_planner import MORE, NO_LOCKS, SEED_ROWS

from zklock.errors import ZkLockError
from zklock.lockrequest import normalize
from zklock.mode import Mode
from zklock.spark import nodes
from zklock.spark.connect_plugin import JvmLockPlanner, load
from zklock.spark.planner import LockPlanner


@pytest.fixture(scope="module")
def python_planner(spark) -> LockPlanner:
    return LockPlanner(spark)


@pytest.fixture(scope="module")
def java_planner(spark) -> JvmLockPlanner:
    return load(spark)


def outcome(plan) -> object:
    """The rows, or what was raised (class and message: refusals must read the same)."""
    try:
        return plan()
    except ZkLockError as exc:  # UnsupportedStatement, InvalidArguments, InvalidLockObject
        return (type(exc).__name__, str(exc))
    except Exception as exc:  # Spark's own error: the same class from both
        return ("spark", type(exc).__name__)


def both(python_planner, java_planner, sql: str, strict: bool = False) -> tuple:
    """What each planner makes of ``sql``: (locks, runs as a command), or what it raised."""
    def classic() -> tuple:
        plan = python_planner.plan_parsed(python_planner.jvm.parse(sql), strict=strict)
        return plan.rows(), plan.is_command

    py = outcome(classic)
    java = outcome(lambda: java_planner.plan_statement(sql, strict=strict))
    return py, java


def test_the_jar_carries_the_node_table_of_nodes_py(java_planner):
    from zklock.spark import planner

    lines = java_planner.node_table().splitlines()
    words = lines.index("words\t" + ",".join(nodes.WRITE_WORDS))
    loaded = dict(line.split("\t") for line in lines[:words])
    assert loaded == {name: kind.name for name, kind in nodes.NODE_KINDS.items()}
    assert lines[words + 1:] == [
        *(f"set\t{name}\t{','.join(sorted(getattr(planner, name)))}"
          for name in sorted(("KNOWN_QUERIES", "STATEMENT_CONTAINERS", "VIEW_DDL"))),
        f"value\tMAX_PINNED\t{planner.MAX_PINNED}"]


@pytest.mark.parametrize("kind,template", CORPUS, ids=[t[:60] for _, t in CORPUS])
def test_corpus_statement_plans_the_same(python_planner, java_planner, spark, shared_db,
                                         kind, template):
    spark.sql("DECLARE OR REPLACE VARIABLE v_corpus_set INT")
    py, java = both(python_planner, java_planner, template.format(d=shared_db))
    assert java == py


@pytest.mark.parametrize("sql", [s for s, _ in SEED_ROWS + MORE] + NO_LOCKS,
                         ids=[s[:60] for s, _ in SEED_ROWS + MORE] + NO_LOCKS)
def test_planner_case_plans_the_same(python_planner, java_planner, shared_db, sql):
    py, java = both(python_planner, java_planner, sql.format(d=shared_db))
    assert java == py


@pytest.mark.parametrize("sql", [
    "ALTER TABLE {d}.dim REPLACE COLUMNS (x INT)",   # the analyzer rejects it: strict raises
    "INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr='01') VALUES (9, 9.0)",
    "SELECT * FROM {d}.no_such_table",
    "SELEC 1",
    "DROP TABLE IDENTIFIER(zk_jvm_tbl)",
    "EXECUTE IMMEDIATE 'INSERT INTO ' || zk_jvm_tbl2 || ' SELECT 7, ''s'''",
    "EXECUTE IMMEDIATE (SELECT 'SELECT 1' FROM {d}.dim LIMIT 1)",
    "ALTER TABLE {d}.orders ADD PARTITION (ds='a/b%c=d', hr=3)",
    "ALTER TABLE {d}.orders ADD PARTITION (ds='caf\u00e9 \u2603', hr=3)",
])
@pytest.mark.parametrize("strict", [True, False])
def test_strict_planning_and_edge_cases_agree(python_planner, java_planner, spark, shared_db,
                                              sql, strict):
    spark.sql("DECLARE OR REPLACE VARIABLE zk_jvm_tbl STRING DEFAULT 'x.y'")
    spark.sql(f"DECLARE OR REPLACE VARIABLE zk_jvm_tbl2 STRING DEFAULT '{shared_db}.dim'")
    py, java = both(python_planner, java_planner, sql.format(d=shared_db), strict=strict)
    assert java == py


def test_use_and_temporary_views_resolve_the_same(python_planner, java_planner, spark,
                                                  shared_db):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW tv_jvm AS SELECT * FROM {shared_db}.orders")
    spark.sql(f"USE {shared_db}")
    try:
        for sql in ["SELECT * FROM dim", "INSERT INTO dim SELECT id, 'x' FROM tv_jvm",
                    "SELECT * FROM tv_jvm WHERE ds = '2024-01-02'", "DROP TABLE dim",
                    "ALTER TABLE orders DROP PARTITION (ds='2024-01-01', hr=1)"]:
            py, java = both(python_planner, java_planner, sql)
            assert java == py, sql
    finally:
        spark.sql("USE default")


@pytest.mark.parametrize("policy", ["refuse", "lock"])
def test_a_node_missing_from_nodes_py_is_refused_or_locked_the_same(spark, shared_db, policy,
                                                                    without_nodes):
    """A command nodes.py does not know (TRUNCATE TABLE's, removed here) reaches the jar's
    table too: the same refusal, or the same conservative locks."""
    without_nodes("TruncateTable", "TruncateTableCommand")
    py_planner, java_planner = LockPlanner(spark, unknown_statements=policy), load(spark, policy)
    assert "TruncateTable\t" not in java_planner.node_table()
    for sql in [f"TRUNCATE TABLE {shared_db}.staging", f"CALL {shared_db}.p()",
                f"BEGIN TRUNCATE TABLE {shared_db}.dim; END"]:
        py, java = both(py_planner, java_planner, sql)
        assert java == py, sql
    assert both(py_planner, java_planner, f"TRUNCATE TABLE {shared_db}.staging")[1] == (
        ([(shared_db, "S"), (f"{shared_db}.staging", "X")], True) if policy == "lock" else
        ("UnsupportedStatement", "zklock has no lock rule for TruncateTable, so the statement"
         " was not run; SET zklock.unknown.statements=lock (spark.zklock.unknown.statements)"
         " to lock every table it names in X instead"))


def dataframes(spark, d: str) -> list:
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


def test_the_statement_kind_is_the_classic_planners(python_planner, java_planner, shared_db):
    kinds = {sql: both(python_planner, java_planner, sql.format(d=shared_db))[1][1]
             for sql in ["SELECT * FROM {d}.dim", "WITH c AS (SELECT 1) SELECT * FROM c",
                         "INSERT INTO {d}.dim VALUES (1, 'a')", "SHOW TABLES", "CACHE TABLE"
                         " {d}.dim", "EXECUTE IMMEDIATE 'SELECT 1'", "VALUES (1)"]}
    assert kinds == {"SELECT * FROM {d}.dim": False,
                     "WITH c AS (SELECT 1) SELECT * FROM c": False,
                     "INSERT INTO {d}.dim VALUES (1, 'a')": True, "SHOW TABLES": True,
                     "CACHE TABLE {d}.dim": True, "EXECUTE IMMEDIATE 'SELECT 1'": True,
                     "VALUES (1)": False}


def test_dataframes_plan_the_same(python_planner, java_planner, spark, shared_db):
    for df in dataframes(spark, shared_db):
        expected = [(t.obj.name, t.mode.value) for t in python_planner.plan_dataframe(df)]
        assert java_planner.plan_dataframe(df) == expected


def test_dataframe_writes_plan_the_same(python_planner, java_planner, spark, shared_db):
    d = shared_db
    src = spark.table(f"{d}.staging")
    location = python_planner.jvm.table_location(d, "events")
    cases = [
        (f"{d}.orders", {"ds": "2024-01-01", "hr": "01"}, ()),
        (f"{d}.orders", {"hr": "1"}, ()),
        (f"{d}.dim", None, ()),
        ("no_such_db_x.t", None, ()),
        (None, None, (location + "/ds=2024-01-01",)),
        (None, None, ("/tmp/zk-jvm-nowhere",)),
    ]
    for table, partition, paths in cases:
        if table is not None:
            expected = python_planner.plan_table_write(table, src, partition)
        else:
            expected = python_planner.plan_dataframe(src)
        written = [(o, Mode.EXCLUSIVE) for p in paths for o in python_planner.tables_at(p)]
        if written:
            expected = normalize([(t.obj, t.mode) for t in expected] + written)
        got = java_planner.plan_write(table, src, partition, list(paths))
        assert got == [(t.obj.name, t.mode.value) for t in expected], (table, paths)


def test_writes_into_a_tables_files_and_escaped_partition_names_plan_the_same(
        python_planner, java_planner, spark, db):
    """A temporary view over a table's files (an insert into it writes that table), and
    partitions whose names Hive escapes, listed back from the catalog."""
    location = python_planner.jvm.table_location(db, "dim")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW tv_files USING parquet"
              f" OPTIONS (path '{location}')")
    for value in ["a/b%c=d", "caf\u00e9 \u2603", "x'y\"z", "tab\there", "\U0001f600",
                  "ctl\u0001a", "arrow -> b"]:
        literal = value.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"ALTER TABLE {db}.orders ADD PARTITION (ds='{literal}', hr=5)")
    for sql in [f"INSERT INTO tv_files SELECT id, 'x' FROM {db}.events",
                f"SELECT * FROM {db}.orders", f"SELECT * FROM {db}.orders WHERE hr = 5",
                f"SELECT * FROM {db}.orders WHERE ds = 'a/b%c=d'",
                f"BEGIN SELECT * FROM {db}.orders; END"]:
        py, java = both(python_planner, java_planner, sql)
        assert java == py, sql
        assert isinstance(py[0], list) and py[0], sql
    assert (f"{db}.dim", "X") in both(python_planner, java_planner,
                                      "INSERT INTO tv_files SELECT 5, 'five'")[1][0]


values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
integers = st.from_regex(r"\A[ +-]?[0-9_]{0,5} ?\Z")


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ds=values, hr=integers)
@example(ds="k -> v\u0001w", hr="1")  # Scala's map rendering and a control character
def test_any_partition_value_plans_the_same(python_planner, java_planner, shared_db, ds, hr):
    """Hive's escaping, Spark's value normalisation and the literal reading of pins, for
    any text: the same locks, or the same error."""
    d = shared_db
    for sql in [f"ALTER TABLE {d}.orders ADD PARTITION (ds={sql_string(ds)}, hr={sql_string(hr)})",
                f"INSERT INTO {d}.orders PARTITION (ds={sql_string(ds)}, hr={sql_string(hr)})"
                f" SELECT id, amt FROM {d}.staging",
                f"SELECT * FROM {d}.orders WHERE ds = {sql_string(ds)} AND hr = 1",
                f"SELECT * FROM {d}.orders WHERE ds IN ({sql_string(ds)}, 'b')"]:
        py, java = both(python_planner, java_planner, sql)
        assert java == py, sql
