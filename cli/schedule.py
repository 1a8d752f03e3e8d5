"""`zklock schedule ...` and `zklock scheduler ...`: parse, call zklock.scheduler, print."""

from __future__ import annotations

import json
import re
import signal
import threading
from collections.abc import Sequence
from typing import Any, Optional

import click

from zklock.config import parse_duration
from zklock.errors import InvalidArguments

from .app import Context, cli, emit, spark_options, with_spark_options


def _namespace_option(func: Any) -> Any:
    return click.option("--namespace", envvar="ZKLOCK_SCHEDULER_NAMESPACE",
                        help="Scheduler namespace (default: scheduler_namespace,"
                             " i.e. 'default').")(func)


def _settings(obj: Context, namespace: Optional[str]) -> Any:
    settings = obj.settings
    return settings.with_(scheduler_namespace=namespace) if namespace else settings


def _admin(obj: Context, namespace: Optional[str]) -> Any:
    """ScheduledQueries without Spark (nothing to validate)."""
    from zklock.scheduler.admin import ScheduledQueries
    from zklock.scheduler.store import SchedulerStore

    settings = _settings(obj, namespace)
    return ScheduledQueries(SchedulerStore(obj.manager().client, settings), settings)


def _spark_admin(obj: Context, namespace: Optional[str], conf: Sequence[str],
                 init_sql: Optional[str]) -> Any:
    """ScheduledQueries validating statements with a local Spark session's parser."""
    from .app import locking_session

    return locking_session(obj, conf, init_sql).scheduled_queries(namespace)


def _schedule(cron: Optional[str], every: Optional[str], at: Optional[str],
              offset: Optional[str], timezone: Optional[str]) -> Any:
    from zklock.scheduler.schedule import cron as cron_schedule
    from zklock.scheduler.schedule import every as every_schedule

    if bool(cron) == bool(every):
        raise click.UsageError("give exactly one of --cron or --every")
    zone = timezone or "UTC"
    if cron:
        if at or offset:
            raise click.UsageError("--at and --offset go with --every")
        return cron_schedule(cron, zone)
    m = re.fullmatch(r"\s*([0-9]+\s+)?([A-Za-z]+)\s*", every or "")
    if m is None:
        raise click.UsageError(f"--every takes 'N UNIT', e.g. '10 minutes', got {every!r}")
    n = int(m.group(1)) if m.group(1) else 1
    return every_schedule(n, m.group(2), at=at, offset=offset, timezone=zone)


schedule_options = [
    click.option("--cron", help="Cron expression (5 fields, 6 with seconds first, or Quartz)."),
    click.option("--every", help="Interval such as '30 seconds', '10 minutes', 'day'."),
    click.option("--at", help="With --every: time of day or offset, e.g. 02:30."),
    click.option("--offset", help="With --every: offset from the period's start, e.g. 30s."),
    click.option("--timezone", help="IANA timezone of the schedule (default UTC)."),
]


def with_schedule_options(func: Any) -> Any:
    for option in reversed(schedule_options):
        func = option(func)
    return func


def _next(q: Any) -> str:
    """When it runs next, in words (a disabled query has no next execution)."""
    at = q.to_dict()["next_execution"]
    return f"next execution {at}" if at else "no next execution (disabled)"


def _query_rows(queries: Sequence[Any]) -> list[dict]:
    return [q.to_dict() for q in queries]


@cli.group()
def schedule() -> None:
    """Scheduled SQL queries: create, alter, drop, list, show, executions, run-now.

    Example: zklock schedule list --json
    """


@schedule.command("create")
@click.argument("name")
@click.argument("statement")
@with_schedule_options
@click.option("--executed-as", help="Run as this user (needs scheduler_impersonation).")
@click.option("--disabled", is_flag=True, help="Create it disabled.")
@_namespace_option
@with_spark_options
@click.pass_obj
def schedule_create(obj: Context, name: str, statement: str, cron: Optional[str],
                    every: Optional[str], at: Optional[str], offset: Optional[str],
                    timezone: Optional[str], executed_as: Optional[str], disabled: bool,
                    namespace: Optional[str], conf: Sequence[str],
                    init_sql: Optional[str]) -> None:
    """Create a scheduled query (admins only); the statement is checked with Spark's parser.

    Example: zklock schedule create compact_orders --cron '0 3 * * *' \\
      "INSERT OVERWRITE TABLE sales.orders_c SELECT * FROM sales.orders"
    """
    from zklock.scheduler.ddl import CreateScheduledQuery
    from zklock.scheduler.model import check_name

    ddl = CreateScheduledQuery(check_name(name), _schedule(cron, every, at, offset, timezone),
                               statement.strip().rstrip(";"), 0, executed_as, not disabled)
    _admin(obj, namespace).require_creator()  # before Spark starts (about 10 s)
    q = _spark_admin(obj, namespace, conf, init_sql).create(ddl)
    click.echo(f"created {q.name}; {_next(q)}")


