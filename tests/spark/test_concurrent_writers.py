"""Writers of different partitions of one table, in separate Spark applications, at once.

The locks let them run together; Spark's shared `_temporary` staging would not
(see zklock/spark/commit.py). Three real Spark applications insert eight
partitions each into one table at the same time, one of them with jobs that all
fail half-way: every insert of the other two succeeds, every partition holds all
its rows, nothing of the failed jobs shows, and no application leaves its
staging behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from zklock.spark.commit import ATTEMPT_ID, SKIP_CLEANUP, commit_isolation, committer_jar

COUNT = 8


def test_concurrent_partition_writers_lose_nothing_even_beside_a_failing_one(
        zk_hosts, root, tmp_path, spark):
    # zklock's committers need a JDK (javac); without one only the success path is isolated
    jdk = committer_jar() is not None
    writers = ("w0", "w1", "bad") if jdk else ("w0", "w1", "w2")
    procs = [subprocess.Popen([sys.executable, "-m", "zklock.testing.writers", zk_hosts, root,
                               str(tmp_path), name, str(len(writers)), str(COUNT), "true"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for name in writers]
    reports = {}
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        report = json.loads(out.strip().splitlines()[-1])
        reports[report["name"]] = report
    good = [n for n in writers if n != "bad"]
    assert all(reports[n]["failures"] == [] for n in good)
    if jdk:
        assert len(reports["bad"]["failures"]) == COUNT  # every job of the bad writer failed
        assert all(r["failures_isolated"] for r in reports.values())  # zklock's committers
    assert len({r["staging"] for r in reports.values()}) == len(writers)
    rows = spark.read.parquet(str(tmp_path / "t")).groupBy("ds").count().collect()
    assert sorted((r["ds"], r["count"]) for r in rows) == sorted(
        (f"{name}-{i}", 200) for name in good for i in range(COUNT))
    staged = tmp_path / "t" / "_temporary"
    assert not staged.exists() or not any(staged.iterdir()), list(staged.iterdir())


def test_staging_is_removed_after_each_write_and_a_dropped_partition_stays_dropped(
        locking, spark, tmp_path):
    spark.sql("CREATE DATABASE IF NOT EXISTS cw")
    loc = tmp_path / "cw_t"
    spark.sql(f"CREATE TABLE cw.t (id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)"
              f" LOCATION '{loc}'")
    try:
        staging = loc / "_temporary" / str(locking.execution.commits.attempt_id)
        locking.sql("INSERT INTO cw.t PARTITION (ds='a') SELECT id FROM range(3)")
        assert (loc / "ds=a").is_dir() and not staging.exists()
        locking.sql("ALTER TABLE cw.t DROP PARTITION (ds='a')")
        shutil.rmtree(loc / "ds=a")  # an external table's data stays: remove it as its owner
        locking.sql("INSERT INTO cw.t PARTITION (ds='b') SELECT id FROM range(3)")
        # an emptied task directory merged again would bring ds=a back as an empty directory
        assert not (loc / "ds=a").exists() and (loc / "ds=b").is_dir()
        assert not staging.exists()
    finally:
        spark.sql("DROP DATABASE IF EXISTS cw CASCADE")


def test_the_users_own_commit_settings_are_kept(spark):
    iso = commit_isolation(spark)
    assert spark.conf.get(ATTEMPT_ID) == str(iso.attempt_id)
    assert spark.conf.get(SKIP_CLEANUP) == "true"
    spark.conf.set(ATTEMPT_ID, "7")
    try:
        assert iso.apply(spark) is False and spark.conf.get(ATTEMPT_ID) == "7"
    finally:
        spark.conf.unset(ATTEMPT_ID)
    assert iso.apply(spark) is True
