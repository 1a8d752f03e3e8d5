"""Running one Spark statement under its locks, and stopping it when they are lost.

Hive lets a query keep writing after its locks vanished. Here every locked
statement runs under its own Spark job tag (its query id; a tag leaves the
pipeline's own job group alone); when its LockSet is lost the tagged jobs
are cancelled and the statement raises
:class:`~zklock.errors.LockLost`. A cancelled file-source write never
reaches its job commit, so its output never becomes visible. The set's
fencing token is a local property (``zklock.fencing.token``) of every job,
for table formats that record it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..errors import LockLost
from ..lockset import LockSet
from ..mode import Mode

T = TypeVar("T")

#: The local property carrying the LockSet's fencing token to every job of the statement.
FENCING_TOKEN = "zklock.fencing.token"

_local = threading.local()


def new_query_id() -> str:
    """The query id of the next locked statement on this thread: the one a
    :func:`query_id_scope` gives, else a fresh ``zklock-<16 hex>``."""
    scoped = getattr(_local, "query_id", None)
    return scoped if scoped is not None else f"zklock-{uuid.uuid4().hex[:16]}"


@contextmanager
def query_id_scope(query_id: str) -> Iterator[None]:
    """Statements run on this thread inside the block record ``query_id`` on their lock
    nodes (the scheduler passes its execution's id, so executions join SHOW LOCKS)."""
    previous = getattr(_local, "query_id", None)
    _local.query_id = query_id
    try:
        yield
    finally:
        _local.query_id = previous


def in_locked_statement() -> bool:
    """True inside a locked statement on this thread (nested actions take nothing more)."""
    return getattr(_local, "depth", 0) > 0


class LockedStatement:
    """Runs ``fn`` with ``lockset`` held: own job tag, fencing token, cancel on loss."""

    def __init__(self, spark: Any, lockset: LockSet, query_id: str, description: str,
                 walker: Any = None) -> None:
        self.sc = spark.sparkContext
        self.walker = walker  # PlanWalker.java: tag and token in one JVM call each way
        self.lockset = lockset
        self.query_id = query_id
        self.description = description[:200]
        self._lost = threading.Event()
        self._reason = ""

    def run(self, fn: Callable[[], T]) -> T:
        with self:
            return fn()

    def __enter__(self) -> LockedStatement:
        self.lockset.check()
        if self.walker is not None:
            self.walker.enter(self.sc._jsc, self.query_id, str(self.lockset.fencing_token))
        else:
            self.sc.addJobTag(self.query_id)
            self.sc.setLocalProperty(FENCING_TOKEN, str(self.lockset.fencing_token))
        self.lockset.on_lost(self._on_lost)
        _local.depth = getattr(_local, "depth", 0) + 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _local.depth -= 1
        if self.walker is not None:
            self.walker.exit(self.sc._jsc, self.query_id)
        else:
            self.sc.removeJobTag(self.query_id)
            self.sc.setLocalProperty(FENCING_TOKEN, None)
        if exc_type is None:
            if self._lost.is_set() or not self.lockset.is_valid:
                raise self._lock_lost(completed=True)
        elif issubclass(exc_type, Exception) and self._lost.is_set():
            raise self._lock_lost() from exc

    @property
    def lost(self) -> bool:
        return self._lost.is_set() or not self.lockset.is_valid

    def _on_lost(self, lockset: LockSet) -> None:
        self._reason = getattr(lockset, "_reason", "") or "session lost"
        self._lost.set()
        try:
            self.sc.cancelJobsWithTag(self.query_id)
        except Exception:  # Spark already stopped: nothing left to cancel
            pass

    def _lock_lost(self, completed: bool = False) -> LockLost:
        reason = self._reason or getattr(self.lockset, "_reason", "") or "session lost"
        if completed:
            return LockLost(self.lockset.objects,
                            f"{reason} while {self.query_id} ran; the statement completed (do"
                            " not simply re-run a write), but others may have overlapped it")
        return LockLost(self.lockset.objects,
                        f"{reason}; Spark jobs of {self.query_id} were cancelled")


def covered(held: LockSet, wanted: list[Any]) -> bool:
    """True when ``held`` grants every (object, mode) target in ``wanted``."""
    modes = {h.target.obj: h.target.mode for h in held.held}
    return all(t.obj in modes and (modes[t.obj] is Mode.EXCLUSIVE or t.mode is Mode.SHARED)
               for t in wanted)
