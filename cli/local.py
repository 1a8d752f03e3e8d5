"""A local SparkSession for the command line and the scheduler, configured like a pipeline's.

Settings pass through as they would to spark-submit: spark-defaults.conf is
read by Spark itself (SPARK_CONF_DIR), ``--conf k=v`` pairs are applied to
the builder, and an init SQL file runs once the session is up (for example
to register the tables a shared metastore does not have).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from zklock.errors import InvalidArguments
from zklock.sql.tokens import split_statements

QUIET = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
}


def parse_conf(pairs: Iterable[str]) -> dict[str, str]:
    """``k=v`` strings to a dict; a pair without '=' is an error."""
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise InvalidArguments(f"--conf takes key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


@contextmanager
def stderr_to(log: Optional[Path]) -> Iterator[None]:
    """Point this process's stderr (file descriptor 2) at ``log`` for the block: a JVM
    started inside it inherits the file for good, so Spark's log and Java's stack traces go
    there, not to the screen. Python's own stderr is back after the block."""
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def local_session(conf: Optional[dict[str, str]] = None, app_name: str = "zklock",
                  log: Optional[Path] = None) -> Any:
    """Get (or create) a SparkSession with zklock's static settings and ``conf`` applied;
    a JVM it starts writes its log to ``log`` (None: to this process's stderr)."""
    from pyspark.sql import SparkSession

    from zklock.spark import configure

    builder = SparkSession.builder.appName(app_name)
    conf = dict(conf or {})
    if "spark.master" not in conf:
        builder = builder.master("local[*]")
    for key, value in {**QUIET, **conf}.items():
        builder = builder.config(key, value)
    with stderr_to(log):
        spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "ERROR"))
    return spark


def run_init_sql(session: Any, init_sql: Optional[str]) -> None:
    """Run the statements of the ``--init-sql`` file (none when None) in ``session``: a
    LockingSession, or a session whose engine has a lock client (they are locked)."""
    if init_sql:
        for stmt in split_statements(Path(init_sql).read_text()):
            session.sql(stmt)
