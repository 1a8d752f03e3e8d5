"""One PySpark job of `make demo`, run through a LockingSession.

    demo_job.py ROLE ZK_HOSTS WAREHOUSE_DIR

Roles: ``setup`` (builds the small warehouse), ``backfill`` (a slow INSERT
OVERWRITE of an old partition), ``ingest`` (adds a new partition), ``report``
(reads the partition being backfilled; it waits for the backfill's X lock),
``compact`` (rewrites a partition an operator holds a lease on; it waits).
Each job prints progress lines and waits for "go" on stdin after Spark starts,
so the demo can order them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zklock import LockNotAcquired  # noqa: E402

ROOT = "/demo"


def say(role: str, text: str) -> None:
    print(f"[{role:8}] {text}", flush=True)


def tables(warehouse: str) -> list[str]:
    return [
        "CREATE DATABASE IF NOT EXISTS sales",
        "CREATE TABLE IF NOT EXISTS sales.orders (id BIGINT, amount DOUBLE, ds STRING)"
        f" USING parquet PARTITIONED BY (ds) LOCATION '{warehouse}/orders'",
        "ALTER TABLE sales.orders RECOVER PARTITIONS",
        "CREATE TABLE IF NOT EXISTS sales.orders_compact (id BIGINT, amount DOUBLE, ds STRING)"
        f" USING parquet PARTITIONED BY (ds) LOCATION '{warehouse}/orders_compact'",
        "CREATE TABLE IF NOT EXISTS sales.daily_summary (ds STRING, orders BIGINT,"
        f" amount DOUBLE) USING parquet LOCATION '{warehouse}/daily_summary'",
    ]


#: The two scheduled queries the setup job creates (through LockingSession.sql).
SCHEDULED = [
    "CREATE SCHEDULED QUERY compact_orders EVERY 10 SECONDS AS"
    " INSERT OVERWRITE TABLE sales.orders_compact"
    " SELECT /*+ COALESCE(1) */ id, amount, ds FROM sales.orders",
    "CREATE SCHEDULED QUERY rebuild_summary EVERY 15 SECONDS OFFSET BY '5s' AS"
    " INSERT OVERWRITE TABLE sales.daily_summary"
    " SELECT ds, count(*), sum(amount) FROM sales.orders GROUP BY ds",
]


def main() -> int:
    role, hosts, warehouse = sys.argv[1:4]
    from pyspark.sql import SparkSession

    from zklock.spark import LockingSession, configure

    spark = configure(SparkSession.builder.master("local[1]").appName(f"demo-{role}")
                      .config("spark.ui.enabled", "false")
                      .config("spark.ui.showConsoleProgress", "false")
                      .config("spark.sql.warehouse.dir", f"{warehouse}/_catalog_{role}")
                      ).getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    Path(warehouse, "orders").mkdir(parents=True, exist_ok=True)
    for stmt in tables(warehouse):
        spark.sql(stmt)
    spark.udf.register("slow", lambda x: (time.sleep(0.02), x)[1], "bigint")
    session = LockingSession(spark, hosts=hosts, root=ROOT, user=role, retries=120,
                             retry_interval=0.25, scheduler_namespace="demo",
                             scheduler_admins="setup")
    say(role, "Spark is up; ready")
    sys.stdin.readline()
    t0 = time.monotonic()
    if role == "setup":
        for day in ("2024-01-01", "2024-01-02"):
            session.sql(f"INSERT INTO sales.orders PARTITION (ds='{day}')"
                        " SELECT id, id * 1.5 FROM range(100)")
        say(role, "built sales.orders with partitions ds=2024-01-01 and ds=2024-01-02")
        for ddl in SCHEDULED:
            session.sql(ddl)
            say(role, ddl[:90] + " ...")
    elif role == "backfill":
        say(role, "INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01') ... (slow)")
        session.sql("INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01')"
                    " SELECT slow(id), id * 2.0 FROM range(300)")
        say(role, f"done in {time.monotonic() - t0:.1f}s; its X lock is released")
    elif role == "ingest":
        say(role, "INSERT INTO sales.orders PARTITION (ds='2024-01-03') ... (slow)")
        session.sql("INSERT INTO sales.orders PARTITION (ds='2024-01-03')"
                    " SELECT slow(id), id * 1.0 FROM range(150)")
        say(role, f"done in {time.monotonic() - t0:.1f}s, alongside the backfill"
                  " (another partition: no conflict)")
    elif role == "compact":
        say(role, "INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-02') ... (compaction)")
        session.sql("INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-02')"
                    " SELECT id, id * 1.5 FROM range(100) DISTRIBUTE BY 1")
        say(role, f"done after waiting {time.monotonic() - t0:.1f}s for the maintenance lease")
    elif role == "report":
        say(role, "SELECT count(*), sum(amount) FROM sales.orders WHERE ds = '2024-01-01'")
        try:
            row = session.sql("SELECT count(*) AS n, sum(amount) AS total FROM sales.orders"
                              " WHERE ds = '2024-01-01'").collect()[0]
        except LockNotAcquired as exc:
            say(role, f"gave up: {exc}")
            return 3
        say(role, f"got {row.n} rows, total {row.total:.0f}, after waiting"
                  f" {time.monotonic() - t0:.1f}s for the backfill's X lock (never a half-written"
                  " partition)")
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
