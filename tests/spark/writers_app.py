"""Concurrent writers of one table inside one Spark application: every kind of write, two
threads at once, each into its own partition (or table), through a LockingSession and
through the plain session under ``enforce()``. Run by tests/spark/test_concurrent_writers.py
in a process of its own (a Hive-enabled SparkContext, one per process), on ``local[4]`` or
``local-cluster``. It prints one JSON document of what each statement did and what the
tables hold; the test asserts on it.

Arguments: ZooKeeper hosts, the znode root, a work directory, the master, the cases
("all", or names separated by commas).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: polling.py, staging.py

from polling import wait_for  # noqa: E402
from staging import leftover_staging  # noqa: E402

from zklock import LockManager  # noqa: E402
from zklock.config import Settings  # noqa: E402
from zklock.spark import LockingSession, configure, enforce, lock_error  # noqa: E402

#: Rows a statement writes, in four tasks (four files).
ROWS = 2000
SELECT = f"SELECT id FROM range(0, {ROWS}, 1, 4)"
WRITERS = ("a", "b")
#: The cases a LockingSession runs in a run of "all" (the plain session runs every one).
LOCKING_CASES = ("ds_static", "ds_dynamic", "hive_static", "ctas", "df_save_as_table",
                 "failing")


class Case:
    """A kind of write: the table it makes, the statement a writer ``me`` runs the
    ``i``-th time, how many statements each writer runs, and what a writer's rows count
    should be after ``ok`` of them returned."""

    def __init__(self, name: str, table: str, write: Callable[..., None], runs: int = 3,
                 rows: Callable[[int], int] = lambda ok: ok * ROWS,
                 count: Callable[..., int] | None = None) -> None:
        self.name, self.table, self.write, self.runs = name, table, write, runs
        self.rows = rows
        self.count = count or (lambda s, t, me: s.sql(
            f"SELECT count(*) FROM {t} WHERE ds = '{me}'").first()[0])


def cases() -> list[Case]:
    def sql(text: str) -> Callable[..., None]:
        return lambda s, t, me, i: s.sql(text.format(t=t, me=me, i=i, select=SELECT))

    def frame(s, me: str):
        return s.range(0, ROWS, 1, 4).selectExpr("id", f"'{me}' AS ds")

    return [
        Case("ds_static", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             sql("INSERT INTO {t} PARTITION (ds='{me}') {select}"), runs=12),
        Case("ds_dynamic", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             sql("INSERT INTO {t} SELECT id, '{me}' FROM range(0, 2000, 1, 4)")),
        Case("ds_mixed", "(id BIGINT, region STRING, ds STRING) USING parquet"
             " PARTITIONED BY (ds, region)",
             sql("INSERT INTO {t} PARTITION (ds='{me}', region) SELECT id,"
                 " CAST(id % 2 AS STRING) FROM range(0, 2000, 1, 4)")),
        Case("ds_overwrite", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             sql("INSERT OVERWRITE {t} PARTITION (ds='{me}') {select}"),
             rows=lambda ok: ROWS if ok else 0),
        Case("ds_overwrite_dynamic", "(id BIGINT, ds STRING) USING parquet"
             " PARTITIONED BY (ds)",
             sql("INSERT OVERWRITE {t} SELECT id, '{me}' FROM range(0, 2000, 1, 4)"),
             rows=lambda ok: ROWS if ok else 0),
        Case("hive_static", "(id BIGINT) PARTITIONED BY (ds STRING) STORED AS PARQUET",
             sql("INSERT INTO {t} PARTITION (ds='{me}') {select}")),
        Case("hive_dynamic", "(id BIGINT) PARTITIONED BY (ds STRING) STORED AS TEXTFILE",
             sql("INSERT INTO {t} PARTITION (ds) SELECT id, '{me}' FROM"
                 " range(0, 2000, 1, 4)")),
        Case("hive_overwrite", "(id BIGINT) PARTITIONED BY (ds STRING) STORED AS PARQUET",
             sql("INSERT OVERWRITE TABLE {t} PARTITION (ds='{me}') {select}"),
             rows=lambda ok: ROWS if ok else 0),
        Case("ctas", "", sql("CREATE TABLE {t}_{me}_{i} USING parquet AS {select}"),
             count=lambda s, t, me: sum(
                 s.sql(f"SELECT count(*) FROM {t}_{me}_{i}").first()[0]
                 for i in range(3) if s.catalog.tableExists(f"{t}_{me}_{i}"))),
        Case("df_insert_into", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             lambda s, t, me, i: frame(s, me).write.mode("append").insertInto(t)),
        Case("df_save_as_table", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             lambda s, t, me, i: frame(s, me).write.mode("append").format("parquet")
             .partitionBy("ds").saveAsTable(t)),
        Case("df_overwrite_table", "",
             lambda s, t, me, i: frame(s, me).write.mode("overwrite").format("parquet")
             .saveAsTable(f"{t}_{me}"),
             rows=lambda ok: ROWS if ok else 0,
             count=lambda s, t, me: s.table(f"{t}_{me}").count()
             if s.catalog.tableExists(f"{t}_{me}") else 0),
        Case("failing", "(id BIGINT, ds STRING) USING parquet PARTITIONED BY (ds)",
             lambda s, t, me, i: s.sql(
                 f"INSERT INTO {t} PARTITION (ds='{me}') SELECT IF(id = 1500 AND '{me}' ="
                 f" 'b', raise_error('an injected task failure'), id) FROM"
                 f" range(0, {ROWS}, 1, 4)"), runs=4),
    ]


def run_case(session, case: Case, prefix: str) -> dict:
    """Both writers at once: each statement's outcome, then each writer's rows."""
    table = f"w.{prefix}_{case.name}"
    if case.table:
        session.sql(f"CREATE TABLE {table} {case.table}")
    outcomes: dict[str, list] = {me: [] for me in WRITERS}
    start = threading.Barrier(len(WRITERS))

    def writer(me: str) -> None:
        start.wait(120)
        for i in range(case.runs):
            try:
                case.write(session, table, me, i)
                outcomes[me].append("ok")
            except Exception as exc:  # noqa: BLE001 (the outcome is what the test reads)
                error = lock_error(exc)
                outcomes[me].append({"type": type(error).__name__,
                                     "raised": type(exc).__name__,
                                     "condition": _condition(exc),
                                     "message": str(error).strip().splitlines()[0][:400]})
    threads = [threading.Thread(target=writer, args=(me,)) for me in WRITERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    seen = {}
    for me in WRITERS:
        ok = outcomes[me].count("ok")
        seen[me] = {"outcomes": outcomes[me], "rows": case.count(session, table, me),
                    "expected": case.rows(ok)}
    return seen


def _condition(exc: BaseException) -> str | None:
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        return get() if callable(get) else None
    except Exception:  # noqa: BLE001
        return None


def check(seen: dict) -> None:
    """What every case must show, for both clients (the tests assert with it)."""
    assert seen["leftovers"] == [], seen["leftovers"]
    for client in ("locking", "plain"):
        for case, writers in seen[client].items():
            for me, got in writers.items():
                where = f"{client} {case} writer {me}: {got}"
                assert got["rows"] == got["expected"], where
                failed = [o for o in got["outcomes"] if o != "ok"]
                if case == "failing" and me == "b":  # every job fails in a task
                    assert len(failed) == len(got["outcomes"]), where
                    for error in failed:  # typed, naming the table and what became of it
                        assert error["type"] == "WriteFailed", where
                        assert error["raised"] != "Py4JJavaError", where
                        assert f"{client}_failing" in error["message"], where
                        assert "nothing it wrote is in the table" in error["message"], where
                        assert "injected task failure" in error["message"], where
                else:
                    assert failed == [], where


def main(argv: list[str]) -> int:
    hosts, root, work, master, wanted = argv[1:6]
    warehouse = Path(work) / "warehouse"
    builder = (SparkSession.builder.master(master).appName("zklock-writers")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
               .config("spark.hadoop.hive.exec.dynamic.partition.mode", "nonstrict")
               .config("spark.driver.extraJavaOptions",
                       f"-Dderby.system.home={work}")
               .enableHiveSupport())
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # both writers retry, by time, until the other's set is gone: a dynamic insert X-locks
    # the whole table, so the two writers take turns there
    lock = dict(hosts=hosts, root=root, timeout=240, retry_interval=0.05)
    manager = LockManager(settings=Settings.resolve(dict(lock, job="writers-plain")))
    engine = enforce(spark, manager)
    locking = LockingSession(spark.newSession(), job="writers-locking", **lock)
    locking.sql("CREATE DATABASE IF NOT EXISTS w")
    chosen = [c for c in cases() if wanted == "all" or c.name in wanted.split(",")]
    seen: dict = {"master": master}
    for client, session in (("locking", locking), ("plain", spark)):
        # every kind of write through the plain session; through the LockingSession, whose
        # writes take the same path in the engine but its own lock client, one of each family
        mine = chosen if client == "plain" or wanted != "all" else [
            c for c in chosen if c.name in LOCKING_CASES]
        seen[client] = {case.name: run_case(session, case, client) for case in mine}
    # a failed job's staging is removed again once its cancelled tasks had time to stop
    wait_for(lambda: not leftover_staging(warehouse), 60)
    seen["leftovers"] = leftover_staging(warehouse)
    locking.close()
    engine.close()
    manager.close()
    spark.stop()
    print(json.dumps(seen), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
