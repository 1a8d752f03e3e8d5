"""Spark 3.5 and 4.0's ``saveAsTable``, locked whole: what only Python can reach.

On those Spark lines ``DataFrameWriter.saveAsTable`` drops an overwritten table in its
catalog before it runs any command, where no engine hook can see the drop
(EngineCalls.saveAsTableDropsFirst; Spark 4.1 runs the call as one command,
``SaveAsV1TableCommand``, which the engine locks). :func:`install` wraps PySpark's classic
``DataFrameWriter.saveAsTable`` so that, in an application with zklock's engine, the engine
holds X on the table and on the catalog tables at its ``path`` option, and S on what the
DataFrame reads, before Spark starts (EngineCalls.lockSaveAsTable: the engine's own grant,
with the session's lock client); the commands the call runs find themselves covered. A
Spark Connect server's saveAsTable and JVM callers are not covered (docs/spark.md, "Spark
versions").
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from .held import run_held
from .jvm import JvmModuleError
from .lock_client import engine_of, save_as_table_drops_first

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
    try:
        engine = engine_of(spark)
        whole = save_as_table_drops_first(spark)
    except JvmModuleError:  # no zklock engine in this application: nothing locks here
        return save()
    if not whole:
        return save()  # the engine locks the one command Spark runs
    path = str(options["path"]) if options.get("path") else None
    held = engine.lockSaveAsTable(spark._jsparkSession, table, path, writer._jwrite,
                                  writer._df._jdf)
    with run_held(held, [table]):
        return save()
