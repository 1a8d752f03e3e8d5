"""`zklock schedule ...` and `zklock scheduler status` (in-process: the test's SparkSession)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ADMIN, wait_for
from zklock.cli.main import cli


@pytest.fixture
def run(sched_conf):
    env = {"ZKLOCK_ZK": sched_conf["hosts"], "ZKLOCK_ROOT": sched_conf["root"],
           "ZKLOCK_SCHEDULER_ROOT": sched_conf["scheduler_root"], "ZKLOCK_USER": ADMIN,
           "ZKLOCK_SCHEDULER_ADMINS": ADMIN}

    def invoke(*args: str, user: str = ADMIN):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False,
                                  env={**env, "ZKLOCK_USER": user})
    return invoke


def test_schedule_lifecycle_table_and_json(spark, run):
    out = run("schedule", "create", "q1", "SELECT 1", "--every", "10 minutes",
              "--offset", "1m")
    assert out.exit_code == 0, out.output
    assert "created q1" in out.output
    rows = json.loads(run("schedule", "list", "--json").output)
    assert [(r["schedule_name"], r["schedule"], r["user"]) for r in rows] == [
        ("q1", "EVERY 10 MINUTES OFFSET BY '1m'", ADMIN)]
    out = run("schedule", "list")
    assert out.output.splitlines()[0].split()[:3] == ["SCHEDULE_NAME", "ENABLED", "SCHEDULE"]
    shown = json.loads(run("schedule", "show", "q1", "--json").output)
    assert shown["query"] == "SELECT 1" and shown["enabled"] is True
    assert run("schedule", "alter", "q1", "--cron", "0 3 * * *", "--timezone",
               "Asia/Tokyo").exit_code == 0
    assert json.loads(run("schedule", "show", "q1", "--json").output)["timezone"] == \
        "Asia/Tokyo"
    assert run("schedule", "alter", "q1", "--disable").exit_code == 0
    requested = run("schedule", "run-now", "q1")
    assert requested.exit_code == 0 and "requested a run of q1" in requested.stdout
    assert "no scheduler process runs" in requested.stderr  # and how to start one
    assert "zklock scheduler run" in requested.stderr
    runs = json.loads(run("schedule", "executions", "q1", "--json").output)
    assert [r["state"] for r in runs] == []  # no scheduler up: the run-now is requested
    assert json.loads(run("schedule", "show", "q1", "--json").output)["enabled"] is False
    assert run("schedule", "drop", "q1").exit_code == 0
    assert run("schedule", "list").output.strip() == "(none)"


def test_create_checks_the_admin_right_before_spark_starts(run, tmp_path):
    init = tmp_path / "init.sql"
    init.write_text("SELEC this would fail if Spark started")
    out = run("schedule", "create", "q3", "SELECT 1", "--every", "10 minutes",
              "--init-sql", str(init), user="bob")
    assert out.exit_code == 1 and "only scheduler admins" in out.output


def test_bad_input_is_one_clear_line(spark, run):
    out = run("schedule", "create", "q2", "SELECT 1", "--cron", "0 61 * * *")
    assert out.exit_code == 1 and "bad cron expression" in out.output
    assert "Traceback" not in out.output
    out = run("schedule", "create", "q2", "SELEC 1", "--cron", "0 1 * * *")
    assert out.exit_code == 1 and "does not parse" in out.output
    out = run("schedule", "create", "q2", "SELECT 1", "--every", "10 minutes", user="bob")
    assert out.exit_code == 1 and "only scheduler admins" in out.output
    out = run("schedule", "alter", "nope", "--enable", "--execute")
    assert out.exit_code == 2
    out = run("schedule", "drop", "nope")
    assert out.exit_code == 1 and "no scheduled query 'nope'" in out.output
    out = run("schedule", "create", "bad/name", "SELECT 1", "--every", "1 hour")
    assert out.exit_code == 1 and "bad scheduled query name" in out.output
    assert json.loads(run("schedule", "list", "--json").output) == []


def test_scheduler_status(make_scheduler, run):
    a = make_scheduler(pool_size=3)
    assert wait_for(lambda: a.is_leader, timeout=10)
    b = make_scheduler(pool_size=1)
    status = json.loads(run("scheduler", "status", "--json").output)
    assert status["leader"] == a.id
    by_id = {r["executor"]: r for r in status["executors"]}
    assert set(by_id) == {a.id, b.id}
    assert by_id[a.id]["leader"] and not by_id[b.id]["leader"]
    assert by_id[a.id]["pool_size"] == 3 and by_id[a.id]["running"] == []
    out = run("scheduler", "status")
    assert f"leader {a.id}" in out.output and "yes" in out.output
