"""A Hive-enabled application streaming into a Hive-format table through foreachBatch and
insert_once (Spark refuses a Hive-format table as a stream's target): test_streams.py's
test_a_hive_format_table_takes_each_batch_once drives it, one step per line of stdin (each
run of the stream a query started again from its checkpoint), and judges it by the data it
prints.

Usage: hive_batches_app.py HOSTS ROOT HOME SOURCE, then steps on stdin, each answered with
its lines and ``END``. ``create`` makes the table (one partition, ds=d1, stored outside the
table's directory); ``run`` streams what the source has (availableNow) and prints each
batch's outcome, then ``IDS`` and the table's ids, sorted, as JSON; ``fail`` does the same
expecting the run to fail, and prints ``FAILED`` with the error's first line.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from zklock.manager import LockManager
from zklock.spark import configure, enforce
from zklock.spark.batches import insert_once

hosts, root, home, source = sys.argv[1:5]
spark = configure(SparkSession.builder.master("local[1]").appName("zklock-hive-batches")
                  .config("spark.ui.enabled", "false")
                  .config("spark.sql.warehouse.dir", home + "/warehouse")
                  .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                          "jdbc:derby:;databaseName=" + home + "/metastore;create=true")
                  .config("hive.exec.dynamic.partition.mode", "nonstrict")
                  .enableHiveSupport()).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
enforce(spark, LockManager(hosts=hosts, root=root, retries=0))


def write(batch_df, batch_id: int) -> None:
    print("BATCH", batch_id, insert_once(batch_df, "default.hv", writer="hv-ingest",
                                         batch=batch_id).name, flush=True)


def create() -> None:
    spark.sql("CREATE TABLE hv (id INT) PARTITIONED BY (ds STRING) STORED AS TEXTFILE")
    # a partition stored outside the table's directory, as an external table's often are
    spark.sql(f"ALTER TABLE hv ADD PARTITION (ds='d1') LOCATION '{home}/outside-d1'")
    print("CREATED")


def run(step: str) -> None:
    query = (spark.readStream.schema("id INT, ds STRING").option("maxFilesPerTrigger", 2)
             .json(source).writeStream.foreachBatch(write)
             .option("checkpointLocation", home + "/checkpoint")
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
        failure = query.exception()
    except Exception as exc:  # the query's failure, raised by awaitTermination
        failure = exc
    if step == "fail":
        print("FAILED", str(failure).strip().splitlines()[0] if failure else "no failure")
    elif failure is not None:
        raise SystemExit(f"the stream failed: {failure}")
    spark.catalog.refreshTable("hv")
    print("IDS", json.dumps(sorted(r.id for r in spark.table("hv").collect())))


for line in sys.stdin:
    if line.strip() == "create":
        create()
    else:
        run(line.strip())
    print("END", flush=True)
