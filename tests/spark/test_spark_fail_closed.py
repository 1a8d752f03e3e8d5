"""Fail closed: every statement form that writes a table takes its locks, or does not run.

Each form is tried twice on real tables with a real ZooKeeper: with another holder keeping
X on the target (denied or refused, table unchanged, no node left) and without contention
(it runs, and takes exactly the locks EXPLAIN LOCKS shows).
"""

from __future__ import annotations

import pytest
from conftest import lock_nodes, raises_lock_error, spark_line, wait_for
from pyspark.sql.catalog import Catalog
from pyspark.sql.types import IntegerType, StructField, StructType

from zklock import LockNotAcquired
from zklock.errors import UnsupportedStatement


def count(spark, table: str) -> int:
    spark.catalog.refreshTable(table)
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def explain(locking, sql: str) -> list[tuple[str, str]]:
    return locking.explain_locks(sql).rows()


# ---- forms that used to write unlocked, under contention -------------------------------
def multi_insert(db: str) -> str:
    return (f"FROM {db}.staging INSERT INTO {db}.dim SELECT id, 'x'"
            f" INSERT INTO {db}.events PARTITION (ds='2024-02-01') SELECT id")


#: What Spark 4.1 added: EXECUTE IMMEDIATE of any string expression, and SQL scripts (4.0's
#: are under development). Absent from older lines' runs, as from docs/spark.md's table.
SPARK_40 = spark_line() >= (4, 0)
SPARK_41 = spark_line() >= (4, 1)
SPARK_40_FORMS = {  # Spark 3.5 has no EXECUTE IMMEDIATE
    "execute immediate literal": (
        lambda db: f"EXECUTE IMMEDIATE 'INSERT INTO {db}.dim SELECT 9, \"nine\"'", "dim"),
}
SPARK_41_FORMS = {
    "execute immediate expression": (
        lambda db: f"EXECUTE IMMEDIATE 'INSERT INTO {db}.dim ' || 'SELECT 9, \"nine\"'", "dim"),
    "script": (lambda db: f"BEGIN INSERT INTO {db}.dim SELECT 9, 'nine'; END", "dim"),
    "script with control flow": (
        lambda db: f"BEGIN DECLARE x INT DEFAULT 0; WHILE x < 2 DO SET x = x + 1;"
                   f" INSERT INTO {db}.dim SELECT x, 'loop'; END WHILE; END", "dim"),
}
CONTENDED = {
    "multi-insert": (multi_insert, "dim"),
    **(SPARK_40_FORMS if SPARK_40 else {}),
    **(SPARK_41_FORMS if SPARK_41 else {}),
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
        with raises_lock_error(LockNotAcquired, match="holder-1"):
            locking.sql(sql)
        assert count(spark, f"{db}.{table}") == before
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


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


@pytest.mark.skipif(not SPARK_40, reason="EXECUTE IMMEDIATE needs Spark 4.0 (docs/spark.md)")
def test_execute_immediate_plans_its_text_from_literal_variable_and_expression(locking, db):
    inner = f"INSERT INTO {db}.events PARTITION (ds='2024-03-01') SELECT id FROM {db}.staging"
    want = explain(locking, inner)
    assert explain(locking, 'EXECUTE IMMEDIATE "' + inner + '"') == want
    locking.sql("DECLARE OR REPLACE VARIABLE zk_stmt STRING")
    locking.sql('SET VAR zk_stmt = "' + inner + '"')
    assert explain(locking, "EXECUTE IMMEDIATE zk_stmt") == want
    if SPARK_41:  # 4.0 takes a literal or a variable only
        assert explain(locking, "EXECUTE IMMEDIATE zk_stmt || ''") == want
    locking.sql("EXECUTE IMMEDIATE zk_stmt")
    assert locking.sql(f"SELECT count(*) AS n FROM {db}.events").collect()[0].n == 1


@pytest.mark.skipif(not SPARK_41, reason="Spark 4.0 parses neither an EXECUTE IMMEDIATE of an"
                    " expression nor a script (docs/spark.md)")
def test_execute_immediate_with_unknowable_text_is_refused(locking, db, zk, root):
    from pyspark.errors import AnalysisException

    with pytest.raises(Exception) as info:  # Spark 4.1 on rejects it first, as analysis
        locking.sql(f"EXECUTE IMMEDIATE (SELECT max(name) FROM {db}.dim)")
    assert isinstance(info.value, (UnsupportedStatement, AnalysisException)), info.value
    assert isinstance(info.value, AnalysisException) or "reads tables" in str(info.value)
    with raises_lock_error(UnsupportedStatement, match="inside a SQL script"):
        locking.sql("BEGIN DECLARE s STRING DEFAULT 'SELECT 1'; EXECUTE IMMEDIATE s; END")
    assert wait_for(lambda: lock_nodes(zk, root) == [])


@pytest.mark.skipif(not SPARK_41, reason="SQL scripts need Spark 4.1 (docs/spark.md)")
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
        make_locking, db, spark, without_nodes, zk, root, make_manager):
    # pretend this Spark has a command zklock never classified: TRUNCATE TABLE's node
    without_nodes("TruncateTable", "TruncateTableCommand")
    strict = make_locking()
    before = count(spark, f"{db}.staging")
    with raises_lock_error(UnsupportedStatement, match="TruncateTable.*zklock.unknown.statements"):
        strict.sql(f"TRUNCATE TABLE {db}.staging")
    assert count(spark, f"{db}.staging") == before
    assert wait_for(lambda: lock_nodes(zk, root) == [])
    lenient = make_locking(unknown_statements="lock")
    assert explain(lenient, f"TRUNCATE TABLE {db}.staging") == [(db, "S"),
                                                                 (f"{db}.staging", "X")]
    other = make_manager()
    with other.acquire([(f"{db}.staging", "S")], query_id="reader-1"):
        with raises_lock_error(LockNotAcquired, match="reader-1"):
            lenient.sql(f"TRUNCATE TABLE {db}.staging")
    lenient.sql(f"TRUNCATE TABLE {db}.staging")
    assert count(spark, f"{db}.staging") == 0


