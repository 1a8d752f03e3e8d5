"""`zklock doctor`: tables Spark reads through a file-sink log, named, and the empty ones
repaired under their X lock (in-process: it reuses the test's SparkSession)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from zklock.cli.main import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False,
                              env={"ZKLOCK_RETRIES": "0"})


def location(spark, table: str) -> Path:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    # the details' Location, after the columns (one of which may be named so)
    return Path([r.data_type for r in rows if r.col_name == "Location"][-1]
                .removeprefix("file:"))


def count(spark, table: str) -> int:
    spark.catalog.refreshTable(table)
    return spark.table(table).count()


def test_doctor_names_tables_read_through_a_sink_log_and_repairs_the_empty(
        spark, db, make_manager, zk_hosts, root):
    damaged, streamed = f"{db}.damaged", f"{db}.streamed"
    for table in (damaged, streamed):
        spark.sql(f"CREATE TABLE {table} (id INT) USING parquet")
        spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT) FROM range(100)")
    # an empty log, as a refused start of an earlier zklock left it: the table reads empty
    (location(spark, damaged) / "_spark_metadata").mkdir()
    assert count(spark, damaged) == 0
    # a log with an entry, of a stream run without zklock: the owner's decision
    log = location(spark, streamed) / "_spark_metadata"
    log.mkdir()
    (log / "0").write_text("v1\n")
    zk = ("--zk", zk_hosts, "--root", root)

    out = run(*zk, "doctor", db)
    assert out.exit_code == 1, out.output
    lines = out.output.splitlines()
    assert sorted(line.split(":")[1].strip() for line in lines) == sorted([damaged, streamed])
    assert any(damaged in line and "empty file-sink log" in line and "--repair" in line
               for line in lines), lines
    assert any(streamed in line and "1 entries" in line for line in lines), lines

    # the repair waits for the table's holders (X), as any writer of it: denied (at once,
    # ZKLOCK_RETRIES=0), in one line of its own, and the other table still named
    holder = make_manager()
    with holder.acquire([(damaged, "S")], query_id="reader-5"):
        out = run(*zk, "doctor", "--repair", db)
    assert out.exit_code == 3, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in out.output, lines
    assert any(damaged in line and "not repaired" in line and "reader-5" in line
               for line in lines), lines
    assert (location(spark, damaged) / "_spark_metadata").exists()

    out = run(*zk, "doctor", "--repair", "--json", db)
    assert out.exit_code == 1  # the other table still needs its owner
    rows = {r["table"]: r for r in json.loads(out.output)}
    assert rows[damaged]["repaired"] is True and rows[damaged]["entries"] == 0
    assert rows[streamed]["repaired"] is False and rows[streamed]["entries"] == 1
    assert count(spark, damaged) == 100
    assert (log / "0").exists()

    log.joinpath("0").unlink()
    log.rmdir()
    out = run(*zk, "doctor", db)
    assert out.exit_code == 0 and "no table is read through a file-sink log" in out.output


def test_doctor_names_an_unknown_database_in_one_line(spark, zk_hosts, root):
    out = run("--zk", zk_hosts, "--root", root, "doctor", "no_such_db_7")
    assert out.exit_code == 1
    assert out.output.strip() == "zklock: no database no_such_db_7 in the catalog"
    out = run("--zk", zk_hosts, "--root", root, "doctor", "spark_catalog.sales")
    assert out.exit_code == 1 and len(out.output.strip().splitlines()) == 1
    assert "name a database of the session's catalog" in out.output


def test_doctor_reads_the_location_after_the_columns(spark, db, zk_hosts, root):
    """A column named Location is not the table's location (DESCRIBE lists columns first)."""
    table = f"{db}.places"
    spark.sql(f"CREATE TABLE {table} (id INT, Location STRING) USING parquet")
    (location(spark, table) / "_spark_metadata").mkdir()
    out = run("--zk", zk_hosts, "--root", root, "doctor", db)
    assert out.exit_code == 1 and f"{table}: an empty file-sink log" in out.output
