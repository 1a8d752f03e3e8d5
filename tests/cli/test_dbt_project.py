"""A real dbt project (dbt-core with dbt-spark's ``thrift`` method, PyHive, both from the
package registry) through ``zklock spark thrift-server``, with docs/deploy.md's hooks (a
session's LOCK TABLE before each table model, UNLOCK TABLE after): while ``dbt run`` drops
and re-creates each table model, another JDBC application reads them in a loop and never
finds one missing, empty or partial.

dbt runs from a virtual environment of its own (``.zklock/dbt-venv``, made once), as a
platform runs it beside its Spark: its dependencies are not the project's. In
``make test-docs``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import PROJECT, PYTHON, wait_for
from deployed import dbt_hooks

from zklock import LockManager
from zklock.servers.ports import free_port

pytestmark = pytest.mark.docs

DBT_VENV = PROJECT / ".zklock" / "dbt-venv"
DBT_REQUIREMENTS = ["dbt-core<1.12", "dbt-spark[PyHive]"]
RUNS = 3
ROWS = 100


def dbt_command() -> Path:
    """dbt, installed into its own venv the first time."""
    dbt = DBT_VENV / "bin" / "dbt"
    if not dbt.exists():
        subprocess.run([sys.executable, "-m", "venv", str(DBT_VENV)], check=True)
        out = subprocess.run([str(DBT_VENV / "bin" / "python"), "-m", "pip", "install", "-q",
                              *DBT_REQUIREMENTS], capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout + out.stderr
    return dbt


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "zklock.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def project(where: Path, port: int) -> Path:
    """A dbt project of two table models, the second built from the first, with the hooks
    docs/deploy.md gives (tests/deployed.py reads them from there)."""
    where.mkdir(parents=True)
    (where / "profiles.yml").write_text(
        "shop:\n  target: dev\n  outputs:\n    dev:\n      type: spark\n      method: thrift\n"
        f"      host: 127.0.0.1\n      port: {port}\n      user: dbt\n      schema: shop\n"
        "      threads: 1\n      connect_retries: 0\n")
    (where / "dbt_project.yml").write_text(
        "name: shop\nversion: '1.0'\nprofile: shop\nmodels:\n  shop:\n"
        "    +materialized: table\n    +file_format: parquet\n" + dbt_hooks(indent=4))
    models = where / "models"
    models.mkdir()
    (models / "orders.sql").write_text(f"select id, id * 2 as amount from range({ROWS})\n")
    (models / "order_totals.sql").write_text(
        "select count(*) as n, sum(amount) as total from {{ ref('orders') }}\n")
    return where


def test_dbt_table_models_are_never_missing_to_a_reader(tmp_path, zk_hosts):
    from pyhive import hive

    dbt = dbt_command()
    port = free_port()
    root = "/zklock-tests-dbt"
    state = tmp_path / "state"
    out = cli("--zk", zk_hosts, "--root", root, "--state-dir", state, "spark",
              "thrift-server", "start", "--port", port, "--warehouse", tmp_path / "wh",
              "--conf", "spark.driver.memory=768m")
    assert out.returncode == 0, out.stderr
    try:
        where = project(tmp_path / "shop", port)
        env = {**os.environ, "DBT_PROFILES_DIR": str(where), "DBT_SEND_ANONYMOUS_USAGE_STATS":
               "false"}

        def run() -> subprocess.CompletedProcess:
            return subprocess.run([str(dbt), "run", "--project-dir", str(where)],
                                  capture_output=True, text=True, timeout=600, env=env)

        first = run()
        assert first.returncode == 0, first.stdout + first.stderr
        seen: list[object] = []
        reading = threading.Event()
        reading.set()

        def reader() -> None:  # another application, reading each model in a loop
            cursor = hive.connect(host="127.0.0.1", port=port, username="report").cursor()
            while reading.is_set():
                for sql in ("SELECT count(*), sum(amount) FROM shop.orders",
                            "SELECT n, total FROM shop.order_totals"):
                    try:
                        cursor.execute(sql)
                        seen.append(tuple(cursor.fetchall()[0]))
                    except Exception as exc:  # noqa: BLE001 (what it met is the outcome)
                        seen.append(str(exc).splitlines()[0][:300])
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            assert wait_for(lambda: len(seen) >= 2, timeout=120)
            for _ in range(RUNS):  # each run drops and re-creates both tables
                again = run()
                assert again.returncode == 0, again.stdout + again.stderr
        finally:
            reading.clear()
            thread.join(120)
        whole = (ROWS, ROWS * (ROWS - 1))
        assert seen and all(s == whole for s in seen), [s for s in seen if s != whole][:5]
        # the models' locks were the session's, and none is left
        with LockManager(hosts=zk_hosts, root=root) as manager:
            assert wait_for(lambda: not manager.show("shop"), timeout=60)
    finally:
        cli("--state-dir", state, "spark", "thrift-server", "stop")
