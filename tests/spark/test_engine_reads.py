"""zklock's engine locks every query Spark executes (LockedQueryExec.java): S on what it reads.

As in test_spark_engine.py, a test makes its own manager the engine's lock client for a
while (``enforce``), on the test's root. While another holder keeps X on a table, every
form of read of it is denied after the client's retries (so it returns no rows); beside a
holder in S, each runs. No LockingSession is involved: these are the reads of libraries,
notebooks and pandas-on-Spark, which never see one.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from conftest import Latch, raises_lock_error, spark_line, wait_for
from diagnostics import SPARK_LOG
from pyspark.sql import SparkSession
from test_spark_engine import message, no_lock_client

from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.observe.events import read_events
from zklock.spark import enforce
from zklock.spark.lock_client import engine_of

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::UserWarning", "ignore::FutureWarning")


def pandas_on_spark(table: str) -> object:
    import pyspark.pandas as ps

    if spark_line() >= (4, 0):  # Spark 4.0 turns ANSI on by default; 3.5 has no such option
        ps.set_option("compute.fail_on_ansi_mode", False)
    return ps.read_table(table).to_pandas()


def arrow_to_pandas(spark, table: str) -> object:
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    try:
        return spark.table(table).toPandas()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.pyspark.enabled")


def cached_twice(spark, table: str) -> object:
    df = spark.table(table).cache()
    try:
        return df.count(), spark.table(table).count()  # the second from the cache
    finally:
        df.unpersist()


def refusal(exc: BaseException) -> str:
    """The message of the engine's refusal behind ``exc``: Spark may wrap it (toPandas runs
    its job on a serving thread and reports "Exception thrown in awaitResult")."""
    java = getattr(exc, "java_exception", None)
    while java is not None:
        if "zklock.EngineRefusal" in str(java.getClass().getName()):
            return str(java.getMessage()).strip().splitlines()[0]
        java = java.getCause()
    return message(exc)


def reads(spark, db: str) -> list:
    """(label, a read of {db}.dim) for every form a pipeline reads in."""
    t = f"{db}.dim"
    return [
        ("collect", lambda: spark.table(t).collect()),
        ("count", lambda: spark.table(t).count()),
        ("show", lambda: spark.table(t).show()),
        ("take", lambda: spark.table(t).take(1)),
        ("first", lambda: spark.table(t).first()),
        ("isEmpty", lambda: spark.table(t).isEmpty()),
        ("tail", lambda: spark.table(t).tail(1)),
        ("toPandas", lambda: spark.table(t).toPandas()),
        ("toPandas with Arrow", lambda: arrow_to_pandas(spark, t)),
        ("toLocalIterator", lambda: list(spark.table(t).toLocalIterator())),
        ("corr", lambda: spark.table(t).corr("id", "id")),
        ("approxQuantile", lambda: spark.table(t).approxQuantile("id", [0.5], 0.1)),
        ("pivot without values", lambda: spark.table(t).groupBy("id").pivot("name").count()
         .collect()),
        ("a join", lambda: spark.sql(f"SELECT count(*) FROM {db}.orders o JOIN {t} d"
                                     " ON o.id = d.id").collect()),
        ("a view over it", lambda: spark.table(f"{db}.day1").collect()),
        ("a subquery", lambda: spark.sql(f"SELECT * FROM range(3) WHERE id IN"
                                         f" (SELECT id FROM {t})").collect()),
        ("a cached DataFrame, read twice", lambda: cached_twice(spark, t)),
        ("pandas-on-Spark", lambda: pandas_on_spark(t)),
        ("SparkSession.active()", lambda: SparkSession.active().sql(f"SELECT * FROM {t}")
         .collect()),
        ("a helper's own getOrCreate()", lambda: SparkSession.builder.getOrCreate().table(t)
         .count()),
        ("SparkSession(sc)", lambda: SparkSession(spark.sparkContext).table(t).count()),
    ]


def test_every_read_form_is_denied_while_another_holds_x(spark, db, make_manager) -> None:
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(f"{db}.dim"), Mode.EXCLUSIVE)], query_id="writer")
    ran = []
    try:
        with enforce(spark, make_manager(retries=1, retry_interval=0.05)):
            for label, read in reads(spark, db):
                try:
                    read()
                    ran.append(label)
                except Exception as exc:  # the engine's denial, through py4j
                    assert "held in X" in refusal(exc), (label, refusal(exc))
    finally:
        held.release()
    # approxQuantile aggregates an RDD outside any SQL execution up to Spark 4.0 (4.3 runs it
    # as SQL): a lifetime the engine cannot bound, so it runs, never silently: the log says
    # which tables it read without locks (docs/spark.md, "Reads in Spark's engine")
    assert set(ran) <= {"approxQuantile"}
    if ran:
        assert f"an RDD of a query reads {db}.dim WITHOUT LOCKS" in SPARK_LOG.read_text()


def test_every_read_form_runs_beside_a_holder_in_s_and_leaves_no_lock(
        spark, db, make_manager) -> None:
    holder = make_manager()
    reader = make_manager(retries=1, retry_interval=0.05)
    with holder.acquire([(LockObject.parse(f"{db}.dim"), Mode.SHARED)], query_id="reader"):
        with enforce(spark, reader):
            for label, read in reads(spark, db):
                try:
                    read()
                except Exception as exc:
                    raise AssertionError(f"{label}: {refusal(exc)}") from exc
        # the reads whose jobs ran after their call hold until their SQL execution ended
        assert wait_for(lambda: {r.data.query_id for r in holder.show(extended=True)}
                        == {"reader"}), holder.show(extended=True)


def test_a_read_takes_its_locks_with_its_statement_and_application(
        spark, db, make_manager, tmp_path) -> None:
    """What an operator sees: the read's S locks in SHOW LOCKS / zklock show while it runs,
    with the statement, the user and the Spark application; gone once it has."""
    watcher = make_manager()
    latch = Latch(spark, tmp_path)
    with enforce(spark, make_manager()):
        reading = threading.Thread(target=lambda: spark.sql(
            f"SELECT zk_latch(id) FROM {db}.dim").collect())
        reading.start()
        try:
            wait_for(latch.reached, timeout=120)
            held = [r for r in watcher.show(f"{db}.dim", extended=True)]
            assert [(r.object, r.mode.value) for r in held] == [(f"{db}.dim", "S")]
            assert "zk_latch" in held[0].data.query
            assert held[0].data.app == spark.sparkContext.applicationId
        finally:
            latch.open()
            reading.join(120)
    # released once the read returned (in the background, as every statement's set)
    assert wait_for(lambda: watcher.show(f"{db}.dim") == [])


def test_a_read_keeps_its_listing_until_anyone_locks_the_table(
        spark, db, make_manager, unswept_hosts) -> None:
    """A read lists its tables' files again under its locks (FreshListings.java), unless its
    grant proves that no one locked the table since this application's previous read listed
    it: the table's node changed only by that read's node and this one's (SoleVersion). A
    file dropped into the table with no lock at all, which zklock cannot see, stays unseen
    until anyone locks the table; the next read then lists again."""
    import shutil
    import uuid
    from pathlib import Path
    from urllib.parse import urlparse

    table = f"{db}.quiet"
    spark.sql(f"CREATE TABLE {table} (id INT) USING parquet")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    location = Path(urlparse(spark.sql(f"DESCRIBE TABLE EXTENDED {table}")
                             .where("col_name = 'Location'").first()["data_type"]).path)

    def drop_a_file_without_locks() -> None:
        part = next(location.glob("part-*.parquet"))
        shutil.copy(part, location / f"part-unlocked-{uuid.uuid4().hex}.parquet")

    other = make_manager(hosts=unswept_hosts)
    target = [(LockObject.parse(table), Mode.SHARED)]
    def count() -> int:
        """A read, once its locks are released (a query's are at its SQL execution's end,
        which Spark's listener bus reports a moment after the call returns)."""
        n = spark.table(table).count()
        assert wait_for(lambda: other.show(table) == [])
        return n

    def totals() -> tuple[int, int]:
        """The application's listings taken and kept (Spark's metrics system)."""
        counts = json.loads(str(engine_of(spark).lockTotals()))
        return counts["fileIndexesListed"], counts["fileIndexesKept"]

    with enforce(spark, make_manager(hosts=unswept_hosts)):
        assert count() == 1  # listed under its locks (its grant made the table's node)
        assert count() == 1  # listed, its node alone on the table's
        drop_a_file_without_locks()
        listed, kept = totals()
        assert count() == 1  # kept: no one locked the table since
        assert totals() == (listed, kept + 1)
        other.acquire(target).release()
        assert count() == 2  # someone did: listed again
        assert totals() == (listed + 1, kept + 1)
        drop_a_file_without_locks()
        with other.acquire(target):
            assert spark.table(table).count() == 3  # beside another holder: listed again
        assert count() == 3
        assert count() == 3
    # this application writing it under another lock space (the suite's other ZooKeeper),
    # where this one's nodes see nothing: its own write's end lists the table again
    with enforce(spark, make_manager()):
        spark.sql(f"INSERT INTO {table} VALUES (9)")
    with enforce(spark, make_manager(hosts=unswept_hosts)):
        assert count() == 4


def test_a_query_with_a_view_subquery_and_cache_takes_one_set_of_locks(
        spark, db, make_manager, tmp_path) -> None:
    """Nested executions (the subquery, the cached plan's materialisation) run inside the
    query's locks and take nothing more: a second request could queue behind a writer's
    intent while this query holds S, and wait for ever."""
    log = tmp_path / "events.jsonl"
    reader = make_manager(event_log=str(log), job="nested")
    cached = spark.table(f"{db}.dim").cache()
    try:
        with enforce(spark, reader):
            spark.sql(f"SELECT * FROM {db}.day1 WHERE id IN (SELECT id FROM {db}.dim)"
                      f" AND id <= (SELECT max(id) FROM {db}.orders)").collect()
    finally:
        cached.unpersist()
    reader.events.flush()
    grants = [e for e in read_events([str(log)]) if e["event"] == "grant"]
    assert len(grants) == 1
    assert {(o, m) for o, m in grants[0]["locks"]} >= {
        (f"{db}.day1", "S"), (f"{db}.dim", "S"), (f"{db}.orders", "S")}


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_a_shuffle_query_holds_its_locks_before_its_first_stage_runs(
        spark, db, make_manager, tmp_path, adaptive) -> None:
    """The grant's stamp (taken in the driver's Python before the JVM hears of the grant)
    against the clock of the query's first task (a Python UDF in its first stage): both
    time.time() on one host, not a file's coarser mtime."""
    log, started = tmp_path / "events.jsonl", tmp_path / "tasks"
    reader = make_manager(event_log=str(log), job="shuffle")
    path = str(started)

    def stamp(x):
        import time as t

        with open(path, "a") as f:
            f.write(f"{t.time() * 1000}\n")
        return x
    spark.udf.register("zk_stamp", stamp, "int")
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    try:
        with enforce(spark, reader):
            spark.sql(f"SELECT name, sum(id) FROM (SELECT zk_stamp(id) AS id, name"
                      f" FROM {db}.dim) GROUP BY name").collect()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    reader.events.flush()
    grant = [e for e in read_events([str(log)]) if e["event"] == "grant"][0]
    first_task_ms = min(float(line) for line in started.read_text().split())
    assert grant["ts"] <= first_task_ms, (grant["ts"], first_task_ms)


def test_a_read_whose_locks_are_lost_has_its_jobs_cancelled(
        spark, db, make_manager, zk, tmp_path) -> None:
    reader = make_manager()
    latch = Latch(spark, tmp_path)
    failure = {}

    def read() -> None:
        try:
            spark.sql(f"SELECT zk_latch(id) FROM {db}.dim").collect()
        except Exception as exc:
            failure["message"] = message(exc)
    with enforce(spark, reader):
        reading = threading.Thread(target=read)
        reading.start()
        try:
            wait_for(latch.reached, timeout=120)
            for record in reader.show(f"{db}.dim"):
                zk.delete(record.node)  # another client removes the read's lock node
            reading.join(60)
        finally:
            latch.open()
            reading.join(60)
    assert "lost" in failure.get("message", ""), failure


def test_without_a_lock_client_a_read_is_refused_in_one_line_or_warned(spark, db) -> None:
    with no_lock_client(spark):
        with pytest.raises(Exception) as refused:
            spark.table(f"{db}.dim").collect()
        assert message(refused.value).startswith(f"zklock: refused a query of {db}.dim:")
        assert "spark.zklock.engine.reads=warn" in message(refused.value)
        assert spark.range(3).count() == 3  # what reads no table needs no lock
        for mode in ("warn", "off"):
            spark.conf.set("spark.zklock.engine.reads", mode)
            try:
                assert spark.table(f"{db}.dim").count() == 2
            finally:
                spark.conf.unset("spark.zklock.engine.reads")
        spark.conf.set("spark.zklock.engine.reads", "of")
        try:
            with pytest.raises(Exception) as typo:
                spark.table(f"{db}.dim").count()
            assert "lock, warn or off" in message(typo.value)
        finally:
            spark.conf.unset("spark.zklock.engine.reads")


def test_holding_keeps_what_an_rdd_reads_locked_for_its_block(
        spark, db, make_locking, make_manager) -> None:
    """An RDD's jobs run after the call that made it, so the engine cannot bound them:
    ``session.holding(df)`` holds S on what ``df`` reads for the block, and what runs inside
    it is covered."""
    from zklock.errors import LockNotAcquired

    session = make_locking()
    writer = make_manager(retries=0)
    df = session.table(f"{db}.dim")
    with session.holding(df) as held:
        assert held.is_valid and held.node_paths
        assert df.rdd.map(lambda row: row.id).sum() == 3
        with raises_lock_error(LockNotAcquired):
            writer.acquire([(f"{db}.dim", "X")])
    # released with the block (in the background, as every statement's set: wait for it)
    assert wait_for(lambda: writer.show(f"{db}.dim") == [])
    with writer.acquire([(f"{db}.dim", "X")]):
        pass


RACE_SECONDS = 30.0  # the floor: enough overwrites to meet readers mid-write


def test_plain_readers_racing_an_overwriter_see_whole_tables_only(
        spark, db, make_locking, make_manager) -> None:
    """For RACE_SECONDS, a LockingSession overwrites a table again and again (four files a
    generation) while two plain-session readers count and checksum it. Each reader starts
    its next read as soon as a new generation is committed, so it races the next overwrite,
    which starts at the same moment. A reader sees one whole generation (500 rows, one
    generation, the ids' sum) or is denied: never a mix, a missing file or another error.
    Without its S locks a read running beside an overwrite fails on the files it deleted,
    or returns a mix."""
    from zklock.errors import LockNotAcquired
    from zklock.spark import lock_error

    table = f"{db}.race"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, g BIGINT) USING parquet")
    writer = make_locking(retries=2000, retry_interval=0.01)
    generation = [0]
    done = threading.Event()
    seen: list[tuple] = []
    failures: list[str] = []
    denials = [0]

    def overwrite() -> None:
        try:
            deadline = time.monotonic() + RACE_SECONDS
            while time.monotonic() < deadline and not failures:
                g = generation[0] + 1
                writer.sql(f"INSERT OVERWRITE {table} SELECT /*+ REPARTITION(4) */ id,"
                           f" {g} AS g FROM range(500)")
                generation[0] = g
        except Exception as exc:
            failures.append(f"overwrite: {exc!r}"[:500])
        finally:
            done.set()

    def read() -> None:
        last = [0]
        while wait_for(lambda: done.is_set() or generation[0] > last[0], timeout=120):
            if done.is_set():
                return
            last[0] = generation[0]
            try:
                row = spark.sql(f"SELECT count(*) AS n, min(g) AS lo, max(g) AS hi,"
                                f" sum(id) AS ids FROM {table}").collect()[0]
            except Exception as exc:
                if isinstance(lock_error(exc), LockNotAcquired):
                    denials[0] += 1
                    continue
                failures.append(f"read: {exc!r}"[:500])
                return
            seen.append(tuple(row))
            if tuple(row)[:1] + tuple(row)[3:] != (500, sum(range(500))) or row.lo != row.hi:
                failures.append(f"read a mix: {tuple(row)}")
                return

    with enforce(spark, make_manager(retries=2000, retry_interval=0.01)):
        threads = [threading.Thread(target=fn) for fn in (overwrite, read, read)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(RACE_SECONDS + 120)
    assert not failures, failures
    assert generation[0] >= 5 and len({hi for _, _, hi, _ in seen}) >= 3, (
        generation[0], seen, denials[0])
