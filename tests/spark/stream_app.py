"""A streaming application for tests/spark/test_streams.py, run in a process of its own so
that the test can SIGKILL its driver in the middle of a batch and start it again from its
checkpoint.

It streams JSON files (2 a batch) into a Parquet table at a fixed location (its catalog is
in memory: each run declares the table again over the same files), every row through a
gate: a task waits until the file ``<gate>/open`` exists, after touching ``<gate>/entered``
(so the test knows a batch runs, holding its locks). Prints "done" when the files are in.

Arguments: ZooKeeper hosts, the znode root, the table's location, the source directory,
the checkpoint directory, the gate directory.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from zklock import LockManager
from zklock.config import Settings
from zklock.spark import configure, enforce


def main(hosts: str, root: str, table_dir: str, source: str, checkpoint: str,
         gate: str) -> None:
    spark = configure(SparkSession.builder.master("local[2]").appName("zklock-stream-app")
                      .config("spark.ui.enabled", "false")
                      .config("spark.sql.shuffle.partitions", "2")
                      .config("spark.zklock.lockClient", "none")).getOrCreate()
    manager = LockManager(settings=Settings.resolve(dict(
        hosts=hosts, root=root, session_timeout=4.0, retries=1000, retry_interval=0.05)))
    enforce(spark, manager)
    spark.sql(f"CREATE TABLE ev (id INT, ds STRING) USING parquet LOCATION '{table_dir}'")

    def through_gate(x: int) -> int:
        import os
        import time

        open(os.path.join(gate, "entered"), "a").close()
        while not os.path.exists(os.path.join(gate, "open")):
            time.sleep(0.02)  # poll: the gate file
        return x

    spark.udf.register("through_gate", through_gate, "int")
    query = (spark.readStream.schema("id INT, ds STRING").option("maxFilesPerTrigger", 2)
             .json(source).selectExpr("through_gate(id) AS id", "ds").writeStream
             .option("checkpointLocation", checkpoint).trigger(availableNow=True)
             .toTable("ev"))
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"failed: {query.exception()}")
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
