"""What a LockingSession runs under locks it takes in Python, and the settings it locks with.

Every statement Spark executes is locked in Spark's engine (lock_client.py); a LockingSession
takes locks itself only where the engine cannot bound the lifetime:

- :meth:`LockedExecution.holding` holds S on what a DataFrame reads for a block (an RDD's
  jobs run after the call that made it: ``df.rdd``, ``foreach`` over an RDD);
- :meth:`LockedExecution.held` holds a SQL script's locks for the whole script (Spark runs
  it statement by statement, with no hook around the whole).

In a classic session the engine holds the block's locks, as a statement's (held.py); a
Spark Connect client's are held in a :class:`~zklock.spark.locked_statement.LockedStatement`.
Either way the block has its own job tag and fencing token, is cancelled with ``LockLost``
when the set is lost, and covers the statements inside it that its locks cover.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..config import SETTABLE, Level, Settings
from ..errors import InvalidArguments
from ..locks.lockrequest import LockTarget
from ..locks.lockset import LockSet
from ..manager import LockManager
from . import answer
from .held import run_held
from .lock_client import EngineLockClient, engine_of, lock_error
from .locked_statement import (
    LockedStatement,
    in_locked_statement,
    is_connect,
    new_query_id,
    statement_scope,
)
from .planner import Planner


class SessionSettings:
    """One LockingSession's settings: its own (keyword arguments, Spark conf, environment)
    layered over its LockManager's (:meth:`Settings.over`), and what ``SET`` changes at run
    time. Its engine lock client and its own locks read :attr:`current`, so one SET reaches
    every path; the one setting Spark's planner reads, ``unknown_statements``, is written
    into the wrapped session's conf by the session (``spark.zklock.unknown.statements``)."""

    def __init__(self, settings: Settings) -> None:
        self.current = settings

    def set(self, **changes: Any) -> Settings:
        """Change settings as ``SET zklock.*`` does: stronger than every level but a call's.
        Only how it locks may change (config.SETTABLE), not where: the ensemble, the root
        and the ZooKeeper session are its manager's for its whole life."""
        fixed = sorted(set(changes) - SETTABLE)
        if fixed:
            raise InvalidArguments(f"a running session cannot change {', '.join(fixed)};"
                                   " set it before the session starts")
        self.current = self.current.with_(Level.SESSION_SET, **changes)
        return self.current


class LockedExecution:
    """What one LockingSession locks itself, under its manager and settings."""

    def __init__(self, spark: Any, planner: Planner, manager: Callable[[], LockManager],
                 settings: SessionSettings,
                 client: Callable[[], Optional[EngineLockClient]]) -> None:
        """``client()``: the lock client bound to the session (None over Spark Connect)."""
        self.spark = spark
        self.planner = planner
        self._manager = manager  # connects on first use
        self.settings = settings
        self._client = client

    @contextmanager
    def holding(self, df: Any, action: str = "holding") -> Iterator[LockSet]:
        """S on what ``df`` reads, held for the block (see :func:`held`)."""
        settings = self.settings.current
        targets = ([] if not settings.support_concurrency or in_locked_statement()
                   else self.planner.plan_dataframe(df))
        with held(self.spark, self._manager(), settings, targets,
                  describe(action, targets), self._client) as lockset:
            if lockset.held:
                self.planner.refresh_listings(df)  # the files as of the locks
            yield lockset

    def held(self, targets: list[LockTarget], what: str) -> Any:
        """``targets`` held for a block, with the session's manager and settings."""
        return held(self.spark, self._manager(), self.settings.current, targets, what,
                    self._client)


@contextmanager
def held(spark: Any, manager: LockManager, settings: Settings, targets: list[LockTarget],
         what: str, client: Callable[[], Optional[EngineLockClient]]) -> Iterator[LockSet]:
    """``targets`` held for the block: all-or-none with ``settings``' retries, under the
    block's own job tag and fencing token (its jobs cancelled and LockLost raised when the
    set is lost). Statements Spark runs in the block find themselves covered where the
    block's locks cover them. Nothing is taken with locking off, inside a locked statement,
    or without targets.

    In a classic session the engine holds them, through the session's lock client
    (``client()``, zklock/spark/held.py); a Spark Connect client holds them itself, and
    tags its operations with their nodes for the server's engine to check."""
    if not settings.support_concurrency or in_locked_statement() or not targets:
        yield LockSet.empty()
        return
    if not is_connect(spark):
        try:
            block = engine_of(spark).hold(spark._jsparkSession, answer.write(targets), what)
        except Exception as exc:  # refused, denied or unavailable, as a statement is
            error = lock_error(exc)
            if error is exc:
                raise
            raise error from None
        bound = client()
        lockset = bound.held_set(block.handle()) if bound is not None else LockSet.empty()
        with run_held(block, lockset.objects), statement_scope():
            yield lockset
        return
    query_id = new_query_id()
    lockset = manager.acquire(targets, query_id=query_id, query=what, settings=settings)
    try:
        with LockedStatement(spark, lockset, query_id, what):
            yield lockset
    finally:
        lockset.release(wait=False)


def describe(action: str, targets: list[LockTarget]) -> str:
    """What a DataFrame's lock nodes record as their query."""
    tables = sorted({t.obj.table_name for t in targets if t.obj.table})
    shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
    return f"DataFrame.{action} reading {shown}" if tables else f"DataFrame.{action}"
