"""The ``zklock`` click group and what every command shares: options, context, output.

:mod:`.main` (locks, leases, the server) and :mod:`.schedule` (scheduled queries) add
their commands to :data:`cli`; both import this module and neither imports the other's
internals. Every failure becomes one line on stderr and a non-zero exit code; no traceback
reaches the user.
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

    def __init__(self, zk: Optional[str], root: Optional[str], state_dir: Optional[str],
                 verbose: bool = False) -> None:
        self.overrides = {"hosts": zk, "root": root, "state_dir": state_dir}
        self.verbose = verbose
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

    def main(self, args: Any = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Every error is one line on stderr starting ``zklock:``, with the exit codes the
        help lists: 1 error, 2 usage, 3 lock not acquired (click would print a usage error
        in three lines, and other errors after ``Error:``)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "zklock"
            click.echo(f"zklock: {one_line(exc.format_message())} (see {where} --help)",
                       err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"zklock: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("zklock: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

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
    """Spark's own message in one line, without the JVM stack trace."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    head = [ln for ln in lines if not ln.startswith(("at ", "JVM stacktrace"))]
    return head[0] if head else type(exc).__name__


def one_line(text: str) -> str:
    """A message on one line: its lines joined, blank ones dropped."""
    return "; ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())


def echo_status(st: dict, as_json: bool, running: Sequence[str]) -> None:
    """A local service's ``status`` (LocalService.status): JSON, or ``running`` lines when
    it runs, else where its state is; exit code 1 when it does not run."""
    if as_json:
        click.echo(json.dumps(st))
    elif st["running"]:
        for line in running:
            click.echo(line)
    else:
        click.echo(f"not running; state dir {st['state_dir']}")
    if not st["running"]:
        sys.exit(1)


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
@click.option("-v", "--verbose", is_flag=True,
              help="Log ZooKeeper client chatter too, and name the file Spark's log goes to"
                   " (<state dir>/spark.log).")
@click.pass_context
def cli(ctx: click.Context, zk: Optional[str], root: Optional[str],
        state_dir: Optional[str], verbose: bool) -> None:
    """zklock: shared and exclusive locks on databases, tables and partitions.

    Exit codes: 0 ok, 1 error, 2 usage error, 3 lock not acquired. Durations take
    500ms, 30s, 5m, 1h or 2d. Shell completion: eval "$(zklock completion bash)".

    Example: zklock --zk zk1:2181 show sales.orders --extended
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="zklock: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.INFO if verbose else logging.CRITICAL)
    ctx.obj = Context(zk, root, state_dir, verbose)
    ctx.call_on_close(ctx.obj.close)


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


def locking_session(obj: Context, conf: Sequence[str], init_sql: Optional[str]) -> Any:
    from zklock.cli.local import local_session, parse_conf, run_init_sql

    from zklock.spark import LockingSession

    log = Path(obj.settings.state_dir) / "spark.log"
    if obj.verbose:
        click.echo(f"zklock: Spark's log: {log.resolve()}", err=True)
    spark = local_session(parse_conf(conf), log=log)
    # PySpark logs a failed statement's query context from Python too (from 4.0 on, through
    # pyspark.logger, which 3.5 lacks): to the same file
    handler = logging.FileHandler(log)
    loggers = [logging.getLogger("py4j")]
    try:
        from pyspark.logger import PySparkLogger

        loggers.append(PySparkLogger.getLogger("SQLQueryContextLogger"))
    except ImportError:
        pass
    for logger in loggers:
        logger.handlers = [handler]
        logger.propagate = False
    session = LockingSession(spark, **{k: v for k, v in obj.overrides.items() if v})
    obj.on_close(session.close)
    run_init_sql(session, init_sql)
    return session
