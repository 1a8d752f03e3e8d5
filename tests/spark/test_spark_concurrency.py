"""Two pipelines (two processes, two Spark drivers) write the same partition through wrappers."""

from __future__ import annotations

import subprocess

import pytest
from conftest import PYTHON, lock_nodes

WORKER = r"""
import sys
from pyspark.sql import SparkSession
from zklock.spark import LockingSession, configure

hosts, root, location, warehouse, wid, n = sys.argv[1:7]
spark = configure(SparkSession.builder.master("local[1]")
                  .config("spark.ui.enabled", "false")
                  .config("spark.ui.showConsoleProgress", "false")
                  .config("spark.sql.warehouse.dir", warehouse)).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
# a session and a wait that a loaded machine does not outlast (three Spark JVMs on it)
session = LockingSession(spark, hosts=hosts, root=root, retries=2400, retry_interval=0.05,
                         session_timeout=10)
session.sql("CREATE TABLE IF NOT EXISTS shared (v STRING, ds STRING) USING parquet"
            f" PARTITIONED BY (ds) LOCATION '{location}'")
print("ready", flush=True)
sys.stdin.readline()  # start both writers together
for i in range(int(n)):
    session.sql(f"INSERT INTO shared PARTITION (ds='p') VALUES ('{wid}-{i}')")
print("done", flush=True)
"""


@pytest.mark.soak  # two Spark applications for a minute: run with `make soak-spark`
def test_two_processes_write_one_partition_in_turn(spark, zk_hosts, root, tmp_path, zk):
    location = tmp_path / "shared"
    n = 4
    procs = [subprocess.Popen([PYTHON, "-c", WORKER, zk_hosts, root, str(location),
                               str(tmp_path / f"wh{w}"), f"w{w}", str(n)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for w in range(2)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout.readline().strip() == "done"
            assert p.wait(timeout=120) == 0
    finally:
        for p in procs:
            p.kill()
            p.wait()
    table = f"shared_{tmp_path.name[-8:]}".replace("-", "_")
    spark.sql(f"CREATE TABLE {table} (v STRING, ds STRING) USING parquet PARTITIONED BY (ds)"
              f" LOCATION '{location}'")
    try:
        spark.sql(f"MSCK REPAIR TABLE {table}")
        rows = sorted(r.v for r in spark.sql(f"SELECT v FROM {table}").collect())
    finally:
        spark.sql(f"DROP TABLE {table}")
    assert rows == sorted(f"w{w}-{i}" for w in range(2) for i in range(n))  # a serial run's data
    assert lock_nodes(zk, root) == []  # the writers have exited: their sessions are closed
