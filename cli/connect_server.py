"""A local Spark Connect server with zklock's plugin, for development, demos and tests.

``zklock spark connect-server start`` runs PySpark's own Spark Connect service in a
process of its own (:mod:`zklock.cli.connect_host`): a Python process whose JVM has
zklock's jar, its plugin (``spark.connect.extensions.relation.classes``, which plans locks
for LockingSession clients) and its engine extension, and whose LockManager takes the locks
of every command a client sends that no LockingSession locked. Its pid, port, log and the
jar it runs live in ``<state dir>/connect-server/`` (``.zklock/`` by default), like the
ZooKeeper of ``zklock server start``.

A Connect server started otherwise (Spark's start-connect-server.sh) has no lock client:
with zklock's extension it refuses the commands that need locks; see docs/spark.md,
"Spark Connect: the server side".
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional

from zklock.errors import SparkConnectError, ZkLockError

from .local_service import LocalService

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


def pyspark_home() -> Path:
    """The Spark distribution PySpark ships (bin/spark-submit, jars/). Raises
    :class:`~zklock.spark.jvm.JvmModuleError`, one line naming ``zklock[spark]``, where
    PySpark is not installed (an operator's host)."""
    from zklock.spark.jvm import check_pyspark

    check_pyspark()
    import pyspark

    return Path(pyspark.__file__).parent


def spark_home_version(home: Path) -> Optional[str]:
    """The Spark version of a distribution, from its spark-core jar's name; None if unknown."""
    for jar in sorted((home / "jars").glob("spark-core_*.jar")):
        name = jar.name[:-len(".jar")]
        return name.split("-", 2)[-1] if name.count("-") >= 2 else None
    return None


@dataclass
class ConnectServer(LocalService):
    """One Spark Connect server process with zklock's plugin, state under ``state_dir``."""

    name: ClassVar[str] = "connect-server"
    title: ClassVar[str] = "a Spark Connect server"
    stop_command: ClassVar[str] = "zklock spark connect-server stop"
    error: ClassVar[type[ZkLockError]] = SparkConnectError

    port: int = DEFAULT_PORT
    warehouse: Optional[str] = None
    conf: dict[str, str] = field(default_factory=dict)
    spark_home: Optional[Path] = None
    jar: Optional[Path] = None
    #: the zklock settings of the server's lock client, as Spark conf (spark.zklock.*)
    locks: dict[str, str] = field(default_factory=dict)

    @property
    def remote(self) -> str:
        """The address a client gives ``SparkSession.builder.remote``."""
        return f"sc://{self.host}:{self.port}"

    def status(self) -> dict:
        """running, port, pid, plugin jar, Spark version and log of the server started here."""
        st = super().status()
        return {**st, "remote": f"sc://{st['host']}:{st['port']}", "jar": st.get("jar"),
                "spark": st.get("spark")}

    def start(self, wait: float = 120.0) -> str:
        """Start the server and return its ``sc://`` address once it accepts connections.

        Raises :class:`~zklock.errors.SparkConnectError` (one line) when one already runs
        here, the port is taken, the plugin was built for another Spark than the server's,
        or the server exits or does not answer within ``wait`` seconds.
        """
        from zklock.spark.application import SPARK_DEFAULTS
        from zklock.spark.jvm import has_connect_server, jar_info, jar_line, module_jar

        self.check_startable()
        home = Path(self.spark_home) if self.spark_home else pyspark_home()
        submit = home / "bin" / "spark-submit"
        if not submit.exists():
            raise SparkConnectError(f"no bin/spark-submit under {home}: not a Spark"
                                    " distribution")
        if not has_connect_server(home / "jars"):
            raise SparkConnectError(
                f"the Spark under {home} ({spark_home_version(home) or 'of unknown version'})"
                " has no Spark Connect server (pip's PySpark 3.5 ships none): zklock's Connect"
                " server needs PySpark 4.0 or newer")
        jar = Path(self.jar) if self.jar else module_jar()
        built_for = jar_info(jar).get("spark")
        if built_for is None:
            raise SparkConnectError(f"{jar} is not zklock's Spark Connect plugin jar")
        server_version = spark_home_version(home)
        if server_version is None or jar_line(server_version) != jar_line(built_for):
            raise SparkConnectError(
                f"zklock's plugin {jar.name} is built for Spark {built_for}'s line but the"
                f" Spark Connect server under {home} is Spark"
                f" {server_version or 'of unknown version'}; use the jar of that Spark's line"
                " (zklock spark jar --spark-version <its version>)")
        cmd = [sys.executable, "-m", "zklock.cli.connect_host", "--port", str(self.port),
               "--host", self.host]
        if self.warehouse:
            cmd += ["--warehouse", str(Path(self.warehouse).resolve())]
        # (SPARK_DEFAULTS: sysdb views need the global temp database "sysdb")
        conf = {**SPARK_DEFAULTS, **self.locks, **self.conf}
        if self.jar:
            conf["spark.jars"] = str(jar)
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_CONNECT_MODE="0")
        env.pop("SPARK_REMOTE", None)
        self.launch(cmd, env, {"jar": str(jar), "spark": server_version,
                               "warehouse": self.warehouse}, wait)
        return self.remote
