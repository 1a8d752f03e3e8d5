"""Concurrent writers of one table's partitions, one Spark application each (a test helper).

Each process starts its own local SparkSession over a shared table location,
waits until every writer is ready, then inserts ``count`` partitions of its own
through a LockingSession (S on the table, X on each partition: the locks let
them run together) and prints one JSON line: its failures.
A writer whose NAME starts with ``bad`` has every job fail half-way.

    python -m zklock.testing.writers HOSTS ROOT WAREHOUSE NAME WRITERS COUNT ISOLATE

With ISOLATE=false the application is built without zklock (Spark's shared
``_temporary/0`` staging), which shows the failures that staging per job prevents
(zklock/spark/java/StagedCommitProtocol.java).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _boom(x: int) -> int:
    time.sleep(0.003)
    if x >= 150:
        raise ValueError("a writer whose job fails half-way")
    return x


def main(argv: list[str]) -> int:
    hosts, root, warehouse, name, writers, count, isolate = argv[1:8]
    from pyspark.sql import SparkSession

    from zklock.config import parse_bool
    from zklock.spark import LockingSession, configure

    wh = Path(warehouse)
    builder = (SparkSession.builder.master("local[2]").appName(f"writer-{name}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", str(wh / f"_catalog_{name}")))
    spark = (configure(builder) if parse_bool(isolate) else builder).getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    spark.udf.register("slow", lambda x: (time.sleep(0.003), x)[1], "bigint")
    spark.udf.register("boom", _boom, "bigint")
    value = "boom(id)" if name.startswith("bad") else "slow(id)"  # a writer whose jobs fail
    # a wait by time, not a count: three applications creating one database and table on
    # a loaded machine can hold each other up for longer than 100 quick retries
    session = LockingSession(spark, hosts=hosts, root=root, job=name, timeout=300,
                             retry_interval=0.1, isolate_commits=parse_bool(isolate))
    session.sql("CREATE DATABASE IF NOT EXISTS w")
    session.sql(f"CREATE TABLE IF NOT EXISTS w.t (id BIGINT, v DOUBLE, ds STRING) USING parquet"
                f" PARTITIONED BY (ds) LOCATION '{wh / 't'}'")
    (wh / f"{name}.ready").touch()
    deadline = time.monotonic() + 300  # a writer that died before it was ready ends the wait
    while len(list(wh.glob("*.ready"))) < int(writers):
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: the other writers were not ready within 300 s")
        time.sleep(0.05)
    failures = []
    for i in range(int(count)):
        try:
            session.sql(f"INSERT INTO w.t PARTITION (ds='{name}-{i}')"
                        f" SELECT {value}, id * 1.0 FROM range(0, 200, 1, 2)")
        except Exception as exc:  # what Spark's commit does to a concurrent writer
            failures.append(f"{name}-{i}: {str(exc).splitlines()[0][:300]}")
    session.stop()
    print(json.dumps({"name": name, "failures": failures}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
