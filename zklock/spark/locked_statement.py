"""Running a Spark Connect client's block under its locks, and stopping it when they are
lost; the query id and depth of locked statements on a thread; finding the committers'
refusal behind an error.

Hive lets a query keep writing after its locks vanished. Here every locked statement runs
under its own Spark job tag (its query id; a tag leaves the pipeline's own job group
alone); when its LockSet is lost the tagged jobs are cancelled and the statement raises
:class:`~zklock.errors.LockLost`. A cancelled file-source write never reaches its job
commit, so its output never becomes visible. The set's fencing token travels with every
job, for table formats that record it.

A cancel can lose the race with the job commit (it runs on the driver after the last task),
so the statement also tells zklock's committers where its lock nodes are: their job commit
checks that every node still exists and otherwise refuses to publish anything
(CommitFence.java). A refused commit raises :class:`LockLost` here too, even when the loss
reached ZooKeeper but not yet this process. In a classic session the engine does all this
for statements and for the blocks Python holds (zklock/spark/held.py); a Spark Connect
client's LockingSession holds a block's locks itself, and its operation tags carry them to
the server's engine (:class:`ConnectJobs`).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..errors import LockLost
from ..locks.lockset import LockSet
from .protocol import Fence, Field, Message, Property, Tag, message

__all__ = ["LockedStatement", "fence_refusal", "in_locked_statement", "new_query_id",
           "query_id_scope", "statement_scope"]

_local = threading.local()


def new_query_id() -> str:
    """The query id of the next locked statement on this thread: the one a
    :func:`query_id_scope` gives, else a fresh ``zklock-<16 hex>``."""
    scoped = getattr(_local, "query_id", None)
    return scoped if scoped is not None else f"zklock-{uuid.uuid4().hex[:16]}"


@contextmanager
def query_id_scope(spark: Any, query_id: str) -> Iterator[None]:
    """Statements run on this thread inside the block record ``query_id`` on their lock
    nodes (the scheduler passes its execution's id, so executions join SHOW LOCKS): those
    Spark's engine locks (a local property of the thread's jobs) and those locked here."""
    previous = getattr(_local, "query_id", None)
    _local.query_id = query_id
    sc = spark.sparkContext
    before = sc.getLocalProperty(Property.QUERY_ID)
    sc.setLocalProperty(Property.QUERY_ID, query_id)
    try:
        yield
    finally:
        _local.query_id = previous
        sc.setLocalProperty(Property.QUERY_ID, before)


def in_locked_statement() -> bool:
    """True inside a locked statement on this thread (nested actions take nothing more)."""
    return getattr(_local, "depth", 0) > 0


@contextmanager
def statement_scope() -> Iterator[None]:
    """The block is a locked statement on this thread (:func:`in_locked_statement`)."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


