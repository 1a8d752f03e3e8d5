"""SparkRunner: runs a scheduled statement through a LockingSession, under its job group.

Scheduled work takes the same locks as any pipeline: the statement goes
through :class:`zklock.spark.LockingSession`, as the execution's user (the
user is what the lock nodes record). It runs under a Spark job group named
after the execution, so a fenced run's jobs can be cancelled by name. A
query (a SELECT) is run to the end into Spark's ``noop`` sink: nothing is
collected into the driver.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Protocol

from kazoo.client import KazooClient

from zklock.config import Settings

from .model import Execution


class Runner(Protocol):
    """What an executor needs to run statements; :class:`SparkRunner` is the real one."""

    def run(self, execution: Execution, group: str) -> None: ...

    def cancel(self, group: str) -> None: ...

    def validate(self, statement: str) -> None: ...


class SparkRunner:
    """One LockingSession per (worker thread, user), sharing the process's ZooKeeper session."""

    def __init__(self, spark: Any, settings: Settings, client: Optional[KazooClient] = None
                 ) -> None:
        self.spark = getattr(spark, "spark", spark)  # a LockingSession's SparkSession
        self.settings = settings
        self.client = client
        self._sessions: dict[tuple[int, str], Any] = {}
        self._lock = threading.Lock()

    def _session(self, user: str) -> Any:
        from zklock.manager import LockManager
        from zklock.spark import LockingSession

        key = (threading.get_ident(), user)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                settings = self.settings.with_(user=user)
                manager = LockManager(client=self.client, settings=settings) \
                    if self.client is not None else None
                session = LockingSession(self._copy(), manager=manager, user=user)
                self._sessions[key] = session
            return session

    def _copy(self) -> Any:
        """A SparkSession of its own for one executor thread and user: a LockingSession is
        the lock client of every statement its SparkSession runs. A copy of the runner's
        (Spark's ``cloneSession``, public in the JVM though Scala keeps it to Spark's own
        packages): scheduled queries see the functions, temporary views and settings the
        scheduler's session had, as they would in that session (``newSession`` drops them)."""
        from pyspark.sql import SparkSession

        return SparkSession(self.spark.sparkContext, self.spark._jsparkSession.cloneSession())

    def run(self, execution: Execution, group: str) -> None:
        from zklock.spark.locked_statement import query_id_scope  # pyspark: only where Spark runs

        sc = self.spark.sparkContext
        sc.setJobGroup(group, f"zklock scheduled query {execution.query_name}"
                              f" ({execution.id})", interruptOnCancel=True)
        try:
            # the lock nodes record the execution's executor_query_id, so
            # sysdb.scheduled_executions joins SHOW LOCKS EXTENDED on query_id
            with query_id_scope(self.spark, execution.executor_query_id or group):
                df = self._session(execution.executed_as or self.settings.effective_user).sql(
                    execution.query)
                if df.columns and not _is_command_result(df):
                    df.write.format("noop").mode("overwrite").save()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
            sc.setLocalProperty("spark.job.interruptOnCancel", None)

    def cancel(self, group: str) -> None:
        try:
            self.spark.sparkContext.cancelJobGroup(group)
        except Exception:  # Spark already stopped: nothing left to cancel
            pass

    def validate(self, statement: str) -> None:
        """Spark's own parser; raises its ParseException, which points at the bad token."""
        self.spark._jsparkSession.sessionState().sqlParser().parsePlan(statement)

    def close(self) -> None:
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()


def _is_command_result(df: Any) -> bool:
    """A command already ran inside ``sql()``; its result is a local relation."""
    try:
        plan = df._jdf.queryExecution().logical()
        return plan.getClass().getSimpleName() in ("LocalRelation", "CommandResult")
    except Exception:
        return False
