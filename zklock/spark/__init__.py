"""zklock for PySpark: implicit S/X locks for every statement a pipeline runs.

``from zklock.spark import LockingSession`` and wrap the pipeline's
SparkSession once. Needs PySpark 4 (classic, not Spark Connect): the lock
planner reads Spark's own parser and analyzer through py4j.
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
    jar = committer_jar()
    if jar is not None:
        existing = getattr(builder, "_options", {}).get("spark.jars")
        builder = builder.config("spark.jars", f"{existing},{jar}" if existing else str(jar))
    return builder


__all__ = ["LockPlan", "LockPlanner", "LockingDataFrame", "LockingSession", "configure"]