@schedule.command("alter")
@click.argument("name")
@with_schedule_options
@click.option("--executed-as", help="Run as this user from now on.")
@click.option("--enable", is_flag=True, help="Enable it.")
@click.option("--disable", is_flag=True, help="Disable it.")
@click.option("--defined-as", help="Replace its statement (checked with Spark's parser).")
@click.option("--execute", is_flag=True, help="Run it now (run-now).")
@_namespace_option
@with_spark_options
@click.pass_obj
def schedule_alter(obj: Context, name: str, cron: Optional[str], every: Optional[str],
                   at: Optional[str], offset: Optional[str], timezone: Optional[str],
                   executed_as: Optional[str], enable: bool, disable: bool,
                   defined_as: Optional[str], execute: bool, namespace: Optional[str],
                   conf: Sequence[str], init_sql: Optional[str]) -> None:
    """Change exactly one thing of a scheduled query (owner or admin).

    Example: zklock schedule alter compact_orders --cron '30 3 * * *' --timezone Europe/Paris
    """
    from zklock.scheduler.ddl import AlterScheduledQuery
    from zklock.scheduler.model import check_name

    flags = [a for a, on in (("enable", enable), ("disable", disable), ("execute", execute))
             if on]
    action = flags[0] if flags else None
    changes = [x for x in (cron or every, executed_as, defined_as, *flags) if x]
    if len(changes) != 1:
        raise click.UsageError("give exactly one change: --cron/--every, --executed-as,"
                               " --enable, --disable, --defined-as or --execute")
    qname = check_name(name)
    if cron or every:
        ddl = AlterScheduledQuery(qname, "schedule",
                                  schedule=_schedule(cron, every, at, offset, timezone))
    elif executed_as:
        ddl = AlterScheduledQuery(qname, "executed_as", executed_as=executed_as)
    elif defined_as:
        ddl = AlterScheduledQuery(qname, "defined_as", statement=defined_as.strip().rstrip(";"))
    else:
        ddl = AlterScheduledQuery(qname, action or "")
    admin = _spark_admin(obj, namespace, conf, init_sql) if defined_as else \
        _admin(obj, namespace)
    q = admin.alter(ddl)
    click.echo(f"altered {q.name} ({ddl.action}); {_next(q)}")


@schedule.command("drop")
@click.argument("name")
@_namespace_option
@click.pass_obj
def schedule_drop(obj: Context, name: str, namespace: Optional[str]) -> None:
    """Drop a scheduled query (owner or admin); a running execution finishes.

    Example: zklock schedule drop compact_orders
    """
    _admin(obj, namespace).drop(name)
    click.echo(f"dropped {name.lower()}")


@schedule.command("run-now")
@click.argument("name")
@_namespace_option
@click.pass_obj
def schedule_run_now(obj: Context, name: str, namespace: Optional[str]) -> None:
    """Run a scheduled query now (ALTER SCHEDULED QUERY ... EXECUTE).

    Example: zklock schedule run-now compact_orders
    """
    admin = _admin(obj, namespace)
    admin.run_now(name)
    click.echo(f"requested a run of {name.lower()}")
    if not admin.store.live_executors():
        click.echo(f"zklock: warning: no scheduler process runs in namespace"
                   f" {admin.store.namespace!r}: the run starts when one does"
                   " (zklock scheduler run)", err=True)


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@_namespace_option
@click.pass_obj
def schedule_list(obj: Context, as_json: bool, namespace: Optional[str]) -> None:
    """Scheduled queries of the namespace, with their next execution.

    Example: zklock schedule list --json
    """
    rows = _query_rows(_admin(obj, namespace).list())
    emit(rows, as_json, ["schedule_name", "enabled", "schedule", "user", "next_execution",
                         "active_execution_id"])


