"""Streams under locks (zklock/spark/java/stream): every micro-batch of a streaming write is a
locked statement, committed whole and once, beside the table's batch writers.

Real streams (file sources with several files per batch, the rate source), a real
SparkSession and a real ZooKeeper. Judged by the data: every source row is in the table
exactly once, and what a reader counts is always whole batches.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import diagnostics
import pytest
from conftest import PROJECT, PYTHON, Latch, lock_nodes, raises_lock_error, spark_line, wait_for

from zklock.errors import UnsupportedStatement
from zklock.locks.mode import Mode
from zklock.locks.objects import LockObject
from zklock.observe import metrics
from zklock.spark import enforce

SCHEMA = "id INT, ds STRING"


def count(spark, table: str) -> int:
    spark.catalog.refreshTable(table)
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def ids(spark, table: str) -> list[int]:
    spark.catalog.refreshTable(table)
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())


def location(spark, table: str) -> Path:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    uri = next(r.data_type for r in rows if r.col_name == "Location")
    return Path(uri.replace("file:", ""))


def add_files(source: Path, first: int, files: int, rows: int = 5) -> list[int]:
    """``files`` JSON files of ``rows`` rows each into ``source``, ids from ``first``; the
    ids written. Each file appears whole (written aside, then renamed)."""
    source.mkdir(parents=True, exist_ok=True)
    written = []
    for f in range(files):
        lines = []
        for r in range(rows):
            n = first + f * rows + r
            written.append(n)
            lines.append(json.dumps({"id": n, "ds": f"d{n % 3}"}))
        tmp = source / f".part-{first}-{f}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(source / f"part-{first}-{f}.json")
    return written


def stream_of(spark, source: Path):
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 2)
            .json(str(source)))


@pytest.fixture
def streaming(spark, make_manager):
    """The test's ``spark`` with a lock client on the test's root that waits (streams wait
    for a holder as statements do)."""
    with enforce(spark, make_manager(retries=2000, retry_interval=0.05)):
        yield spark


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_each_micro_batch_lands_once_with_no_spark_log(streaming, db, tmp_path, partitioned):
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet"
              + (" PARTITIONED BY (ds)" if partitioned else ""))
    spark.sql(f"INSERT INTO {table} VALUES (-1, 'd0')")  # written before the stream
    source = tmp_path / "source"
    expected = [-1] + add_files(source, 0, 5)
    query = (stream_of(spark, source).writeStream.queryName("ingest")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).toTable(table))
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    assert ids(spark, table) == expected  # each row once, the earlier row still seen
    place = location(spark, table)
    assert not (place / "_spark_metadata").exists()
    batches = place / "_zklock" / "batches" / query.id
    records = sorted(p.name for p in batches.iterdir() if not p.name.startswith("."))
    assert records == ["2.committed"]  # 5 files, 2 a batch: batches 0, 1, 2
    # a backfill's overwrite of what the stream wrote is visible at once
    if partitioned:
        spark.sql(f"INSERT OVERWRITE {table} PARTITION (ds='d0') VALUES (100)")
        kept = [n for n in expected if n >= 0 and n % 3 != 0]
    else:
        spark.sql(f"INSERT OVERWRITE {table} VALUES (100, 'd0')")
        kept = []
    assert ids(spark, table) == sorted(kept + [100])


def test_a_backfill_of_an_old_partition_completes_while_the_stream_runs(streaming, db,
                                                                       tmp_path):
    """A processingTime stream appends to a partitioned table while a backfill rewrites an
    old partition: the backfill returns with the stream running, its rows are visible at
    once, and every streamed row is in the table once."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    spark.sql(f"INSERT INTO {table} VALUES (-1, 'old'), (-2, 'old')")
    source = tmp_path / "source"
    expected = add_files(source, 0, 1)  # partitions d0, d1, d2: never 'old'
    query = (stream_of(spark, source).writeStream.queryName("ingest-backfilled")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="100 milliseconds").toTable(table))
    try:
        assert wait_for(lambda: count(spark, table) == 2 + len(expected), timeout=60)
        expected += add_files(source, 100, 2)  # batches under way while the backfill runs
        spark.sql(f"INSERT OVERWRITE {table} PARTITION (ds='old') VALUES (-10)")
        assert query.isActive, query.exception()
        old = spark.sql(f"SELECT id FROM {table} WHERE ds = 'old'").collect()
        assert [r.id for r in old] == [-10]  # visible at once, no log hides it
        expected += add_files(source, 200, 1)
        assert wait_for(lambda: count(spark, table) == len(expected) + 1, timeout=60)
    finally:
        query.stop()
    assert ids(spark, table) == sorted(expected + [-10])


