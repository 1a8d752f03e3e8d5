"""A pipeline run by tests/scripts/test_build_dist.py with zklock installed from its wheel,
as a user with no home, on a JRE: a LockingSession's writes and a plain session's, first
under another holder's X (denied), then alone. Prints one JSON document of what it saw.

Arguments: ZooKeeper hosts, the znode root, the warehouse directory.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

import zklock
from zklock import LockManager
from zklock.errors import LockNotAcquired
from zklock.servers.java import jdk_tool
from zklock.spark import LockingSession, configure, enforce, lock_error
from zklock.spark.jvm import module_jar


def denied(write) -> bool:
    try:
        write()
    except Exception as exc:
        if isinstance(lock_error(exc), LockNotAcquired):
            return True
        raise
    return False


def main(hosts: str, root: str, warehouse: str) -> dict:
    jar = module_jar()
    # executors in JVMs of their own, as on a cluster: zklock's committers (configured
    # here, as docs/deploy.md's spark-defaults.conf does) run in them, from the jar that
    # configure() put in spark.jars, the wheel's
    spark = configure(SparkSession.builder.master("local-cluster[2,1,1024]").appName("wheel")
                      .config("spark.sql.warehouse.dir", warehouse)
                      .config("spark.executor.memory", "768m")
                      .config("spark.sql.sources.outputCommitterClass",
                              "zklock.IsolatedFileOutputCommitter")
                      .config("spark.sql.parquet.output.committer.class",
                              "zklock.IsolatedParquetOutputCommitter")
                      .config("spark.ui.enabled", "false")).getOrCreate()
    # each statement waits (by retries, not a pause) for the background release of the set
    # of the one before it; under the holder's X, one attempt each
    session = LockingSession(spark.newSession(), hosts=hosts, root=root, retries=200,
                             retry_interval=0.05)
    session.sql("CREATE TABLE t (id INT) USING parquet")
    session.sql("INSERT INTO t VALUES (1)")
    holder = LockManager(hosts=hosts, root=root)
    plain = enforce(spark, LockManager(hosts=hosts, root=root, retries=0))
    with holder.acquire([("default.t", "X")]):
        session.set(retries=0)
        denials = {"session": denied(lambda: session.sql("INSERT INTO t VALUES (2)")),
                   "plain": denied(lambda: spark.sql("INSERT INTO t VALUES (3)").collect())}
    holder.close()
    session.set(retries=200, retry_interval=0.05)
    plain.close()
    plain = enforce(spark, LockManager(hosts=hosts, root=root, retries=200, retry_interval=0.05))
    session.sql("INSERT INTO t VALUES (4)")
    spark.sql("INSERT INTO t VALUES (5)").collect()
    rows = sorted(r.id for r in spark.table("t").collect())
    shipped = [str(j) for j in spark.sparkContext._jsc.jars()]
    plain.close()
    session.close()
    spark.stop()
    return {"zklock": zklock.__file__, "jar": str(jar), "javac": jdk_tool("javac"),
            "spark_jars": shipped,
            "denied": denials, "rows": rows}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
