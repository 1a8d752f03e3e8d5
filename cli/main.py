"""The ``zklock`` command: parse arguments, call the library, print.

Every failure becomes one line on stderr and a non-zero exit code; no
traceback reaches the user.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import click
from kazoo.exceptions import KazooException, NoAuthError

from zklock.config import Settings
from zklock.errors import LockNotAcquired, ZkLockError
from zklock.manager import LockManager

from .render import table


class Context:
    """Options shared by every sub-command; the manager is made on first use."""

    def __init__(self, zk: Optional[str], root: Optional[str], state_dir: Optional[str]) -> None:
        self.overrides = {"hosts": zk, "root": root, "state_dir": state_dir}
        self._manager: Optional[LockManager] = None
        self._closers: list[Any] = []

    def on_close(self, func: Any) -> None:
        self._closers.append(func)

    @property
    def settings(self) -> Settings:
        return Settings.resolve(self.overrides)

    def manager(self) -> LockManager:
        if self._manager is None:
            self._manager = LockManager(settings=self.settings)
        return self._manager

    def close(self) -> None:
        for func in self._closers:
            func()
        if self._manager is not None:
            self._manager.close()


class Group(click.Group):
    """Turns zklock and ZooKeeper errors into one clear line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LockNotAcquired as exc:
            click.echo(f"zklock: {exc}", err=True)
            ctx.exit(3)
        except ZkLockError as exc:
            raise click.ClickException(str(exc)) from None
        except NoAuthError:
            raise click.ClickException("ZooKeeper denied access (check credentials)") from None
        except KazooException as exc:
            raise click.ClickException(
                f"ZooKeeper error: {type(exc).__name__} {exc}".strip()) from None
        except OSError as exc:
            raise click.ClickException(str(exc)) from None
        except Exception as exc:
            if type(exc).__module__.startswith(("pyspark", "py4j")):
                raise click.ClickException(spark_error(exc)) from None
            raise


def spark_error(exc: Exception) -> str:
    """Spark's own message, without the JVM stack trace."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    head = [ln for ln in lines if not ln.lstrip().startswith(("at ", "JVM stacktrace"))][:6]
    return "\n".join(head) or type(exc).__name__


def emit(rows: Sequence[dict], as_json: bool, columns: Sequence[str]) -> None:
    if as_json:
        click.echo(json.dumps(list(rows), indent=2, ensure_ascii=False, default=str))
    elif rows:
        click.echo(table(rows, columns))
    else:
        click.echo("(none)")


@click.group(cls=Group)
@click.option("--zk", envvar="ZKLOCK_ZK", help="ZooKeeper hosts (env ZKLOCK_ZK).")
@click.option("--root", envvar="ZKLOCK_ROOT", help="Lock root znode (default /warehouse).")
@click.option("--state-dir", envvar="ZKLOCK_STATE_DIR",
              help="Embedded server state directory (default .zklock).")
@click.option("-v", "--verbose", is_flag=True, help="Log ZooKeeper client chatter too.")
@click.pass_context
def cli(ctx: click.Context, zk: Optional[str], root: Optional[str],
        state_dir: Optional[str], verbose: bool) -> None:
    """zklock: shared and exclusive locks on databases, tables and partitions."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="zklock: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.INFO if verbose else logging.CRITICAL)
    ctx.obj = Context(zk, root, state_dir)
    ctx.call_on_close(ctx.obj.close)


