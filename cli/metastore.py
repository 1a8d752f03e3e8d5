"""A local Hive Metastore that Spark applications share: ``zklock metastore start|status|stop``.

Platforms share one catalog between their Spark applications (and Hive): a Hive Metastore.
Without one, each application has a private catalog, and a partition one job adds is not
in another job's catalog until it runs ``ALTER TABLE ... RECOVER PARTITIONS`` (X on the
whole table, in Hive's model and in zklock's). This runs the metastore PySpark ships (Hive
2.3's ``HiveMetaStore``, from ``pyspark/jars``) on an embedded Derby database, with its
state, log and warehouse under ``<state dir>/metastore/``. An application joins it with the
Spark conf of :meth:`Metastore.spark_conf` (``enableHiveSupport()`` and the thrift URI).

It is for development, demos and tests: Derby allows one metastore process, and the
server has no authentication.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

import click

from zklock.config import parse_duration
from zklock.errors import ServerError, ZkLockError
from zklock.servers.java import jdk_tool

from .app import Context, cli, echo_status
from .local_service import LocalService

SERVER_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
DEFAULT_PORT = 9083  # Hive's own default


@dataclass
class Metastore(LocalService):
    """PySpark's Hive Metastore server on a Derby database under ``<state_dir>/metastore``."""

    name: ClassVar[str] = "metastore"
    title: ClassVar[str] = "a Hive Metastore"
    stop_command: ClassVar[str] = "zklock metastore stop"
    error: ClassVar[type[ZkLockError]] = ServerError

    port: int = DEFAULT_PORT
    #: where tables without a LOCATION live (default: ``warehouse`` in the state directory)
    warehouse: Optional[str] = None
    heap_mb: int = 512

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    def warehouse_dir(self) -> str:
        return str(Path(self.warehouse).resolve() if self.warehouse
                   else self.state_dir / "warehouse")

    def spark_conf(self) -> dict[str, str]:
        """What an application sets to use this metastore (as ``enableHiveSupport()`` and
        ``spark.hadoop.hive.metastore.uris`` would): every application that shares tables
        also shares the warehouse directory, where a CREATE without LOCATION puts them."""
        info = self.info()
        return {"spark.sql.catalogImplementation": "hive",
                "spark.hadoop.hive.metastore.uris":
                    f"thrift://{info.get('host', self.host)}:{info.get('port', self.port)}",
                "spark.sql.warehouse.dir": str(info.get("warehouse") or self.warehouse_dir())}

    def status(self) -> dict:
        """running, pid, port, URI, warehouse, log, and the Spark conf that joins it."""
        st = super().status()
        return {**st, "uri": f"thrift://{st['host']}:{st['port']}",
                "warehouse": st.get("warehouse") or self.warehouse_dir(),
                "spark_conf": self.spark_conf()}

    def start(self, wait: float = 120.0) -> str:
        """Start the metastore and return its ``thrift://`` URI once it accepts connections.

        Its Derby database is created on the first start and kept across restarts (delete
        the state directory to start empty). Raises :class:`ServerError` (one line) when one
        already runs here, the port is taken, or it exits or does not listen in time.
        """
        from .connect_server import pyspark_home

        self.check_startable()
        jars = pyspark_home() / "jars"
        if not any(jars.glob("hive-metastore-*.jar")):
            raise ServerError(f"no Hive Metastore in {jars}: this PySpark ships no Hive jars")
        warehouse = self.warehouse_dir()
        database = self.state_dir / "metastore_db"
        java = jdk_tool("java")
        if java is None:
            raise ServerError("java not found: install a Java runtime (17+) or set JAVA_HOME")
        cmd = [java, f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               # Hive 2.3's async log4j appender needs a disruptor jar Spark does not ship
               "-Dhive.async.log.enabled=false",
               f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={database};create=true",
               f"-Dhive.metastore.warehouse.dir={warehouse}",
               # an empty Derby database gets Hive's schema on first use
               "-Ddatanucleus.schema.autoCreateAll=true",
               "-Dhive.metastore.schema.verification=false",
               f"-Dderby.stream.error.file={self.state_dir / 'derby.log'}",
               "-cp", f"{jars}/*", SERVER_CLASS, "-p", str(self.port)]
        self.launch(cmd, dict(os.environ), {"warehouse": warehouse}, wait)
        return self.uri


@cli.group()
def metastore() -> None:
    """A local Hive Metastore (PySpark's, on Derby) that Spark applications share.

    Its pid, port, Derby database, warehouse and log live in <state dir>/metastore/.

    Example: zklock metastore start && zklock metastore status
    """


def _metastore(obj: Context, port: Optional[int] = None,
               warehouse: Optional[str] = None) -> Metastore:
    server = Metastore(Path(obj.settings.state_dir), port=port or DEFAULT_PORT,
                       warehouse=warehouse)
    if port is None:
        server.port = int(server.info().get("port", DEFAULT_PORT))
    return server


@metastore.command("start")
@click.option("--port", type=int, default=None, help="Thrift port (default 9083).")
@click.option("--warehouse", type=click.Path(file_okay=False),
              help="Where tables without a LOCATION live (default: in the state directory).")
@click.option("--wait", default="120s", show_default=True,
              help="How long to wait for the metastore to listen.")
@click.pass_obj
def start(obj: Context, port: Optional[int], warehouse: Optional[str], wait: str) -> None:
    """Start a Hive Metastore on loopback; print its thrift:// URI.

    Spark applications join it with: --conf spark.sql.catalogImplementation=hive
    --conf spark.hadoop.hive.metastore.uris=<URI> --conf spark.sql.warehouse.dir=<warehouse>
    (`zklock metastore status` prints them).

    Example: zklock metastore start --port 9083
    """
    click.echo(_metastore(obj, port, warehouse).start(wait=parse_duration(wait)))


@metastore.command("stop")
@click.pass_obj
def stop(obj: Context) -> None:
    """Stop the Hive Metastore started from this state directory (its data stays).

    Example: zklock metastore stop
    """
    click.echo("stopped" if _metastore(obj).stop() else "not running")


@metastore.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.pass_obj
def status(obj: Context, as_json: bool) -> None:
    """Whether the local Hive Metastore runs: its URI, pid, warehouse, and the Spark conf
    that joins it.

    Exit code 1 when it does not run. Example: zklock metastore status --json
    """
    st = _metastore(obj).status()
    echo_status(st, as_json, [] if not st["running"] else [
        f"running, pid {st['pid']}; {st['uri']}; warehouse {st['warehouse']}; log {st['log']}",
        "spark conf: " + " ".join(f"--conf {k}={v}" for k, v in st["spark_conf"].items())])
