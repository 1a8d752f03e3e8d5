"""CommitIsolation: concurrent writers of one table's partitions must not share Spark's staging.

zklock lets two jobs write different partitions of one table at once (S on the
table, X on each partition: Hive's lock table says they are compatible). Spark's
file commit protocol (Hadoop's FileOutputCommitter) does not keep that promise
by itself for appends and static-partition inserts: every application stages
them under ``<table location>/_temporary/0`` (the Hadoop application attempt id
is 0 outside YARN), and every job commit deletes the whole ``_temporary``
directory. A job committing while another one writes the same table removes the
other's staged files: that job fails, or its commit finds no output for a task
and publishes the partition short of files. (Dynamic partition overwrite and
Hive serde tables already stage per job.) Measured with bench/concurrent_writers.py,
three applications inserting twelve partitions each into one table, twice: 16 of
72 inserts failed and one more lost a file silently; with this module, 0 and 0.

A LockingSession therefore gives its SparkSession a staging directory of its
own (``_temporary/<random attempt id>``) and turns off the shared clean-up,
through two Hadoop settings that Spark copies from the session's SQL conf into
every write job. A setting made outside zklock stays as it is (with a warning).
Each SparkSession has its own, not each application: two LockingSessions of one
application (threads of a backfill, each with its session) writing partitions of one
table at once would otherwise merge and delete each other's staged tasks when the
first commits. A session's staging under a table is removed after each write there,
once no other write of that session is running on it.

A job that *fails* runs Hadoop's abortJob, which deletes the whole ``_temporary``
whatever the skip setting says. zklock's committers (IsolatedFileOutputCommitter.java,
IsolatedParquetOutputCommitter.java: Hadoop's and Parquet's with a job clean-up that
deletes only its own attempt directory) close that; Spark loads them by name, so
they must be on the class path when the application starts, which
:func:`zklock.spark.configure` arranges (``spark.jars``). Without them a failing
writer can still break a concurrent one.

The same committers fence the job commit (CommitFence.java): as the last thing
before the job's files become visible, commitJob checks in ZooKeeper that every
lock node of the statement's set still exists, in one round trip from a client
the driver's JVM keeps per connect string, and refuses the commit (the job
aborts, removing only its own staging) when one is gone or ZooKeeper does not
answer in time. So a write whose locks were lost never commits, even when the
cancel of its jobs (locked_statement.py) comes too late, after the last task. The
statement names the nodes in local properties; a write without them is not
checked. About 0.3 ms for a few nodes (bench/fenced_commit.py).

Limits, documented in docs/spark.md: every writer of the table must be isolated
(a plain Spark application commits into ``_temporary/0`` and deletes it all);
threads writing one table at once through one SparkSession share its directory;
committers other than FileOutputCommitter (S3A's) have their own rules.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..objects import LockObject
from .jvm import new_instance

log = logging.getLogger(__name__)

ATTEMPT_ID = "mapreduce.job.application.attempt.id"
SKIP_CLEANUP = "mapreduce.fileoutputcommitter.cleanup.skipped"
#: Spark conf key -> (zklock's committer, Spark's default) for the failure path
COMMITTERS = {
    "spark.sql.parquet.output.committer.class":
        ("zklock.IsolatedParquetOutputCommitter",
         "org.apache.parquet.hadoop.ParquetOutputCommitter"),
    "spark.sql.sources.outputCommitterClass": ("zklock.IsolatedFileOutputCommitter", None),
}
_APPS: dict[str, CommitIsolation] = {}
_APPS_LOCK = threading.Lock()


def commit_isolation(spark: Any) -> CommitIsolation:
    """The application's CommitIsolation, applied to this SparkSession's conf."""
    app = str(spark.sparkContext.applicationId)
    with _APPS_LOCK:
        iso = _APPS.get(app)
        if iso is None:
            iso = _APPS[app] = CommitIsolation()
    iso.apply(spark)
    return iso


#: Seconds after a failed write before its staging is removed again (see ``writing``).
SETTLE_S = 1.0


class CommitIsolation:
    """One application's staging: a directory of its own for each of its SparkSessions,
    cleaned out of a table after each write there."""

    def __init__(self) -> None:
        self.attempts: set[int] = set()  # the attempt ids given to its sessions
        self.failures_isolated = False  # zklock's committers in use (see _use_committers)
        self._files: Any = None  # TableFiles.java: a table's location, deleting its staging
        # writes in flight per (table, attempt id)
        self._writing: dict[tuple[str, str, int], int] = {}
        # table -> location, looked up once; a statement X-locking the whole table (DDL
        # among them: a drop, a re-create elsewhere) makes it be looked up again
        self._locations: dict[tuple[str, str], Optional[str]] = {}
        self._lock = threading.Lock()
        #: second removals after failed writes: (when, [(db, table, attempt)])
        self._pending: list[tuple[float, list[tuple[str, str, int]]]] = []

    def attempt_of(self, spark: Any) -> Optional[int]:
        """The attempt id (staging directory) this application gave ``spark``; None when it
        gave it none (the user's settings were kept)."""
        current = spark.conf.get(ATTEMPT_ID, None)
        return {str(a): a for a in self.attempts}.get(current)  # the user's may be any text

    def apply(self, spark: Any) -> bool:
        """Give this SparkSession a staging directory of its own (a new attempt id: a
        session cloned from another gets its own too) and skip Hadoop's shared clean-up,
        unless the user set either."""
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        with self._lock:
            attempt = 1 + secrets.randbelow(2**31 - 2)
            while attempt in self.attempts:
                attempt = 1 + secrets.randbelow(2**31 - 2)
        ours = {str(a) for a in self.attempts}
        mine = {ATTEMPT_ID: str(attempt), SKIP_CLEANUP: "true"}
        for key, value in mine.items():
            current = spark.conf.get(key, None)
            if (current is not None and current != value and current not in ours) \
                    or hadoop.get(key) is not None:
                log.warning("%s is set outside zklock: Spark's staging is left as configured,"
                            " and concurrent writers of one table may delete each other's"
                            " staged files", key)
                return False
        with self._lock:
            self.attempts.add(attempt)
        for key, value in mine.items():
            spark.conf.set(key, value)
        if self._files is None:
            self._files = new_instance(spark, "TableFiles",
                                       ["org.apache.spark.sql.SparkSession"],
                                       [spark._jsparkSession])
        self.failures_isolated = self._use_committers(spark)
        return True

    @staticmethod
    def _use_committers(spark: Any) -> bool:
        """Use zklock's committers when the application can load them (built with
        :func:`zklock.spark.configure`): a failing job then deletes only its own staging."""
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        if conf.getClassByNameOrNull(COMMITTERS[next(iter(COMMITTERS))][0]) is None:
            log.info("zklock's committers are not on this application's class path (build"
                     " the session with zklock.spark.configure): a failing write may still"
                     " remove the staging of other applications writing the same table")
            return False
        for key, (ours, default) in COMMITTERS.items():
            current = spark.conf.get(key, None)
            if current in (None, default, ours):
                spark.conf.set(key, ours)
            else:
                log.warning("%s is %s, set outside zklock: kept; a failing write may remove"
                            " the staging of other applications writing the same table",
                            key, current)
                return False
        return True

    @contextmanager
    def writing(self, objects: list[LockObject], attempt: int) -> Iterator[None]:
        """Around one write statement (its X-locked objects) of the session with staging
        ``attempt``: afterwards, remove that staging under each table it wrote, unless
        another write of the session is still running there. Emptied task directories left
        in it would otherwise be merged again by every later commit (and bring back the
        directory of a partition dropped meanwhile).

        A failed statement's staging is removed again ``SETTLE_S`` seconds later (or at
        :meth:`settle`): Spark reports a job failed while its other tasks are still being
        cancelled, and a cancelled task may create its directories after the first removal."""
        tables = sorted({(o.db, o.table, attempt) for o in objects if o.table is not None})
        whole = [(o.db, o.table) for o in objects if o.table is not None and not o.partition]
        with self._lock:
            for t in whole:
                self._locations.pop(t, None)
            for t in tables:
                self._writing[t] = self._writing.get(t, 0) + 1
        failed = True
        try:
            yield
            failed = False
        finally:
            with self._lock:
                for t in whole:  # looked up after the statement, not before
                    self._locations.pop(t, None)
                for t in tables:
                    self._writing[t] -= 1
                    if not self._writing[t]:
                        del self._writing[t]
            self._remove(tables)
            if failed:
                self._remove_later(tables)

    def settle(self) -> None:
        """Run the pending second removals now, once their tasks had ``SETTLE_S`` seconds
        to stop (before the application stops: afterwards nothing can remove them)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for due, tables in pending:
            time.sleep(max(0.0, due - time.monotonic()))
            self._remove(tables)

    def _remove_later(self, tables: list[tuple[str, str, int]]) -> None:
        entry = (time.monotonic() + SETTLE_S, tables)
        with self._lock:
            self._pending.append(entry)

        def run() -> None:
            with self._lock:
                if entry not in self._pending:
                    return  # settle() ran it
                self._pending.remove(entry)
            self._remove(tables)
        timer = threading.Timer(SETTLE_S, run)
        timer.daemon = True
        timer.start()

    def _remove(self, tables: list[tuple[str, str, int]]) -> None:
        """Delete a session's staging (its attempt) under each table, skipping one that a
        write of that session has entered meanwhile: the check and the delete hold the
        lock a write takes to enter, so a write never has its staging deleted under it."""
        if self._files is None:
            return
        for db, table, attempt in tables:
            with self._lock:
                if (db, table, attempt) in self._writing:
                    continue
                try:
                    if (db, table) not in self._locations:
                        self._locations[(db, table)] = self._files.location(db, table)
                    location = self._locations[(db, table)]
                    if location is not None:
                        self._files.delete(f"{location}/_temporary/{attempt}")
                except Exception as exc:  # a dropped table, a stopped context: clutter
                    log.debug("could not remove staging of %s.%s: %s", db, table, exc)
