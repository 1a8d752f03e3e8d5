"""A Spark application on ``local-cluster[2,1,1024]`` (two executors, each a JVM of its own,
as on YARN or Kubernetes), run by tests/spark/test_local_cluster.py in a process of its own
(one SparkContext per process). It runs each case and prints one JSON document of what it
saw; the test asserts on it.

Arguments: ZooKeeper hosts, the znode root, a work directory.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: polling.py

import held_commits  # noqa: E402
from polling import lock_nodes, wait_for  # noqa: E402

from zklock import LockManager
from zklock.errors import LockLost
from zklock.spark import LockingSession, configure, lock_error


def locks(hosts: str, root: str) -> dict:
    """A LockingSession's settings here: each statement waits, by retries, for the set of the
    one before it, which the engine releases in the background (the plain session's CREATE
    is locked by the application's child lock client)."""
    return {"hosts": hosts, "root": root, "retries": 400, "retry_interval": 0.05}


#: How long a case waits for a state of its write (its commit reached, its tasks running, its
#: lock nodes there): the writes here run for at most 40 s of tasks (cancelled_tasks), three
#: times that for a loaded machine.
STATE_S = 120.0


def two_writers(spark, hosts: str, root: str) -> dict:
    """Two LockingSessions write two partitions of one table at once, each task in an
    executor JVM: both commit, each its own partition."""
    spark.sql("CREATE TABLE parts (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    errors = []

    def write(ds: str) -> None:
        try:
            with LockingSession(spark.newSession(), **locks(hosts, root)) as s:
                s.sql(f"INSERT INTO parts PARTITION (ds='{ds}') SELECT CAST(id AS INT)"
                      f" FROM range(0, 2000, 1, 4)")
        except Exception as exc:
            errors.append(str(lock_error(exc)).strip().splitlines()[0][:300])
    threads = [threading.Thread(target=write, args=(ds,)) for ds in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    counts = {r.ds: r.n for r in spark.sql("SELECT ds, count(*) AS n FROM parts GROUP BY ds")
              .collect()}
    return {"errors": errors, "counts": counts}


def fenced_commit(spark, hosts: str, root: str, work: Path, zk: KazooClient) -> dict:
    """Every task done on the executors, the job commit (on the driver) held back, a lock
    node deleted by another client: the commit is refused and nothing becomes visible."""
    spark.sql("CREATE TABLE fenced (id INT) USING parquet")
    held = spark.newSession()
    for key, value in held_commits.CONF.items():  # its writes: the tests' held protocol
        held.conf.set(key, value)
    session = LockingSession(held, **locks(hosts, root))
    session.sql("INSERT INTO fenced VALUES (1)")
    hold = work / "hold"
    hold.write_text("held")
    system = spark._jvm.java.lang.System
    system.setProperty(held_commits.AT_COMMIT, str(hold))
    outcome = {}

    def write() -> None:
        try:
            session.sql("INSERT INTO fenced SELECT CAST(id AS INT) FROM range(2, 100, 1, 4)")
            outcome["error"] = None
        except Exception as exc:
            outcome["error"] = exc
    writer = threading.Thread(target=write)
    writer.start()
    try:
        reached = wait_for(lambda: Path(f"{hold}.held").exists(), STATE_S)
        mine = [n for n in lock_nodes(zk, root) if "/fenced/write-" in n]
        for node in mine:
            zk.delete(node)
    finally:
        hold.unlink(missing_ok=True)
        writer.join(120)
        system.clearProperty(held_commits.AT_COMMIT)
    error = outcome.get("error")
    session.close()
    return {"reached_commit": reached, "deleted": len(mine),
            "lost": isinstance(error, LockLost), "error": str(error)[:400],
            "rows": sorted(r.id for r in spark.table("fenced").collect())}


def cancelled_tasks(spark, hosts: str, root: str, zk: KazooClient) -> dict:
    """A write whose tasks run for a while in the executors; its lock node is deleted by
    another client as they run: the tasks are cancelled (the write fails long before its
    tasks would end) and nothing becomes visible."""
    spark.sql("CREATE TABLE slow (id INT) USING parquet")
    session = LockingSession(spark.newSession(), **locks(hosts, root))
    # 4 tasks of 100 rows, 0.2 s a row: 20 s each, 40 s on two executors
    slow = ("INSERT INTO slow SELECT CAST(id + 0 * length(coalesce(java_method("
            "'java.lang.Thread', 'sleep', 200L), '')) AS INT) FROM range(0, 400, 1, 4)")
    outcome = {}

    def write() -> None:
        started = time.monotonic()
        try:
            session.sql(slow)
            outcome["error"] = None
        except Exception as exc:
            outcome["error"] = lock_error(exc)
        outcome["seconds"] = time.monotonic() - started
    writer = threading.Thread(target=write)
    writer.start()
    tracker = spark.sparkContext.statusTracker()
    stages = wait_for(lambda: [s for s in tracker.getActiveStageIds()
                           if (tracker.getStageInfo(s) or None)
                           and tracker.getStageInfo(s).numActiveTasks > 0], STATE_S)
    mine = wait_for(lambda: [n for n in lock_nodes(zk, root) if "/slow/write-" in n],
                    STATE_S)
    for node in mine:
        zk.delete(node)
    writer.join(120)
    error = outcome.get("error")
    infos = [tracker.getStageInfo(s) for s in stages]
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    session.close()
    return {"tasks_ran": bool(stages), "lost": isinstance(error, LockLost),
            "error": str(error)[:400],
            "tasks": [(i.numTasks, i.numCompletedTasks) for i in infos if i is not None],
            "rows": spark.table("slow").count(), "executors": executors}


def threads_of_one_application(spark, hosts: str, root: str, where: Path) -> dict:
    """Two threads of one LockingSession, then two of the plain session under enforce(),
    each writing its own partition of one table twelve times, beside a writer whose every
    job fails: what tests/spark/writers_app.py runs on local[4]."""
    from staging import leftover_staging
    from writers_app import cases, run_case

    from zklock.spark import enforce

    spark.sql("CREATE DATABASE IF NOT EXISTS w")
    chosen = [c for c in cases() if c.name in ("ds_static", "failing")]
    locking = LockingSession(spark.newSession(), **locks(hosts, root))
    manager = LockManager(**locks(hosts, root))
    try:
        seen = {"locking": {c.name: run_case(locking, c, "locking") for c in chosen}}
        with enforce(spark, manager):
            seen["plain"] = {c.name: run_case(spark, c, "plain") for c in chosen}
    finally:
        locking.close()
        manager.close()
    warehouse = where / "warehouse"
    wait_for(lambda: not leftover_staging(warehouse), STATE_S)  # a failed job's second removal
    return {**seen, "leftovers": leftover_staging(warehouse)}


def main(hosts: str, root: str, work: str) -> dict:
    where = Path(work)
    spark = configure(SparkSession.builder.master("local-cluster[2,1,1024]")
                      .appName("zklock-local-cluster")
                      .config("spark.jars", str(held_commits.jar()))
                      .config("spark.sql.warehouse.dir", str(where / "warehouse"))
                      .config("spark.ui.enabled", "false")
                      .config("spark.executor.memory", "768m")
                      .config("spark.sql.legacy.createHiveTableByDefault", "false")
                      # the plain session's statements (the CREATEs) are locked by the
                      # application's child lock client, which locks where this conf says
                      .config("spark.zklock.zookeeper.quorum", hosts)
                      .config("spark.zklock.root", root)).getOrCreate()
    zk = KazooClient(hosts=hosts)
    zk.start()
    LockManager(hosts=hosts, root=root).close()  # the root exists before anyone lists it
    try:
        return {"two_writers": two_writers(spark, hosts, root),
                "threads": threads_of_one_application(spark, hosts, root, where),
                "fenced_commit": fenced_commit(spark, hosts, root, where, zk),
                "cancelled_tasks": cancelled_tasks(spark, hosts, root, zk),
                "jars": [str(j) for j in spark.sparkContext._jsc.jars()]}
    finally:
        zk.stop()
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