def test_a_once_trigger_into_an_orc_table_writes_each_run_once(streaming, db, tmp_path):
    """trigger(once=True), each run one locked batch of what has arrived, into an ORC
    table: every row once over two runs of the query, and no Spark log in the table."""
    spark = streaming
    table = f"{db}.ev_orc"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING orc")
    source = tmp_path / "source"
    expected = add_files(source, 0, 3)
    for run in range(2):
        query = (stream_of(spark, source).writeStream.format("orc").queryName("once-orc")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(once=True).toTable(table))
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        assert ids(spark, table) == sorted(expected)
        expected += add_files(source, 100 * (run + 1), 2)
    place = location(spark, table)
    assert not (place / "_spark_metadata").exists()
    assert list(place.glob("part-*.orc"))


def cli_output(zk_hosts: str, root: str, *args: str) -> str:
    """What ``zklock <args>`` prints for the run's lock root, as an operator runs it."""
    from click.testing import CliRunner
    from zklock.cli.main import cli

    out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, *args])
    assert out.exit_code == 0, out.output
    return out.output


def test_batches_wait_for_a_holder_and_readers_see_whole_batches(streaming, db, tmp_path,
                                                                 make_manager, zk, zk_hosts,
                                                                 root):
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source = tmp_path / "source"
    expected = add_files(source, 0, 1, rows=10)  # a batch: one file of 10 rows
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(table), Mode.EXCLUSIVE)], query_id="backfill-7")
    query = (stream_of(spark, source).writeStream.queryName("ingest")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="100 milliseconds").toTable(table))
    batches = metrics.STREAM_BATCHES.labels("ingest")._value.get()
    waited = metrics.STREAM_BATCH_WAIT.labels("ingest")._sum.get()
    seen: list[int] = []
    reading = threading.Event()
    reading.set()

    def reader() -> None:  # a reader of the table, locked as any query (S)
        while reading.is_set():
            seen.append(spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n)

    watcher = threading.Thread(target=reader)

    try:
        # the first batch waits for the holder, named in the wait record as the stream's
        # micro-batch: its query's name, id and batch id
        waits = f"{root}/.waits"
        assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
        record = json.loads(zk.get(f"{waits}/{zk.get_children(waits)[0]}")[0])
        named = f"micro-batch 0 of stream ingest (id {query.id}) into {table}"
        assert named in record["query"], record
        # as `zklock waits` shows it to an operator, beside the holder it waits for
        waits_view = cli_output(zk_hosts, root, "waits")
        assert named in waits_view and "backfill-7" in waits_view, waits_view
        # nothing of it is in the table while X is held (a locked reader would wait)
        assert not list(location(spark, table).glob("part-*"))
        held.release()
        assert wait_for(lambda: count(spark, table) == 10, timeout=60)
        watcher.start()
        for batch in range(1, 4):
            expected += add_files(source, batch * 10, 1, rows=10)
            rows = len(expected)
            assert wait_for(lambda rows=rows: count(spark, table) == rows, timeout=60)
    finally:
        held.release()  # (again: released already, unless an assertion failed first)
        reading.clear()
        query.stop()
    if watcher.is_alive():
        watcher.join(60)
    assert ids(spark, table) == sorted(expected)
    # what the reader counted: whole batches of 10 rows, never fewer than before
    assert seen and all(n % 10 == 0 for n in seen), seen
    assert seen == sorted(seen), seen
    # the metrics count its batches, and the wait of the first, by the query's name
    assert metrics.STREAM_BATCHES.labels("ingest")._value.get() - batches >= 4
    assert metrics.STREAM_BATCH_WAIT.labels("ingest")._sum.get() - waited > 0


def batch_files(table_dir: Path) -> dict[str, list[Path]]:
    """The table's data files, by the write job that wrote them (its id in their names)."""
    jobs: dict[str, list[Path]] = {}
    for f in table_dir.rglob("part-*"):
        if "_temporary" not in f.parts and "_zklock" not in f.parts:
            jobs.setdefault(f.name.split("-", 2)[2][:36], []).append(f)
    return jobs


