"""The process of a Spark Connect server started by ``zklock spark connect-server start``.

A Spark Connect server runs every client's commands in its own JVM, so that is where they
must be locked. The server runs in a Python process of its own: PySpark starts its JVM with
zklock's engine extension (:func:`zklock.spark.configure`), this process's LockManager is
the engine's lock client (:func:`zklock.spark.enforce`), and then the Connect service
starts in that JVM (``SparkConnectService.start``, what Spark's own SparkConnectServer
main does). A plain client, ``SparkSession.builder.remote(...)`` and nothing else, gets its
commands locked by the server; a client with a LockingSession holds its own locks, and
the server checks that they still exist before each command runs (EngineGuard.java).

    python -m zklock.cli.connect_host --port 15002 [--host H] [--warehouse DIR] [--conf K=V]...

Where ZooKeeper is comes from the ``spark.zklock.*`` settings among ``--conf`` or the
``ZKLOCK_*`` environment, as for any zklock process. The process serves until SIGTERM or
SIGINT, then stops the service, releases what it holds and stops Spark.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Optional

from zklock.config import Settings
from zklock.manager import LockManager

from .local import parse_conf


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="zklock-connect-server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--warehouse")
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args(argv)
    conf = parse_conf(args.conf)

    from pyspark.sql import SparkSession

    from zklock.spark import configure, enforce
    from zklock.spark.connect import PLUGIN_SETTING
    from zklock.spark.protocol import JvmClass

    builder = (SparkSession.builder.appName("zklock Spark Connect server")
               .config(PLUGIN_SETTING, JvmClass.CONNECT_PLUGIN)
               .config("spark.connect.grpc.binding.port", str(args.port))
               .config("spark.connect.grpc.binding.address", args.host)
               .config("spark.ui.enabled", "false"))
    if args.warehouse:
        builder = builder.config("spark.sql.warehouse.dir", args.warehouse)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    manager = LockManager(settings=Settings.resolve(spark_conf=conf))
    engine = enforce(spark, manager)
    service = spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(spark.sparkContext._jsc.sc())
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(f"zklock Spark Connect server listening on {args.host}:{args.port}", flush=True)
    done.wait()
    try:  # no new commands, then none running, then no lock client: never a command unlocked
        try:
            service.stop(getattr(service, "stop$default$1")(),
                         getattr(service, "stop$default$2")())
        except Exception:  # stopping anyway
            pass
        spark.sparkContext.cancelAllJobs()
        spark.stop()
    finally:
        engine.close()
        manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
