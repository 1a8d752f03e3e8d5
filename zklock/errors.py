"""The exceptions zklock raises.

Every error a user can cause or meet carries enough text to act on it
without a traceback: which object, which holder, which setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ZkLockError(Exception):
    """Base class of every zklock error."""


class InvalidLockObject(ZkLockError, ValueError):
    """A lock object name that cannot be turned into a safe znode path."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"invalid lock object {text!r}: {reason}")


class InvalidArguments(ZkLockError, ValueError):
    """Bad arguments to a lock or lease call (the lease API's InvalidArgumentsException)."""


class LockNotAcquired(ZkLockError):
    """A lock request was denied on every attempt.

    ``conflicts`` lists the records (object, mode, holder data) that denied it
    on the last attempt.
    """

    def __init__(self, message: str, conflicts: Sequence[Any] = ()) -> None:
        self.conflicts = list(conflicts)
        super().__init__(message)


class LockRequestCancelled(LockNotAcquired):
    """A waiting lock request given up because its caller cancelled it (a streaming query
    stopped while its batch waited for a holder): it holds nothing and waits no more."""


class LeaseAlreadyExists(LockNotAcquired):
    """A lease could not be granted because a conflicting lock or lease is held."""


class ExceedsMaxLeaseTime(ZkLockError):
    """Extending a lease would take its total lifetime past the configured maximum."""


class UnsupportedStatement(InvalidArguments):
    """A statement zklock cannot lock, refused before it takes or leaves any lock.

    Raised for a command or write whose plan node zklock has no lock rule for (unless
    ``unknown_statements=lock``), for writes zklock never locks (stored procedures, sinks
    it cannot tell the writes of, pipelines' own SQL), and for statement text that cannot be
    known before it runs.
    """


class LeaseNotFound(InvalidArguments):
    """No live lease has the given id (dropped, reaped, or taken over)."""


class LockLost(ZkLockError):
    """A held lock set can no longer be guaranteed (session suspended, expired or nodes gone)."""

    def __init__(self, objects: Sequence[str], reason: str) -> None:
        self.objects = list(objects)
        self.reason = reason
        shown = ", ".join(self.objects[:5]) + (" ..." if len(self.objects) > 5 else "")
        super().__init__(f"lock lost on {shown or 'no objects'}: {reason}")


class WriteFailed(ZkLockError):
    """A statement that wrote under its locks failed. The message names what it wrote and
    what became of the write: nothing of it committed (the common case: a task or the job
    failed, and its staging is removed), its commit failed part-way, or it committed and a
    later step failed. Spark's own error is its ``__cause__`` where Python has it."""


class NotAuthorized(ZkLockError):
    """The identity in use may not do this (a scheduler rule, or an admin-only operation)."""


class NotLeaseHolder(NotAuthorized):
    """A lease was asked to be dropped, extended or unlocked by someone other than its holder
    (HDFS: only the lease's client renews or closes; others wait for the soft limit or call
    recoverLease)."""


class ZooKeeperUnavailable(ZkLockError):
    """ZooKeeper could not be reached within the connect timeout, or was lost in the middle of
    an operation for longer than its retries."""


class ServerError(ZkLockError):
    """The embedded ZooKeeper server could not be started, stopped or found."""


class SparkConnectError(ZkLockError):
    """A Spark Connect server cannot plan zklock's locks (unreachable, without zklock's plugin,
    with another version of it, or built for another Spark), or cannot be started or found."""
