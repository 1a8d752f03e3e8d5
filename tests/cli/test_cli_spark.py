"""`zklock explain` and `zklock sql` (in-process: they reuse the test's SparkSession)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from zklock.cli.main import cli


def run(*args: str):
    # one attempt: a denied statement answers at once instead of after ten retries
    return CliRunner().invoke(cli, list(args), catch_exceptions=False,
                              env={"ZKLOCK_RETRIES": "0"})


def test_explain_prints_the_plan_as_table_and_json(spark, shared_db, zk_hosts, root):
    sql = f"SELECT * FROM {shared_db}.orders WHERE ds = '2024-01-01' AND hr = 1"
    out = run("--zk", zk_hosts, "--root", root, "explain", sql)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split() == ["OBJECT", "MODE"]
    assert lines[-1].split() == [f"{shared_db}.orders/ds=2024-01-01/hr=1", "S"]
    out = run("--zk", zk_hosts, "--root", root, "explain", "--json",
              f"INSERT INTO {shared_db}.dim VALUES (1, 'x')")
    assert json.loads(out.output) == [{"object": shared_db, "mode": "S"},
                                      {"object": f"{shared_db}.dim", "mode": "X"}]


def test_explain_with_init_sql_and_conf(spark, shared_db, tmp_path, zk_hosts, root):
    init = tmp_path / "init.sql"
    init.write_text(f"-- register what the pipeline uses;\nCREATE OR REPLACE TEMPORARY VIEW"
                    f" cli_v AS SELECT * FROM {shared_db}.dim;\n")
    out = run("--zk", zk_hosts, "--root", root, "explain", "--init-sql", str(init),
              "--conf", "spark.sql.shuffle.partitions=2", "--json", "SELECT * FROM cli_v")
    assert out.exit_code == 0, out.output
    assert [r["object"] for r in json.loads(out.output)] == [shared_db, f"{shared_db}.dim"]


def test_bad_sql_and_bad_conf_are_one_clear_error(spark, zk_hosts, root):
    out = run("--zk", zk_hosts, "--root", root, "explain", "SELEC 1")
    assert out.exit_code == 1
    assert "PARSE_SYNTAX_ERROR" in out.output and "Traceback" not in out.output
    out = run("--zk", zk_hosts, "--root", root, "sql", "--conf", "nonsense", "SELECT 1")
    assert out.exit_code == 1 and "--conf takes key=value" in out.output


def test_sql_runs_through_a_locking_session(spark, db, make_manager, zk_hosts, root):
    out = run("--zk", zk_hosts, "--root", root, "sql", f"INSERT INTO {db}.dim VALUES (3, 'c')")
    assert out.exit_code == 0 and out.output.strip() == "OK"
    other = make_manager()
    with other.acquire([(f"{db}.dim", "X")], query_id="maint"):
        out = run("--zk", zk_hosts, "--root", root, "sql", f"SELECT * FROM {db}.dim")
        assert out.exit_code == 3 and "maint" in out.output
        out = run("--zk", zk_hosts, "--root", root, "sql", "--json", "SHOW LOCKS EXTENDED")
        rows = json.loads(out.output)
        assert {(r["object"], r["mode"], r["query_id"]) for r in rows} == {
            (db, "S", "maint"), (f"{db}.dim", "X", "maint")}
    out = run("--zk", zk_hosts, "--root", root, "sql", "--json",
              f"SELECT count(*) AS n FROM {db}.dim")
    assert json.loads(out.output) == [{"n": 3}]


def test_a_spark_error_is_one_line_and_sparks_log_goes_to_a_file(zk_hosts, root, tmp_path):
    """In a process of its own (a fresh JVM): Spark's log and Java's stack go to
    <state dir>/spark.log; the screen gets one line."""
    import subprocess

    from conftest import PYTHON

    state = tmp_path / "state"
    proc = subprocess.run([PYTHON, "-m", "zklock.cli.main", "--zk", zk_hosts, "--root", root,
                           "--state-dir", str(state), "sql",
                           "SELECT * FROM nosuch_db_cli.nosuch_table"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("zklock: ") and "nosuch" in lines[0], lines
    assert (state / "spark.log").stat().st_size > 0


def test_verbose_names_the_file_sparks_log_goes_to(spark, zk_hosts, root, tmp_path):
    out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, "--state-dir",
                                   str(tmp_path), "--verbose", "explain", "SELECT 1"])
    assert out.exit_code == 0
    assert f"zklock: Spark's log: {(tmp_path / 'spark.log').resolve()}" in out.stderr


def test_spark_jar_prints_or_places_the_module_jar(tmp_path):
    """`zklock spark jar` for an image builder: the installed Spark's jar, copied where
    asked; a Spark this install has no jar for, or a place it cannot write, is one line."""
    import pyspark

    from zklock.spark.jvm import build_hash, jar_info, jar_line

    out = CliRunner().invoke(cli, ["spark", "jar"])
    assert out.exit_code == 0, out.output
    assert jar_info(Path(out.output.strip()))["build"] == build_hash()
    out = CliRunner().invoke(cli, ["spark", "jar", "--spark-version", pyspark.__version__,
                                   "--output", str(tmp_path)])
    assert out.exit_code == 0, out.output
    placed = Path(out.output.strip())
    assert placed.parent == tmp_path and placed.name.startswith("zklock")
    assert jar_info(placed)["build"] == build_hash()
    other = "3.5.4" if jar_line(pyspark.__version__) >= (4, 0) else "4.0.1"
    for args, message in ((["--spark-version", "3.4.0"], "zklock supports Spark 3.5 to"),
                          (["--spark-version", other], "carries no jar for Spark"),
                          (["--output", str(tmp_path / "missing" / "x.jar")], "cannot write")):
        out = CliRunner().invoke(cli, ["spark", "jar", *args])
        assert out.exit_code == 1 and message in out.output, out.output
        assert out.output.count("\n") == 1 and "Traceback" not in out.output
