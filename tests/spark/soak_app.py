"""One Spark application of the Spark chaos suite (tests/spark/test_spark_chaos.py), in a
process of its own: it runs its role until its deadline and records every statement's
outcome, one JSON line each, flushed before and after the statement (a SIGKILL leaves a
start without an end: an outcome nobody was told). The checker judges by the data.

Roles (each a separate application; tables are shared by location, each application has
its own catalog over them):
- ``writer``: two LockingSessions, one overwriting ``soak.gen`` with numbered generations
  (four files each), one appending batches with unique ids to ``soak.batches``;
- ``parts``: two threads of one LockingSession appending batches to their own partitions
  of ``soak.parts``, on ``local-cluster`` (executors in JVMs of their own, which the suite
  kills);
- ``reader``: the plain session under ``enforce()``, reading both tables; and, in the same
  application (one Spark JVM fewer on a small machine), a streaming query appending JSON
  files (one a batch, written by a feeder thread) to partition ``p='s'`` of
  ``soak.events``, restarted from its checkpoint when it fails, beside a backfill (a
  LockingSession) overwriting partition ``p='old'`` with numbered generations; at its
  deadline a last ``availableNow`` run catches up, so that every file is then in the table;
- ``child``: run by spark-submit with zklock in its conf only (never calls ``enforce()``):
  the engine's child lock client locks its plain session's appends and reads;
- ``connect``: a plain Spark Connect client of zklock's Connect server (HOSTS is its
  ``sc://`` URL), appending and reading: the server's lock client locks it;
- ``jdbc``: a JDBC client of zklock's Thrift server (HOSTS is its ``host:port``), connected
  as dbt's ``thrift`` method connects (PyHive), appending and reading.

    python soak_app.py ROLE HOSTS ROOT WORK SECONDS NAME
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

#: Rows of a generation (four files) and of a batch (two files).
GEN_ROWS = 400
BATCH_ROWS = 100
SESSION_TIMEOUT = 4.0
#: How long a statement waits for its locks (a startup's DDL waits longer: ensure_tables)
LOCK_TIMEOUT = 60


def tables(work: Path) -> dict[str, str]:
    data = work / "data"
    return {
        "gen": f"(g BIGINT, id BIGINT) USING parquet LOCATION '{data / 'gen'}'",
        "batches": f"(batch STRING, id BIGINT) USING parquet LOCATION '{data / 'batches'}'",
        "parts": f"(batch STRING, id BIGINT, p STRING) USING parquet PARTITIONED BY (p)"
                 f" LOCATION '{data / 'parts'}'",
        "events": f"(batch STRING, id BIGINT, p STRING) USING parquet PARTITIONED BY (p)"
                  f" LOCATION '{data / 'events'}'",
    }


class Recorder:
    """Appends this application's statement outcomes to ``out``, one line each."""

    def __init__(self, out: Path, app: str) -> None:
        self.file = out.open("a", buffering=1)
        self.app = app
        self.lock = threading.Lock()

    def write(self, **fields) -> None:
        line = json.dumps({"app": self.app, "pid": os.getpid(), "t": time.time(), **fields})
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()
            os.fsync(self.file.fileno())

    def run(self, what: str, key: str, statement) -> object:
        """Run ``statement()``, recorded before (start) and after (end, with its outcome);
        its result, or False when it raised."""
        self.write(kind="start", what=what, key=key)
        try:
            out = statement()
        except Exception as exc:  # noqa: BLE001 (the outcome is what the checker reads)
            self.write(kind="end", what=what, key=key, ok=False, error=kind_of(exc),
                       message=str(exc).strip().splitlines()[0][:300] if str(exc) else "")
            return False
        self.write(kind="end", what=what, key=key, ok=True,
                   seen=out if isinstance(out, (list, dict)) else None)
        return out


