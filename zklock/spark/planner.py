"""The lock planner as the Spark layer sees it: one protocol, two clients, one set of rules.

The rules are LockPlanner.java's, run inside Spark where the plans are (the JVM module,
:mod:`.jvm`): Spark's engine asks it for every statement it executes (lock_client.py). Python
asks it only for what it locks itself or shows: EXPLAIN LOCKS, the objects zklock's own
statements name, :meth:`LockingSession.holding`. A classic session calls it through py4j
(:class:`ClassicPlanner`); a Spark Connect session asks zklock's plugin in the server
(:class:`ConnectPlanner`). Both read the same answer
(:mod:`.answer`): it is the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from ..locks.lockrequest import LockTarget
from ..locks.mode import Mode
from ..locks.objects import LockObject
from . import answer, jvm
from .connect import plan_dataframe, plan_statement, plan_write


@dataclass
class LockPlan:
    """The locks of one statement, and what its planner needs to run it."""

    statement: str
    targets: list[LockTarget]
    is_command: bool
    notes: list[str] = field(default_factory=list)
    #: hold the locks around the whole statement (a SQL script: answer.PlannedLocks.whole)
    whole: bool = False

    def rows(self) -> list[tuple[str, str]]:
        """(object, mode) in acquisition order."""
        return [(t.obj.name, t.mode.value) for t in self.targets]


class Planner(Protocol):
    """What a LockingSession asks its planner (classic or Spark Connect)."""

    unknown_statements: str

    def plan_sql(self, sql: str, strict: bool = True) -> LockPlan:
        """Plan a statement (Spark's parse and analysis errors are raised as Spark's).
        ``strict=False`` (EXPLAIN LOCKS) plans a statement the analyzer rejects from its
        parsed form."""

    def plan_dataframe(self, df: Any) -> list[LockTarget]:
        """S on what an action on ``df`` reads."""

    def refresh_listings(self, df: Any) -> int:
        """List again the files of what ``df`` reads, once its locks are granted: Spark
        keeps a session's listings, and another application's write changes the files
        (FreshListings.java). How many listings were dropped."""

    def plan_write(self, table: str, partition: Optional[dict[str, Any]] = None
                   ) -> list[LockTarget]:
        """X on ``table``, or on its static ``partition`` prefix: the object zklock's own
        statements name (nothing for a temporary view). Spark's writes are planned in its
        engine."""

    def validate(self, statement: str) -> None:
        """Raise Spark's ParseException when ``statement`` does not parse."""


def write_target(planner: Planner, table: str,
                 partition: Optional[dict[str, Any]] = None) -> Optional[LockObject]:
    """The object a write to ``table`` (its static ``partition`` prefix) locks in X; None
    for a temporary view."""
    found = [t.obj for t in planner.plan_write(table, partition=partition)
             if t.mode is Mode.EXCLUSIVE]
    return found[0] if found else None


def quoted_name(parts: Sequence[str]) -> str:
    """A multi-part name as Spark SQL reads it back: each part in backticks."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


class ClassicPlanner:
    """LockPlanner.java in a classic session's JVM, through py4j."""

    def __init__(self, spark: Any, unknown_statements: str = "refuse") -> None:
        from pyspark.errors.exceptions.captured import capture_sql_exception

        self.spark = spark
        self._policy = unknown_statements
        self._java = jvm.new_instance(
            spark, "planner.LockPlanner", ["org.apache.spark.sql.SparkSession",
                                   "java.lang.String"],
            [spark._jsparkSession, unknown_statements])
        # Spark's errors (ParseException, AnalysisException) raised as PySpark raises them
        self._call = capture_sql_exception(lambda method, *args: method(*args))
        self._listings: Any = None  # FreshListings.java, made on first use

    @property
    def unknown_statements(self) -> str:
        """refuse (default) or lock: what a command zklock has no rule for gets."""
        return self._policy

    @unknown_statements.setter
    def unknown_statements(self, policy: str) -> None:
        self._java.setUnknownStatements(policy)
        self._policy = policy

    def plan_sql(self, sql: str, strict: bool = True) -> LockPlan:
        locks = answer.read(str(self._call(self._java.planSql, sql, strict)))
        return LockPlan(sql, locks.targets, locks.is_command, locks.notes, locks.whole)

    def plan_dataframe(self, df: Any) -> list[LockTarget]:
        return answer.read(str(self._call(self._java.planDataFrame, df._jdf))).targets

    def refresh_listings(self, df: Any) -> int:
        if self._listings is None:
            self._listings = jvm.new_instance(self.spark, "engine.FreshListings", [], [])
        return int(self._listings.refreshQuery(df._jdf.queryExecution()))

    def plan_write(self, table: str, partition: Optional[dict[str, Any]] = None
                   ) -> list[LockTarget]:
        spec = ({str(k): str(v) for k, v in partition.items() if v is not None}
                if partition else None)
        return answer.read(str(self._call(self._java.planWrite, table, spec))).targets


    def validate(self, statement: str) -> None:
        self._call(self._java.validate, statement)


class ConnectPlanner:
    """Plans for one Spark Connect session through zklock's server plugin.

    A Spark Connect client has no parser, analyzer or catalog, so it asks zklock's plugin in
    the Connect server (:mod:`zklock.spark.connect`), which runs LockPlanner.java: the same
    rules as :class:`ClassicPlanner`'s, so classic and Connect sessions lock the same objects.
    """

    def __init__(self, spark: Any, unknown_statements: str = "refuse") -> None:
        self.spark = spark
        #: refuse (default) or lock: what to do with a command zklock has no rule for
        self.unknown_statements = unknown_statements

    def plan_sql(self, sql: str, strict: bool = True) -> LockPlan:
        locks = plan_statement(self.spark, sql, self.unknown_statements, strict=strict)
        return LockPlan(sql, locks.targets, locks.is_command, locks.notes, locks.whole)

    def plan_dataframe(self, df: Any) -> list[LockTarget]:
        return plan_dataframe(self.spark, df, self.unknown_statements).targets

    def refresh_listings(self, df: Any) -> int:
        """None from here: the server lists again the files of each query it runs under a
        client's locks (LockedQueryExec.java), which a Connect client cannot reach."""
        return 0

    def plan_write(self, table: str, partition: Optional[dict[str, Any]] = None
                   ) -> list[LockTarget]:
        return plan_write(self.spark, table, partition).targets

    def validate(self, statement: str) -> None:
        plan_statement(self.spark, statement, "lock", strict=False)
