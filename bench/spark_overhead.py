"""What implicit locking adds to a Spark statement: LockingSession vs the bare SparkSession.

Run: ``make bench-spark`` (or ``.venv/bin/python bench/spark_overhead.py``).
It starts its own ZooKeeper (fsync on) unless ZKLOCK_ZK is set and one
local SparkSession, then runs, interleaved wrapped/bare so noise hits both:

- a trivial ``INSERT INTO t PARTITION (ds, hr) VALUES (...)`` (4 objects);
- a small ``SELECT count(*)`` over one ds prefix (10 objects: db, table,
  ds and its 7 hr partitions);

and reports the median wall time of each, the median of the paired
differences (wrapped minus bare, run back to back), and zklock's own work
measured step by step on the same statement: planning (one JVM call into
zklock's planner, and reading its answer; Spark parses and analyzes anyway,
and the wrapper executes the plan it analyzed, so parsing and analysis are
not extra), the ZooKeeper acquire
plus the release send, the job tag and fencing-token property, and for a write
the removal of its application's commit staging under the table.
``--out`` appends the Markdown table to a file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import local_spark, median_ms, paired, report, start_zookeeper  # noqa: E402


def connect_table(hosts: str, reps: int) -> str:
    """The same two statements over Spark Connect: a bare Connect session against a
    LockingSession wrapping it, paired; zklock's work is planning in the server's plugin,
    the ZooKeeper acquire and release, and the operation tags."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    from zklock.cli.connect_server import ConnectServer

    from zklock.spark import LockingSession
    from zklock.spark.statement import LockedStatement

    state = Path(tempfile.mkdtemp(prefix="zklock-bench-connect-"))
    from zklock.server import free_port

    server = ConnectServer(state, port=free_port(), warehouse=str(state / "warehouse"),
                           conf={"spark.sql.shuffle.partitions": "2"})
    server.start()
    cs = ConnectSession.builder.remote(server.remote).create()
    try:
        cs.sql("CREATE DATABASE benchc")
        cs.sql("CREATE TABLE benchc.t (id INT, amt DOUBLE, ds STRING, hr INT) USING parquet"
               " PARTITIONED BY (ds, hr)")
        for hr in range(7):
            cs.sql(f"INSERT INTO benchc.t PARTITION (ds='d0', hr={hr}) VALUES (1, 1.0)")
        locking = LockingSession(cs, hosts=hosts, root="/bench-spark-connect", retries=0)
        insert = "INSERT INTO benchc.t PARTITION (ds='d1', hr=1) VALUES ({i}, 1.0)"
        select = "SELECT count(*) FROM benchc.t WHERE ds = 'd0'"
        cases = {
            "INSERT INTO t PARTITION (ds, hr) VALUES": (
                lambda i: cs.sql(insert.format(i=i)),
                lambda i: locking.sql(insert.format(i=i)), insert.format(i=0)),
            "SELECT count(*) ... WHERE ds = 'd0'": (
                lambda i: cs.sql(select).collect(),
                lambda i: locking.sql(select).collect(), select),
        }
        rows = []
        for name, (bare, wrapped, sql) in cases.items():
            for i in range(5):
                bare(i)
                wrapped(i)
            times: dict[str, list[float]] = {k: [] for k in
                                             ("bare", "wrapped", "diff", "plan", "zk", "tag")}
            for i in range(reps):
                pair = paired({"bare": bare, "wrapped": wrapped}, i)
                for kind, t in pair.items():
                    times[kind].append(t)
                times["diff"].append(pair["wrapped"] - pair["bare"])
                t0 = time.perf_counter()
                plan = locking.planner.plan_sql(sql, lazy_queries=True)
                if plan.is_command:
                    targets = plan.targets
                else:  # what locking.sql(select).collect() plans: the statement, the action
                    targets = locking.planner.plan_dataframe(locking.planner.run(plan))
                t1 = time.perf_counter()
                lockset = locking.manager.acquire(targets)
                t2 = time.perf_counter()
                LockedStatement(cs, lockset, "bench", sql).run(lambda: None)
                t3 = time.perf_counter()
                lockset.release(wait=False)
                t4 = time.perf_counter()
                times["plan"].append(t1 - t0)
                times["zk"].append((t2 - t1) + (t4 - t3))
                times["tag"].append(t3 - t2)
            m = {k: median_ms(v) for k, v in times.items()}
            rows.append((name, len(targets), m))
            print(f"connect {name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in m.items()),
                  file=sys.stderr)
        locking.close()
    finally:
        cs.stop()
        server.stop()
    out = ["Spark Connect (a local Connect server with zklock's plugin; planning is a round"
           " trip to it):", "",
           "| statement | objects | bare ms | wrapped ms | paired difference ms (%) "
           "| zklock work ms (%) = plan in the server + ZooKeeper + operation tags |",
           "|---|---:|---:|---:|---:|---:|"]
    for name, n, m in rows:
        work = m["plan"] + m["zk"] + m["tag"]
        out.append(f"| `{name}` | {n} | {m['bare']:.1f} | {m['wrapped']:.1f} "
                   f"| {m['diff']:+.1f} ({100 * m['diff'] / m['bare']:+.1f}%) "
                   f"| {work:.1f} ({100 * work / m['bare']:.1f}%) = {m['plan']:.1f}"
                   f" + {m['zk']:.1f} + {m['tag']:.1f} |")
    return "\n".join(out)