def test_a_replayed_batch_is_not_written_twice(streaming, db, tmp_path):
    """Spark replays the last batch when its commit log lacks it (a crash after the sink
    returned): the table already holds it, and its record says so. A batch cut off while
    its files moved (its record pending, part of it still staged) is finished, once."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    source, checkpoint = tmp_path / "source", tmp_path / "checkpoint"
    expected = add_files(source, 0, 4)

    def run():
        query = (stream_of(spark, source).writeStream.queryName("ingest")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).toTable(table))
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        return query.id

    def forget_commit(batch: int) -> None:  # Spark's record of it, and its checksum
        for name in (str(batch), f".{batch}.crc"):
            (checkpoint / "commits" / name).unlink()

    query_id = run()
    assert ids(spark, table) == sorted(expected)
    place = location(spark, table)
    # the crash after the sink returned: Spark's commit of batch 1 never happened
    forget_commit(1)
    assert run() == query_id
    assert ids(spark, table) == sorted(expected)
    # the crash while batch 1's files moved: some of them still staged, the record pending
    forget_commit(1)
    records = place / "_zklock" / "batches" / query_id
    (records / "1.committed").unlink()
    import pyarrow.parquet as pq

    def ids_in(files: list[Path]) -> list[int]:
        return [i for f in files for i in pq.read_table(str(f)).column("id").to_pylist()]

    # batch 1's files: those of the job that did not write the first file's rows (batch 0
    # took the first file Spark listed, and another)
    groups = list(batch_files(place).values())
    assert len(groups) == 2, groups
    newest = next(fs for fs in groups if 0 not in ids_in(fs))
    staged = place / "_temporary" / "12345"
    for f in newest:
        task = staged / "task_0" / f.parent.relative_to(place)
        task.mkdir(parents=True, exist_ok=True)
        f.rename(task / f.name)
    (records / "1.pending").write_text(f"file:{place}\nfile:{staged}")
    assert len(ids(spark, table)) < len(expected)  # what a crash there leaves
    assert run() == query_id
    assert ids(spark, table) == sorted(expected)
    assert not staged.exists()
    assert sorted(p.name for p in records.iterdir() if not p.name.startswith(".")) \
        == ["1.committed"]


def test_a_refused_start_leaves_the_table_as_it_was(streaming, db, tmp_path):
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    place = location(spark, table)
    source = tmp_path / "source"
    add_files(source, 0, 1)
    stream = stream_of(spark, source).writeStream.trigger(availableNow=True)
    # files at a table's path: the table is written by name, never through Spark's log
    before = sorted(p.name for p in place.iterdir())
    with raises_lock_error(UnsupportedStatement, match="a catalog table is stored there"):
        stream.format("parquet").option("checkpointLocation", str(tmp_path / "c1")) \
            .start(str(place))
    # nothing left: no log, no staging in the table, no checkpoint (not even its directory)
    assert sorted(p.name for p in place.iterdir()) == before
    assert not (tmp_path / "c1").exists()
    # and the table reads as before: a later INSERT of 100 rows reads back as 100
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), 'x' FROM range(100)")
    assert count(spark, table) == 100
    spark.sql(f"TRUNCATE TABLE {table}")
    # a table that a stream without zklock wrote through Spark's log: refused, log kept
    log = place / "_spark_metadata"
    log.mkdir()
    (log / "0").write_text("v1\n")
    with raises_lock_error(UnsupportedStatement, match="file-sink log"):
        stream.option("checkpointLocation", str(tmp_path / "c2")).toTable(table)
    assert (log / "0").exists() and not (tmp_path / "c2").exists()
    (log / "0").unlink()
    # an empty log (what a refused start of an earlier zklock left) hides the table's rows
    # from Spark's readers: the next stream's start removes it
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), 'x' FROM range(100)")
    assert count(spark, table) == 0
    query = stream.option("checkpointLocation", str(tmp_path / "c3")).toTable(table)
    query.awaitTermination(180)
    assert not log.exists()
    assert count(spark, table) == 105


def test_a_file_sink_whose_log_zklock_cannot_fence_is_refused_and_leaves_nothing(
        streaming, tmp_path):
    """An application naming another checkpoint manager than zklock's: the log entries, the
    file sink's commits, would go unfenced, so a stream into files is refused as it starts,
    and leaves no log."""
    spark = streaming
    source, out = tmp_path / "source", tmp_path / "out"
    add_files(source, 0, 1)
    package = "checkpointing." if spark_line() >= (4, 1) else ""
    key = "spark.sql.streaming.checkpointFileManagerClass"
    zklocks = spark.conf.get(key)  # what configure() named
    spark.conf.set(key, f"org.apache.spark.sql.execution.streaming.{package}"
                        "FileSystemBasedCheckpointFileManager")
    try:
        with raises_lock_error(UnsupportedStatement, match="which zklock's checkpoint manager"
                                                          " fences"):
            (stream_of(spark, source).writeStream.format("parquet")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start(str(out)))
    finally:
        spark.conf.set(key, zklocks)
    assert not (out / "_spark_metadata").exists()


def test_sparks_file_sink_makes_its_log_only_with_its_first_entry(streaming, db):
    """Spark's file sink makes its log as the stream starts, before zklock's rule replaces
    the sink of a stream into a table: a reader that resolved the table then read it through
    the empty log, no rows and no partition columns, and its session kept that relation.
    zklock's checkpoint manager makes the log with its first entry (adapters/LazySinkLogs)."""
    from pyspark import __version__

    from zklock.spark.protocol import Conf, JvmClass

    spark = streaming
    assert spark.conf.get(Conf.CHECKPOINT_MANAGER) == JvmClass.CHECKPOINT_MANAGER
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    spark.sql(f"INSERT INTO {table} SELECT CAST(id AS INT), 'a' FROM range(100)")
    log_dir = location(spark, table) / "_spark_metadata"
    jvm = spark.sparkContext._jvm
    package = jvm.org.apache.spark.sql.execution.streaming
    if tuple(int(p) for p in __version__.split(".")[:2]) >= (4, 1):
        package = package.sinks
    none = jvm.scala.Option.empty()
    log = package.FileStreamSinkLog(1, spark._jsparkSession, str(log_dir), none)  # as a sink
    assert not log_dir.exists()
    reader = spark.newSession()
    assert reader.sql(f"SELECT count(*) AS n FROM {table} WHERE ds = 'a'").collect()[0].n == 100
    reader.sql(f"INSERT OVERWRITE {table} PARTITION (ds='a') SELECT 7")  # ds known
    assert log.getLatestBatchId().isEmpty()
    # a file sink at a path gets its log at its first batch, as Spark's own does
    entries = spark.sparkContext._gateway.new_array(package.SinkFileStatus, 0)
    assert log.add(0, entries)
    assert (log_dir / "0").exists()
    assert log.getLatestBatchId().get() == 0


