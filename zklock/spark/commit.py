"""CommitIsolation: concurrent writers of one table's partitions must not share Spark's staging.

zklock lets two jobs write different partitions of one table at once (S on the
table, X on each partition: seed 001's table says they are compatible). Spark's
file commit protocol does not keep that promise by itself: every application
stages its output under ``<table location>/_temporary/0`` (the Hadoop
application attempt id is 0 outside YARN), and every job commit deletes the
whole ``_temporary`` directory. A job committing while another one writes the
same table removes the other's staged files: that job fails, or its commit
finds no output for a task and publishes the partition short of files.
Measured on Spark 4 with three processes each inserting twelve partitions of
one table: 3 of 36 inserts failed and one partition silently lost a file.

A LockingSession therefore gives its application a staging directory of its
own (``_temporary/<random attempt id>``) and turns off the shared clean-up,
through two Hadoop settings that Spark copies from the session's SQL conf into
every write job. A setting the user made stays as it is. What the application
staged is removed when it ends (Spark ignores ``_``-prefixed directories when
it reads, so a leftover from a killed process is clutter, never data).

Two writers inside one application (threads of one SparkSession) still share
its staging directory; they are not isolated from each other.
"""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
from typing import Any, Optional

from ..objects import LockObject

log = logging.getLogger(__name__)

ATTEMPT_ID = "mapreduce.job.application.attempt.id"
SKIP_CLEANUP = "mapreduce.fileoutputcommitter.cleanup.skipped"

_APPS: dict[str, CommitIsolation] = {}
_APPS_LOCK = threading.Lock()


def commit_isolation(spark: Any) -> CommitIsolation:
    """The application's CommitIsolation, applied to this SparkSession's conf."""
    app = str(spark.sparkContext.applicationId)
    with _APPS_LOCK:
        iso = _APPS.get(app)
        if iso is None:
            iso = _APPS[app] = CommitIsolation()
            atexit.register(iso.clean_up)
    iso.apply(spark)
    return iso


class CommitIsolation:
    """One application's own staging directory, and the tables to clean it out of."""

    def __init__(self) -> None:
        self.attempt_id = 1 + secrets.randbelow(2**31 - 2)
        self._spark: Any = None
        self._tables: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def apply(self, spark: Any) -> bool:
        """Set the two Hadoop settings on this SparkSession unless the user set them."""
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        mine = {ATTEMPT_ID: str(self.attempt_id), SKIP_CLEANUP: "true"}
        for key, value in mine.items():
            current = spark.conf.get(key, None)
            if (current is not None and current != value) or hadoop.get(key) is not None:
                log.info("%s is set by the user: Spark's staging is left as configured", key)
                return False
        for key, value in mine.items():
            spark.conf.set(key, value)
        self._spark = spark
        return True

    def wrote(self, objects: list[LockObject]) -> None:
        """Remember the tables a statement wrote (its X locks), to clean up after."""
        with self._lock:
            self._tables.update((o.db, o.table) for o in objects if o.table is not None)

    def clean_up(self) -> None:
        """Delete this application's staging directory under every table it wrote.

        Run when the application ends (LockingSession.stop, or process exit), not when
        one LockingSession closes: other sessions of the application may be writing."""
        with self._lock:
            tables, self._tables = self._tables, set()
        spark = self._spark
        if spark is None or not tables:
            return
        try:
            jvm = spark._jvm
            conf = spark._jsparkSession.sessionState().newHadoopConf()
        except Exception as exc:  # the context is gone already
            log.debug("no staging clean-up: %s", exc)
            return
        for db, table in sorted(tables):
            try:
                location = self._location(spark, db, table)
                if location is None:
                    continue
                path = jvm.org.apache.hadoop.fs.Path(f"{location}/_temporary/{self.attempt_id}")
                path.getFileSystem(conf).delete(path, True)
            except Exception as exc:  # a dropped table, a stopped context: clutter, not data
                log.debug("could not remove staging of %s.%s: %s", db, table, exc)

    @staticmethod
    def _location(spark: Any, db: str, table: str) -> Optional[str]:
        jvm = spark._jvm
        ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier(table, jvm.scala.Some(db))
        catalog = spark._jsparkSession.sessionState().catalog()
        if not catalog.tableExists(ident):
            return None
        uri = catalog.getTableMetadata(ident).storage().locationUri()
        return str(uri.get().toString()) if uri.isDefined() else None
