"""zklock for PySpark: implicit S/X locks for every statement a pipeline runs.

``from zklock.spark import LockingSession`` and wrap the pipeline's
SparkSession once. Needs PySpark 4. On a classic session the lock planner
reads Spark's own parser and analyzer through py4j; on a Spark Connect
session it runs in the Connect server as zklock's plugin (connect_plugin.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .dataframe import LockingDataFrame
from .planner import LockPlan, LockPlanner
from .session import LockingSession

SPARK_DEFAULTS = {
    # sysdb.locks (and the scheduler's sysdb views) are global temporary views in "sysdb".
    "spark.sql.globalTempDatabase": "sysdb",
}


def configure(builder: Any) -> Any:
    """Apply the static Spark settings zklock relies on to a SparkSession builder.

    Also puts zklock's output committers on the application's class path (appended to
    the builder's ``spark.jars``), so that a failing write cannot remove the staged
    files of other applications writing the same table (see zklock/spark/commit.py).

    A builder of a local Spark Connect session (``spark.api.mode=connect`` with a local
    master, or ``remote("local")``), whose Connect server PySpark starts itself, also gets
    zklock's plugin (the jar and ``spark.connect.extensions.relation.classes``), which
    plans its locks. (PySpark then warns that it cannot set that static setting on the
    session it created: the server has it already.) A remote server is started by its
    operator with the plugin: see docs/spark.md.
    """
    from .commit import committer_jar

    for key, value in SPARK_DEFAULTS.items():
        builder = builder.config(key, value)
    options = getattr(builder, "_options", {})
    local = str(options.get("spark.master", "local")).startswith("local")
    if local and "spark.pyspark.python" not in options and not os.environ.get("PYSPARK_PYTHON"):
        # a local application's Python workers run the driver's interpreter, the one that
        # has PySpark's packages (pyarrow for Arrow UDFs), not whatever python3 is on PATH
        builder = builder.config("spark.pyspark.python", sys.executable)
    jars = [committer_jar()]
    if _local_connect(options, local):
        from .connect_plugin import PLUGIN_CLASS, PLUGIN_SETTING, plugin_jar

        jars.append(plugin_jar())
        plugins = [p.strip() for p in str(options.get(PLUGIN_SETTING, "")).split(",")
                   if p.strip()]
        if PLUGIN_CLASS not in plugins:
            builder = builder.config(PLUGIN_SETTING, ",".join([*plugins, PLUGIN_CLASS]))
    for jar in filter(None, jars):
        existing = getattr(builder, "_options", {}).get("spark.jars")
        builder = builder.config("spark.jars", f"{existing},{jar}" if existing else str(jar))
    return builder


def _local_connect(options: dict, local_master: bool) -> bool:
    """Does this builder make a Spark Connect session whose server PySpark starts here?"""
    remote = options.get("spark.remote", os.environ.get("SPARK_REMOTE"))
    if remote is not None:
        return str(remote).startswith("local")
    return local_master and str(options.get("spark.api.mode", "")).lower() == "connect"


__all__ = ["LockPlan", "LockPlanner", "LockingDataFrame", "LockingSession", "configure"]
