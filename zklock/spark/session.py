"""LockingSession: a SparkSession whose every statement takes Hive's locks implicitly.

Wrap once, then use it as the SparkSession it wraps::

    spark = LockingSession(SparkSession.builder.getOrCreate())
    spark.sql("INSERT INTO sales.orders PARTITION (ds='2024-01-01') SELECT ...")

Every statement Spark executes is locked in Spark's engine (lock_client.py), whatever API sent
it, and the session is the lock client of the SparkSession it wraps: its manager, settings
and ``SET zklock.*`` apply to every statement that SparkSession runs, SQL, DataFrame or
catalog, now or later. So the session itself is thin. It keeps what only Python can do:

- zklock's own SQL (SHOW LOCKS, EXPLAIN LOCKS, SET, LOCK TABLE, leases) and what layers
  above add (the scheduler's DDL), routed through :mod:`.registry`;
- errors in zklock's terms: a statement run through :meth:`sql` raises LockNotAcquired,
  LockLost or UnsupportedStatement (a DataFrame's action raises PySpark's
  ``QueryExecutionException`` with a ``ZKLOCK_*`` condition: :func:`~.engine.lock_error`);
- :meth:`holding`, for lifetimes the engine cannot bound (an RDD's later jobs).

Anything else passes through to the wrapped SparkSession.
"""

from __future__ import annotations

import atexit
import functools
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..config import (
    CARRIED_KEYS,
    CARRIED_SETTINGS,
    ENGINE_SETTINGS,
    WAIT_BOUNDS,
    Level,
    Settings,
)
from ..errors import InvalidArguments, UnsupportedStatement, WriteFailed
from ..locks.objects import LockObject
from ..manager import LockManager
from . import registry, saveastable, sql_runner
from .blocks import LockedExecution, SessionSettings
from .jvm import JvmModuleError
from .lock_client import (
    EXTENSION_CLASS,
    EngineLockClient,
    guards,
    has_client,
    local_connect_server,
    lock_error,
    settings_of,
)
from .locked_statement import is_connect
from .planner import ClassicPlanner, ConnectPlanner, LockPlan, Planner

SYSTEM_DATABASE = "sysdb"

#: The Spark Connect sessions a LockingSession of this process wraps: one each, as a classic
#: SparkSession has (LockClients.bind refuses a second), since what a LockingSession publishes
#: in its session's conf (how statements wait, the engine's settings) is every statement's
#: there, and a second would silently change the first one's.
_WRAPPED_CONNECT: weakref.WeakSet[Any] = weakref.WeakSet()
_WRAPPED_LOCK = threading.Lock()


#: A SQL script's start (``BEGIN``, or ``label: BEGIN``), after comments.
_SCRIPT = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*(?:\w+\s*:\s*)?BEGIN\b",
                     re.IGNORECASE | re.DOTALL)


def maybe_script(sql: str) -> bool:
    """Could ``sql`` be a SQL script? The planner decides; this only spares every other
    statement the question."""
    return _SCRIPT.match(sql) is not None

registry.register_statement(sql_runner.HANDLER)


