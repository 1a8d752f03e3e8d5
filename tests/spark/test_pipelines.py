"""Spark Declarative Pipelines under locks: ``spark-pipelines run`` (PySpark 4.1+) with
docs/deploy.md's block in its ``SPARK_CONF_DIR``, as a platform configures it (the spec's
``configuration:`` cannot carry static settings). Its streaming table's flow is a stream
into a catalog table: every micro-batch locked and committed once (docs/spark.md, "Streams
and pipelines"); its materialized views are written by statements, locked as any.

Real runs of Spark's own CLI (a Spark Connect server it starts, a Hive metastore of the
test's own, so that a second run finds the first one's tables) on a real ZooKeeper.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import PYTHON, spark_line, wait_for, waiting_queries
from deployed import shared_metastore, spark_defaults
from zklock.cli.connect_server import pyspark_home

from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.spark import jvm

pytestmark = pytest.mark.docs

EVENTS = '''
from pyspark import pipelines as dp
from pyspark.sql import SparkSession

spark = SparkSession.active()


@dp.table
def events():
    return spark.readStream.schema("id INT, ds STRING").json("{source}")
'''
TOTALS = "CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n FROM events\n"
NEWEST = "CREATE MATERIALIZED VIEW newest AS SELECT max(id) AS m FROM events\n"


@pytest.fixture
def pipeline(tmp_path: Path, zk_hosts: str, root: str) -> dict[str, Path]:
    """A pipeline project (a streaming table over JSON files, a materialized view over it)
    and a Spark conf directory holding deploy.md's block, on the test's ZooKeeper root.
    `make test-docs` runs in the newest PySpark setup.cfg allows: one without Spark's
    pipelines (before 4.1) is an install to mend, not a test to skip."""
    if spark_line() < (4, 1) or not (pyspark_home() / "bin" / "spark-pipelines").exists():
        pytest.fail(f"spark-pipelines needs PySpark 4.1 or newer (with its pipelines extra);"
                    f" this one is {'.'.join(map(str, spark_line()))}: run make install")
    project, source, conf = tmp_path / "project", tmp_path / "source", tmp_path / "conf"
    for d in (project / "transformations", source, conf):
        d.mkdir(parents=True)
    (project / "spark-pipeline.yml").write_text(
        f"name: zklock_test\nstorage: file://{tmp_path}/storage\n"
        "libraries:\n  - glob:\n      include: transformations/**\n")
    (project / "transformations" / "events.py").write_text(EVENTS.format(source=source))
    (project / "transformations" / "totals.sql").write_text(TOTALS)
    jar = jvm.jar_for()
    settings = {**spark_defaults(),
                "spark.zklock.zookeeper.quorum": zk_hosts, "spark.zklock.root": root,
                "spark.zklock.lock.retryInterval": "0.1s", "spark.zklock.lock.retries": "600",
                "spark.zklock.eventLog": str(tmp_path / "events.jsonl"),
                "spark.zklock.metrics.port": "0",
                "spark.zklock.lockClient.python": PYTHON,
                "spark.jars": str(jar), "spark.driver.extraClassPath": str(jar),
                # a metastore of the test's own: the second run finds the first's tables
                "spark.sql.catalogImplementation": "hive",
                "spark.hadoop.javax.jdo.option.ConnectionURL":
                    f"jdbc:derby:;databaseName={tmp_path}/metastore_db;create=true",
                "spark.sql.warehouse.dir": str(tmp_path / "warehouse")}
    (conf / "spark-defaults.conf").write_text(
        "".join(f"{k} {v}\n" for k, v in settings.items()))
    return {"project": project, "source": source, "conf": conf,
            "warehouse": tmp_path / "warehouse"}


def run(pipeline: dict) -> subprocess.CompletedProcess:
    home = pyspark_home()
    # SPARK_TESTING: PySpark's local Spark Connect server on a port of its own (SPARK-42272),
    # not Spark Connect's default one, which a documented command's server may hold
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(pipeline["conf"]),
           "PYSPARK_PYTHON": PYTHON, "PATH": f"{Path(PYTHON).parent}:{os.environ['PATH']}",
           "SPARK_TESTING": "1"}
    return subprocess.run([str(home / "bin" / "spark-pipelines"), "run",
                           *pipeline.get("args", [])],
                          cwd=pipeline["project"], env=env, capture_output=True, text=True,
                          timeout=600)


def failure(out: subprocess.CompletedProcess) -> str:
    """What a failed run said: its error lines (a JVM's trace is long), then its tail."""
    said = out.stdout + out.stderr
    errors = [line for line in said.splitlines()
              if "Exception" in line or "Error" in line or "zklock" in line]
    return "\n".join(errors[:20]) + "\n...\n" + said[-2000:]


def add_rows(source: Path, name: str, ids: range) -> list[int]:
    tmp = source / f".{name}.tmp"
    tmp.write_text("".join(json.dumps({"id": i, "ds": "d"}) + "\n" for i in ids))
    tmp.rename(source / f"{name}.json")
    return list(ids)


def table_ids(pipeline: dict[str, Path], table: str, column: str = "id") -> list[int]:
    return sorted(pq.read_table(str(pipeline["warehouse"] / table)).column(column).to_pylist())


def run_waits(zk, root: str) -> str:
    """The query of the one wait a run records, once it does."""
    waits = f"{root}/.waits"
    assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=300)
    return json.loads(zk.get(f"{waits}/{zk.get_children(waits)[0]}")[0])["query"]