@schedule.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@_namespace_option
@click.pass_obj
def schedule_show(obj: Context, name: str, as_json: bool, namespace: Optional[str]) -> None:
    """Everything about one scheduled query.

    Example: zklock schedule show compact_orders
    """
    row = _admin(obj, namespace).get(name).to_dict()
    if as_json:
        click.echo(json.dumps(row, indent=2, default=str))
        return
    width = max(len(k) for k in row)
    for key, value in row.items():
        click.echo(f"{key:<{width}}  {'' if value is None else value}")


@schedule.command("executions")
@click.argument("name", required=False)
@click.option("--limit", type=int, default=50, show_default=True,
              help="The most recent N executions.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@_namespace_option
@click.pass_obj
def schedule_executions(obj: Context, name: Optional[str], limit: int, as_json: bool,
                        namespace: Optional[str]) -> None:
    """Executions of one scheduled query (or all), oldest first.

    Example: zklock schedule executions compact_orders --limit 10
    """
    rows = [e.to_dict() for e in _admin(obj, namespace).executions(name, limit=limit)]
    emit(rows, as_json, ["scheduled_execution_id", "state", "trigger_time", "start_time",
                         "end_time", "executor", "error_message"])


@cli.group()
def scheduler() -> None:
    """Scheduler processes: run one, or see who leads and what runs.

    Example: zklock scheduler status
    """


@scheduler.command("run")
@_namespace_option
@click.option("--executors", type=int, default=None,
              help="Executions this process runs at once (default scheduler_pool_size, 2);"
                   " 0 makes a leader candidate that runs nothing itself.")
@click.option("--quiet-period", default=None,
              help="Launch nothing for this long after start, e.g. 60s; 0 turns it off.")
@click.option("--metrics-port", type=int, default=None,
              help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics.")
@with_spark_options
@click.pass_obj
def scheduler_run(obj: Context, namespace: Optional[str], executors: Optional[int],
                  quiet_period: Optional[str], metrics_port: Optional[int],
                  conf: Sequence[str], init_sql: Optional[str]) -> None:
    """Run a scheduler process (executor and leader candidate) until SIGTERM or Ctrl-C.

    Example: zklock scheduler run --executors 4 --quiet-period 0 --conf spark.master=local[4]
    """
    from zklock.cli.local import local_session, parse_conf, run_init_sql
    from zklock.scheduler.runner import SparkRunner
    from zklock.scheduler.service import SchedulerService

    from zklock.spark import enforce

    if executors is not None and executors < 0:
        raise InvalidArguments("--executors must be 0 or more")
    quiet = parse_duration(quiet_period) if quiet_period is not None else None
    settings = _settings(obj, namespace)
    if metrics_port:
        from zklock.observe import metrics

        metrics.serve(metrics_port, settings.metrics_bind)
    spark = local_session(parse_conf(conf), app_name="zklock-scheduler")
    engine = enforce(spark, obj.manager())  # locks what the scheduler's Spark runs
    run_init_sql(spark, init_sql)
    client = obj.manager().client
    runner = SparkRunner(spark, settings, client)

    def report(leading: bool) -> None:
        click.echo(f"zklock: {'now leading' if leading else 'lost leadership of'} namespace"
                   f" {settings.scheduler_namespace}", err=True)

    service = SchedulerService(settings, runner, client=client,
                               pool_size=executors,
                               quiet_period=quiet, on_leadership=report)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    service.start()
    click.echo(f"scheduler {service.id} running in namespace {settings.scheduler_namespace}"
               f" (pool {service.info.pool_size})", err=True)
    try:
        while not done.wait(1.0):
            pass
    finally:
        service.stop()
        runner.close()
        engine.close()
    click.echo(f"scheduler {service.id} stopped", err=True)


@scheduler.command("status")
@_namespace_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.pass_obj
def scheduler_status(obj: Context, namespace: Optional[str], as_json: bool) -> None:
    """The leader, the live scheduler processes and what each is running.

    Example: zklock scheduler status --json
    """
    from zklock.scheduler.service import describe_status
    from zklock.scheduler.store import SchedulerStore

    status = describe_status(SchedulerStore(obj.manager().client,
                                            _settings(obj, namespace)))
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    click.echo(f"namespace {status['namespace']}; leader {status['leader'] or '(none)'}")
    rows = [{**r, "leader": "yes" if r["leader"] else "",
             "running": " ".join(r["running"]) or "-"} for r in status["executors"]]
    emit(rows, False, ["executor", "host", "pid", "leader", "pool_size", "running"])


__all__ = ["schedule", "scheduler", "spark_options"]