def kind_of(exc: BaseException) -> str:
    """zklock's exception for ``exc`` by name; a JDBC client's error by the condition its
    message carries (ZKLOCK_LOCK_LOST ...); else the exception's own class."""
    import re

    from zklock.spark import lock_error
    from zklock.spark.lock_client import CONDITIONS

    error = lock_error(exc)
    if error is exc:
        found = re.search(r"ZKLOCK_[A-Z_]+", str(exc))
        if found and found.group(0) in CONDITIONS:
            return CONDITIONS[found.group(0)].__name__
    return type(error).__name__


class JdbcSession:
    """A Thrift server's JDBC client as PyHive connects (one connection per thread), with the
    small part of a SparkSession's surface the loops use."""

    def __init__(self, address: str) -> None:
        host, port = address.split(":")
        self.host, self.port = host, int(port)
        self.local = threading.local()

    def sql(self, statement: str):
        from pyhive import hive

        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = hive.connect(host=self.host, port=self.port,
                                                  username="soak")
        cursor = conn.cursor()
        try:
            cursor.execute(statement)
            rows = cursor.fetchall() if statement.startswith("SELECT") else []
        except Exception:
            cursor.close()
            raise
        cursor.close()
        return Rows(rows)


class Rows(list):
    def collect(self) -> list:
        return list(self)