def with_settings(pipeline: dict, **settings: str) -> None:
    conf = pipeline["conf"] / "spark-defaults.conf"
    lines = dict(line.split(" ", 1) for line in conf.read_text().splitlines())
    lines.update(settings)
    conf.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))


def test_a_run_takes_every_dataset_before_it_creates_one(pipeline, make_manager, zk, root):
    """Spark creates a pipeline's new datasets through the catalog API, before any statement:
    the run takes X on all of them as it starts, or starts nothing. Held by another, the
    run is refused in one line after its retries, and creates nothing; or it waits, and
    creates nothing until the holder releases."""
    expected = add_rows(pipeline["source"], "a", range(10))
    holder = make_manager()
    held = holder.acquire([(LockObject.parse("default.totals"), Mode.EXCLUSIVE)],
                          query_id="holder-sdp")
    try:
        with_settings(pipeline, **{"spark.zklock.lock.retries": "3"})
        refused = run(pipeline)
        assert refused.returncode != 0
        said = [line for line in (refused.stdout + refused.stderr).splitlines()
                if "zklock: " in line]
        assert said and "default.totals" in said[0] and "holder-sdp" in said[0], failure(refused)
        assert not pipeline["warehouse"].exists() or not any(pipeline["warehouse"].iterdir())
        with_settings(pipeline, **{"spark.zklock.lock.retries": "600"})
        done: dict[str, subprocess.CompletedProcess] = {}
        waiting = threading.Thread(target=lambda: done.setdefault("run", run(pipeline)))
        waiting.start()
        assert "spark-pipelines run" in run_waits(zk, root)
        assert not pipeline["warehouse"].exists() or not any(pipeline["warehouse"].iterdir())
    finally:
        held.release()
    waiting.join(600)
    assert done["run"].returncode == 0, failure(done["run"])
    assert table_ids(pipeline, "events") == expected
    assert table_ids(pipeline, "totals", "n") == [10]


def test_two_runs_and_a_holder_of_the_streaming_table(pipeline, make_manager, zk, root):
    expected = add_rows(pipeline["source"], "a", range(10))
    first = run(pipeline)
    assert first.returncode == 0, failure(first)
    assert table_ids(pipeline, "events") == expected
    assert table_ids(pipeline, "totals", "n") == [10]
    streamed = pipeline["warehouse"] / "events"
    assert not (streamed / "_spark_metadata").exists()
    assert (streamed / "_zklock" / "batches").is_dir()
    # new rows, and another holder's X on the streaming table: the run waits for it
    expected += add_rows(pipeline["source"], "b", range(10, 15))
    holder = make_manager()
    held = holder.acquire([(LockObject.parse("default.events"), Mode.EXCLUSIVE)],
                          query_id="backfill-sdp")
    done: dict[str, subprocess.CompletedProcess] = {}
    second = threading.Thread(target=lambda: done.setdefault("run", run(pipeline)))
    second.start()
    try:
        query = run_waits(zk, root)
        assert "spark-pipelines run" in query and "default.events" in query, query
        assert table_ids(pipeline, "events") == expected[:10]  # held back
    finally:
        held.release()
    second.join(600)
    assert done["run"].returncode == 0, failure(done["run"])
    assert table_ids(pipeline, "events") == expected  # every row once
    assert table_ids(pipeline, "totals", "n") == [15]


