"""zklock for PySpark: implicit S/X locks for every statement a pipeline runs.

``from zklock.spark import LockingSession`` and wrap the pipeline's
SparkSession once. Needs PySpark 3.5 or 4.0 to 4.3. The lock planner runs inside Spark, in
zklock's JVM module (jvm.py): a classic session calls it through py4j, a
Spark Connect session asks zklock's plugin in the server (connect.py).

The package itself loads without PySpark: an operator's host runs ``zklock show`` with no
PySpark, and the child lock client of ``spark-sql`` and the Thrift server
(:mod:`.lock_process`) runs in whatever Python a Spark image has. Its modules import
PySpark only where they call it; the names below that need it check the installed
PySpark first, on their first use, and say in one line what is missing
(:func:`.jvm.check_pyspark`).
"""

from __future__ import annotations

import importlib
from typing import Any

from .jvm import check_pyspark

#: The public names that need PySpark, each with the module that defines it.
_NEEDS_PYSPARK = {
    "BatchOutcome": ".batches",
    "EngineLockClient": ".lock_client",
    "LockPlan": ".planner",
    "LockingSession": ".session",
    "configure": ".application",
    "enforce": ".application",
    "insert_once": ".batches",
    "lock_error": ".lock_client",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`_NEEDS_PYSPARK`, loaded once PySpark is found fit (PEP 562)."""
    where = _NEEDS_PYSPARK.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    check_pyspark()
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_NEEDS_PYSPARK)
