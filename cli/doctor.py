"""`zklock doctor`: catalog tables that Spark's readers see wrongly, because of a stream.

Spark's file sink keeps a log, ``_spark_metadata``, in the directory it writes, and from
then on Spark reads that directory only through the log: a table whose directory holds one
shows Spark's readers the files the log lists, and nothing else. Two ways a table gets one:

- **empty**: a streaming start that an earlier zklock refused, after Spark's sink had made
  the log (zklock's checkpoint manager now makes a log with its first entry only). Spark's
  readers see the table empty, whatever its files; nothing of the table is in the log, so
  removing it loses nothing: ``--repair`` does, under the table's X lock;
- **with entries**: a stream run into the table's directory without zklock. Readers see
  only what that stream wrote, never a backfill's or another writer's files. Which files are
  the table is a decision for its owner: named, never repaired.

Each table is one line, printed as it is done; a table that cannot be checked or repaired
(its metadata unreadable, its lock denied) is one line too, and the others go on. The exit
code is 0 when every table reads as a table, 1 while one needs its owner or ``--repair``,
3 when a repair was denied its lock, so that a platform can run it as a check.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import click

from zklock.errors import LockNotAcquired

from .app import Context, cli, emit, locking_session, spark_error, with_spark_options

#: The directory of Spark's file-sink log, in the directory the sink writes
#: (stream/SinkLogDir.java).
SINK_LOG = "_spark_metadata"
#: Where DESCRIBE TABLE EXTENDED's rows about the table begin (its columns come first).
DETAILS = "# Detailed Table Information"


class Repair(enum.Enum):
    """What ``--repair`` did with a table's log, under the table's X lock."""

    REMOVED = "removed"
    #: gone already (a stream's start into the table removed it meanwhile)
    GONE = "gone"
    #: entries appeared meanwhile (a stream without zklock): its owner's
    KEPT = "kept"


@dataclass(frozen=True)
class SinkLog:
    """A file-sink log found in a table's directory: its path and how many entries it has."""

    table: str
    path: str
    entries: int

    @property
    def empty(self) -> bool:
        return self.entries == 0

    def finding(self) -> str:
        if self.empty:
            return (f"{self.table}: an empty file-sink log ({self.path}), left by a streaming"
                    " start an earlier zklock refused, makes Spark's readers see the table"
                    " empty; zklock doctor --repair removes it")
        return (f"{self.table}: a file-sink log ({self.path}, {self.entries} entries) of a"
                " stream run without zklock: Spark's readers see only the files it lists;"
                " check the table's files, then move the log away")


@cli.command()
@click.argument("databases", nargs=-1)
@click.option("--repair", is_flag=True,
              help="Remove the empty logs, each under its table's X lock.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as a JSON array.")
@with_spark_options
@click.pass_obj
def doctor(obj: Context, databases: Sequence[str], repair: bool, as_json: bool,
           conf: Sequence[str], init_sql: Optional[str]) -> None:
    """Catalog tables of DATABASES (default: all) that Spark reads through a file-sink log.

    Exit code 1 while a table needs its owner or --repair, 3 when a repair was denied its
    lock. Starts a local Spark session to read the catalog (about 10 s; --conf for the
    metastore). Example: zklock doctor sales --repair
    """
    for db in databases:
        if "." in db or "`" in db:
            raise click.ClickException(f"name a database of the session's catalog as it is"
                                       f" named there (sales, not spark_catalog.sales): {db}")
    session = locking_session(obj, conf, init_sql)
    rows = [_checked(session, table, repair, echo=not as_json)
            for table in _tables(session, databases)]
    rows = [row for row in rows if row is not None]
    if as_json:
        emit(rows, True, [])
    elif not rows:
        click.echo("zklock: no table is read through a file-sink log")
    if any(row.get("denied") for row in rows):
        click.get_current_context().exit(3)
    if any(not row.get("repaired") for row in rows):
        click.get_current_context().exit(1)


