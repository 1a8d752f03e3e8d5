"""ConnectPlanner: the lock planner of a Spark Connect session, answered by the server.

A Spark Connect client has no parser, analyzer or catalog, so it cannot plan locks
itself. It asks zklock's plugin in the Connect server (:mod:`zklock.spark.connect`),
which plans with LockPlanner.java: the rules of planner.py and the node table of
nodes.py, so classic and Connect sessions lock the same objects. This class answers the
questions LockedExecution and the DataFrames ask :class:`~zklock.spark.planner.LockPlanner`,
in the same terms (:class:`~zklock.spark.planner.LockPlan`, LockTargets), so the rest of
the Spark layer does not care which kind of session it runs on.
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import InvalidArguments
from ..lockrequest import LockTarget, normalize
from ..mode import Mode
from ..objects import LockObject
from .connect import plan_locks, plan_statement
from .planner import LockPlan


class ConnectPlanner:
    """Plans for one Spark Connect session through zklock's server plugin."""

    #: no JVM walker on the client: job tags go through Connect's operation tags
    walker = None

    def __init__(self, spark: Any, unknown_statements: str = "refuse") -> None:
        self.spark = spark
        #: refuse (default) or lock: what to do with a command zklock has no rule for
        self.unknown_statements = unknown_statements

    # ---- the questions LockPlanner answers ----------------------------------------
    def plan_sql(self, sql: str, lazy_queries: bool = False, strict: bool = True) -> LockPlan:
        """The locks of ``sql``, and whether Spark runs it as a command (in ``sql()``)."""
        rows, is_command = plan_statement(self.spark, sql, self.unknown_statements,
                                          strict=strict)
        targets = normalize(rows)
        if lazy_queries and not is_command:
            targets = []
        # Spark Connect runs a command when sql() is called: it is run again from its text
        return LockPlan("connect", targets, is_command, text=sql)

    def run(self, plan: LockPlan) -> Any:
        """Run a planned statement (locks are the caller's). A command runs in ``sql()``,
        as Spark Connect runs it. A query's DataFrame is built here, lazily, from its text:
        that is the relation Connect's ``sql()`` would answer with after a round trip that
        only parses and analyzes it again (the plugin just did, and raised its errors)."""
        if plan.text is None:
            raise InvalidArguments("a Spark Connect plan runs from its SQL text; this one has"
                                   " none")
        if plan.is_command:
            return self.spark.sql(plan.text)
        from pyspark.sql.connect.dataframe import DataFrame
        from pyspark.sql.connect.plan import SQL

        return DataFrame(SQL(plan.text), self.spark)

    def plan_parsed(self, parsed: Any, strict: bool = True, lazy_queries: bool = False,
                    text: Optional[str] = None) -> LockPlan:
        """Re-plan a statement (after a wait): a Connect plan is its text."""
        return self.plan_sql(text or "", lazy_queries=lazy_queries, strict=strict)

    def plan_dataframe(self, df: Any) -> list[LockTarget]:
        """S locks for an action on ``df``."""
        return normalize(plan_locks(self.spark, df=df,
                                    unknown_statements=self.unknown_statements))

    def plan_table_write(self, name: str, df: Any = None,
                         partition: Optional[dict[str, Any]] = None) -> list[LockTarget]:
        """X on a write target table (or its static partition prefix), S on ``df``'s sources."""
        rows = plan_locks(self.spark, df=df, table=name, partition=partition or None,
                          unknown_statements=self.unknown_statements)
        return normalize(rows)

    def tables_at(self, path: str) -> list[LockObject]:
        """Catalog tables a write to ``path`` touches (at, below or above their location)."""
        rows = plan_locks(self.spark, paths=[path],
                          unknown_statements=self.unknown_statements)
        return [LockObject.parse(o) for o, m in rows
                if m == Mode.EXCLUSIVE.value and LockObject.parse(o).table is not None]

    def column_pins(self, table: str, condition: Any) -> dict[str, str]:
        """No pins over Connect: ``writeTo(t).overwrite(cond)`` takes X on the whole table,
        which locks more, never less."""
        return {}

    def table_object(self, parts: list[str]) -> Optional[LockObject]:
        """A table's LockObject from its name parts (the current database for one part)."""
        rows = plan_locks(self.spark, table=".".join(f"`{p}`" for p in parts),
                          unknown_statements=self.unknown_statements)
        found = [LockObject.parse(o) for o, m in rows if m == Mode.EXCLUSIVE.value]
        return found[0] if found else None

    def static_prefix(self, table: LockObject, spec: dict[str, Any]) -> LockObject:
        """The table, or its partition given by the leading static values of ``spec``."""
        if not spec:
            return table
        rows = plan_locks(self.spark, table=f"`{table.db}`.`{table.table}`",
                          partition={str(k): str(v) for k, v in spec.items()},
                          unknown_statements=self.unknown_statements)
        found = [LockObject.parse(o) for o, m in rows if m == Mode.EXCLUSIVE.value]
        return found[0] if found else table

    def validate(self, statement: str) -> None:
        """Raise Spark's ParseException when ``statement`` does not parse."""
        plan_statement(self.spark, statement, "lock", strict=False)