def test_foreach_batch_that_names_its_batch_writes_it_once(streaming, db, tmp_path):
    from zklock.spark.batches import BatchOutcome, insert_once

    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (ds STRING, id INT) USING parquet")  # other order
    source, checkpoint = tmp_path / "source", tmp_path / "checkpoint"
    expected = add_files(source, 0, 4)
    outcomes: list[BatchOutcome] = []

    def write(batch_df, batch_id: int) -> None:
        outcomes.append(insert_once(batch_df, table, writer="ev-ingest", batch=batch_id))

    def run() -> None:
        query = (stream_of(spark, source).writeStream.foreachBatch(write)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()

    run()
    assert outcomes == [BatchOutcome.WRITTEN] * 2
    # foreachBatch is at least once: Spark runs a batch again when its end was not recorded
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink()
    run()
    assert outcomes[2:] == [BatchOutcome.ALREADY_WRITTEN]
    assert ids(spark, table) == sorted(expected)
    frame = spark.range(3).selectExpr("CAST(id AS INT) AS id", "'x' AS ds")
    with pytest.raises(Exception, match="a writer's id is 1 to 128 letters"):
        insert_once(frame, table, writer="../escape", batch=0)
    with pytest.raises(ValueError, match="a batch is a number from 0"):
        insert_once(frame, table, writer="ok", batch=-1)
    assert ids(spark, table) == sorted(expected)


def test_a_stream_into_files_keeps_sparks_log_and_locks_its_source_table(
        streaming, db, tmp_path, make_manager, zk, root):
    """Files at a path no table is stored at: Spark's sink and its log (exactly once for
    the path's readers), each batch holding S on the table the stream reads."""
    spark = streaming
    source = f"{db}.src"
    spark.sql(f"CREATE TABLE {source} (id INT, ds STRING) USING parquet")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'a'), (2, 'b')")
    out = tmp_path / "out"
    holder = make_manager()
    held = holder.acquire([(LockObject.parse(source), Mode.EXCLUSIVE)], query_id="compaction")
    query = (spark.readStream.table(source).writeStream.format("parquet")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start(str(out)))
    try:
        waits = f"{root}/.waits"
        assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
        record = json.loads(zk.get(f"{waits}/{zk.get_children(waits)[0]}")[0])
        assert "micro-batch 0 of stream" in record["query"], record
    finally:
        held.release()
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    assert (out / "_spark_metadata").is_dir()
    assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == [1, 2]


