"""A local Spark Thrift server with zklock's engine, for JDBC clients in development and tests.

``zklock spark thrift-server start`` runs Spark's own Thrift JDBC/ODBC server (HiveServer2's
protocol: beeline, BI tools, dbt's ``thrift`` method) from the installed PySpark, with
zklock's jar and engine extension and nothing else of zklock's: the engine starts zklock's
lock client as its child process (ChildLockClient.java), with the ZooKeeper, root and
settings of the ``zklock`` command that started it, and locks every JDBC client's
statements, recording each client's user. The counterpart of ``zklock spark
connect-server``; its pid, port, log and jar live in ``<state dir>/thrift-server/``.

A Thrift server started with Spark's ``sbin/start-thriftserver.sh`` and zklock's settings in
spark-defaults.conf (docs/deploy.md) is locked the same way.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional

from zklock.errors import ServerError, ZkLockError

from .connect_server import pyspark_home
from .local_service import LocalService

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
#: HiveServer2 runs a JDBC session's work as its user (impersonation, Hive's default: on).
#: Spark's Thrift server runs its jobs as its own user either way, and with it on, two
#: sessions closing at once can leave one whose thread's Hive client is no longer its user's
#: (Spark shares one between threads): Hive's SessionState.close then builds another, which
#: loads Hive's function registry, and on Spark 4 (its PySpark has no hive-llap-common) the
#: close fails with NoClassDefFoundError LlapSigner$Signable. Off unless ``--conf`` sets it;
#: the lock holder data names each JDBC client's user either way (Spark's current_user()).
IMPERSONATION = "spark.hadoop.hive.server2.enable.doAs"
DEFAULT_PORT = 10000  # HiveServer2's own default


@dataclass
class ThriftServer(LocalService):
    """One Spark Thrift server process with zklock's engine, state under ``state_dir``."""

    name: ClassVar[str] = "thrift-server"
    title: ClassVar[str] = "a Spark Thrift server"
    stop_command: ClassVar[str] = "zklock spark thrift-server stop"
    error: ClassVar[type[ZkLockError]] = ServerError

    port: int = DEFAULT_PORT
    warehouse: Optional[str] = None
    conf: dict[str, str] = field(default_factory=dict)
    #: the zklock settings of the server's lock client, as Spark conf (spark.zklock.*)
    locks: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The JDBC URL a client connects to (``beeline -u <url>``)."""
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    @property
    def lock_client_file(self) -> Path:
        """Where the server's JVM keeps its child lock client's state (ChildSupervisor.java)."""
        return self.state_dir / "lock-client.json"

    def status(self) -> dict:
        """running, port, pid, jar, JDBC URL and log of the server started here, and its
        lock client: whether the child runs, its pid, how many times it was restarted, and
        the last error (none before the first statement starts it)."""
        st = super().status()
        return {**st, "url": f"jdbc:hive2://{st['host']}:{st['port']}/default",
                "jar": st.get("jar"), "lock_client": self.lock_client()}

    def lock_client(self) -> dict:
        """The child lock client's state as the server's JVM last wrote it, ``up`` checked
        against the process table now (a child killed since is not up)."""
        from zklock.spark.protocol import Field

        try:
            state = json.loads(self.lock_client_file.read_text())
        except (OSError, ValueError):
            return {Field.UP: False, Field.PID: None, Field.RESTARTS: 0,
                    Field.FAILURES_IN_A_ROW: 0, Field.LAST_ERROR: None, "started": False}
        pid = state.get(Field.PID)
        state[Field.UP] = bool(state.get(Field.UP) and pid and Path(f"/proc/{pid}").exists())
        state["started"] = True
        return state

    def start(self, wait: float = 180.0) -> str:
        """Start the server and return its JDBC URL once it accepts connections.

        Raises :class:`~zklock.errors.ServerError` (one line) when one already runs here,
        the port is taken, or the server exits or does not listen within ``wait`` seconds.
        """
        from zklock.config import spark_key
        from zklock.spark.application import EXTENSIONS, SPARK_DEFAULTS
        from zklock.spark.jvm import jar_info, module_jar
        from zklock.spark.lock_client import EXTENSION_CLASS
        from zklock.spark.protocol import JvmClass

        self.check_startable()
        home = pyspark_home()
        jar = module_jar()

        conf = {**SPARK_DEFAULTS, EXTENSIONS: EXTENSION_CLASS, "spark.jars": str(jar),
                # no jar, no server (docs/deploy.md)
                "spark.plugins.defaultList": JvmClass.PLUGIN,
                "spark.ui.enabled": "false",
                # the child lock client runs in this zklock's Python
                spark_key("lock_client_python"): sys.executable,
                spark_key("lock_client_status_file"): str(self.lock_client_file),
                IMPERSONATION: "false",
                **self.locks, **self.conf}
        if self.warehouse:
            conf["spark.sql.warehouse.dir"] = str(Path(self.warehouse).resolve())
        # the jar on the driver's own class path too, not only Spark's loader of spark.jars:
        # Hive's JDBC sessions run on threads whose class loader is Hive's, which a
        # session's close may close (docs/deploy.md)
        cmd = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
               "--name", "zklock Thrift server", "--driver-class-path", str(jar)]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += ["spark-internal", "--hiveconf", f"hive.server2.thrift.port={self.port}",
                "--hiveconf", f"hive.server2.thrift.bind.host={self.host}"]
        env = dict(os.environ, SPARK_HOME=str(home))
        env.pop("SPARK_REMOTE", None)
        self.launch(cmd, env, {"jar": str(jar), "spark": jar_info(jar).get("spark"),
                               "warehouse": self.warehouse}, wait)
        return self.url