def _checked(session: Any, table: str, repair: bool, echo: bool) -> Optional[dict[str, Any]]:
    """``table``'s row (None where it reads as a table), its line printed (``echo``) as it
    is done."""
    row: dict[str, Any] = {"table": table}
    try:
        log = sink_log(session, table)
        if log is None:
            return None
        row.update(log=log.path, entries=log.entries, repaired=False, finding=log.finding())
        line = log.finding()
        if repair and log.empty:
            done = remove_empty(session, log)
            row["repaired"] = done is not Repair.KEPT
            line = (f"{table}: repaired: removed the empty {log.path}" if done is Repair.REMOVED
                    else f"{table}: repaired: the empty {log.path} was gone already"
                    if done is Repair.GONE else
                    f"{table}: not repaired: entries appeared in {log.path} meanwhile (a"
                    " stream run without zklock): check the table's files, then move it away")
    except LockNotAcquired as exc:
        row.update(repaired=False, denied=True, finding=f"{table}: not repaired: {exc}")
        line = row["finding"]
    except Exception as exc:  # noqa: BLE001 (one table's trouble: named, the others go on)
        message = spark_error(exc) if type(exc).__module__.startswith(("pyspark", "py4j")) \
            else str(exc)
        row.update(repaired=False, finding=f"{table}: not checked: {message}")
        line = row["finding"]
    if echo:
        click.echo(f"zklock: {line}")
    return row


def _tables(session: Any, databases: Sequence[str]) -> list[str]:
    """The catalog tables (no views) of ``databases`` (all when empty), as ``db.table``."""
    spark = session.spark
    names = list(databases) or [d.name for d in spark.catalog.listDatabases()]
    tables = []
    for db in names:
        if not spark.catalog.databaseExists(db):
            raise click.ClickException(f"no database {db} in the catalog")
        tables += [f"{db}.{t.name}" for t in spark.catalog.listTables(db)
                   if not t.isTemporary and t.tableType != "VIEW"]
    return tables


def sink_log(session: Any, table: str) -> Optional[SinkLog]:
    """The file-sink log in ``table``'s directory; None where there is none (or no
    directory). Its metadata is read through ``session``, in S as any read."""
    location = _location(session, table)
    if location is None:
        return None
    path = f"{location.rstrip('/')}/{SINK_LOG}"
    entries = _entries(session.spark, path)
    return None if entries is None else SinkLog(table, path, entries)


def remove_empty(session: Any, log: SinkLog) -> Repair:
    """Remove ``log`` under its table's X lock, where it is still empty."""
    with session.manager.acquire([(log.table, "X")],
                                 query=f"zklock doctor --repair {log.table}"):
        entries = _entries(session.spark, log.path)
        if entries is None:
            return Repair.GONE
        if entries:
            return Repair.KEPT
        _file_system(session.spark, log.path).delete(_path(session.spark, log.path), False)
        return Repair.REMOVED


def _location(session: Any, table: str) -> Optional[str]:
    """``table``'s location, from DESCRIBE TABLE EXTENDED's details (after its columns, one
    of which may be named Location too)."""
    quoted = ".".join("`" + part.replace("`", "``") + "`" for part in table.split(".", 1))
    details = False
    for row in session.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect():
        details = details or row.col_name.strip() == DETAILS
        if details and row.col_name == "Location":
            return str(row.data_type)
    return None


def _path(spark: Any, path: str) -> Any:
    return spark._jvm.org.apache.hadoop.fs.Path(path)


def _file_system(spark: Any, path: str) -> Any:
    return _path(spark, path).getFileSystem(spark._jsc.hadoopConfiguration())


def _entries(spark: Any, path: str) -> Optional[int]:
    """How many entries the log at ``path`` has; None where there is none."""
    fs = _file_system(spark, path)
    hadoop_path = _path(spark, path)
    if not fs.exists(hadoop_path):
        return None
    return len(fs.listStatus(hadoop_path))
