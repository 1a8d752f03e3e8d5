"""LockingSession: a SparkSession whose every statement takes Hive's locks implicitly.

Wrap once, then use it as the SparkSession it wraps::

    spark = LockingSession(SparkSession.builder.getOrCreate())
    spark.sql("INSERT INTO sales.orders PARTITION (ds='2024-01-01') SELECT ...")

Commands (what Spark executes eagerly in ``sql()``) hold their locks for
exactly the call. Queries are lazy: the DataFrames the session returns lock
for the duration of each action. Anything not overridden here passes
through to the wrapped SparkSession.

The statement is parsed and analyzed once: the analyzed plan that gave the
locks is the one Spark executes. When the grant came only after waiting,
the statement is analyzed again under the locks (the catalog may have
changed meanwhile) and, if it now needs locks it does not hold, the whole
request is retried.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime as dt
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any, Optional

from ..config import HIVE_ALIASES, SETTINGS, Settings, parse_bool, parse_duration
from ..errors import InvalidArguments, LeaseNotFound, LockNotAcquired
from ..listing import LockRecord, hive_rows
from ..lockrequest import LockTarget, normalize
from ..lockset import LockSet
from ..manager import LockManager
from ..mode import Mode
from ..objects import LockObject
from . import registry
from .catalog import LockingCatalog
from .commit import commit_isolation
from .dataframe import LockingDataFrame, LockingReader, adopt, adopting
from .extensions import (
    DropForceLease,
    ExplainLocks,
    LockTable,
    SetZkLock,
    ShowLease,
    ShowLocks,
    Target,
    UnlockTable,
    parse_extension,
)
from .planner import LockPlan, LockPlanner
from .statement import LockedStatement, covered, in_locked_statement, new_query_id

#: Columns of SHOW LOCKS, then the extra ones of SHOW LOCKS EXTENDED and sysdb.locks.
LOCK_COLUMNS = "object STRING, mode STRING"
EXTENDED_COLUMNS = (LOCK_COLUMNS + ", user STRING, host STRING, pid BIGINT, query_id STRING,"
                    " query STRING, acquired_at TIMESTAMP, lock_type STRING,"
                    " lease_id BIGINT, end_at TIMESTAMP, fencing_token BIGINT")
EXPLAIN_COLUMNS = "object STRING, mode STRING"
#: SHOW LOCKS with show_locks_format=hive: Hive's two columns (EXTENDED lines in the first)
HIVE_LOCK_COLUMNS = "tab_name STRING, mode STRING"
LEASE_COLUMNS = ("lease_id BIGINT, holder STRING, user STRING, objects STRING,"
                 " start_utc TIMESTAMP, end_utc TIMESTAMP")
#: LOCK TABLE without FOR lasts this long (renew it, or UNLOCK it sooner).
DEFAULT_LEASE_S = 3600.0
SYSTEM_DATABASE = "sysdb"
#: Session-level keys accepted by ``SET zklock.<key>=<value>``.
SESSION_KEYS = {
    "zklock.support.concurrency": "support_concurrency",
    "zklock.lock.retries": "retries",
    "zklock.lock.retryinterval": "retry_interval",
    "zklock.unknown.statements": "unknown_statements",
    "zklock.showlocks.format": "show_locks_format",
    # Hive's names for the same session settings
    "hive.support.concurrency": "support_concurrency",
    "hive.lock.numretries": "retries",
    "hive.lock.sleep.between.retries": "retry_interval",
}
#: Hive settings that choose the ZooKeeper ensemble: fixed for a session's life.
STATIC_HIVE_KEYS = frozenset({"hive.zookeeper.quorum", "hive.zookeeper.namespace"})
REPLANS = 5


class LockingSession:
    """A SparkSession wrapper that takes S/X locks for every statement and DataFrame action."""

    def __init__(self, spark: Any, manager: Optional[LockManager] = None,
                 **settings: Any) -> None:
        if isinstance(spark, LockingSession):
            spark = spark._spark
        conf = {}
        for key in [s.spark for s in SETTINGS if s.spark] + list(HIVE_ALIASES):
            value = spark.conf.get(key, None)
            if value is not None:
                conf[key] = value
        self._spark = spark
        self.settings = Settings.resolve(settings, spark_conf=conf)
        self._manager = manager
        self._own_manager = manager is None
        self._manager_lock = threading.Lock()
        self._planner = LockPlanner(spark,
                                    unknown_statements=self.settings.unknown_statements)
        self._concurrency = self.settings.support_concurrency
        self._retries = self.settings.retries
        self._retry_interval = self.settings.retry_interval
        self._show_format = self.settings.show_locks_format
        # on even while concurrency is off: SET zklock.support.concurrency may turn it on
        self._commits = commit_isolation(spark) if self.settings.isolate_commits else None
        registry.load_plugins()
        self._system_views: dict[str, Callable[[], Any]] = {"locks": self._locks_view}
        for name, build in registry.views().items():
            self._system_views[name] = functools.partial(build, self)

    # ---- plumbing ---------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        method = registry.session_methods().get(name)
        if method is not None:  # offered by a layer above (session.scheduled_queries())
            return functools.partial(method, self)
        return getattr(self._spark, name)

    def __repr__(self) -> str:
        return f"LockingSession({self._spark!r}, concurrency={self._concurrency})"

    @property
    def spark(self) -> Any:
        """The wrapped SparkSession: the explicit way to run something without zklock."""
        return self._spark

    @property
    def planner(self) -> LockPlanner:
        """The lock planner of this session (EXPLAIN LOCKS uses it; so do the writers)."""
        return self._planner

    @property
    def catalog(self) -> LockingCatalog:
        """``spark.catalog`` whose mutating methods lock (or are refused)."""
        return LockingCatalog(self)

    @property
    def readStream(self) -> Any:
        """``spark.readStream``: its DataFrames are lock-aware (their streaming writes are
        refused: a query that writes forever cannot hold a statement's locks)."""
        return adopting(self._spark.readStream, self)

    def newSession(self) -> LockingSession:
        """A new SparkSession (own SQL conf, temp views, functions) that locks like this one,
        sharing its LockManager."""
        overrides = {f.name: getattr(self.settings, f.name)
                     for f in dataclasses.fields(self.settings) if f.name != "extra"}
        overrides.update(support_concurrency=self._concurrency, retries=self._retries,
                         retry_interval=self._retry_interval,
                         show_locks_format=self._show_format,
                         unknown_statements=self._planner.unknown_statements)
        return LockingSession(self._spark.newSession(), manager=self.manager, **overrides)

    @property
    def manager(self) -> LockManager:
        """The LockManager (connected on first use when the session built it)."""
        with self._manager_lock:
            if self._manager is None:
                self._manager = LockManager(settings=self.settings)
                # close the ZooKeeper session cleanly at exit: its last async release is sent
                # and its ephemeral nodes go at once instead of after the session timeout
                atexit.register(self.close)
            return self._manager

    @property
    def support_concurrency(self) -> bool:
        return self._concurrency

    def close(self) -> None:
        """Close the LockManager if this session built it; the SparkSession stays up."""
        with self._manager_lock:
            if self._own_manager and self._manager is not None:
                self._manager.close()
                self._manager = None

    def stop(self) -> None:
        self.close()
        self._spark.stop()

    def __enter__(self) -> LockingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the SparkSession surface -------------------------------------------------
    def sql(self, sqlQuery: str, args: Any = None, **kwargs: Any) -> LockingDataFrame:
        """Run one statement: zklock's own SQL, or Spark SQL under the locks it needs."""
        if args:
            raise InvalidArguments("LockingSession.sql does not take parameter markers (args);"
                                   " use {name} formatting with keyword arguments instead")
        if kwargs:
            from pyspark.sql.sql_formatter import SQLStringFormatter

            formatter = SQLStringFormatter(self._spark)
            try:
                return self.sql(formatter.format(sqlQuery, **kwargs))
            finally:
                formatter.clear()
        handler = self._registered_statement(sqlQuery)
        if handler is not None:
            return adopt(handler.run(self, sqlQuery), self)
        ext = parse_extension(sqlQuery)
        if ext is not None:
            return self._extension(ext)
        self.refresh_system_views(sqlQuery)
        if not self._concurrency:
            return adopt(self._spark.sql(sqlQuery), self)
        plan = self._planner.plan_sql(sqlQuery, lazy_queries=True)
        if not plan.is_command or not plan.targets:
            return adopt(self._execute(plan), self)
        return adopt(self._run_command(sqlQuery, plan), self)

    def table(self, tableName: str) -> LockingDataFrame:
        self.refresh_system_views(tableName)
        return adopt(self._spark.table(tableName), self)

    @property
    def read(self) -> LockingReader:
        return LockingReader(self)

    def createDataFrame(self, *args: Any, **kwargs: Any) -> LockingDataFrame:
        return adopt(self._spark.createDataFrame(*args, **kwargs), self)

    def range(self, *args: Any, **kwargs: Any) -> LockingDataFrame:
        return adopt(self._spark.range(*args, **kwargs), self)

    # ---- zklock's own surface -----------------------------------------------------
    def explain_locks(self, sql: str) -> LockPlan:
        """The locks ``sql`` would take, in acquisition order, without taking anything."""
        if parse_extension(sql) is not None:
            return LockPlan("zklock", [])
        return self._planner.plan_parsed(self._planner.jvm.parse(sql), strict=False)

    def show_locks(self, obj: Optional[LockObject] = None, extended: bool = False) -> Any:
        records = self.manager.show(obj, extended=extended)
        rows = [_lock_row(r, extended) for r in records]
        schema = EXTENDED_COLUMNS if extended else LOCK_COLUMNS
        return adopt(self._spark.createDataFrame(rows, schema), self)

    def register_system_view(self, name: str, build: Callable[[], Any]) -> None:
        """Serve ``sysdb.<name>`` from ``build()`` (a DataFrame), refreshed on every reference."""
        self._system_views[name.lower()] = build

    # ---- running statements ------------------------------------------------------
    def _execute(self, plan: LockPlan) -> Any:
        if plan.text is not None:  # a script or EXECUTE IMMEDIATE: Spark drives it
            return self._spark.sql(plan.text)
        if plan.qe is not None and self._planner.walker is not None:
            return self._planner.jvm.run_query_execution(self._planner.walker, plan.qe)
        return self._planner.jvm.run(plan.analyzed if plan.analyzed is not None
                                     else plan.parsed)

    def _acquire(self, targets: list[LockTarget], query_id: str, query: str) -> LockSet:
        return self.manager.acquire(targets, query_id=query_id, query=query,
                                    retries=self._retries, retry_interval=self._retry_interval)

    def commit_staging(self, lockset: LockSet) -> Any:
        """Around a locked statement: the commit staging of the tables it X-locked."""
        if self._commits is None:
            return nullcontext()
        return self._commits.writing([h.target.obj for h in lockset.held
                                      if h.target.mode.value == "X"])

    def _run_command(self, sql: str, plan: LockPlan) -> Any:
        for _ in range(REPLANS):
            query_id = new_query_id()
            lockset = self._acquire(plan.targets, query_id, sql)
            try:
                if lockset.attempts > 1:
                    fresh = self._planner.plan_parsed(plan.parsed, text=plan.text)
                    if not covered(lockset, fresh.targets):
                        plan = fresh
                        continue
                    plan = fresh
                statement = LockedStatement(self._spark, lockset, query_id, sql,
                                            self._planner.walker)
                with self.commit_staging(lockset):
                    return statement.run(lambda p=plan: self._execute(p))
            finally:
                lockset.release(wait=False)
        raise LockNotAcquired(f"the catalog kept changing the locks this statement needs"
                              f" ({REPLANS} re-plans): {sql[:200]}")

    def run_read(self, df: Any, action: str, fn: Callable[[], Any]) -> Any:
        if not self._concurrency or in_locked_statement():
            return fn()
        targets = self._planner.plan_dataframe(df)
        if not targets:
            return fn()
        query_id = new_query_id()
        what = _describe(action, targets)
        lockset = self._acquire(targets, query_id, what)
        try:
            return LockedStatement(self._spark, lockset, query_id, what,
                                   self._planner.walker).run(fn)
        finally:
            lockset.release(wait=False)

    def open_read(self, df: Any, action: str) -> _HeldRead:
        return _HeldRead(self, df, action)

    def run_write(self, df: Any, table: Optional[str], partition: Optional[dict],
                  what: str, fn: Callable[[], Any], paths: tuple[str, ...] = ()) -> Any:
        """Run a DataFrame write ``fn``: X on ``table`` (or its static ``partition``
        prefix) and on every catalog table stored at or around ``paths``, S on what
        ``df`` reads."""
        if not self._concurrency or in_locked_statement():
            return fn()
        if table is not None:
            targets = self._planner.plan_table_write(table, df, partition)
        else:
            targets = self._planner.plan_dataframe(df)
        written = [(obj, Mode.EXCLUSIVE) for path in paths
                   for obj in self._planner.tables_at(path)]
        if written:
            targets = normalize([(t.obj, t.mode) for t in targets] + written)
        return self.run_locked(targets, what, fn)

    def run_locked(self, targets: list[LockTarget], what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` holding ``targets`` (a locked write or catalog call): all-or-none,
        its own job tag and fencing token, cancelled and LockLost if the set is lost."""
        if not self._concurrency or in_locked_statement() or not targets:
            return fn()
        query_id = new_query_id()
        lockset = self._acquire(targets, query_id, what)
        try:
            with self.commit_staging(lockset):
                return LockedStatement(self._spark, lockset, query_id, what,
                                       self._planner.walker).run(fn)
        finally:
            lockset.release(wait=False)

    # ---- zklock SQL -------------------------------------------------------------
    def _extension(self, ext: Any) -> Any:
        if isinstance(ext, ShowLocks):
            obj = self._show_target(ext.target)
            if self._show_format == "hive":
                records = self.manager.show(obj, extended=ext.extended)
                return self._rows(hive_rows(records, ext.extended), HIVE_LOCK_COLUMNS)
            return self.show_locks(obj, extended=ext.extended)
        if isinstance(ext, ExplainLocks):
            plan = self.explain_locks(ext.statement)
            return adopt(self._spark.createDataFrame(plan.rows(), EXPLAIN_COLUMNS), self)
        if isinstance(ext, SetZkLock):
            return self._set(ext)
        if isinstance(ext, LockTable):
            obj = self._show_target(ext.target, strict=True)
            seconds = ext.seconds if ext.seconds is not None else DEFAULT_LEASE_S
            lease_id = self.manager.grab_lease([(obj, ext.mode)], duration_s=seconds,
                                               holder=self.settings.effective_user)
            return self._rows([(lease_id, obj.name, ext.mode)],
                              "lease_id BIGINT, object STRING, mode STRING")
        if isinstance(ext, UnlockTable):
            obj = self._show_target(ext.target, strict=True)
            mine = [x for x in self.manager.list_lease([obj])
                    if x.holder == self.settings.effective_user and obj.name in x.leaves]
            if not mine:
                raise LeaseNotFound(f"no lease of {self.settings.effective_user} on {obj.name}")
            for x in mine:
                self.manager.drop_lease(x.lease_id, [obj])
            return self._rows([(x.lease_id, obj.name) for x in mine],
                              "lease_id BIGINT, object STRING")
        if isinstance(ext, ShowLease):
            objs = [self._show_target(t) for t in ext.targets] or None
            rows = [(x.lease_id, x.holder, x.user, " ".join(f"{o}:{m.upper()}"
                                                             for o, m in x.objects),
                     _ts(x.start_ms), _ts(x.end_ms)) for x in self.manager.list_lease(objs)]
            return self._rows(rows, LEASE_COLUMNS)
        if isinstance(ext, DropForceLease):
            objs = [self._show_target(t, strict=True) for t in ext.targets]
            n = self.manager.force_drop_lease(objs)
            return self._rows([(n,)], "dropped_nodes BIGINT")
        raise InvalidArguments(f"unsupported statement {ext!r}")

    def _rows(self, rows: list[tuple], schema: str) -> Any:
        return adopt(self._spark.createDataFrame(rows, schema), self)

    def _show_target(self, ext: Target, strict: bool = False) -> Optional[LockObject]:
        """The object a zklock statement names. ``strict`` (UNLOCK, DROP FORCE LEASE) refuses
        a partition spec that does not match the table's partition columns exactly, so a
        typo can never widen a drop to the whole table."""
        if ext.database is not None:
            return LockObject(ext.database)
        if ext.table is None:
            return None
        obj = self._planner._table_object(ext.table)
        if obj is None:
            raise InvalidArguments(f"{'.'.join(ext.table)} is a temporary view, not a table")
        if not ext.partition:
            return obj
        found = self._planner._static_prefix(obj, ext.partition)
        if strict and len(found.partition) != len(ext.partition):
            raise InvalidArguments(
                f"PARTITION ({', '.join(ext.partition)}) does not name a partition of"
                f" {obj.name} (keys must be its partition columns, leading ones first)")
        return found

    def _set(self, ext: SetZkLock) -> Any:
        attr = SESSION_KEYS.get(ext.key.lower())
        if ext.key.lower() in STATIC_HIVE_KEYS and ext.value is not None:
            raise InvalidArguments(
                f"{ext.key} chooses the ZooKeeper ensemble and cannot change in a running"
                " session; set it (or spark.zklock.zookeeper.quorum / spark.zklock.root) in"
                " the Spark conf before the session starts")
        if attr is None and ext.key.lower() in STATIC_HIVE_KEYS:
            value = (self.settings.hosts if ext.key.lower() == "hive.zookeeper.quorum"
                     else self.settings.root)
            return self._rows([(ext.key, str(value))], "key STRING, value STRING")
        if attr is None:
            raise InvalidArguments(f"unknown zklock session setting {ext.key!r};"
                                   f" known: {', '.join(sorted(SESSION_KEYS))}")
        if ext.value is not None:
            if attr == "support_concurrency":
                self._concurrency = parse_bool(ext.value)
            elif attr == "show_locks_format":
                self._show_format = Settings.resolve(
                    {"show_locks_format": ext.value}).show_locks_format
            elif attr == "unknown_statements":
                self._planner.unknown_statements = Settings.resolve(
                    {"unknown_statements": ext.value}).unknown_statements
            elif attr == "retries":
                if not ext.value.isdigit():
                    raise InvalidArguments(f"{ext.key} must be an integer >= 0")
                self._retries = int(ext.value)
            else:
                self._retry_interval = parse_duration(ext.value)
        current = {"support_concurrency": self._concurrency, "retries": self._retries,
                   "retry_interval": self._retry_interval,
                   "unknown_statements": self._planner.unknown_statements,
                   "show_locks_format": self._show_format}[attr]
        value = str(current).lower() if isinstance(current, bool) else str(current)
        return adopt(self._spark.createDataFrame([(ext.key, value)], "key STRING, value STRING"),
                     self)

    # ---- what layers above add (zklock.spark.registry) ------------------------------
    def validate_statement(self, statement: str) -> None:
        """Raise InvalidArguments with Spark's parse error when ``statement`` does not parse
        (the scheduler checks statements it stores with it)."""
        try:
            self._planner.jvm.parse(statement)
        except Exception as exc:
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()
                     and not ln.lstrip().startswith(("at ", "JVM stacktrace"))]
            raise InvalidArguments("the scheduled statement does not parse: "
                                   + "\n".join(lines[:8])) from None

    def _registered_statement(self, sql: str) -> Optional[registry.StatementHandler]:
        for handler in registry.statements():
            if handler.recognises(sql):
                return handler
        return None

    # ---- sysdb views -------------------------------------------------------------
    def _locks_view(self) -> Any:
        return self.show_locks(None, extended=True)

    def refresh_system_views(self, text: str) -> None:
        lowered = text.lower()
        if SYSTEM_DATABASE not in lowered:
            return
        for name, build in self._system_views.items():
            if name in lowered:
                self._publish(name, build())

    def _publish(self, name: str, df: Any) -> None:
        global_db = self._spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
        if global_db.lower() != SYSTEM_DATABASE:
            raise InvalidArguments(
                f"{SYSTEM_DATABASE}.{name} needs spark.sql.globalTempDatabase={SYSTEM_DATABASE}"
                " (a static setting: put it in spark-defaults.conf or the session builder,"
                " e.g. zklock.spark.configure(SparkSession.builder))")
        df.createOrReplaceGlobalTempView(name)


class _HeldRead:
    """S locks held across an iteration (``toLocalIterator``)."""

    def __init__(self, session: LockingSession, df: Any, action: str) -> None:
        self.session, self.df, self.action = session, df, action
        self.lockset: Optional[LockSet] = None
        self.query_id = new_query_id()

    def __enter__(self) -> _HeldRead:
        s = self.session
        if s._concurrency and not in_locked_statement():
            targets = s._planner.plan_dataframe(self.df)
            if targets:
                self.lockset = s._acquire(targets, self.query_id,
                                          _describe(self.action, targets))
        return self

    def iterate(self, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        if self.lockset is None:
            yield from make()
            return
        statement = LockedStatement(self.session._spark, self.lockset, self.query_id,
                                    self.action, self.session._planner.walker)
        with statement:  # the iterator's serving thread inherits the job tag and token
            rows = make()
        try:
            yield from rows  # outside the statement: the caller's own work in the loop locks
        except Exception as exc:
            if statement.lost:
                raise statement._lock_lost() from exc
            raise
        if statement.lost:
            raise statement._lock_lost()

    def __exit__(self, *exc: object) -> None:
        if self.lockset is not None:
            self.lockset.release(wait=False)


def _describe(action: str, targets: list[LockTarget]) -> str:
    tables = sorted({t.obj.table_name for t in targets if t.obj.table})
    shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
    return f"DataFrame.{action} reading {shown}" if tables else f"DataFrame.{action}"


def _ts(ms: Optional[int]) -> Optional[dt.datetime]:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


def _lock_row(r: LockRecord, extended: bool) -> tuple:
    if not extended:
        return (r.object, r.mode.value)
    d = r.data
    return (r.object, r.mode.value, d.user if d else None, d.host if d else None,
            d.pid if d else None, d.query_id if d else None, d.query if d else None,
            _ts(r.ctime_ms), r.kind, r.czxid if r.explicit else None, _ts(r.end_ms), r.czxid)
