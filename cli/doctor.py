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

Each finding is one line, and the exit code is 1 while one remains (0: every table reads as
a table), so that a platform can run it as a check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import click

from .app import Context, cli, emit, locking_session, with_spark_options

#: The directory of Spark's file-sink log, in the directory the sink writes
#: (stream/SinkLogDir.java).
SINK_LOG = "_spark_metadata"


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

    Exit code 1 while a table needs its owner or --repair. Starts a local Spark session to
    read the catalog (about 10 s). Example: zklock doctor sales --repair
    """
    session = locking_session(obj, conf, init_sql)
    rows = []
    for log in sink_logs(session, databases):
        repaired = repair and log.empty and remove_empty(session, log)
        rows.append({"table": log.table, "log": log.path, "entries": log.entries,
                     "repaired": repaired, "finding": log.finding()})
    if as_json:
        emit(rows, True, [])
    elif not rows:
        click.echo("zklock: no table is read through a file-sink log")
    for row in [] if as_json else rows:
        click.echo(f"zklock: {row['table']}: repaired: removed the empty {row['log']}"
                   if row["repaired"] else f"zklock: {row['finding']}")
    if any(not row["repaired"] for row in rows):
        click.get_current_context().exit(1)


def sink_logs(session: Any, databases: Sequence[str]) -> list[SinkLog]:
    """The file-sink logs in the directories of the catalog tables of ``databases`` (all
    when empty), a table's metadata read through ``session`` (locked in S as any read)."""
    spark = session.spark
    names = list(databases) or [d.name for d in spark.catalog.listDatabases()]
    found = []
    for db in names:
        if not spark.catalog.databaseExists(db):
            raise click.ClickException(f"no database {db} in the catalog")
        for table in spark.catalog.listTables(db):
            if table.isTemporary or table.tableType == "VIEW":
                continue
            name = f"{db}.{table.name}"
            location = _location(session, name)
            if location is None:
                continue
            entries = _entries(spark, f"{location.rstrip('/')}/{SINK_LOG}")
            if entries is not None:
                found.append(SinkLog(name, f"{location.rstrip('/')}/{SINK_LOG}", entries))
    return found


def remove_empty(session: Any, log: SinkLog) -> bool:
    """Remove ``log`` under its table's X lock, where it is still empty: whether it was."""
    with session.manager.acquire([(log.table, "X")], query=f"zklock doctor --repair {log.table}"):
        if _entries(session.spark, log.path) != 0:
            return False
        return bool(_file_system(session.spark, log.path).delete(_path(session.spark, log.path),
                                                                  False))


def _location(session: Any, table: str) -> Optional[str]:
    quoted = ".".join(f"`{p}`" for p in table.split(".", 1))
    rows = session.sql(f"DESCRIBE TABLE EXTENDED {quoted}").collect()
    for row in rows:
        if row.col_name == "Location":
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