def test_unknown_statements_reaches_a_plain_sessions_statements_by_the_precedence(
        without_nodes, db, spark, zk_hosts, root, monkeypatch):
    """enforce()'s unknown_statements is stronger than the Spark conf's, and the
    environment's weaker (docs/configuration.md, "Precedence"), for the statements of a
    plain session too, which the engine plans in the JVM."""
    from test_spark_engine import no_lock_client

    from zklock.spark import enforce

    without_nodes("TruncateTable", "TruncateTableCommand")
    truncate = f"TRUNCATE TABLE {db}.staging"
    spark.conf.set("spark.zklock.unknown.statements", "refuse")
    try:
        with no_lock_client(spark):
            with enforce(spark, hosts=zk_hosts, root=root, unknown_statements="lock"):
                spark.sql(truncate)  # the argument beats the conf: locked, and run
                assert count(spark, f"{db}.staging") == 0
            monkeypatch.setenv("ZKLOCK_UNKNOWN_STATEMENTS", "lock")
            with enforce(spark, hosts=zk_hosts, root=root):
                with raises_lock_error(UnsupportedStatement, match="TruncateTable"):
                    spark.sql(truncate)  # the conf beats the environment: refused
                spark.conf.unset("spark.zklock.unknown.statements")
                spark.sql(truncate)  # the environment, where the conf says nothing
    finally:
        spark.conf.unset("spark.zklock.unknown.statements")


@pytest.mark.parametrize("sql", [
    "CALL system.noop()",
])
def test_writes_zklock_never_locks_are_refused(locking, sql, zk, root):
    with pytest.raises(Exception) as info:
        locking.sql(sql)
    assert wait_for(lambda: lock_nodes(zk, root) == [])
    assert (info.type is UnsupportedStatement or "PROCEDURE" in str(info.value).upper()
            or "ROUTINE" in str(info.value).upper()  # no such procedure: analysis refuses it
            or (not SPARK_40 and "CALL" in str(info.value)))  # 3.5 cannot parse CALL


# ---- the rest of the PySpark surface ------------------------------------------------
def test_handed_back_sessions_lock(locking, make_manager, db, spark):
    before = count(spark, f"{db}.dim")
    other = make_manager()
    df = locking.table(f"{db}.staging")
    child = locking.newSession()
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-2"):
        for session in (df.sparkSession, child, df.select("id").sparkSession):
            with raises_lock_error(LockNotAcquired, match="holder-2"):
                session.sql(f"INSERT INTO {db}.dim VALUES (8, 'eight')")
        with raises_lock_error(LockNotAcquired, match="holder-2"):
            child.table(f"{db}.dim").write.insertInto(f"{db}.dim")
    assert count(spark, f"{db}.dim") == before
    child.sql(f"INSERT INTO {db}.dim VALUES (8, 'eight')")
    assert count(spark, f"{db}.dim") == before + 1


def table_location(spark, table: str) -> str:
    return spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where(
        "col_name = 'Location'").collect()[0].data_type


@pytest.mark.parametrize("how", ["parquet", "save", "option-path", "partition-dir",
                                 "database-dir"])
