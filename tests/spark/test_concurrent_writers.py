"""Writers of one table at once, in one application and in several: every statement that
returns has written all its rows, every one that raises has written none, and no staging
is left behind (zklock/spark/java/StagedCommitProtocol.java: staging per write job).

In one application (tests/spark/writers_app.py, a Hive-enabled application in a process of
its own), two threads write their own partitions (or tables) of one table at once, through
one LockingSession and through the plain session under ``enforce()``: datasource and
Hive-format tables; static, dynamic and mixed partitions; append and overwrite; CTAS;
``df.write`` with insertInto and saveAsTable; and a writer whose every job fails in a task
beside one that commits. On ``local[4]`` here (every kind), the core case on ``local[2]``,
and three applications at once: each a Spark application of its own, marked soak (`make
soak-spark`, which CI runs after `make test`); on ``local-cluster`` (tasks and their commits
in executor JVMs of their own) in tests/spark/test_local_cluster.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import PROJECT, PYTHON
from writers_app import LOCKING_CASES, check

COUNT = 5


def run_app(work, zk_hosts: str, root: str, master: str, cases: str) -> dict:
    out = subprocess.run([PYTHON, str(PROJECT / "tests" / "spark" / "writers_app.py"),
                          zk_hosts, root, str(work), master, cases],
                         capture_output=True, text=True, timeout=900, cwd=work)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local4(tmp_path_factory, zk_hosts) -> dict:
    return run_app(tmp_path_factory.mktemp("writers"), zk_hosts, "/zklock-tests-writers",
                   "local[4]", "all")


@pytest.mark.soak  # a Spark application of its own for 90 s: run with `make soak-spark`
def test_every_kind_of_write_by_two_threads_at_once_is_all_or_nothing(local4) -> None:
    assert set(local4["plain"]) >= {
        "ds_static", "ds_dynamic", "ds_mixed", "ds_overwrite", "ds_overwrite_dynamic",
        "hive_static", "hive_dynamic", "hive_overwrite", "ctas", "df_insert_into",
        "df_save_as_table", "df_overwrite_table", "failing"}
    assert set(local4["locking"]) == set(LOCKING_CASES)
    assert len(local4["locking"]["ds_static"]["a"]["outcomes"]) == 12
    check(local4)


@pytest.mark.soak  # a Spark application of its own for 100 s: run with `make soak-spark`
def test_two_threads_of_one_application_writing_one_table_are_all_or_nothing(
        tmp_path, zk_hosts) -> None:
    """The core case: two threads of a LockingSession, then of the plain
    session under enforce(), each writing its own partition of one table twelve times,
    beside a writer whose every job fails in a task (the local-cluster run of the same is
    marked soak)."""
    seen = run_app(tmp_path, zk_hosts, "/zklock-tests-writers-core", "local[2]",
                   "ds_static,failing")
    assert set(seen["locking"]) == set(seen["plain"]) == {"ds_static", "failing"}
    check(seen)


@pytest.mark.soak  # three Spark applications for 80 s: run with `make soak-spark`
def test_concurrent_partition_writers_lose_nothing_even_beside_a_failing_one(
        zk_hosts, root, tmp_path, spark):
    """Three applications at once, one of them with jobs that all fail half-way."""
    writers = ("w0", "w1", "bad")
    logs = {name: tmp_path / f"{name}.log" for name in writers}
    procs = {name: subprocess.Popen([sys.executable, "-m", "zklock.testing.writers", zk_hosts,
                                     root, str(tmp_path), name, str(len(writers)), str(COUNT),
                                     "true"], stdout=subprocess.PIPE,
                                    stderr=logs[name].open("w"), text=True)
             for name in writers}
    reports = {}
    try:
        for name, p in procs.items():
            out, _ = p.communicate(timeout=600)
            tail = logs[name].read_text(errors="replace")[-3000:]
            assert p.returncode == 0, f"writer {name} exited {p.returncode}: {tail}"
            report = json.loads(out.strip().splitlines()[-1])
            reports[report["name"]] = report
    finally:
        for p in procs.values():  # stopped and reaped whatever happened
            if p.poll() is None:
                p.kill()
            p.wait(60)
    good = [n for n in writers if n != "bad"]
    assert all(reports[n]["failures"] == [] for n in good)
    assert len(reports["bad"]["failures"]) == COUNT  # every job of the bad writer failed
    rows = spark.read.parquet(str(tmp_path / "t")).groupBy("ds").count().collect()
    assert sorted((r["ds"], r["count"]) for r in rows) == sorted(
        (f"{name}-{i}", 200) for name in good for i in range(COUNT))
    staged = tmp_path / "t" / "_temporary"
    assert not staged.exists() or not any(staged.iterdir()), list(staged.iterdir())
