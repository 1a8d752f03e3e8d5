"""An application's side of zklock: its SparkSession builder configured for zklock's
engine (:func:`configure`), and its plain sessions' statements locked (:func:`enforce`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

from ..manager import LockManager
from .lock_client import EngineLockClient, settings_of
from .protocol import Conf, JvmClass

#: Spark's setting naming session extensions: zklock's puts every command under its locks.
EXTENSIONS = "spark.sql.extensions"
SPARK_DEFAULTS = {
    # sysdb.locks (and the scheduler's sysdb views) are global temporary views in "sysdb".
    "spark.sql.globalTempDatabase": "sysdb",
    # RDD saves commit through zklock's committer, which refuses one into a table's files
    "spark.hadoop.mapred.output.committer.class": JvmClass.MAPRED_COMMITTER,
}
#: Each file write job stages on its own, and a stream's file sink makes its log with its
#: first entry (StagedCommitProtocol.java): what zklock's plugin makes a deployment's
#: defaults, a builder gets unless it names its own.
#: The Spark line from which a declarative pipeline's run takes its datasets' locks as it
#: starts, in zklock's Spark Connect interceptor (adapters/spark-4.1/PipelineStarts.java),
#: which zklock's plugin names as the application starts and configure() in a builder.
PIPELINES_SINCE = (4, 1)
STAGING = {
    Conf.COMMIT_PROTOCOL: JvmClass.COMMIT_PROTOCOL,
    Conf.CHECKPOINT_MANAGER: JvmClass.CHECKPOINT_MANAGER,
}



def configure(builder: Any) -> Any:
    """Apply the static Spark settings zklock relies on to a SparkSession builder.

    Also puts zklock's JVM module on the application's class path (appended to the
    builder's ``spark.jars``, unless that names a zklock jar already or Spark's ``jars/``
    has one): its engine extension, and its commit protocol and committers, which Spark
    loads by name, give every write job staging of its own (see
    zklock/spark/java/StagedCommitProtocol.java). Raises JvmModuleError when the
    module cannot be had (a source install without a JDK) or ``spark.jars`` names a zklock
    jar of another build.

    A builder of a local Spark Connect session (``spark.api.mode=connect`` with a local
    master, or ``remote("local")``), whose Connect server PySpark starts itself, also gets
    zklock's plugin (the jar and ``spark.connect.extensions.relation.classes``), which
    plans its locks. (PySpark then warns that it cannot set that static setting on the
    session it created: the server has it already.) A remote server is started by its
    operator with the plugin: see docs/spark.md. On Spark 4.1 and later, the builder also
    names zklock's Spark Connect interceptor, where a declarative pipeline's run takes its
    datasets' locks as it starts (docs/spark.md, "Streams and pipelines").
    """
    from .connect import PLUGIN_SETTING
    from .jvm import (
        JvmModuleError,
        adapter_line,
        build_hash,
        has_connect_server,
        in_spark_jars,
        jar_info,
        module_jar,
        spark_version,
    )
    from .lock_client import EXTENSION_CLASS

    for key, value in SPARK_DEFAULTS.items():
        builder = builder.config(key, value)
    options = getattr(builder, "_options", {})
    for key, value in STAGING.items():
        if key not in options:
            builder = builder.config(key, value)
    local = str(options.get("spark.master", "local")).startswith("local")
    if local and "spark.pyspark.python" not in options and not os.environ.get("PYSPARK_PYTHON"):
        # a local application's Python workers run the driver's interpreter, the one that
        # has PySpark's packages (pyarrow for Arrow UDFs), not whatever python3 is on PATH
        builder = builder.config("spark.pyspark.python", sys.executable)
    if _local_connect(options, local):
        builder = _named(builder, PLUGIN_SETTING, JvmClass.CONNECT_PLUGIN)
    if has_connect_server() and adapter_line(spark_version()) >= PIPELINES_SINCE:
        builder = _named(builder, Conf.CONNECT_INTERCEPTORS, JvmClass.PIPELINE_STARTS)
    builder = _named(builder, EXTENSIONS, EXTENSION_CLASS)
    existing = getattr(builder, "_options", {}).get("spark.jars")
    jars = [j for j in str(existing or "").split(",") if j]
    named = [j for j in jars if jar_info(Path(j))]  # one zklock jar on the class path
    for jar in named:
        if jar_info(Path(jar)).get("build") != build_hash():
            raise JvmModuleError(f"spark.jars names {jar}, a zklock jar of another build;"
                                 f" name this zklock's instead (zklock spark jar), or none")
    if not named:
        module = module_jar()
        if not in_spark_jars(module):
            builder = builder.config("spark.jars", ",".join([*jars, str(module)]))
    return builder


def _named(builder: Any, key: str, name: str) -> Any:
    """``builder`` with ``name`` in its comma-separated setting ``key``, after those it names."""
    named = [n.strip() for n in str(getattr(builder, "_options", {}).get(key, "")).split(",")
             if n.strip()]
    return builder if name in named else builder.config(key, ",".join([*named, name]))


def enforce(spark: Any, manager: Optional[LockManager] = None,
            **settings: Any) -> EngineLockClient:
    """Make ``manager`` (default: one built from ``settings``, Spark conf and the
    environment) take the locks of every statement this application's engine runs in a
    SparkSession no LockingSession wraps, with ``settings`` and the Spark conf over the
    manager's own, as a LockingSession's (docs/configuration.md, "Precedence"). The session
    must be built with :func:`configure`. ``close()`` the returned client (or use it as a
    context manager) to stop."""
    from . import saveastable

    saveastable.install()  # Spark 3.5 and 4.0's saveAsTable, locked whole by this client
    own = settings_of(spark, settings)
    if manager is None:
        manager = LockManager(settings=own)
    layered = own.over(manager.settings)
    return EngineLockClient(spark, manager, settings=lambda: layered).install(own_policy=True)


def _local_connect(options: dict, local_master: bool) -> bool:
    """Does this builder make a Spark Connect session whose server PySpark starts here?"""
    remote = options.get("spark.remote", os.environ.get("SPARK_REMOTE"))
    if remote is not None:
        return str(remote).startswith("local")
    return local_master and str(options.get("spark.api.mode", "")).lower() == "connect"