def test_path_writes_into_a_tables_location_lock_that_table(how, locking, make_manager, db,
                                                            spark, zk, root):
    location = table_location(spark, f"{db}.dim")
    df = locking.createDataFrame([(7, "seven")], "id INT, name STRING")
    write = df.write.mode("append")
    attempts = {
        "parquet": lambda: write.parquet(location),
        "save": lambda: write.format("parquet").save(location),
        "option-path": lambda: write.format("parquet").option("path", location).save(),
        "partition-dir": lambda: write.parquet(location + "/sub"),
        "database-dir": lambda: write.parquet(location.rsplit("/", 1)[0]),
    }
    before = count(spark, f"{db}.dim")
    other = make_manager()
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-3"):
        with raises_lock_error(LockNotAcquired, match="holder-3"):
            attempts[how]()
    assert count(spark, f"{db}.dim") == before
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


def test_path_write_elsewhere_locks_only_its_sources(locking, make_manager, db, tmp_path):
    other = make_manager()
    with other.acquire([(f"{db}.staging", "X")], query_id="holder-5"):  # its source
        with raises_lock_error(LockNotAcquired, match="holder-5"):
            locking.table(f"{db}.staging").write.parquet(str(tmp_path / "denied"))
    assert not (tmp_path / "denied").exists()  # refused: nothing written
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-4"):  # not its source: runs
        locking.table(f"{db}.staging").write.parquet(str(tmp_path / "out"))
    assert locking.read.parquet(str(tmp_path / "out")).count() \
        == count(locking, f"{db}.staging")


CATALOG_CALLS = {
    "dropTable": (lambda c, db: c.dropTable(f"{db}.dim"), "dim"),
    "truncateTable": (lambda c, db: c.truncateTable(f"{db}.dim"), "dim"),
    "recoverPartitions": (lambda c, db: c.recoverPartitions(f"{db}.events"), "events"),
    "createTable": (lambda c, db: c.createTable(f"{db}.fresh", source="parquet",
                                                 schema=StructType([StructField("id",
                                                                                IntegerType())])),
                    "fresh"),
    "dropView": (lambda c, db: c.dropView(f"{db}.day1"), "day1"),
    "dropDatabase": (lambda c, db: c.dropDatabase(db, cascade=True), None),
    "analyzeTable": (lambda c, db: c.analyzeTable(f"{db}.dim"), "dim"),
}


@pytest.mark.parametrize("method", sorted(m for m in CATALOG_CALLS
                                          if hasattr(Catalog, m)))  # what this PySpark has
def test_catalog_mutations_lock(method, locking, make_manager, db, spark, zk, root):
    call, table = CATALOG_CALLS[method]
    obj = f"{db}.{table}" if table else db
    other = make_manager()
    with other.acquire([(obj, "X")], query_id="holder-5"):
        with raises_lock_error(LockNotAcquired, match="holder-5"):
            call(locking.catalog, db)
    assert spark.catalog.databaseExists(db)
    if method != "createTable":
        assert spark.catalog.tableExists(f"{db}.{table or 'dim'}")
    call(locking.catalog, db)  # uncontended it runs
    assert wait_for(lambda: lock_nodes(zk, root) == [], timeout=30)


def test_catalog_reads_pass_and_changes_are_locked_in_the_engine(locking, make_manager, db,
                                                                spark, tmp_path):
    """Every catalog method that changes a table runs a command, which the engine locks (or
    refuses): there is no list of known methods to fall behind a newer PySpark."""
    assert locking.catalog.tableExists(f"{db}.dim")
    assert {t.name for t in locking.catalog.listTables(db)} >= {"dim", "orders"}
    other = make_manager()
    with other.acquire([(f"{db}.orders", "S")], query_id="holder-c"):
        with raises_lock_error(LockNotAcquired, match="holder-c"):
            locking.catalog.recoverPartitions(f"{db}.orders")
    assert spark.catalog.tableExists(f"{db}.dim")
    locking.catalog.createTable(f"{db}.made", path=str(tmp_path / "made"),
                                schema=spark.table(f"{db}.dim").schema)
    assert spark.catalog.tableExists(f"{db}.made")


def test_insert_into_a_temp_view_over_a_tables_files_locks_the_table(locking, make_manager,
                                                                     db, spark, zk, root):
    location = table_location(spark, f"{db}.dim")
    locking.sql(f"CREATE OR REPLACE TEMPORARY VIEW dim_files USING parquet"
                f" OPTIONS (path '{location}')")
    assert (f"{db}.dim", "X") in explain(locking, "INSERT INTO dim_files SELECT 5, 'five'")
    other = make_manager()
    before = count(spark, f"{db}.dim")
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-6"):
        with raises_lock_error(LockNotAcquired, match="holder-6"):
            locking.sql("INSERT INTO dim_files SELECT 5, 'five'")
    assert count(spark, f"{db}.dim") == before