class LockingSession:
    """A SparkSession wrapper: the lock client of every statement its SparkSession runs."""

    def __init__(self, spark: Any, manager: Optional[LockManager] = None,
                 settings: Optional[Settings] = None, **overrides: Any) -> None:
        """``overrides``: settings by name (``retries=1``); ``settings``: start from these
        instead of the Spark conf and the environment (a new session of this one's).
        Raises UnsupportedStatement when Spark does not lock in its engine: nothing would
        lock the session's statements."""
        if isinstance(spark, LockingSession):
            spark = spark.spark
        self._spark = spark
        # this session's keyword arguments, Spark conf and environment, over its manager's
        # own settings: docs/configuration.md, "Precedence"
        if settings is None:
            own = settings_of(spark, overrides)
        else:
            own = settings.with_(Level.SESSION, **overrides) if overrides else settings
        self._settings = SessionSettings(own if manager is None else own.over(manager.settings))
        self._manager = manager
        self._own_manager = manager is None
        self.connect = is_connect(spark)
        if manager is not None and not manager.application:
            manager.application = self._application()
        self._manager_lock = threading.Lock()
        self._require_engine()
        self._planner = self._make_planner(spark)
        # what the engine reads or carries from the session's conf, put back when this one
        # closes
        self._engine_conf_before = {
            key: self._spark.conf.get(key, None)
            for key in (*(s.spark for s in ENGINE_SETTINGS), *CARRIED_KEYS)}
        self._published: dict[str, Optional[str]] = {}  # what this session wrote there
        self.execution = LockedExecution(spark, self._planner, lambda: self.manager,
                                         self._settings, lambda: self._engine)
        self._process: Optional[EngineLockClient] = None  # the process's client, if made here
        self._engine = self._engine_client(spark)
        saveastable.install()
        registry.load_plugins()
        self._system_views: dict[str, Callable[[], Any]] = {"locks": self._locks_view}
        for name, build in registry.views().items():
            self._system_views[name] = functools.partial(build, self)
        if self.connect:
            with _WRAPPED_LOCK:
                if spark in _WRAPPED_CONNECT:
                    raise InvalidArguments(
                        "this Spark Connect session is wrapped by a LockingSession already:"
                        " close that one, or wrap another session"
                        " (SparkSession.builder.remote(...).create())")
                _WRAPPED_CONNECT.add(spark)
        self._publish_policy()  # last: a session that failed to start changed nothing

    def _require_engine(self) -> None:
        """Fail closed: without zklock's engine extension nothing would lock what this
        session runs. A classic session's JVM is asked (the setting alone may name an
        extension Spark did not apply); a Connect server's setting is what a client can see
        (zklock's own server has the extension)."""
        if self.connect:
            extensions = str(self._spark.conf.get("spark.sql.extensions", "") or "")
            locks = EXTENSION_CLASS in [e.strip() for e in extensions.split(",")]
        else:
            try:
                locks = guards(self._spark)
            except JvmModuleError:  # zklock's jar is not on the application's class path
                locks = False
        if not locks:
            raise UnsupportedStatement(
                "zklock locks statements in Spark's engine, and this "
                + ("Spark Connect server runs without zklock's extension: start it with"
                   " `zklock spark connect-server start`" if self.connect else
                   "SparkSession was built without it: build it with"
                   " zklock.spark.configure(SparkSession.builder)"))

    def _make_planner(self, spark: Any) -> Planner:
        policy = self.settings.unknown_statements
        if self.connect:
            return ConnectPlanner(spark, unknown_statements=policy)
        return ClassicPlanner(spark, unknown_statements=policy)

    def _engine_client(self, spark: Any) -> Optional[EngineLockClient]:
        """The lock client of every statement of the wrapped SparkSession; also the
        process's where it has none yet (the plain session of another thread, a library's
        own sessions). Over Spark Connect, the server's lock client takes the locks: this
        session's becomes that of a local server PySpark started in this process, if it
        has none."""
        if self.connect:
            server = local_connect_server(spark)
            if server is None or has_client(server):
                return None
            return EngineLockClient(server, lambda: self.manager,
                                    settings=lambda: self.settings).install()
        client = EngineLockClient(spark, lambda: self.manager,
                                  settings=lambda: self.settings).bind()
        if not has_client(spark):
            self._process = EngineLockClient(spark, lambda: self.manager,
                                             settings=lambda: self.settings).install()
        return client

    def _publish_policy(self) -> None:
        """What the engine reads or carries from a session's conf, in the wrapped session's:
        this session's settings, which SET may change (put back at close). The settings the
        engine reads (config.ENGINE_SETTINGS), and how its statements wait
        (config.CARRIED_SETTINGS: the engine carries them to whichever lock client takes the
        locks, a Spark Connect server's included) where something set them: its one wait, a
        count or a timeout, the other unset; nothing where all are defaults, so that the lock
        client's own settings decide."""
        settings = self.settings
        publish: dict[str, Optional[str]] = {}
        for setting in ENGINE_SETTINGS:
            value = getattr(settings, setting.name)
            publish[setting.spark] = str(value).lower() if isinstance(value, bool) else str(value)
        chosen = {s.name: getattr(settings, s.name) for s in CARRIED_SETTINGS
                  if settings.level(s.name) > Level.DEFAULT}
        if chosen.keys() & WAIT_BOUNDS:
            wait = settings.wait()
            chosen.update(retries=wait.retries, timeout=wait.timeout)
        for setting in CARRIED_SETTINGS:
            value = chosen.get(setting.name)
            publish[setting.spark] = None if value is None else str(value)
        for key in set(CARRIED_KEYS) - set(publish):
            publish[key] = None  # Hive's names, SET's short forms: this session's are above
        for key, value in publish.items():
            if value is None:
                self._spark.conf.unset(key)
            else:
                self._spark.conf.set(key, value)
        self._published = publish

    # ---- plumbing ---------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        method = registry.session_methods().get(name)
        if method is not None:  # offered by a layer above (session.scheduled_queries())
            return functools.partial(method, self)
        return getattr(self._spark, name)

    def __repr__(self) -> str:
        return f"LockingSession({self._spark!r}, concurrency={self.support_concurrency})"

    @property
    def settings(self) -> Settings:
        """The settings this session locks with now: its own over its manager's, and what
        ``SET zklock.*`` changed (docs/configuration.md, "Precedence")."""
        return self._settings.current

    def set(self, **changes: Any) -> Settings:
        """Change settings for every statement of the session, as ``SET zklock.*`` does."""
        settings = self._settings.set(**changes)
        self._planner.unknown_statements = settings.unknown_statements
        self._publish_policy()
        return settings

    @property
    def spark(self) -> Any:
        """The wrapped SparkSession (its statements are locked by this session too)."""
        return self._spark

    @property
    def planner(self) -> Planner:
        """The lock planner of this session (ClassicPlanner, or ConnectPlanner over Connect)."""
        return self._planner

    def newSession(self) -> LockingSession:
        """A new SparkSession (own SQL conf, temp views, functions) that locks like this one,
        sharing its LockManager."""
        return LockingSession(self._spark.newSession(), manager=self.manager,
                              settings=self.settings)

    @property
    def manager(self) -> LockManager:
        """The LockManager (connected on first use when the session built it)."""
        with self._manager_lock:
            if self._manager is None:
                self._manager = LockManager(settings=self.settings)
                self._manager.application = self._application()
                # close the ZooKeeper session cleanly at exit: its last async release is sent
                # and its ephemeral nodes go at once instead of after the session timeout
                atexit.register(self.close)
            return self._manager

    def _application(self) -> str:
        """This session's Spark application id (a Connect server's, over Connect)."""
        try:
            if self.connect:
                return str(self._spark.conf.get("spark.app.id", "") or "")
            return str(self._spark.sparkContext.applicationId)
        except Exception:  # a stopped session: the lock data goes without it
            return ""

    @property
    def support_concurrency(self) -> bool:
        return self.settings.support_concurrency

    def close(self) -> None:
        """Close the LockManager if this session built it (and stop being the engine's lock
        client); the SparkSession stays up."""
        for client in (self._engine, self._process):
            if client is not None:
                client.close()
        self._engine = self._process = None
        try:  # the wrapped session's settings as they were before this session, where they
            # are still what it wrote (the session's own SET since is kept)
            for key, before in self._engine_conf_before.items():
                if key not in self._published or (self._spark.conf.get(key, None)
                                                  != self._published[key]):
                    continue
                if before is None:
                    self._spark.conf.unset(key)
                else:
                    self._spark.conf.set(key, before)
        except Exception:  # Spark stopped: nothing left to put back
            pass
        if self.connect:
            with _WRAPPED_LOCK:
                _WRAPPED_CONNECT.discard(self._spark)
        with self._manager_lock:
            if self._own_manager and self._manager is not None:
                self._manager.close()
                self._manager = None

    def stop(self) -> None:
        """Close, then stop Spark."""
        self.close()
        self._spark.stop()

    def __enter__(self) -> LockingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the SparkSession surface -------------------------------------------------
    def sql(self, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:
        """Run one statement: zklock's own SQL, or Spark SQL (locked in Spark's engine; a
        command's denial, loss or refusal raised as zklock's exception)."""
        if args:
            raise InvalidArguments("LockingSession.sql does not take parameter markers (args);"
                                   " use {name} formatting with keyword arguments instead")
        if kwargs:
            return self._formatted(sqlQuery, kwargs)
        for handler in registry.statements():
            if handler.recognises(sqlQuery):
                return handler.run(self, sqlQuery)
        self.refresh_system_views(sqlQuery)
        with self.errors():
            if maybe_script(sqlQuery):
                return self._script(sqlQuery)
            return self._spark.sql(sqlQuery)

    def _script(self, sql: str) -> Any:
        """A SQL script holds the union of its statements' locks for its whole run (Spark runs
        it statement by statement, with no hook around the whole: docs/spark.md)."""
        plan = self._planner.plan_sql(sql)
        if not plan.whole:
            return self._spark.sql(sql)
        with self.execution.held(plan.targets, sql[:200]):
            return self._spark.sql(sql)

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Spark's errors for statements zklock refused, denied or lost, raised in the block
        as zklock's exceptions (UnsupportedStatement, LockNotAcquired, LockLost, WriteFailed:
        a failed write keeps Spark's error as its cause)."""
        try:
            yield
        except Exception as exc:
            error = lock_error(exc)
            if error is exc:
                raise
            raise error from (exc if isinstance(error, WriteFailed) else None)

    def _formatted(self, sql: str, kwargs: dict[str, Any]) -> Any:
        """``sql("... {df} ...", df=df)``: PySpark's formatter, then :meth:`sql`."""
        if self.connect:
            raise InvalidArguments("LockingSession.sql over Spark Connect takes no keyword"
                                   " arguments: format the statement first")
        from pyspark.sql.sql_formatter import SQLStringFormatter

        formatter = SQLStringFormatter(self._spark)
        try:
            return self.sql(formatter.format(sql, **kwargs))
        finally:
            formatter.clear()

    def table(self, tableName: str) -> Any:
        """``spark.table``, with zklock's sysdb views published first."""
        self.refresh_system_views(tableName)
        return self._spark.table(tableName)

    # ---- zklock's own surface -----------------------------------------------------
    def holding(self, df: Any) -> Any:
        """A context manager holding S on what ``df`` reads for its block, in kazoo's style:
        for lifetimes Spark's engine cannot bound, an RDD's jobs that run after the call that
        made it::

            with session.holding(df):
                df.rdd.foreach(send)

        Everything ``df`` or other statements run inside the block is covered by the set;
        ``LockLost`` cancels its jobs as for any statement. It yields the LockSet."""
        return self.execution.holding(df)

    def explain_locks(self, sql: str) -> LockPlan:
        """The locks ``sql`` would take, in acquisition order, without taking anything."""
        if sql_runner.recognises(sql):
            return LockPlan(sql, [], is_command=True)
        return self._planner.plan_sql(sql, strict=False)

    def show_locks(self, obj: Optional[LockObject] = None, extended: bool = False) -> Any:
        records = self.manager.show(obj, extended=extended)
        return sql_runner.lock_rows(self, records, extended)

    def validate_statement(self, statement: str) -> None:
        """Raise InvalidArguments with Spark's parse error when ``statement`` does not parse
        (the scheduler checks statements it stores with it)."""
        try:
            self._planner.validate(statement)
        except Exception as exc:
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()
                     and not ln.lstrip().startswith(("at ", "JVM stacktrace"))]
            raise InvalidArguments("the scheduled statement does not parse: "
                                   + "\n".join(lines[:8])) from None

    # ---- sysdb views -------------------------------------------------------------
    def _locks_view(self) -> Any:
        return self.show_locks(None, extended=True)

    def refresh_system_views(self, text: str) -> None:
        """Publish the sysdb views ``text`` names (global temporary views, rebuilt now)."""
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
