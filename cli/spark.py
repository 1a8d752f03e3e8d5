"""`zklock spark ...`: the Spark Connect server side (zklock's plugin jar, a local server)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import click

from zklock.config import parse_duration

from .app import Context, cli, echo_status


@cli.group()
def spark() -> None:
    """Spark Connect: zklock's planner plugin for Connect servers, and a local server.

    Example: zklock spark connect-server start --port 15002
    """


@spark.command("jar")
@click.option("--spark-version", metavar="VERSION",
              help="The Spark the jar is for (default: the installed PySpark's).")
@click.option("--output", "-o", type=click.Path(), metavar="PATH",
              help="Copy the jar there: a directory (such as $SPARK_HOME/jars) or a file.")
def jar(spark_version: Optional[str], output: Optional[str]) -> None:
    """Print (or copy) zklock's JVM module jar for a Spark version.

    An image builder places it in the image's $SPARK_HOME/jars: every Spark process then
    has zklock's engine extension, committers and Connect plugin on its class path, and
    zklock uses that jar instead of its own. A wheel carries a jar per Spark line; a
    source install builds one for its own PySpark only.

    Example: zklock spark jar --spark-version 3.5.4 --output /opt/spark/jars
    """
    import shutil

    from zklock.spark.jvm import jar_for

    found = jar_for(spark_version)
    if output is None:
        click.echo(str(found))
        return
    target = Path(output)
    if target.is_dir():
        target = target / found.name  # zklock*.jar: the name zklock looks for there
    try:
        shutil.copyfile(found, target)
    except OSError as exc:
        raise click.ClickException(f"cannot write {target}: {exc.strerror or exc}") from None
    click.echo(str(target))


@spark.command("plugin-jar")
def plugin_jar() -> None:
    """Print the path of zklock's JVM module jar for the installed Spark (built once from a
    source install), which holds its Spark Connect plugin; the same as `zklock spark jar`.

    Add it to an existing Connect server: --jars "$(zklock spark plugin-jar)"
    --conf spark.connect.extensions.relation.classes=zklock.ConnectLockPlugin

    Example: zklock spark plugin-jar
    """
    from zklock.spark.jvm import jar_for

    click.echo(str(jar_for()))


@spark.group("connect-server")
def connect_server() -> None:
    """A local Spark Connect server (PySpark's) running zklock's lock planner plugin.

    Its pid, port, log and jar live in <state dir>/connect-server/ (default .zklock/).

    Example: zklock spark connect-server start && zklock spark connect-server status
    """


def _server(obj: Context, port: Optional[int] = None, warehouse: Optional[str] = None,
            conf: Sequence[str] = (), spark_home: Optional[str] = None,
            jar: Optional[str] = None) -> Any:
    from zklock.cli.connect_server import DEFAULT_PORT, ConnectServer
    from zklock.cli.local import parse_conf

    server = ConnectServer(Path(obj.settings.state_dir), port=port or DEFAULT_PORT,
                           warehouse=warehouse, conf=parse_conf(conf),
                           spark_home=Path(spark_home) if spark_home else None,
                           jar=Path(jar) if jar else None,
                           locks={"spark.zklock.zookeeper.quorum": obj.settings.connect_string(),
                                  "spark.zklock.root": obj.settings.root})
    if port is None:
        server.port = int(server.info().get("port", DEFAULT_PORT))
    return server


@connect_server.command("start")
@click.option("--port", type=int, default=None, help="gRPC port (default 15002).")
@click.option("--warehouse", type=click.Path(file_okay=False),
              help="spark.sql.warehouse.dir of the server (default: Spark's).")
@click.option("--conf", "conf", multiple=True, metavar="K=V",
              help="A Spark setting for the server, as for spark-submit (repeatable).")
@click.option("--spark-home", type=click.Path(exists=True, file_okay=False),
              help="Run this Spark distribution's server (default: PySpark's own).")
@click.option("--jar", type=click.Path(exists=True, dir_okay=False),
              help="zklock's plugin jar to load (default: built from this zklock).")
@click.option("--wait", default="120s", show_default=True,
              help="How long to wait for the server to listen.")
@click.pass_obj
def start(obj: Context, port: Optional[int], warehouse: Optional[str], conf: Sequence[str],
          spark_home: Optional[str], jar: Optional[str], wait: str) -> None:
    """Start a Spark Connect server with zklock's plugin; print its sc:// address.

    Example: zklock spark connect-server start --port 15002 --warehouse /data/warehouse
    """
    server = _server(obj, port, warehouse, conf, spark_home, jar)
    click.echo(server.start(wait=parse_duration(wait)))


@connect_server.command("stop")
@click.pass_obj
def stop(obj: Context) -> None:
    """Stop the Spark Connect server started from this state directory.

    Example: zklock spark connect-server stop
    """
    click.echo("stopped" if _server(obj).stop() else "not running")


@connect_server.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.pass_obj
def status(obj: Context, as_json: bool) -> None:
    """Whether the local Spark Connect server runs: its port, pid and plugin jar.

    Exit code 1 when it does not run. Example: zklock spark connect-server status --json
    """
    st = _server(obj).status()
    echo_status(st, as_json, [f"running, pid {st['pid']}; {st['remote']}; plugin jar"
                              f" {st['jar']}; Spark {st['spark']}; log {st['log']}"])


@spark.group("thrift-server")
def thrift_server() -> None:
    """A local Spark Thrift server (JDBC: beeline, BI tools, dbt) whose every statement is
    locked by zklock's engine and its child lock client.

    Its pid, port, log and jar live in <state dir>/thrift-server/ (default .zklock/).

    Example: zklock spark thrift-server start --port 10000 && beeline -u
    jdbc:hive2://127.0.0.1:10000/default -n alice
    """


def _thrift(obj: Context, port: Optional[int] = None, warehouse: Optional[str] = None,
            conf: Sequence[str] = ()) -> Any:
    from zklock.cli.local import parse_conf
    from zklock.cli.thrift_server import DEFAULT_PORT, ThriftServer

    server = ThriftServer(Path(obj.settings.state_dir), port=port or DEFAULT_PORT,
                          warehouse=warehouse, conf=parse_conf(conf),
                          locks={"spark.zklock.zookeeper.quorum": obj.settings.connect_string(),
                                 "spark.zklock.root": obj.settings.root})
    if port is None:
        server.port = int(server.info().get("port", DEFAULT_PORT))
    return server


@thrift_server.command("start")
@click.option("--port", type=int, default=None, help="JDBC port (default 10000).")
@click.option("--warehouse", type=click.Path(file_okay=False),
              help="spark.sql.warehouse.dir of the server (default: Spark's).")
@click.option("--conf", "conf", multiple=True, metavar="K=V",
              help="A Spark setting for the server, as for spark-submit (repeatable).")
@click.option("--wait", default="180s", show_default=True,
              help="How long to wait for the server to listen.")
@click.pass_obj
def thrift_start(obj: Context, port: Optional[int], warehouse: Optional[str],
                 conf: Sequence[str], wait: str) -> None:
    """Start a Spark Thrift server with zklock's engine; print its JDBC URL.

    Example: zklock spark thrift-server start --port 10000 --warehouse /data/warehouse
    """
    click.echo(_thrift(obj, port, warehouse, conf).start(wait=parse_duration(wait)))


@thrift_server.command("stop")
@click.pass_obj
def thrift_stop(obj: Context) -> None:
    """Stop the Spark Thrift server started from this state directory.

    Example: zklock spark thrift-server stop
    """
    click.echo("stopped" if _thrift(obj).stop() else "not running")


@thrift_server.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.pass_obj
def thrift_status(obj: Context, as_json: bool) -> None:
    """Whether the local Spark Thrift server runs: its JDBC URL, pid and jar, and whether
    its lock client is up and how often it was restarted.

    Exit code 1 when it does not run. Example: zklock spark thrift-server status --json
    """
    from zklock.spark.protocol import Field

    st = _thrift(obj).status()
    lc = st["lock_client"]
    client = ("lock client not started yet (the first statement starts it)"
              if not lc["started"] else
              f"lock client {'up, pid ' + str(lc[Field.PID]) if lc[Field.UP] else 'down'},"
              f" restarted {lc[Field.RESTARTS]} time(s)"
              + (f"; last error: {lc[Field.LAST_ERROR]}" if lc.get(Field.LAST_ERROR) else ""))
    echo_status(st, as_json, [f"running, pid {st['pid']}; {st['url']}; jar {st['jar']};"
                              f" log {st['log']}", client])