def test_a_file_sink_batch_whose_lock_node_is_deleted_logs_nothing(streaming, db, tmp_path,
                                                                   zk, root):
    """Files at a path: Spark's sink commits a batch by its log's entry, which is fenced as a
    table's commit is. Another client deletes the batch's lock node (S on its source) while
    it runs: no entry, so the path's readers see nothing of it; the query fails with the
    loss, and restarted from its checkpoint writes every row once."""
    spark = streaming
    source = f"{db}.src"
    spark.sql(f"CREATE TABLE {source} (id INT, ds STRING) USING parquet")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'a'), (2, 'b')")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    latch = Latch(spark, tmp_path / "latch", name="zk_files_latch")

    def start():
        return (spark.readStream.table(source).selectExpr("zk_files_latch(id) AS id", "ds")
                .writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).start(str(out)))

    query = start()
    assert wait_for(latch.reached, timeout=120)
    node_dir = f"{root}/{db}/src"
    nodes = [n for n in zk.get_children(node_dir) if n.startswith("read-")]
    assert len(nodes) == 1, nodes
    zk.delete(f"{node_dir}/{nodes[0]}")
    latch.open()
    with pytest.raises(Exception, match="zklock: locks lost (before commit|while micro-batch 0)"):
        query.awaitTermination(180)
    assert not (out / "_spark_metadata" / "0").exists()
    again = start()
    again.awaitTermination(180)
    assert again.exception() is None, again.exception()
    assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == [1, 2]


@pytest.mark.parametrize("held", [True, False], ids=["held", "gone"])
def test_a_file_sink_log_entry_is_put_in_place_only_while_its_locks_hold(
        spark, zk, zk_hosts, root, tmp_path, held):
    """The fence itself, where no lock client has seen the loss to cancel the batch first:
    zklock's checkpoint manager writes a file sink's log entry under a batch's locks (the
    local properties a locked batch sets) and closes it, which puts it in place only if
    every lock node still exists (the sink's commit: the path's readers read through it)."""
    from py4j.protocol import Py4JJavaError

    from zklock.spark.jvm import new_instance
    from zklock.spark.protocol import Property

    node = f"{root}/fence-probe"
    if held:
        zk.create(node, makepath=True)
    log = tmp_path / "out" / "_spark_metadata"
    jvm = spark._jvm
    manager = new_instance(spark, "adapters.LazySinkLogs",
                           ["org.apache.hadoop.fs.Path", "org.apache.hadoop.conf.Configuration"],
                           [jvm.org.apache.hadoop.fs.Path(str(log)),
                            spark._jsc.hadoopConfiguration()])
    sc = spark.sparkContext
    sc.setLocalProperty(Property.FENCE_ZOOKEEPER, zk_hosts)
    sc.setLocalProperty(Property.FENCE_NODES, node)
    try:
        entry = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(str(log / "0")), False)
        entry.write(bytearray(b"v1\n"))
        if held:
            entry.close()
        else:
            with pytest.raises(Py4JJavaError, match="zklock: locks lost before commit"):
                entry.close()
    finally:
        sc.setLocalProperty(Property.FENCE_ZOOKEEPER, None)
        sc.setLocalProperty(Property.FENCE_NODES, None)
    assert (log / "0").exists() == held
    # no temporary file left (Hadoop's local file system keeps a checksum beside a file)
    assert not [p for p in log.iterdir() if p.name not in ("0", ".0.crc")]


def test_sinks_that_write_no_table_run_as_they_are(streaming, tmp_path):
    spark = streaming
    source = tmp_path / "source"
    add_files(source, 0, 1)
    query = (stream_of(spark, source).writeStream.format("memory").queryName("zk_mem")
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert spark.sql("SELECT count(*) AS n FROM zk_mem").collect()[0].n == 5


def test_a_rate_stream_on_processing_time_writes_each_value_once(streaming, db, tmp_path):
    """Spark's rate source, small batches on a processingTime trigger, stopped in its
    stride and started again from its checkpoint: the table holds every value the committed
    batches produced, 0 to n, each once; a reader's counts never go down."""
    spark = streaming
    table = f"{db}.rate"
    spark.sql(f"CREATE TABLE {table} (value BIGINT) USING parquet")
    seen: list[int] = []

    def run(batches: int) -> None:
        query = (spark.readStream.format("rate").option("rowsPerSecond", 20)
                 .option("numPartitions", 2).load().select("value").writeStream
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="200 milliseconds").toTable(table))
        try:
            assert wait_for(lambda: sum(1 for p in query.recentProgress
                                        if p["numInputRows"] > 0) >= batches, timeout=120)
            seen.append(count(spark, table))
        finally:
            query.stop()
        assert query.exception() is None, query.exception()
        seen.append(count(spark, table))

    run(3)
    run(2)
    values = [r.value for r in spark.table(table).collect()]
    assert sorted(values) == list(range(len(values))), sorted(values)[:50]
    assert len(values) > 0 and seen == sorted(seen), seen


