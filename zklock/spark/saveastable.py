"""Spark 3.5 and 4.0's ``saveAsTable``, locked whole from Python.

On those Spark lines ``DataFrameWriter.saveAsTable`` drops an overwritten table in its
catalog before it runs any command, where no engine hook can see the drop
(EngineLocks.saveAsTableDropsFirst; Spark 4.1 runs the call as one command,
``SaveAsV1TableCommand``, which the engine locks). :func:`install` wraps PySpark's classic
``DataFrameWriter.saveAsTable`` so that, in a session whose lock client runs in this
process (a LockingSession's, or :func:`~zklock.spark.enforce`'s), the call holds X on the
table and on the catalog tables at its ``path`` option, and S on what the DataFrame reads,
before Spark starts; the commands it runs find themselves covered. A Spark Connect server's
saveAsTable and JVM callers are not covered (docs/spark.md, "Spark versions").
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from .engine import client_of, save_as_table_drops_first
from .execution import describe
from .planner import ClassicPlanner

_installed = False
_lock = threading.Lock()


def install() -> None:
    """Wrap PySpark's classic ``DataFrameWriter.saveAsTable`` (once per process)."""
    global _installed
    from pyspark.sql.readwriter import DataFrameWriter  # the classic writer (3.5 and 4.x)

    with _lock:
        if _installed:
            return
        _installed = True
        original = DataFrameWriter.saveAsTable

        @functools.wraps(original)
        def save_as_table(self: Any, name: str, *args: Any, **options: Any) -> Any:
            return locked_save(self, name, lambda: original(self, name, *args, **options),
                               options)

        DataFrameWriter.saveAsTable = save_as_table


def locked_save(writer: Any, table: str, save: Any, options: dict[str, Any]) -> Any:
    """Run ``save`` (the writer's saveAsTable of ``table``) as the module says."""
    spark = writer._spark
    client = client_of(spark)
    if client is None or not save_as_table_drops_first(spark):
        return save()  # the engine locks it (or refuses it: no lock client)
    planner = ClassicPlanner(spark, client.settings.unknown_statements)
    paths = [str(options["path"])] if options.get("path") else []
    paths += path_option(writer)
    targets = (planner.plan_write(table) + planner.plan_paths(paths)
               + planner.plan_dataframe(writer._df))
    return client.locked(spark, targets, describe("saveAsTable", targets), save)


def path_option(writer: Any) -> list[str]:
    """The ``path`` option set earlier on the writer (``option("path", p)``), read from the
    JVM writer's options (a field of Spark's DataFrameWriter, 3.5 and 4.0)."""
    jclass = writer._jwrite.getClass()
    while jclass is not None:
        for field in jclass.getDeclaredFields():
            if str(field.getName()) == "extraOptions":
                field.setAccessible(True)
                found = field.get(writer._jwrite).get("path")
                return [str(found.get())] if found.isDefined() else []
        jclass = jclass.getSuperclass()
    return []