@cli.command()
@click.argument("target", required=False, metavar="[OBJECT]")
@click.option("--extended", is_flag=True, help="Show holder, query and times.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.pass_obj
def show(obj: Context, target: Optional[str], extended: bool, as_json: bool) -> None:
    """Held locks at or below OBJECT (db, db.table, db.table/k=v), or all."""
    records = obj.manager().show(target, extended=extended or as_json)
    rows = [r.to_dict(extended=extended or as_json) for r in records]
    cols = ["object", "mode"]
    if extended:
        cols += ["kind", "user", "host", "pid", "query_id", "acquired_at", "fencing_token"]
    emit(rows, as_json, cols)


@cli.group()
def server() -> None:
    """Run a local ZooKeeper (Debian's zookeeper package) for development and demos."""


def _server(ctx_obj: Context, port: Optional[int] = None):
    from zklock.server import ZkServer

    state = Path(ctx_obj.settings.state_dir)
    if port is None:
        port = 2181
        info = state / "server.json"
        if info.exists():
            try:
                port = int(json.loads(info.read_text())["connect"].rsplit(":", 1)[1])
            except (ValueError, KeyError, IndexError):
                pass
    return ZkServer(state, port=port)


@server.command("start")
@click.option("--port", type=int, default=None, help="Client port (default 2181).")
@click.pass_obj
def server_start(obj: Context, port: Optional[int]) -> None:
    """Start a standalone ZooKeeper on loopback and print its connect string."""
    srv = _server(obj, port)
    connect = srv.start()
    click.echo(connect)


@server.command("stop")
@click.pass_obj
def server_stop(obj: Context) -> None:
    """Stop the ZooKeeper started from this state directory."""
    srv = _server(obj)
    click.echo("stopped" if srv.stop() else "not running")


@server.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def server_status(obj: Context, as_json: bool) -> None:
    """Whether the local ZooKeeper runs, its pid, mode and connect string."""
    st = _server(obj).status()
    if as_json:
        click.echo(json.dumps(st))
    else:
        state = f"running ({st['mode'] or 'unknown mode'}), pid {st['pid']}" if st["running"] \
            else "not running"
        click.echo(f"{state}; connect {st['connect']}; state dir {st['state_dir']}")
    if not st["running"]:
        sys.exit(1)


spark_options = [
    click.option("--conf", "conf", multiple=True, metavar="K=V",
                 help="A Spark setting, as for spark-submit (repeatable)."),
    click.option("--init-sql", type=click.Path(exists=True, dir_okay=False),
                 help="A SQL file run when the Spark session starts (register tables...)."),
]


def with_spark_options(func: Any) -> Any:
    for option in reversed(spark_options):
        func = option(func)
    return func


def _locking_session(obj: Context, conf: Sequence[str], init_sql: Optional[str]) -> Any:
    from zklock.spark import LockingSession
    from zklock.spark.local import local_session, parse_conf

    spark = local_session(parse_conf(conf), init_sql)
    session = LockingSession(spark, **{k: v for k, v in obj.overrides.items() if v})
    obj.on_close(session.close)
    return session


@cli.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@with_spark_options
@click.pass_obj
def explain(obj: Context, sql: str, as_json: bool, conf: Sequence[str],
            init_sql: Optional[str]) -> None:
    """The locks SQL would take, in acquisition order, without taking them.

    Starts a local Spark session to resolve the catalog (about 10 s).
    Example: zklock explain "INSERT INTO sales.orders PARTITION (ds='1') SELECT ..."
    """
    plan = _locking_session(obj, conf, init_sql).explain_locks(sql)
    rows = [{"object": o, "mode": m} for o, m in plan.rows()]
    emit(rows, as_json, ["object", "mode"])
    for note in plan.notes:
        click.echo(f"zklock: note: {note}", err=True)


@cli.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON array.")
@click.option("--limit", type=int, default=1000, show_default=True,
              help="Print at most this many rows.")
@with_spark_options
@click.pass_obj
def sql(obj: Context, sql: str, as_json: bool, limit: int, conf: Sequence[str],
        init_sql: Optional[str]) -> None:
    """Run one statement through a LockingSession and print its result.

    Example: zklock sql "SHOW LOCKS sales.orders EXTENDED"
    """
    df = _locking_session(obj, conf, init_sql).sql(sql)
    columns = list(df.columns)
    if not columns:
        click.echo("OK")
        return
    rows = [r.asDict() for r in df.limit(limit).collect()]
    emit(rows, as_json, columns)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="zklock")
    except KeyboardInterrupt:
        click.echo("zklock: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