def test_a_full_refresh_is_atomic_to_readers(pipeline, make_manager):
    """Spark's refresh of a materialized view is a TRUNCATE as the run starts, then the
    view's flow writes (a reader between them finds it empty, in Spark itself). Under zklock
    the run holds X on its datasets from its start to its end: a reader taking S (as every
    statement of an application under zklock does) waits for the run and reads the old
    count or the new."""
    add_rows(pipeline["source"], "a", range(10))
    first = run(pipeline)
    assert first.returncode == 0, failure(first)
    assert table_ids(pipeline, "totals", "n") == [10]
    expected = add_rows(pipeline["source"], "b", range(10, 15))
    reader, watcher = make_manager(), make_manager()
    seen: list[object] = []
    held_for_run: list[str] = []
    done = threading.Event()

    def read() -> None:
        view = [(LockObject.parse("default.totals"), Mode.SHARED)]
        while not done.is_set():
            with reader.acquire(view, query_id="reader", retry_interval=0.05, timeout=600):
                try:
                    seen.append(table_ids(pipeline, "totals", "n"))
                except Exception as e:  # a missing or unreadable view: what must not happen
                    seen.append(repr(e))
            done.wait(0.05)  # (a reader's pace, leaving the run room to take its X)

    def watch() -> None:
        while not done.is_set() and not held_for_run:
            held_for_run.extend(r.data.query for r in watcher.show("default.totals", True)
                                if r.data and "pipeline's run" in r.data.query)
            done.wait(0.05)  # (a watcher's pace)

    threads = [threading.Thread(target=read), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    try:
        refreshed = run({**pipeline, "args": ["--full-refresh-all"]})
    finally:
        done.set()
        for t in threads:
            t.join(60)
    assert refreshed.returncode == 0, failure(refreshed)
    assert held_for_run and "spark-pipelines run" in held_for_run[0], held_for_run
    assert table_ids(pipeline, "events") == list(range(10)) + expected
    assert table_ids(pipeline, "totals", "n") == [15]
    assert seen and all(s in ([10], [15]) for s in seen), sorted(map(str, seen))[:5]


def test_two_runs_at_once_refresh_one_after_the_other(pipeline, tmp_path, make_manager, zk,
                                                      root):
    """Two runs at once of one pipeline with two views (which Spark refreshes in parallel),
    on one metastore as a platform's applications share it: each run takes all its datasets
    as it starts or waits holding none, so the first to take them runs whole and the other
    waits until it has ended; neither can hold a view the other needs (they would then wait
    on each other until lock.timeout, and one would fail). A holder of the streaming table
    keeps both waiting until both are seen; every row is then in the table once, counted
    once."""
    with shared_metastore(tmp_path / "metastore-state") as metastore:
        conf = pipeline["conf"] / "spark-defaults.conf"
        settings = dict(line.split(" ", 1) for line in conf.read_text().splitlines())
        for key in ("spark.hadoop.javax.jdo.option.ConnectionURL", "spark.sql.warehouse.dir"):
            del settings[key]
        settings.update(metastore["spark_conf"])
        # the second run waits through the rest of the first (its stream, the view's write,
        # its session's end): minutes for two applications on a loaded machine
        settings["spark.zklock.lock.retries"] = "6000"
        conf.write_text("".join(f"{k} {v}\n" for k, v in settings.items()))
        shared = {**pipeline,
                  "warehouse": Path(metastore["spark_conf"]["spark.sql.warehouse.dir"])}
        (pipeline["project"] / "transformations" / "newest.sql").write_text(NEWEST)
        expected = add_rows(pipeline["source"], "a", range(10))
        first = run(shared)
        assert first.returncode == 0, failure(first)
        expected += add_rows(pipeline["source"], "b", range(10, 15))
        held = make_manager().acquire([(LockObject.parse("default.events"), Mode.EXCLUSIVE)],
                                      query_id="backfill-sdp")
        done: dict[str, subprocess.CompletedProcess] = {}
        runs = [threading.Thread(target=lambda k=k: done.setdefault(k, run(shared)))
                for k in ("one", "two")]
        for t in runs:
            t.start()
        try:
            def both_wait() -> bool:
                return sum("spark-pipelines run" in q for q in waiting_queries(zk, root)) == 2

            assert wait_for(both_wait, timeout=300), waiting_queries(zk, root)
            assert table_ids(shared, "events") == expected[:10]  # held back
        finally:
            held.release()
        for t in runs:
            t.join(600)
        for name in ("one", "two"):
            assert done[name].returncode == 0, failure(done[name])
        assert table_ids(shared, "events") == expected
        assert table_ids(shared, "totals", "n") == [15]
        assert table_ids(shared, "newest", "m") == [14]