class ConnectJobs:
    """A Spark Connect session's operations: tagged on the client (Connect's operation
    tags are per thread), interrupted on the server by tag. The fencing token travels as
    a second tag, ``zklock-token-<n>``, and the set's lock nodes as a third,
    ``zklock-fence-<base64url of {"zookeeper": ..., "nodes": [...]}>``: the server adds
    operation tags to its jobs' tags (the ``spark.job.tags`` property every task sees),
    each as ``SparkConnect_..._Tag_<tag>``, and zklock's engine extension there checks
    that the nodes still exist before a command runs (EngineGuard.java)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._extra_tags: dict[str, list[str]] = {}

    def enter(self, tag: str, token: str, zookeeper: Optional[str],
              nodes: Optional[str]) -> None:
        tags = [tag, f"zklock-token-{token}"]
        if zookeeper and nodes:
            fence = json.dumps({Field.ZOOKEEPER: zookeeper, Field.NODES: nodes.split("\n")})
            tags.append(Tag.FENCE + base64.urlsafe_b64encode(fence.encode()).decode())
        for t in tags:
            self.spark.addTag(t)
        self._extra_tags[tag] = tags[1:]

    def exit(self, tag: str) -> None:
        self.spark.removeTag(tag)
        for t in self._extra_tags.pop(tag, []):
            self.spark.removeTag(t)

    def cancel(self, tag: str) -> None:
        self.spark.interruptTag(tag)


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (``SparkSession.builder.remote(...)``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class LockedStatement:
    """A Spark Connect client's block with ``lockset`` held: own operation tags (its query
    id, fencing token and lock nodes), interrupted on loss. (A classic session's blocks are
    held by the engine: zklock/spark/held.py.)"""

    def __init__(self, spark: Any, lockset: LockSet, query_id: str, description: str) -> None:
        self.jobs = ConnectJobs(spark)
        self.lockset = lockset
        self.query_id = query_id
        self.description = description[:200]
        self._lost = threading.Event()
        self._reason = ""

    def __enter__(self) -> LockedStatement:
        self.lockset.check()
        token = str(self.lockset.fencing_token)
        zookeeper, nodes = self._fence()
        self.jobs.enter(self.query_id, token, zookeeper, nodes)
        self.lockset.on_lost(self._on_lost)
        self._scope = statement_scope()
        self._scope.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._scope.__exit__(None, None, None)
        self.jobs.exit(self.query_id)
        if exc_type is None:
            if self._lost.is_set() or not self.lockset.is_valid:
                raise self._lock_lost(completed=True)
        elif issubclass(exc_type, Exception):
            refused = fence_refusal(exc)
            if refused is not None:
                raise self._lock_lost(refused=refused) from exc
            if self._lost.is_set():
                raise self._lock_lost() from exc

    def _fence(self) -> tuple[Optional[str], Optional[str]]:
        """(connect string, node paths) for the committers' check; (None, None) when the
        set holds nothing, so that a commit is not checked."""
        nodes = self.lockset.node_paths
        zookeeper = self.lockset.connect_string if nodes else None
        if zookeeper is None:
            return None, None
        return zookeeper, "\n".join(nodes)

    @property
    def lost(self) -> bool:
        return self._lost.is_set() or not self.lockset.is_valid

    def _on_lost(self, lockset: LockSet) -> None:
        self._reason = lockset.lost_reason or "session lost"
        self._lost.set()
        try:
            self.jobs.cancel(self.query_id)
        except Exception:  # Spark already stopped: nothing left to cancel
            pass

    def _lock_lost(self, completed: bool = False, refused: Optional[str] = None) -> LockLost:
        """The loss, in the words the engine uses for its own statements (protocol.message)."""
        reason = self._reason or self.lockset.lost_reason or "session lost"
        if refused is not None:  # the loss may be known to ZooKeeper only, not to us yet
            known = f"{reason}; " if self.lost else ""
            return LockLost(self.lockset.objects, known + message(
                Message.COMMIT_REFUSED, refused=refused, command=self.query_id))
        return LockLost(self.lockset.objects, message(
            Message.LOST_COMPLETED if completed else Message.LOST_CANCELLED,
            command=self.query_id, reason=reason))


def fence_refusal(exc: BaseException) -> Optional[str]:
    """The refusal of zklock's committers (``zklock: locks lost before commit (...)``)
    behind ``exc``, or None: looked for in the Python exception chain and in the Java
    exception's causes, which PySpark does not always put in the message."""
    seen: set[int] = set()
    pending: list[Any] = [exc]
    while pending and len(seen) < 20:
        err = pending.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        found = _refusal_in(_text(err))
        if found is None:
            found = _refusal_in_java(getattr(err, "java_exception", None)
                                     or getattr(err, "_origin", None))
        if found is not None:
            return found
        pending += [err.__cause__, err.__context__]
    return None


def _text(err: BaseException) -> str:
    try:
        return str(err)  # a Py4JJavaError asks the JVM for its stack trace
    except Exception:
        return ""


def _refusal_in(text: str) -> Optional[str]:
    at = text.find(Fence.REFUSED)
    return text[at:].split("\n", 1)[0].strip() if at >= 0 else None


def _refusal_in_java(throwable: Any, depth: int = 10) -> Optional[str]:
    try:
        while throwable is not None and depth > 0:
            found = _refusal_in(str(throwable.getMessage() or ""))
            if found is not None:
                return found
            throwable, depth = throwable.getCause(), depth - 1
    except Exception:  # a stopped JVM: no more to learn
        pass
    return None
