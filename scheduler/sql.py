"""What the scheduler adds to a LockingSession: its DDL, its sysdb views, scheduled_queries().

The Spark layer offers hooks (:mod:`zklock.spark.registry`) and imports nothing from the
scheduler; :func:`register` plugs the scheduler in. It runs when this package is
imported and, through the ``zklock.spark.plugins`` entry point in setup.cfg, when a
LockingSession is first built, so ``CREATE SCHEDULED QUERY`` works in any session.
"""

from __future__ import annotations

from typing import Any, Optional

from zklock.spark import registry

from .admin import ScheduledQueries
from .ddl import CreateScheduledQuery, is_scheduled_ddl, parse_scheduled_ddl
from .store import SchedulerStore
from .views import scheduled_executions_rows, scheduled_queries_rows

RESULT_COLUMNS = "schedule_name STRING, result STRING, next_execution STRING"


def scheduled_queries(session: Any, namespace: Optional[str] = None) -> ScheduledQueries:
    """The :class:`~zklock.scheduler.admin.ScheduledQueries` of a namespace, as the
    session's user, validating statements with the session's Spark parser."""
    store = SchedulerStore(session.manager.client, session.settings, namespace)
    return ScheduledQueries(store, session.settings, validate=session.validate_statement)


def run_ddl(session: Any, sql: str) -> Any:
    """CREATE/ALTER/DROP SCHEDULED QUERY: one row saying what was done."""
    ddl = parse_scheduled_ddl(sql)
    q = scheduled_queries(session).apply(ddl)
    verb = "created" if isinstance(ddl, CreateScheduledQuery) else (
        "dropped" if q is None else f"altered ({ddl.action})")
    nxt = q.to_dict()["next_execution"] if q is not None else None
    return session.spark.createDataFrame([(ddl.name, verb, nxt)], RESULT_COLUMNS)


def _queries_view(session: Any) -> Any:
    rows, schema = scheduled_queries_rows(session.manager.client, session.settings)
    return session.spark.createDataFrame(rows, schema)


def _executions_view(session: Any) -> Any:
    rows, schema = scheduled_executions_rows(session.manager.client, session.settings)
    return session.spark.createDataFrame(rows, schema)


def register() -> None:
    """Plug the scheduler into every LockingSession (idempotent)."""
    registry.register_statement(registry.StatementHandler(
        "scheduled query DDL", recognises=is_scheduled_ddl, run=run_ddl))
    registry.register_view("scheduled_queries", _queries_view)
    registry.register_view("scheduled_executions", _executions_view)
    registry.register_session_method("scheduled_queries", scheduled_queries)
