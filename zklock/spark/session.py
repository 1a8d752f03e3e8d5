"""LockingSession: a SparkSession whose every statement takes Hive's locks implicitly.

Wrap once, then use it as the SparkSession it wraps::

    spark = LockingSession(SparkSession.builder.getOrCreate())
    spark.sql("INSERT INTO sales.orders PARTITION (ds='2024-01-01') SELECT ...")

The session is a thin proxy. It routes each statement: zklock's own SQL and what layers
above add (the scheduler's DDL) go to the handlers registered in :mod:`.registry`; Spark
SQL is planned (:mod:`.planner`, or :mod:`.connect_planner` for a Spark Connect session)
and run by :mod:`.execution`, which holds the locks. Commands lock for exactly the
``sql()`` call; queries are lazy, and the DataFrames the session returns (:mod:`.dataframe`)
lock for the duration of each action. Writes through the DataFrame API and the catalog are
locked in Spark's engine, as this session (:mod:`.writes`). Anything not overridden here
passes through to the wrapped SparkSession.

A classic session runs the very plan it analyzed to find the locks; when the grant came
only after waiting, the statement is planned again under the locks (the catalog may have
changed meanwhile) and, if it now needs locks it does not hold, the whole request is
retried.
"""

from __future__ import annotations

import atexit
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Optional

from ..config import Level, Settings
from ..errors import InvalidArguments, UnsupportedStatement
from ..manager import LockManager
from ..objects import LockObject
from . import registry
from . import sql as zklock_sql
from .commit import commit_isolation
from .dataframe import LockingReader, adopt, adopting
from .engine import (
    EXTENSION_CLASS,
    EngineLockClient,
    as_owner,
    guards,
    has_client,
    local_connect_server,
    python_error,
    register_owner,
    save_as_table_drops_first,
    settings_of,
)
from .execution import LockedExecution, SessionSettings
from .jvm import JvmModuleError
from .planner import ClassicPlanner, LockPlan, Planner
from .statement import is_connect
from .writes import CATALOG_READS, EngineWrites

SYSTEM_DATABASE = "sysdb"

registry.register_statement(zklock_sql.HANDLER)