def zk_write_rtt(client, n: int = 200) -> float:
    """Median ms of one synchronous ZooKeeper write (a set) on ``client``'s connection."""
    path = "/bench-spark-rtt"
    client.ensure_path(path)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        client.set(path, str(i).encode())
        times.append(time.perf_counter() - t0)
    client.delete(path)
    return median_ms(times)


def classic_table(hosts: str, reps: int) -> str:
    """The two statements on a classic local SparkSession, wrapped against bare, paired,
    with zklock's work step by step."""
    from zklock.spark import LockingSession

    spark = local_spark("zklock-bench-wh-")
    try:
        spark.sql("CREATE DATABASE bench")
        spark.sql("CREATE TABLE bench.t (id INT, amt DOUBLE, ds STRING, hr INT) USING parquet"
                  " PARTITIONED BY (ds, hr)")
        for hr in range(7):
            spark.sql(f"INSERT INTO bench.t PARTITION (ds='d0', hr={hr}) VALUES (1, 1.0)")
        locking = LockingSession(spark, hosts=hosts, root="/bench-spark", retries=0)
        insert = "INSERT INTO bench.t PARTITION (ds='d1', hr=1) VALUES ({i}, 1.0)"
        select = "SELECT count(*) FROM bench.t WHERE ds = 'd0'"
        cases = {
            "INSERT INTO t PARTITION (ds, hr) VALUES": (
                lambda i: spark.sql(insert.format(i=i)),
                lambda i: locking.sql(insert.format(i=i)),
                insert.format(i=0)),
            "SELECT count(*) ... WHERE ds = 'd0'": (
                lambda i: spark.sql(select).collect(),
                lambda i: locking.sql(select).collect(),
                select),
        }
        from zklock.spark.statement import LockedStatement

        planner = locking.planner
        rtt = zk_write_rtt(locking.manager.client)
        rows = []
        for name, (bare, wrapped, sql) in cases.items():
            for i in range(5):  # warm both paths (JIT, caches)
                bare(i)
                wrapped(i)
            times: dict[str, list[float]] = {k: [] for k in
                                             ("bare", "wrapped", "diff", "walk", "zk", "tag",
                                              "staging")}
            objects = len(locking.explain_locks(sql).targets)
            for i in range(reps):
                pair = paired({"bare": bare, "wrapped": wrapped}, i)
                for kind, t in pair.items():
                    times[kind].append(t)
                times["diff"].append(pair["wrapped"] - pair["bare"])
                # zklock's own work on the same statement, step by step
                if sql.startswith("SELECT"):
                    df = spark.sql(sql)
                    t0 = time.perf_counter()
                    targets = planner.plan_dataframe(df)
                    times["walk"].append(time.perf_counter() - t0)
                else:
                    # planning parses and analyzes too (Spark would anyway, and the wrapper
                    # runs the plan it analyzed): its own work is its time minus those
                    t0 = time.perf_counter()
                    plan = planner.plan_sql(sql)
                    elapsed = time.perf_counter() - t0
                    targets = plan.targets
                    times["walk"].append(elapsed - plan.handle.sparkNanos() / 1e9)
                t0 = time.perf_counter()
                lockset = locking.manager.acquire(targets)
                t1 = time.perf_counter()
                LockedStatement(spark, lockset, "bench", sql).run(lambda: None)
                t2 = time.perf_counter()
                with locking.execution.commit_staging(lockset):  # a write's staging clean-up
                    pass
                t3 = time.perf_counter()
                lockset.release(wait=False)
                t4 = time.perf_counter()
                times["zk"].append((t1 - t0) + (t4 - t3))
                times["tag"].append(t2 - t1)
                times["staging"].append(t3 - t2)
            m = {k: median_ms(v) for k, v in times.items()}
            rows.append((name, objects, m))
            print(f"{name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in m.items()),
                  file=sys.stderr)
        locking.close()
    finally:
        spark.stop()
    table = [
        f"One ZooKeeper write round trip in this run: {rtt:.2f} ms (median of 200 sets).",
        "",
        "| statement | objects | bare ms | wrapped ms | paired difference ms (%) "
        "| zklock work ms (%) = planning + ZooKeeper + job tag + staging clean-up "
        "| own work (planning + tag + staging) / write RTT |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, n, m in rows:
        work = m["walk"] + m["zk"] + m["tag"] + m["staging"]
        own = m["walk"] + m["tag"] + m["staging"]
        table.append(
            f"| `{name}` | {n} | {m['bare']:.1f} | {m['wrapped']:.1f} "
            f"| {m['diff']:+.1f} ({100 * m['diff'] / m['bare']:+.1f}%) "
            f"| {work:.1f} ({100 * work / m['bare']:.1f}%) = {m['walk']:.1f} + {m['zk']:.1f}"
            f" + {m['tag']:.1f} + {m['staging']:.1f} | {own:.1f} ms = {own / rtt:.2f}x |")
    return "\n".join(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40, help="runs per contender and statement")
    ap.add_argument("--out", help="append the Markdown table to this file")
    ap.add_argument("--classic", action=argparse.BooleanOptionalAction, default=True,
                    help="measure a classic local SparkSession")
    ap.add_argument("--connect", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure a Spark Connect session (a local Connect server with"
                         " zklock's plugin)")
    args = ap.parse_args()

    # ZooKeeper's default container sweep (60 s), as a production server has
    hosts, server = start_zookeeper(container_check_ms=60000)
    try:
        tables = []
        if args.classic:
            tables.append(classic_table(hosts, args.reps))
        if args.connect:
            tables.append(connect_table(hosts, args.reps))
    finally:
        if server is not None:
            server.stop()
    text = "\n\n".join(tables)
    report(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
