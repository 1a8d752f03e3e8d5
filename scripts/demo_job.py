"""One PySpark job of `make demo`, run through a LockingSession.

    demo_job.py ROLE ZK_HOSTS STATE_DIR METASTORE_CONF_JSON

Every job is a Spark application of its own on the demo's shared Hive Metastore (the Spark
conf in METASTORE_CONF_JSON, from ``zklock metastore``): a partition one job adds is in
every other job's catalog at once, as on a platform.

Roles:

- ``setup`` builds the warehouse (sales.orders partitioned by ds, the
  sales.customers dimension, sales.daily_summary and sales.orders_compact)
  and creates the two scheduled queries in SQL; at the end it prints
  ``sysdb.scheduled_executions`` and writes the EXPLAIN LOCKS of the scheduled queries
  (``explain-locks.json``) for the demo's claim checker;
- ``backfill`` slowly overwrites an old partition (X on it);
- ``ingest`` adds three new partitions, one after another;
- ``report`` reads the whole fact table joined with the dimension (it waits
  for the backfill's X lock);
- ``schema`` adds a column to the dimension (X on it: it waits for the report);
- ``connect`` does its work over Spark Connect: it starts a local Connect server with
  zklock's plugin (on the same metastore), wraps a Connect session in a LockingSession,
  reads the fact table and adds a partition, with the same locks a classic session takes.

Each job prints a progress line per step and waits for "go" on stdin after
Spark starts, so the demo can order them. Lock events go to the demo's event log.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zklock import LockNotAcquired  # noqa: E402

ROOT = "/demo"


def say(role: str, text: str) -> None:
    print(f"[{role:9}] {text}", flush=True)


#: The warehouse, built once by the setup job in the shared metastore.
TABLES = [
    "CREATE DATABASE sales",
    "CREATE TABLE sales.orders (id BIGINT, customer BIGINT, amount DOUBLE, ds STRING)"
    " USING parquet PARTITIONED BY (ds)",
    "CREATE TABLE sales.customers (id BIGINT, name STRING) USING parquet",
    "CREATE TABLE sales.orders_compact (id BIGINT, customer BIGINT, amount DOUBLE, ds STRING)"
    " USING parquet PARTITIONED BY (ds)",
    "CREATE TABLE sales.daily_summary (ds STRING, orders BIGINT, amount DOUBLE) USING parquet",
]


#: The two scheduled queries the setup job creates (through LockingSession.sql).
SCHEDULED = [
    "CREATE SCHEDULED QUERY compact_orders EVERY 10 SECONDS AS"
    " INSERT OVERWRITE TABLE sales.orders_compact"
    " SELECT /*+ COALESCE(1) */ id, customer, amount, ds FROM sales.orders",
    "CREATE SCHEDULED QUERY rebuild_summary EVERY 15 SECONDS OFFSET BY '5s' AS"
    " INSERT OVERWRITE TABLE sales.daily_summary"
    " SELECT ds, count(*), sum(amount) FROM sales.orders GROUP BY ds",
]


def scheduled_bodies() -> dict[str, str]:
    """Each scheduled query's name and the statement it runs."""
    return {ddl.split()[3]: ddl.split(" AS ", 1)[1] for ddl in SCHEDULED}