class LockingSession:
    """A SparkSession wrapper that takes S/X locks for every statement and DataFrame action."""

    def __init__(self, spark: Any, manager: Optional[LockManager] = None,
                 settings: Optional[Settings] = None, **overrides: Any) -> None:
        """``overrides``: settings by name (``retries=1``); ``settings``: start from these
        instead of the Spark conf and the environment (a new session of this one's)."""
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
        self._planner = self._make_planner(spark)
        # on even while concurrency is off: SET zklock.support.concurrency may turn it on
        commits = None
        if self.settings.isolate_commits and not self.connect:
            commits = commit_isolation(spark)
        self.execution = LockedExecution(spark, self._planner, lambda: self.manager,
                                         self._settings, commits)
        self._engine = self._engine_client(spark)
        self._owner = register_owner(self.execution)
        self._engine_locks: Optional[bool] = None  # does Spark lock in its engine? (asked once)
        self._drops_first: Optional[bool] = None  # Spark 4.0's saveAsTable (asked once)
        registry.load_plugins()
        self._system_views: dict[str, Callable[[], Any]] = {"locks": self._locks_view}
        for name, build in registry.views().items():
            self._system_views[name] = functools.partial(build, self)

    def _make_planner(self, spark: Any) -> Planner:
        policy = self.settings.unknown_statements
        if self.connect:  # PySpark's Connect client, which needs packages of its own
            from . import connect_frames  # noqa: F401  (makes Connect DataFrames lock-aware)
            from .connect_planner import ConnectPlanner

            return ConnectPlanner(spark, unknown_statements=policy)
        return ClassicPlanner(spark, unknown_statements=policy)

    def _engine_client(self, spark: Any) -> Optional[EngineLockClient]:
        """In an application with zklock's engine extension and no lock client yet, this
        session's LockManager takes the locks of the commands the engine runs outside it
        (the plain session, a library's own getOrCreate(), pandas-on-Spark)."""
        if self.connect:  # a local Connect server runs in this process's own JVM, if any
            spark = local_connect_server(spark)
            if spark is None:
                return None
        try:
            if has_client(spark):
                return None
        except JvmModuleError:  # built without zklock.spark.configure: no extension
            return None
        return EngineLockClient(spark, lambda: self.manager,
                                settings=lambda: self.settings).install()

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
        """Change settings for this session's every path, as ``SET zklock.*`` does."""
        settings = self._settings.set(**changes)
        self._planner.unknown_statements = settings.unknown_statements
        return settings

    @property
    def spark(self) -> Any:
        """The wrapped SparkSession: the explicit way to run something without zklock."""
        return self._spark

    @property
    def planner(self) -> Planner:
        """The lock planner of this session (ClassicPlanner, or ConnectPlanner over Connect)."""
        return self._planner

    @property
    def catalog(self) -> Any:
        """``spark.catalog``, whose changes are locked in Spark's engine as this session."""
        return EngineWrites(self._spark.catalog, self, reads=CATALOG_READS)

    def writes(self, builder: Any, df: Any) -> EngineWrites:
        """A PySpark writer or merge builder of ``df`` (``df.write``, ``df.writeTo(t)``,
        ``df.mergeInto(...)``) whose writes are this session's (see :meth:`writing`)."""
        return EngineWrites(builder, self, df=df)

    def save_as_table(self, table: str, df: Any, paths: tuple[str, ...],
                      save: Callable[[], Any]) -> Any:
        """Run ``save`` (``df.write....saveAsTable(table)``, with ``paths`` its path options).
        Where Spark drops an overwritten table before it runs any command (Spark 4.0), the
        call is locked whole here: X on the table and on the catalog tables at its path, S
        on what ``df`` reads; elsewhere the engine locks its command."""
        planner = self._planner
        if not isinstance(planner, ClassicPlanner) or not self._save_as_table_drops_first():
            return save()
        targets = (planner.plan_write(table) + planner.plan_paths(paths)
                   + planner.plan_dataframe(df))
        return self.execution.locked(targets, f"saveAsTable {table}", save)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Spark writes run in the block are this session's: its engine locks them with this
        session's manager and retries (a Connect server, with its own), and their denials,
        losses and refusals are raised as zklock's exceptions. Refused (UnsupportedStatement)
        where Spark does not lock in its engine."""
        if not self._locks_in_engine():
            raise UnsupportedStatement(
                "zklock locks writes in Spark's engine, and this "
                + ("Spark Connect server runs without zklock's extension: start it with"
                   " `zklock spark connect-server start`" if self.connect else
                   "SparkSession was built without it: build it with"
                   " zklock.spark.configure(SparkSession.builder)")
                + "; the write does not run")
        owned = nullcontext() if self.connect else as_owner(self._spark, self._owner)
        try:
            with owned:
                yield
        except Exception as exc:
            error = python_error(exc)
            if error is exc:
                raise
            raise error from None

    def _save_as_table_drops_first(self) -> bool:
        """Spark 4.0's saveAsTable (asked of the JVM once: it is the Spark line's)."""
        if self._drops_first is None:
            self._drops_first = save_as_table_drops_first(self._spark)
        return self._drops_first

    def _locks_in_engine(self) -> bool:
        """Does Spark lock this session's commands in its engine? A classic session's JVM is
        asked (the setting alone may name an extension Spark did not apply); a Connect
        server's setting is what a client can see (zklock's own server has the extension)."""
        if self._engine_locks is None:
            if self.connect:
                extensions = str(self._spark.conf.get("spark.sql.extensions", "") or "")
                self._engine_locks = EXTENSION_CLASS in [e.strip()
                                                         for e in extensions.split(",")]
            else:
                try:
                    self._engine_locks = guards(self._spark)
                except JvmModuleError:  # zklock's jar is not on the application's class path
                    self._engine_locks = False
        return self._engine_locks

    @property
    def readStream(self) -> Any:
        """``spark.readStream``: its DataFrames are lock-aware (their streaming writes are
        refused: a query that writes forever cannot hold a statement's locks)."""
        return adopting(self._spark.readStream, self)

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
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        with self._manager_lock:
            if self._own_manager and self._manager is not None:
                self._manager.close()
                self._manager = None

    def stop(self) -> None:
        """Close, then stop Spark, once failed writes' staging is removed for good."""
        self.close()
        commits = self.execution.commits
        if commits is not None:
            commits.settle()
        self._spark.stop()

    def __enter__(self) -> LockingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the SparkSession surface -------------------------------------------------
    def sql(self, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:
        """Run one statement: zklock's own SQL, or Spark SQL under the locks it needs."""
        if args:
            raise InvalidArguments("LockingSession.sql does not take parameter markers (args);"
                                   " use {name} formatting with keyword arguments instead")
        if kwargs:
            return self._formatted(sqlQuery, kwargs)
        for handler in registry.statements():
            if handler.recognises(sqlQuery):
                return adopt(handler.run(self, sqlQuery), self)
        self.refresh_system_views(sqlQuery)
        if not self.support_concurrency:
            return adopt(self._spark.sql(sqlQuery), self)
        plan = self._planner.plan_sql(sqlQuery, lazy_queries=True)
        if not plan.is_command or not plan.targets:
            return adopt(self.execution.execute(plan), self)
        return adopt(self.execution.command(sqlQuery, plan), self)

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
        self.refresh_system_views(tableName)
        return adopt(self._spark.table(tableName), self)

    @property
    def read(self) -> Any:
        if self.connect:
            return adopting(self._spark.read, self)
        return LockingReader(self)

    def createDataFrame(self, *args: Any, **kwargs: Any) -> Any:
        return adopt(self._spark.createDataFrame(*args, **kwargs), self)

    def range(self, *args: Any, **kwargs: Any) -> Any:
        return adopt(self._spark.range(*args, **kwargs), self)

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
        if zklock_sql.recognises(sql):
            return LockPlan(sql, [], is_command=True)
        return self._planner.plan_sql(sql, strict=False)

    def show_locks(self, obj: Optional[LockObject] = None, extended: bool = False) -> Any:
        records = self.manager.show(obj, extended=extended)
        return adopt(zklock_sql.lock_rows(self, records, extended), self)

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
