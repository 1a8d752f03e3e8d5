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

    @property
    def settings(self) -> Settings:
        return Settings.resolve(self.overrides)

    def manager(self) -> LockManager:
        if self._manager is None:
            self._manager = LockManager(settings=self.settings)
        return self._manager

    def close(self) -> None:
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


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="zklock")
    except KeyboardInterrupt:
        click.echo("zklock: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