def connect_job(hosts: str, state: str, metastore: dict[str, str]) -> int:
    """The ``connect`` role: the same pipeline code over a Spark Connect session."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    from zklock.cli.connect_server import ConnectServer

    from zklock.servers.ports import free_port
    from zklock.spark import LockingSession

    role = "connect"
    # the server's lock client takes this job's locks (every statement is locked in the
    # server's engine): its events go to the demo's log, under this job's name
    server = ConnectServer(Path(state) / "connect", port=free_port(),
                           locks={"spark.zklock.zookeeper.quorum": hosts,
                                  "spark.zklock.root": ROOT,
                                  "spark.zklock.eventLog": f"{state}/events.jsonl",
                                  "spark.zklock.job": role, "spark.zklock.user": role},
                           conf={**metastore, "spark.sql.shuffle.partitions": "2",
                                 "spark.driver.memory": "768m"})
    server.start()
    try:
        spark = ConnectSession.builder.remote(server.remote).create()
        session = LockingSession(spark, hosts=hosts, root=ROOT, user=role, job=role,
                                 retries=240, retry_interval=0.25,
                                 event_log=f"{state}/events.jsonl")
        say(role, f"Spark Connect server with zklock's plugin at {server.remote}; ready")
        sys.stdin.readline()
        n = session.table("sales.orders").count()  # S on the table and every partition
        say(role, f"read {n} orders through Spark Connect (S locks for the action)")
        plan = session.explain_locks("INSERT INTO sales.orders PARTITION (ds='2024-01-06')"
                                     " SELECT id, id % 20, id * 1.0 FROM range(50)")
        session.sql("INSERT INTO sales.orders PARTITION (ds='2024-01-06')"
                    " SELECT id, id % 20, id * 1.0 FROM range(50)")
        say(role, "added ds=2024-01-06 over Spark Connect, planned in the server: "
                  + " ".join(f"{o}:{m}" for o, m in plan.rows()))
        session.close()
        spark.stop()
    finally:
        server.stop()
    return 0


def main() -> int:
    role, hosts, state, metastore = sys.argv[1], sys.argv[2], sys.argv[3], \
        json.loads(sys.argv[4])
    if role == "connect":
        return connect_job(hosts, state, metastore)
    from pyspark.sql import SparkSession

    from zklock.spark import LockingSession, configure

    builder = (SparkSession.builder.master("local[1]").appName(f"demo-{role}")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in metastore.items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    session = LockingSession(spark, hosts=hosts, root=ROOT, user=role, job=role,
                             retries=240, retry_interval=0.25,
                             event_log=f"{state}/events.jsonl",
                             scheduler_namespace="demo", scheduler_admins="setup")
    spark.udf.register("slow", lambda x: (time.sleep(0.02), x)[1], "bigint")
    say(role, "Spark is up; ready")
    sys.stdin.readline()
    t0 = time.monotonic()
    if role == "setup":
        for ddl in TABLES:
            session.sql(ddl)
        session.sql("INSERT INTO sales.customers SELECT id, concat('customer ', id)"
                    " FROM range(20)")
        for day in ("2024-01-01", "2024-01-02"):
            session.sql(f"INSERT INTO sales.orders PARTITION (ds='{day}')"
                        " SELECT id, id % 20, id * 1.5 FROM range(100)")
        say(role, "built sales.orders (ds=2024-01-01, 2024-01-02), sales.customers, and the"
                  " compact and summary tables")
        for ddl in SCHEDULED:
            session.sql(ddl)
            say(role, ddl[:92] + " ...")
        sys.stdin.readline()  # the demo's end: what the scheduler did, for the claims
        explained = {name: [list(lock) for lock in session.explain_locks(body).rows()]
                     for name, body in scheduled_bodies().items()}
        Path(state, "explain-locks.json").write_text(json.dumps(explained))
        rows = session.sql(
            "SELECT schedule_name, state, executor_query_id, trigger_time, merged_triggers,"
            " elapsed FROM sysdb.scheduled_executions WHERE namespace = 'demo'"
            " ORDER BY trigger_time, schedule_name").collect()
        print("$ SELECT schedule_name, state, executor_query_id, trigger_time,"
              " merged_triggers, elapsed FROM sysdb.scheduled_executions", flush=True)
        print(f"{'SCHEDULE_NAME':16} {'STATE':9} {'EXECUTOR_QUERY_ID':48} {'TRIGGER_TIME':12}"
              " MERGED  ELAPSED", flush=True)
        for r in rows:
            print(f"{r.schedule_name:16} {r.state:9} {r.executor_query_id or '':48}"
                  f" {r.trigger_time:%H:%M:%S}     {r.merged_triggers:6}  {r.elapsed or 0:.1f}s",
                  flush=True)
        print("(merged: trigger times missed before the scheduler was up run once)",
              flush=True)
    elif role == "backfill":
        say(role, "INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01') ... (slow)")
        session.sql("INSERT OVERWRITE sales.orders PARTITION (ds='2024-01-01')"
                    " SELECT slow(id), id % 20, id * 2.0 FROM range(300)")
        say(role, f"done in {time.monotonic() - t0:.1f}s; its X lock is released")
    elif role == "ingest":
        for day in ("2024-01-03", "2024-01-04", "2024-01-05"):
            t1 = time.monotonic()
            session.sql(f"INSERT INTO sales.orders PARTITION (ds='{day}')"
                        " SELECT slow(id), id % 20, id * 1.0 FROM range(120)")
            say(role, f"added partition ds={day} in {time.monotonic() - t1:.1f}s (beside the"
                      " backfill: another partition, no conflict)")
    elif role == "report":
        say(role, "SELECT c.name, sum(o.amount) FROM sales.orders o JOIN sales.customers c"
                  " ... (the whole fact table)")
        try:
            rows = session.sql("SELECT c.name, count(*) AS n, sum(o.amount) AS total"
                               " FROM sales.orders o JOIN sales.customers c"
                               " ON o.customer = c.id WHERE slow(o.id) >= 0"
                               " GROUP BY c.name").collect()
        except LockNotAcquired as exc:
            say(role, f"gave up: {exc}")
            return 3
        n = sum(r.n for r in rows)
        say(role, f"{n} orders over {len(rows)} customers, after {time.monotonic() - t0:.1f}s"
                  " (it waited for the backfill's X lock: never a half-written partition)")
    elif role == "schema":
        say(role, "ALTER TABLE sales.customers ADD COLUMNS (segment STRING) (X on the table)")
        session.sql("ALTER TABLE sales.customers ADD COLUMNS (segment STRING)")
        say(role, f"done after {time.monotonic() - t0:.1f}s (it waited for the report's S"
                  " lock on sales.customers)")
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
