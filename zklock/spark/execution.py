"""Locked execution: running Spark work while holding the locks it needs.

Three kinds of work, three lifetimes:

- :meth:`LockedExecution.command` runs a planned statement (what Spark executes eagerly in
  ``sql()``: DDL, INSERT, CTAS, scripts ...) holding its locks for exactly the call;
- :meth:`LockedExecution.read` runs one DataFrame action holding S on what it reads
  (:meth:`~LockedExecution.held_read` keeps them across an iteration);
- a DataFrame write or catalog change is locked in Spark's engine, whose lock client takes
  the locks for the session with :meth:`~LockedExecution.acquire` and
  :meth:`~LockedExecution.commit_staging` (engine.py).

Each runs inside a :class:`~zklock.spark.statement.LockedStatement` (its own job tag and
fencing token; cancelled with ``LockLost`` when the set is lost) and, for commands, inside
the application's commit staging (commit.py). The DataFrames of a LockingSession call this
public API; the session itself only routes statements here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Optional

from ..config import Level, Settings
from ..errors import InvalidArguments, LockNotAcquired
from ..lockrequest import LockTarget
from ..lockset import LockSet
from ..manager import LockManager
from ..mode import Mode
from .planner import LockPlan, Planner
from .statement import LockedStatement, covered, in_locked_statement, new_query_id

#: How often a statement granted after waiting is re-planned before giving up.
REPLANS = 5


class SessionSettings:
    """One LockingSession's settings: its own (keyword arguments, Spark conf, environment)
    layered over its LockManager's (:meth:`Settings.over`), and what ``SET`` changes at run
    time. Every path of the session (statements, DataFrame actions, writes, the engine's
    lock client it installed) reads :attr:`current`, so one SET reaches them all."""

    def __init__(self, settings: Settings) -> None:
        self.current = settings

    #: What a running session may change (``SET zklock.*``): how it locks, not where (the
    #: ensemble, the root, the ZooKeeper session are its manager's for its whole life).
    CHANGEABLE = frozenset({"support_concurrency", "timeout", "retries", "retry_interval",
                            "unknown_statements", "show_locks_format", "node_naming"})

    def set(self, **changes: Any) -> Settings:
        """Change settings as ``SET zklock.*`` does: stronger than every level but a call's."""
        fixed = sorted(set(changes) - self.CHANGEABLE)
        if fixed:
            raise InvalidArguments(f"a running session cannot change {', '.join(fixed)};"
                                   " set it before the session starts")
        self.current = self.current.with_(Level.SESSION_SET, **changes)
        return self.current