def build(master: str, work: Path, name: str, zklock_conf: bool = True):
    from pyspark.sql import SparkSession

    from zklock.spark import configure

    builder = (SparkSession.builder.master(master).appName(f"soak-{name}")
               .config("spark.sql.warehouse.dir", str(work / f"catalog-{name}"))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.hive.manageFilesourcePartitions", "false")
               .config("spark.driver.memory", "512m")
               .config("spark.executor.memory", "512m"))  # local-cluster's executors
    spark = (configure(builder) if zklock_conf else builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def do(session, sql: str) -> None:
    """Run a statement whose result is its effect."""
    session.sql(sql)


def ensure_tables(session, rec: Recorder, work: Path, deadline: float) -> None:
    """The database and tables in this application's catalog, over the shared files,
    tried until they are there (faults may refuse a try). Recorded first: the application
    is ready (Spark, or the client, is up and zklock enforced)."""
    rec.write(kind="ready")
    wanted = [("db", "CREATE DATABASE IF NOT EXISTS soak")] + [
        (t, f"CREATE TABLE IF NOT EXISTS soak.{t} {spec}") for t, spec in tables(work).items()]
    # each application has a catalog of its own: a driver started again while the others run
    # creates the database in its catalog, so it asks for X on soak, which every statement of
    # the others holds or waits for in S. Its request keeps its place among them (its ticket)
    # only while it waits: it waits for the rest of the run, not for lock.timeout, and would
    # be behind every later request if it gave up and asked again
    for key, sql in wanted:
        while time.monotonic() < deadline:
            do(session, f"SET zklock.lock.timeout={max(1, int(deadline - time.monotonic()))}s")
            if rec.run("ddl", key, lambda q=sql: do(session, q)) is not False:
                break
            time.sleep(0.5)  # pacing: a denied or failed DDL tries again
    do(session, f"SET zklock.lock.timeout={LOCK_TIMEOUT}s")


def gen_loop(session, rec: Recorder, deadline: float) -> None:
    while time.monotonic() < deadline:
        g = time.time_ns() // 1000  # increasing across restarts of the application
        sql = f"INSERT OVERWRITE soak.gen SELECT {g} AS g, id FROM range(0, {GEN_ROWS}, 1, 4)"
        rec.run("gen", str(g), lambda q=sql: do(session, q))


def append_loop(session, rec: Recorder, deadline: float, table: str, tag: str,
                partition: str | None = None) -> None:
    n = 0
    while time.monotonic() < deadline:
        batch = f"{tag}-{os.getpid()}-{n}"
        n += 1
        into = f"soak.{table}" + (f" PARTITION (p='{partition}')" if partition else "")
        sql = f"INSERT INTO {into} SELECT '{batch}', id FROM range(0, {BATCH_ROWS}, 1, 2)"
        rec.run(table, batch, lambda q=sql: do(session, q))


def read_loop(session, rec: Recorder, deadline: float) -> None:
    while time.monotonic() < deadline:
        rec.run("read-gen", "", lambda: [[r[0], r[1]] for r in session.sql(
            "SELECT g, count(*) FROM soak.gen GROUP BY g").collect()])
        rec.run("read-batches", "", lambda: {r[0]: r[1] for r in session.sql(
            "SELECT batch, count(*) FROM soak.batches GROUP BY batch").collect()})


def feed_loop(source: Path, deadline: float, fed: threading.Event) -> None:
    """A source file of BATCH_ROWS rows a second (the stream, a file a batch, keeps up with
    it on two loaded cores), numbered on from the last one (across
    restarts of the application), the first one even past the deadline (so that the stream
    has one to write); each appears whole (written aside, then renamed)."""
    source.mkdir(parents=True, exist_ok=True)
    n = 1 + max((int(f.stem) for f in source.glob("*.json")), default=-1)
    first = n
    while n == first or time.monotonic() < deadline:
        tmp = source / f".{n}.tmp"
        tmp.write_text("".join(json.dumps({"batch": f"file-{n}", "id": i, "p": "s"}) + "\n"
                               for i in range(BATCH_ROWS)))
        tmp.rename(source / f"{n}.json")
        n += 1
        time.sleep(1.0)  # pacing: the feeder's cadence
    fed.set()


def stream_failure(exc: BaseException) -> str:
    """What a failed streaming query met, by zklock's exception: Spark wraps its cause in
    a StreamingQueryException whose message carries zklock's words."""
    kind = kind_of(exc)
    text = str(exc)
    for words, error in (("zklock: locks lost", "LockLost"),
                         ("zklock: lock not acquired", "LockNotAcquired"),
                         ("ZooKeeper", "ZooKeeperUnavailable")):
        if kind == "StreamingQueryException" and words in text:
            return error
    return kind


def stream_loop(spark, rec: Recorder, work: Path, deadline: float,
                fed: threading.Event) -> None:
    """The streaming query, each batch recorded as a statement once it is committed; a
    query that fails is recorded so and started again from its checkpoint. Once the
    deadline is past and the feeder has written its last file, a last availableNow run over
    every file left."""
    def start(trigger: dict, files: int = 1):
        return (spark.readStream.schema("batch STRING, id BIGINT, p STRING")
                .option("maxFilesPerTrigger", files).json(str(work / "source")).writeStream
                .option("checkpointLocation", str(work / "checkpoint"))
                .trigger(**trigger).toTable("soak.events"))

    while time.monotonic() < deadline:
        rec.write(kind="start", what="stream", key="run")
        try:
            query = start({"processingTime": "500 milliseconds"})
        except Exception as exc:  # noqa: BLE001 (its start was refused: recorded)
            rec.write(kind="end", what="stream", key="run", ok=False,
                      error=stream_failure(exc), message=str(exc).splitlines()[0][:300])
            time.sleep(1)  # pacing: a refused start tries again
            continue
        done = -1
        while query.isActive and time.monotonic() < deadline:
            progress = query.lastProgress
            if progress is not None and progress["numInputRows"] > 0 \
                    and progress["batchId"] > done:
                done = progress["batchId"]
                rec.write(kind="end", what="stream-batch", key=str(done), ok=True)
            time.sleep(0.2)  # poll: the query's progress
        query.stop()
        failed = query.exception()
        rec.write(kind="end", what="stream", key="run", ok=failed is None,
                  **({} if failed is None else {
                      "error": stream_failure(failed),
                      "message": str(failed).strip().splitlines()[0][:300]}))
    def catch_up() -> None:
        if not fed.wait(60):
            raise TimeoutError("the feeder did not finish")
        # the table over the shared files, where a loaded start left no time to declare it
        # (toTable would make one of its own elsewhere)
        do(spark, "CREATE DATABASE IF NOT EXISTS soak")
        do(spark, f"CREATE TABLE IF NOT EXISTS soak.events {tables(work)['events']}")
        query = start({"availableNow": True}, files=100)  # what is left, 100 files a batch
        if not query.awaitTermination(300):
            query.stop()
            raise TimeoutError("the last run did not finish within 300 s")
        if query.exception() is not None:
            raise query.exception()

    rec.run("stream-final", "", catch_up)


def backfill_loop(session, rec: Recorder, deadline: float) -> None:
    """Numbered generations of partition p='old' of the streamed table."""
    while time.monotonic() < deadline:
        g = time.time_ns() // 1000
        sql = (f"INSERT OVERWRITE soak.events PARTITION (p='old')"
               f" SELECT 'gen-{g}', id FROM range(0, {BATCH_ROWS}, 1, 2)")
        rec.run("backfill", str(g), lambda q=sql: do(session, q))
        time.sleep(1)  # pacing: a backfill a second beside the stream


def main(argv: list[str]) -> int:
    role, hosts, root, work_dir, seconds, name = argv[1:7]
    work = Path(work_dir)
    rec = Recorder(work / "out" / f"{name}.jsonl", name)
    rec.write(kind="launch")  # the process is up; Spark is not yet
    deadline = time.monotonic() + float(seconds)
    # every grant, denial, release and loss, with its query id: to tell, when a check fails,
    # who held what (the lock data in a denial names the query)
    (work / "events").mkdir(exist_ok=True)
    locks = dict(hosts=hosts, root=root, session_timeout=SESSION_TIMEOUT, timeout=LOCK_TIMEOUT,
                 retry_interval=0.1, connect_timeout=30, job=name,
                 event_log=str(work / "events" / f"{name}-{os.getpid()}.jsonl"))
    if role in ("connect", "jdbc"):  # clients of zklock's servers: they lock for them
        if role == "connect":
            from pyspark.sql.connect.session import SparkSession

            session = SparkSession.builder.remote(hosts).create()
        else:
            session = JdbcSession(hosts)
        ensure_tables(session, rec, work, deadline)
        threads = [threading.Thread(target=append_loop,
                                    args=(session, rec, deadline, "batches", name)),
                   threading.Thread(target=read_loop, args=(session, rec, deadline))]
    elif role == "child":  # zklock from spark-submit's conf only: the child lock client
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        ensure_tables(spark, rec, work, deadline)
        threads = [threading.Thread(target=append_loop,
                                    args=(spark, rec, deadline, "batches", name)),
                   threading.Thread(target=read_loop, args=(spark, rec, deadline))]
    else:
        from zklock import LockManager
        from zklock.config import Settings
        from zklock.spark import LockingSession, enforce

        # the partition writers' tasks run in executor JVMs of their own (killed by the suite)
        spark = build("local-cluster[2,1,768]" if role == "parts" else "local[2]", work, name)
        enforce(spark, LockManager(settings=Settings.resolve(locks)))
        # in a LockingSession: its SET of lock.timeout is the session's own (a plain session's
        # counts at the Spark conf's level, under the manager's timeout: configuration.md)
        ensure_tables(LockingSession(spark.newSession(), **locks), rec, work, deadline)
        if role == "writer":
            gen = LockingSession(spark.newSession(), **locks)
            append = LockingSession(spark.newSession(), **locks)
            threads = [threading.Thread(target=gen_loop, args=(gen, rec, deadline)),
                       threading.Thread(target=append_loop,
                                        args=(append, rec, deadline, "batches", name))]
        elif role == "parts":
            both = LockingSession(spark.newSession(), **locks)
            threads = [threading.Thread(target=append_loop,
                                        args=(both, rec, deadline, "parts", f"{name}{k}",
                                              f"{name}{k}")) for k in range(2)]
        elif role == "reader":
            backfill = LockingSession(spark.newSession(), **locks)
            fed = threading.Event()  # the feeder wrote its last file
            threads = [threading.Thread(target=read_loop, args=(spark, rec, deadline)),
                       threading.Thread(target=feed_loop,
                                        args=(work / "source", deadline, fed)),
                       threading.Thread(target=stream_loop,
                                        args=(spark, rec, work, deadline, fed)),
                       threading.Thread(target=backfill_loop, args=(backfill, rec, deadline))]
        else:
            raise SystemExit(f"no role {role}")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.write(kind="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
