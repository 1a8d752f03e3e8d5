"""`zklock explain` and `zklock sql` (in-process: they reuse the test's SparkSession)."""

from __future__ import annotations

import json

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