@pytest.mark.soak  # two Spark applications of their own: run by make soak-spark
def test_a_driver_killed_in_a_batch_restarts_without_losing_or_doubling(zk_hosts, root,
                                                                          tmp_path):
    """The driver SIGKILLed while a batch runs under its locks: its lock node goes with its
    session, nothing of the batch is in the table, and the restarted query writes every row
    exactly once."""
    table_dir, source = tmp_path / "ev", tmp_path / "source"
    checkpoint, gate = tmp_path / "checkpoint", tmp_path / "gate"
    gate.mkdir()
    table_dir.mkdir()
    expected = add_files(source, 0, 4)
    args = [PYTHON, str(PROJECT / "tests" / "spark" / "stream_app.py"), zk_hosts, root,
            str(table_dir), str(source), str(checkpoint), str(gate)]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True, text=True)
    try:
        assert wait_for(lambda: (gate / "entered").exists() or first.poll() is not None,
                        timeout=180)
        assert first.poll() is None, first.stdout.read()
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM
        first.wait(60)
    assert not list(table_dir.glob("part-*"))  # batch 0 had not committed
    (gate / "open").touch()
    second = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0 and "done" in second.stdout, second.stdout + second.stderr
    import pyarrow.parquet as pq

    rows = pq.read_table(str(table_dir)).column("id").to_pylist()
    assert sorted(rows) == sorted(expected)


def test_a_batch_whose_lock_node_is_deleted_commits_nothing(streaming, db, tmp_path, zk,
                                                            zk_hosts, root):
    """Another client deletes the batch's lock node while it runs: the fence refuses its
    commit, the query fails with the loss, nothing of the batch is in the table, and the
    query restarted from its checkpoint writes every row once."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source, checkpoint = tmp_path / "source", tmp_path / "checkpoint"
    expected = add_files(source, 0, 2)
    latch = Latch(spark, tmp_path / "latch", name="zk_stream_latch")

    def start():
        return (stream_of(spark, source).selectExpr("zk_stream_latch(id) AS id", "ds")
                .writeStream.queryName("node-deleted")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).toTable(table))

    lost = metrics.STREAM_BATCHES_LOST.labels(metrics.stream_label("node-deleted"))
    lost_before = lost._value.get()
    query = start()
    assert wait_for(latch.reached, timeout=120)
    node_dir = f"{root}/{db}/ev"
    nodes = [n for n in zk.get_children(node_dir) if n.startswith("write-")]
    assert len(nodes) == 1, nodes
    holder = json.loads(zk.get(f"{node_dir}/{nodes[0]}")[0])  # what zklock show names
    named = f"micro-batch 0 of stream node-deleted (id {query.id}) into {table}"
    assert holder["query"].startswith(named)
    shown = cli_output(zk_hosts, root, "show", table, "--extended")
    assert named in shown, shown
    zk.delete(f"{node_dir}/{nodes[0]}")
    latch.open()
    # the fence refuses its commit, or, where the lock client saw the loss first, its jobs
    # are cancelled: either way the batch fails with the loss
    with pytest.raises(Exception, match="zklock: locks lost (before commit|while micro-batch 0)"):
        query.awaitTermination(180)
    assert count(spark, table) == 0
    # counted once, by the query's name, whichever saw the loss first
    assert lost._value.get() - lost_before == 1
    again = start()
    again.awaitTermination(180)
    assert again.exception() is None, again.exception()
    assert ids(spark, table) == sorted(expected)


@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_a_batch_whose_locks_are_lost_is_written_again_where_the_setting_says(
        streaming, db, tmp_path, zk, root, stateful):
    """spark.zklock.stream.lockLost=retry: the batch whose lock node another client deleted
    takes its locks again and is written again, once; the query goes on. A query that keeps
    state (here a deduplication) is not run
    twice in one run: it fails, as by default, and its restart writes the batch once."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source, checkpoint = tmp_path / "source", tmp_path / "checkpoint"
    expected = add_files(source, 0, 2)
    latch = Latch(spark, tmp_path / "latch", name="zk_retry_latch")

    def start():
        rows = stream_of(spark, source).selectExpr("zk_retry_latch(id) AS id", "ds")
        return ((rows.dropDuplicates(["id"]) if stateful else rows).writeStream
                .queryName("retrying").option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True).toTable(table))

    batches = metrics.STREAM_BATCHES.labels("retrying")._value.get()
    spark.conf.set("spark.zklock.stream.lockLost", "retry")
    try:
        query = start()
        assert wait_for(latch.reached, timeout=120)
        node_dir = f"{root}/{db}/ev"
        (node,) = [n for n in zk.get_children(node_dir) if n.startswith("write-")]
        zk.delete(f"{node_dir}/{node}")
        latch.open()
        if stateful:
            with pytest.raises(Exception, match="zklock: locks lost"):
                query.awaitTermination(180)
            assert count(spark, table) == 0
            query = start()
            query.awaitTermination(180)
        else:  # (the driver's stderr says it: "... lost its locks (...); written again")
            query.awaitTermination(180)
            # its lock requests: the batch's, and the same batch's again
            assert metrics.STREAM_BATCHES.labels("retrying")._value.get() - batches == 2
        assert query.exception() is None, query.exception()
        assert ids(spark, table) == sorted(expected)
    finally:
        spark.conf.unset("spark.zklock.stream.lockLost")