class LockedExecution:
    """Runs statements, actions and writes of one LockingSession under their locks."""

    def __init__(self, spark: Any, planner: Planner, manager: Callable[[], LockManager],
                 settings: SessionSettings, commits: Any = None) -> None:
        self.spark = spark
        self.planner = planner
        self._manager = manager  # connects on first use
        self.settings = settings
        self._commits = commits  # CommitIsolation, or None when isolate_commits is off

    # ---- the three lifetimes -------------------------------------------------------
    def command(self, sql: str, plan: LockPlan) -> Any:
        """Run a planned statement holding its locks for exactly the call.

        When the grant came only after waiting, or the plan asks for it (``recheck``: a
        CREATE ... IF NOT EXISTS of an existing object planned in S), the statement is
        planned again under its locks (the catalog may have changed meanwhile); if it now
        needs locks it does not hold, the whole request is retried.
        """
        for _ in range(REPLANS):
            query_id = new_query_id()
            lockset = self._acquire(plan.targets, query_id, sql)
            try:
                if lockset.attempts > 1 or plan.recheck:
                    fresh = self.planner.replan(plan)
                    if not covered(lockset, fresh.targets):
                        plan = fresh
                        continue
                    plan = fresh
                statement = LockedStatement(self.spark, lockset, query_id, sql)
                with self.commit_staging(lockset):
                    return statement.run(lambda p=plan: self.execute(p))
            finally:
                lockset.release(wait=False)
        raise LockNotAcquired(f"the catalog kept changing the locks this statement needs"
                              f" ({REPLANS} re-plans): {sql[:200]}")

    def read(self, df: Any, action: str, fn: Callable[[], Any]) -> Any:
        """Run the action ``fn`` on ``df`` holding S on what it reads."""
        with self.holding(df, action):
            return fn()

    @contextmanager
    def holding(self, df: Any, action: str = "holding") -> Iterator[LockSet]:
        """S on what ``df`` reads, held for the block (an action's call, or what runs after
        an action returns and the engine cannot bound: ``df.rdd``, ``foreach`` over an RDD).
        Statements and actions inside the block are covered by the set (the engine takes
        nothing more); inside a locked statement, or with nothing to lock, it takes nothing."""
        targets = ([] if not self.locking or in_locked_statement()
                   else self.planner.plan_dataframe(df))
        if not targets:
            yield LockSet.empty()
            return
        query_id = new_query_id()
        what = describe(action, targets)
        lockset = self._acquire(targets, query_id, what)
        try:
            self.planner.refresh_listings(df)  # the files as of the locks
            with LockedStatement(self.spark, lockset, query_id, what):
                yield lockset
        finally:
            lockset.release(wait=False)

    def held_read(self, df: Any, action: str) -> HeldRead:
        """S locks on what ``df`` reads, held across an iteration (``toLocalIterator``)."""
        return HeldRead(self, df, action)

    def locked(self, targets: list[LockTarget], what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` holding ``targets``: all-or-none, its own job tag and fencing token,
        cancelled and LockLost if the set is lost (the engine finds its commands covered).
        For what the engine cannot see whole: Spark 4.0's saveAsTable (writes.py)."""
        if not self.locking or in_locked_statement() or not targets:
            return fn()
        query_id = new_query_id()
        lockset = self._acquire(targets, query_id, what)
        try:
            with self.commit_staging(lockset):
                return LockedStatement(self.spark, lockset, query_id, what).run(fn)
        finally:
            lockset.release(wait=False)

    @property
    def locking(self) -> bool:
        """Does the session take locks (``support_concurrency``, which SET may change)?"""
        return self.settings.current.support_concurrency

    @property
    def commits(self) -> Any:
        """The application's CommitIsolation; None when ``isolate_commits`` is off."""
        return self._commits

    # ---- pieces ----------------------------------------------------------------------
    def execute(self, plan: LockPlan) -> Any:
        """Run a planned statement (no locks here), as the session's planner runs it."""
        return self.planner.run(plan)

    def commit_staging(self, lockset: LockSet) -> Any:
        """Around a locked statement: the commit staging of the tables it X-locked."""
        if self._commits is None:
            return nullcontext()
        return self._commits.writing([h.target.obj for h in lockset.held
                                      if h.target.mode is Mode.EXCLUSIVE])

    def acquire(self, targets: list[LockTarget], query_id: str, query: str) -> LockSet:
        """Acquire ``targets`` with this session's retries (see :class:`LockManager`)."""
        return self._acquire(targets, query_id, query)

    def _acquire(self, targets: list[LockTarget], query_id: str, query: str) -> LockSet:
        return self._manager().acquire(targets, query_id=query_id, query=query,
                                       settings=self.settings.current)


class HeldRead:
    """S locks held across an iteration (``toLocalIterator``)."""

    def __init__(self, execution: LockedExecution, df: Any, action: str) -> None:
        self.execution, self.df, self.action = execution, df, action
        self.lockset: Optional[LockSet] = None
        self.query_id = new_query_id()

    def __enter__(self) -> HeldRead:
        ex = self.execution
        if ex.locking and not in_locked_statement():
            targets = ex.planner.plan_dataframe(self.df)
            if targets:
                self.lockset = ex.acquire(targets, self.query_id,
                                          describe(self.action, targets))
                ex.planner.refresh_listings(self.df)  # the files as of the locks
        return self

    def iterate(self, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        if self.lockset is None:
            yield from make()
            return
        statement = LockedStatement(self.execution.spark, self.lockset, self.query_id,
                                    self.action)
        with statement:  # the iterator's serving thread inherits the job tag and token
            rows = make()
        try:
            yield from rows  # outside the statement: the caller's own work in the loop locks
        except Exception as exc:
            if statement.lost:
                raise statement.lock_lost() from exc
            raise
        if statement.lost:
            raise statement.lock_lost()

    def __exit__(self, *exc: object) -> None:
        if self.lockset is not None:
            self.lockset.release(wait=False)


def describe(action: str, targets: list[LockTarget]) -> str:
    """What a DataFrame action's lock nodes record as their query."""
    tables = sorted({t.obj.table_name for t in targets if t.obj.table})
    shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
    return f"DataFrame.{action} reading {shown}" if tables else f"DataFrame.{action}"
