"""ConnectPlanner: the lock planner of a Spark Connect session, answered by the server.

A Spark Connect client has no parser, analyzer or catalog, so it asks zklock's plugin in
the Connect server (:mod:`zklock.spark.connect`), which runs LockPlanner.java: the one
planner, so classic and Connect sessions lock the same objects. This class answers the
:class:`~zklock.spark.planner.Planner` questions, so the rest of the Spark layer does not
care which kind of session it runs on.
"""

from __future__ import annotations

from typing import Any, Optional

from ..locks.lockrequest import LockTarget
from .connect import plan_dataframe, plan_statement, plan_write
from .planner import LockPlan


class ConnectPlanner:
    """Plans for one Spark Connect session through zklock's server plugin."""

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
