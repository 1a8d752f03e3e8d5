"""py4j calls (Python -> JVM, on the calling thread) of one saveAsTable overwrite of an
existing table in a LockingSession, on the installed PySpark: a count, not a timing. On
Spark 3.5 and 4.0 zklock locks that call whole from Python (zklock/spark/saveastable.py);
from 4.1 on the engine locks the one command Spark runs.

    .venv-compat/pyspark-4.0.0/bin/python bench/py4j_calls.py
"""
import tempfile
import threading
from pathlib import Path

import py4j.clientserver as cs
from pyspark.sql import SparkSession

from zklock.servers.ports import free_port
from zklock.servers.zookeeper import ZkServer
from zklock.spark import LockingSession, configure

work = Path(tempfile.mkdtemp())
zk = ZkServer(work / "zk", port=free_port())
zk.start(wait=90)
try:
    spark = configure(SparkSession.builder.master("local[1]")
                      .config("spark.sql.warehouse.dir", str(work / "wh"))
                      .config("spark.ui.enabled", "false")).getOrCreate()
    s = LockingSession(spark, hosts=zk.connect, root="/count")
    s.sql("CREATE DATABASE IF NOT EXISTS c")
    df = s.range(10)
    df.write.mode("overwrite").saveAsTable("c.t")
    counts = {"n": 0}
    me = threading.get_ident()
    real = cs.ClientServerConnection.send_command

    def counting(self, command):
        if threading.get_ident() == me:
            counts["n"] += 1
        return real(self, command)

    cs.ClientServerConnection.send_command = counting
    df.write.mode("overwrite").saveAsTable("c.t")
    cs.ClientServerConnection.send_command = real
    print("py4j calls of saveAsTable overwrite:", counts["n"])
    s.close()
    spark.stop()
finally:
    zk.stop()
