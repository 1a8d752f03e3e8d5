"""What a LockingSession runs under locks it takes in Python, and the settings it locks with.

Every statement Spark executes is locked in Spark's engine (lock_client.py); a LockingSession
takes locks itself only where the engine cannot bound the lifetime:

- :meth:`LockedExecution.holding` holds S on what a DataFrame reads for a block (an RDD's
  jobs run after the call that made it: ``df.rdd``, ``foreach`` over an RDD);
- :meth:`LockedExecution.held` holds a SQL script's locks for the whole script (Spark runs
  it statement by statement, with no hook around the whole).

The engine holds the block's locks, as a statement's: a classic session's through its lock
client (held.py), a Spark Connect client's in the server, for the client's session
(engine/ConnectBlocks.java), its operations naming the block by a tag. Either way the block
has its own job tag and fencing token, is cancelled with ``LockLost`` when the set is lost,
and covers the statements inside it that its locks cover, and no others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..config import SETTABLE, Level, Settings
from ..errors import InvalidArguments, ZkLockError
from ..locks.lockrequest import LockTarget
from ..locks.lockset import HeldLock, LockSet
from ..manager import LockManager
from . import answer
from .connect import hold_block, release_block, renew_block
from .held import run_held
from .lock_client import EngineLockClient, engine_of, lock_error
from .locked_statement import in_locked_statement, is_connect, statement_scope
from .planner import Planner
from .protocol import Tag

log = logging.getLogger(__name__)

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
    (``client()``, zklock/spark/held.py); over Spark Connect the server's engine holds them
    for the client's session (its settings carried as a statement's), and the block's
    operations name it by a tag."""
    if not settings.support_concurrency or in_locked_statement() or not targets:
        yield LockSet.empty()
        return
    if is_connect(spark):
        # the server keeps it three of the client's ZooKeeper session timeouts unrenewed:
        # a dead client's block goes about when its client-held set would have
        ttl = max(settings.session_timeout, 5.0) * 3
        with connect_block(spark, targets, what, manager.root, ttl) as lockset:
            yield lockset
        return
    try:
        block = engine_of(spark).hold(spark._jsparkSession, answer.write(targets), what)
    except Exception as exc:  # refused, denied or unavailable, as a statement is
        raise _zklock_error(exc) from None
    bound = client()
    lockset = bound.held_set(block.handle()) if bound is not None else LockSet.empty()
    with run_held(block, lockset.objects), statement_scope():
        yield lockset


@contextmanager
def connect_block(spark: Any, targets: list[LockTarget], what: str, root: str,
                  ttl: float) -> Iterator[LockSet]:
    """A Spark Connect client's block, held by the server's engine
    (engine/ConnectBlocks.java) until its end, renewed every third of ``ttl`` while it
    runs: its operations tagged with its id. It yields what the server holds, as a LockSet
    this process does not own (releasing it does nothing: the block's end does). A loss
    while it ran raises LockLost at its end, from the block's own error if it had one."""
    try:
        block, nodes = hold_block(spark, targets, what, ttl)
    except Exception as exc:  # refused, denied or unavailable, as a statement is
        raise _zklock_error(exc) from None
    if not block:
        yield LockSet.empty()
        return
    by_object = {n.rsplit("/", 1)[0]: n for n in nodes}
    held = [HeldLock(t, t.obj.znode(root), by_object.get(t.obj.znode(root), ""), 0)
            for t in targets]
    tag = Tag.BLOCK + block
    view = LockSet(None, held, query_id=block)
    renewing: Optional[Renewal] = None
    failed: Optional[BaseException] = None
    try:
        spark.addTag(tag)
        renewing = Renewal(lambda: renew_block(spark, block), ttl / 3, view)
        with statement_scope():
            yield view
    except BaseException as exc:
        failed = exc
        raise
    finally:
        if renewing is not None:
            renewing.stop()
        spark.removeTag(tag)
        try:
            release_block(spark, block)
        except Exception as lost:
            error = _zklock_error(lost)
            if isinstance(error, ZkLockError) or failed is None:
                raise error from failed  # a loss replaces the block's own error, its cause


class Renewal:
    """Calls ``renew`` every ``interval`` seconds on a thread of its own until
    :meth:`stop`. A renewal that finds the block gone marks ``view`` lost and ends (the
    block's release raises the loss); one that fails otherwise (the server out of reach a
    moment) is tried again at the next interval."""

    def __init__(self, renew: Callable[[], None], interval: float, view: LockSet) -> None:
        self._renew = renew
        self._interval = interval
        self._view = view
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zklock-block-renewal",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._renew()
            except Exception as exc:
                error = _zklock_error(exc)
                if isinstance(error, ZkLockError):  # not held any more
                    self._view.mark_lost(str(error))
                    return
                log.warning("renewing a Spark Connect block failed (tried again): %s", exc)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=self._interval + 30)


def _zklock_error(exc: Exception) -> Exception:
    """zklock's exception for the engine's refusal, denial or loss behind ``exc``; ``exc``
    itself when zklock was not its cause."""
    error = lock_error(exc)
    return error if isinstance(error, Exception) else exc


def describe(action: str, targets: list[LockTarget]) -> str:
    """What a DataFrame's lock nodes record as their query."""
    tables = sorted({t.obj.table_name for t in targets if t.obj.table})
    shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
    return f"DataFrame.{action} reading {shown}" if tables else f"DataFrame.{action}"