def test_a_query_stopped_in_a_batch_stops_cleanly_and_releases_it(streaming, db, tmp_path,
                                                                  zk, root):
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source = tmp_path / "source"
    add_files(source, 0, 1)
    latch = Latch(spark, tmp_path / "latch", name="zk_stop_latch", limit=60)
    query = (stream_of(spark, source).selectExpr("zk_stop_latch(id) AS id", "ds")
             .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="100 milliseconds").toTable(table))
    assert wait_for(latch.reached, timeout=120)
    assert [n for n in lock_nodes(zk, f"{root}/{db}/ev") if "/write-" in n]
    query.stop()  # Spark interrupts the batch: a clean stop, as without zklock
    assert query.exception() is None
    # (the table's node is a container: the server may sweep it once empty)
    assert wait_for(lambda: not [n for n in lock_nodes(zk, f"{root}/{db}/ev")
                                 if "/write-" in n], timeout=30)
    latch.open()
    assert count(spark, table) == 0


def test_a_query_stopped_while_its_batch_waits_stops_at_once_and_keeps_nothing(
        streaming, db, tmp_path, make_manager, zk, root):
    """A batch asks for its locks as Spark writes its offsets, ahead of its sink
    (GrantAhead); run again from its checkpoint, as its sink starts. Stopped while that
    request waits for a holder, the query stops at once, the holder still holding: the
    request is cancelled (EngineLockClient.cancel), nothing of the query stays held or
    waiting, and nothing is written. Once the holder is gone, a restart writes the batch
    exactly once."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source = tmp_path / "source"
    add_files(source, 0, 5)
    files = location(spark, table)
    held = make_manager().acquire([(LockObject.parse(table), Mode.EXCLUSIVE)])
    waits = f"{root}/.waits"

    def start():
        return (stream_of(spark, source).writeStream
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(processingTime="100 milliseconds").toTable(table))

    try:
        for _ in range(2):  # batch 0 asked ahead; then run again from its offsets
            query = start()
            assert wait_for(lambda: zk.exists(waits) and zk.get_children(waits), timeout=60)
            stopping = threading.Thread(target=query.stop)
            stopping.start()
            stopping.join(60)
            assert not stopping.is_alive()
            assert query.exception() is None
            assert held.is_valid
            assert wait_for(lambda: not zk.get_children(waits), timeout=30)
            assert wait_for(lambda: sorted(lock_nodes(zk, f"{root}/{db}/ev")) == sorted(
                n for n in held.node_paths if f"/{db}/ev/" in n), timeout=30)
            assert not list(files.rglob("*.parquet"))  # (read without the table's locks)
    finally:
        held.release()
    query = start()
    try:
        assert wait_for(lambda: count(spark, table) == 25, timeout=120)
    finally:
        query.stop()
    assert query.exception() is None
    assert ids(spark, table) == list(range(25))


@pytest.mark.parametrize("holder", [False, True], ids=["granted", "waiting"])
def test_a_query_failing_before_its_sink_keeps_no_lock(streaming, db, tmp_path, zk, root,
                                                       make_manager, holder):
    """A batch's locks are asked for as Spark writes its offsets; a query that fails after
    that, before its sink (here its plan: a cast ANSI refuses, folded as Spark optimizes
    the batch), never claims them, and they are released: nothing stays held, nothing is
    written, and the table takes an INSERT as before. Where the request still waits for a
    holder, it is cancelled once the query's thread has ended: it waits no more, while the
    holder holds on."""
    spark = streaming
    table = f"{db}.ev"
    spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source = tmp_path / "source"
    add_files(source, 0, 1)
    held = make_manager().acquire([(LockObject.parse(table), Mode.EXCLUSIVE)]) if holder else None
    started = diagnostics.now_ms()
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        query = (stream_of(spark, source).selectExpr("id + CAST('x' AS INT) AS id", "ds")
                 .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).toTable(table))
        with pytest.raises(Exception, match="(?i)cast|invalid|number"):
            query.awaitTermination(120)
        # the offsets of its batch were written (its request sent), its sink never called
        assert (tmp_path / "checkpoint" / "offsets" / "0").exists()
        assert wait_for(lambda: not zk.exists(f"{root}/.waits")
                        or not zk.get_children(f"{root}/.waits"), timeout=30)
        mine = sorted(n for n in held.node_paths if f"/{db}/ev/" in n) if held else []
        assert wait_for(lambda: sorted(lock_nodes(zk, f"{root}/{db}/ev")) == mine, timeout=30)
        assert held is None or held.is_valid
        if held is not None:  # its request was cancelled, not answered by the holder's end
            assert wait_for(lambda: '"event":"cancel"' in diagnostics.events_since(started),
                            timeout=30)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        if held is not None:
            held.release()
    spark.sql(f"INSERT INTO {table} VALUES (1, 'd1')")
    assert count(spark, table) == 1


def test_a_hive_format_table_takes_each_batch_once(zk_hosts, root, tmp_path):
    """A Hive-format table, which Spark refuses as a stream's target, streamed into through
    foreachBatch and insert_once in a real Hive-enabled application (its own Derby
    metastore): each batch lands once; one replayed (its end not in the checkpoint) is not
    written again; one cut off while Hive's load moved its files in (its record pending,
    part of its files in the table) has what it moved removed, in the table's directory
    and in a partition stored outside it, and is written again, once; one whose load fails
    part-way raises and leaves none of its rows, and lands once when run again."""
    home, source = tmp_path / "home", tmp_path / "source"
    home.mkdir()
    from driven import driven

    app_path = str(PROJECT / "tests" / "spark" / "hive_batches_app.py")
    with driven([PYTHON, app_path, zk_hosts, root, str(home), str(source)], tmp_path,
                limit=900) as (process, errors):

        def app(step: str) -> list[str]:
            process.stdin.write(step + "\n")
            process.stdin.flush()
            lines = []
            for line in process.stdout:
                if line.strip() == "END":
                    return [ln for ln in lines
                            if ln.split(" ")[0] in ("BATCH", "IDS", "FAILED", "CREATED")]
                lines.append(line.strip())
            process.wait()
            raise AssertionError("\n".join(lines)[-2000:] + errors.read_text()[-4000:])

        hive_batches(app, home, source)
        process.stdin.close()
        assert process.wait(timeout=120) == 0, errors.read_text()[-4000:]


def hive_batches(app, home: Path, source: Path) -> None:
    """test_a_hive_format_table_takes_each_batch_once's steps, ``app(step)`` its lines."""
    def table_ids(lines: list[str]) -> list[int]:
        return json.loads(next(line for line in lines if line.startswith("IDS "))[4:])

    def forget_commit(batch: int) -> None:  # the crash after the batch, before Spark's end
        for name in (str(batch), f".{batch}.crc"):
            (home / "checkpoint" / "commits" / name).unlink()

    assert app("create") == ["CREATED"]
    table = home / "warehouse" / "hv"
    records = table / "_zklock" / "batches" / "hv-ingest"
    expected = add_files(source, 0, 4)
    lines = app("run")
    assert lines[:-1] == ["BATCH 0 WRITTEN", "BATCH 1 WRITTEN"]
    assert table_ids(lines) == sorted(expected)

    forget_commit(1)  # replayed: the table holds it
    lines = app("run")
    assert lines[:-1] == ["BATCH 1 ALREADY_WRITTEN"] and table_ids(lines) == sorted(expected)

    # cut off in Hive's load: its record pending, one of its files never moved in
    forget_commit(1)
    (records / "1.committed").rename(records / "1.pending")
    files_id = (records / "1.pending").read_text().splitlines()[2]
    outside = home / "outside-d1"

    def files_of_batch_1() -> list[Path]:
        return sorted(p for place in (table, outside) for p in place.rglob(f"*{files_id}*")
                      if not p.name.startswith("."))

    moved = files_of_batch_1()
    assert len(moved) >= 3 and any(outside in p.parents for p in moved), moved
    next(p for p in moved if table in p.parents).unlink()
    lines = app("run")
    assert lines[:-1] == ["BATCH 1 REWRITTEN"] and table_ids(lines) == sorted(expected)
    assert not files_of_batch_1()  # none of the cut-off write stays, outside it either

    # a load failing part-way: a file where the next batch's partition ds=d9 would go
    more = add_files(source, 100, 2)
    (source / "part-100-0.json").write_text("\n".join(
        json.dumps({"id": n, "ds": "d9" if n == 104 else f"d{n % 3}"}) for n in more[:5])
        + "\n")
    (table / "ds=d9").write_text("not a partition")
    lines = app("fail")
    assert lines[0].startswith("FAILED") and "no failure" not in lines[0], lines
    assert table_ids(lines) == sorted(expected)  # raised: none of its rows
    (table / "ds=d9").unlink()
    lines = app("run")  # undone again first: a move Hive made after the failure
    assert lines[:-1] == ["BATCH 2 REWRITTEN"] and table_ids(lines) == sorted(expected + more)
