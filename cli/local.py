"""A local SparkSession for the command line and the scheduler, configured like a pipeline's.

Settings pass through as they would to spark-submit: spark-defaults.conf is
read by Spark itself (SPARK_CONF_DIR), ``--conf k=v`` pairs are applied to
the builder, and an init SQL file runs once the session is up (for example
to register the tables a shared metastore does not have).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from zklock.errors import InvalidArguments
from zklock.sqltext import split_statements

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


def local_session(conf: Optional[dict[str, str]] = None, init_sql: Optional[str] = None,
                  app_name: str = "zklock") -> Any:
    """Get (or create) a SparkSession with zklock's static settings and ``conf`` applied."""
    from pyspark.sql import SparkSession

    from zklock.spark import configure

    builder = SparkSession.builder.appName(app_name)
    conf = dict(conf or {})
    if "spark.master" not in conf:
        builder = builder.master("local[*]")
    for key, value in {**QUIET, **conf}.items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "ERROR"))
    if init_sql:
        for stmt in split_statements(Path(init_sql).read_text()):
            spark.sql(stmt)
    return spark