@pytest.mark.skipif(not SPARK_41, reason="SQL scripts need Spark 4.1 (docs/spark.md)")
def test_lost_lock_stops_a_script(make_locking, db, spark, zk_hosts, zk, root, tmp_path):
    import threading

    from zklock import LockLost
    from zklock.testing import expire_session

    running = tmp_path / "running"  # the script's insert runs its job once this exists
    expired = tmp_path / "expired"  # and its rows wait until the session has expired
    marker, gone = str(running), str(expired)
    # the killer touches `expired` once it has expired the session, or given up: after at
    # most its wait for the lock (held_wait) and expire_session's own (expiry_wait)
    held_wait, expiry_wait = 30.0, 20.0
    bound = held_wait + expiry_wait + 10.0

    def slow(x: int) -> int:
        import pathlib
        import time as _t

        pathlib.Path(marker).touch()
        deadline = _t.monotonic() + bound  # (only if the killer itself hangs)
        while not pathlib.Path(gone).exists() and _t.monotonic() < deadline:
            _t.sleep(0.01)  # (polling the condition: the script is still running then)
        return x
    locking = make_locking()
    locking.udf.register("slow_script", slow, "int")
    before = (count(spark, f"{db}.dim"), count(spark, f"{db}.staging"))
    script = (f"BEGIN INSERT INTO {db}.dim SELECT slow_script(CAST(id AS INT)), 'x'"
              f" FROM range(40); INSERT INTO {db}.staging VALUES (99, 9.0, 9); END")

    def expire_when_held():
        try:
            if wait_for(lambda: bool(lock_nodes(zk, root)) and running.exists(),
                        timeout=held_wait):
                expire_session(locking.manager.client, zk_hosts, wait=expiry_wait)
        finally:
            expired.touch()
    killer = threading.Thread(target=expire_when_held)
    killer.start()
    with raises_lock_error(LockLost):
        locking.sql(script)
    killer.join()
    assert (count(spark, f"{db}.dim"), count(spark, f"{db}.staging")) == before


LOCATION_FORMS = {
    "create table at another's location": lambda db, loc: (
        f"CREATE TABLE {db}.alias (id INT, name STRING) USING parquet LOCATION '{loc}'"),
    "ctas at another's location": lambda db, loc: (
        f"CREATE TABLE {db}.alias USING parquet LOCATION '{loc}' AS SELECT 1 AS id"),
    "set location onto another's": lambda db, loc: (
        f"ALTER TABLE {db}.staging SET LOCATION '{loc}'"),
    "load data moving another's files": lambda db, loc: (
        f"LOAD DATA INPATH '{loc}' INTO TABLE {db}.staging"),
}


@pytest.mark.parametrize("form", sorted(LOCATION_FORMS))
def test_statements_touching_another_tables_location_lock_it(form, locking, db, spark):
    location = table_location(spark, f"{db}.dim")
    assert (f"{db}.dim", "X") in explain(locking, LOCATION_FORMS[form](db, location))


def test_writers_with_a_path_option_lock_the_table_stored_there(locking, make_manager, db,
                                                                spark):
    location = table_location(spark, f"{db}.dim")
    df = locking.createDataFrame([(7, "seven")], "id INT, name STRING")
    other = make_manager()
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-7"):
        with raises_lock_error(LockNotAcquired, match="holder-7"):
            df.write.format("parquet").option("path", location).saveAsTable(f"{db}.alias2")
        if SPARK_40:  # Spark 3.5's writeTo ignores a path option: alias3 gets its own files
            with raises_lock_error(LockNotAcquired, match="holder-7"):
                df.writeTo(f"{db}.alias3").using("parquet").option("path", location).create()
    assert not spark.catalog.tableExists(f"{db}.alias2")


def test_save_as_table_runs_only_what_its_locks_cover(locking, db, spark):
    """A saveAsTable held whole (EngineCalls.lockSaveAsTable: Spark 3.5 and 4.0, whose call
    drops an overwritten table before any command runs) is a block: a command it runs is
    covered only where its locks cover it. Held for another table, a saveAsTable of this one
    is refused before Spark drops anything, on every line."""
    from zklock.spark.held import run_held
    from zklock.spark.lock_client import engine_of

    before = count(spark, f"{db}.dim")
    df = locking.createDataFrame([(8, "eight")], "id INT, name STRING")
    writer = df.write.mode("overwrite").format("parquet")
    held = engine_of(spark).lockSaveAsTable(spark._jsparkSession, f"{db}.staging", None,
                                            writer._jwrite, df._jdf)
    with pytest.raises(Exception) as raised:
        with run_held(held, [f"{db}.staging"]):
            writer.saveAsTable(f"{db}.dim")
    assert "do not cover" in str(raised.value), raised.value
    assert spark.catalog.tableExists(f"{db}.dim") and count(spark, f"{db}.dim") == before
