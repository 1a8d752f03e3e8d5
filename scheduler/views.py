"""Rows of sysdb.scheduled_queries and sysdb.scheduled_executions, across all namespaces.

Column names follow Hive's sysdb tables, plus zklock's own (timezone,
owner, merged_triggers, fencing_token...). Kept apart from Spark: the
session turns these rows into DataFrames.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Optional

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zklock.config import Settings

from .store import SchedulerStore

QUERY_COLUMNS = (
    "schedule_name STRING, namespace STRING, enabled BOOLEAN, schedule STRING,"
    " timezone STRING, user STRING, owner STRING, query STRING, next_execution TIMESTAMP,"
    " active_execution_id STRING")
EXECUTION_COLUMNS = (
    "scheduled_execution_id STRING, schedule_name STRING, namespace STRING,"
    " trigger_time TIMESTAMP, merged_triggers INT, executor STRING, executor_query_id STRING,"
    " user STRING, state STRING, start_time TIMESTAMP, end_time TIMESTAMP,"
    " last_update_time TIMESTAMP, next_deadline TIMESTAMP, error_message STRING,"
    " elapsed DOUBLE, fencing_token BIGINT")


def _ts(ms: Optional[int]) -> Optional[dt.datetime]:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


def namespaces(client: KazooClient, settings: Settings) -> list[str]:
    try:
        return sorted(client.get_children(settings.scheduler_root))
    except NoNodeError:
        return []


def scheduled_queries_rows(client: KazooClient, settings: Settings) -> tuple[list, str]:
    rows: list[tuple[Any, ...]] = []
    for ns in namespaces(client, settings):
        for q in SchedulerStore(client, settings, ns).list_queries():
            rows.append((q.name, q.namespace, q.enabled, q.parsed_schedule.describe(),
                         q.timezone, q.executed_as, q.owner, q.query,
                         _ts(q.next_execution) if q.enabled else None, q.active_execution))
    return rows, QUERY_COLUMNS


def scheduled_executions_rows(client: KazooClient, settings: Settings) -> tuple[list, str]:
    rows: list[tuple[Any, ...]] = []
    for ns in namespaces(client, settings):
        for e in SchedulerStore(client, settings, ns).list_executions():
            rows.append((e.id, e.query_name, e.namespace, _ts(e.trigger_time), e.merged,
                         e.executor, e.executor_query_id, e.executed_as, e.state,
                         _ts(e.start), _ts(e.end), _ts(e.last_update), _ts(e.next_deadline),
                         e.error_message, e.elapsed_s, e.fencing_token))
    return rows, EXECUTION_COLUMNS
