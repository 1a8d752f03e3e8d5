"""The query id and depth of locked statements on a thread; whether a session is Spark
Connect's; finding the committers' refusal behind an error.

Hive lets a query keep writing after its locks vanished. zklock's engine runs every locked
statement and block under its own Spark job tag, cancels the tagged jobs when its set is
lost, and tells zklock's committers where its lock nodes are: their job commit checks that
every node still exists and otherwise refuses to publish anything (CommitFence.java). A
refused commit raises :class:`~zklock.errors.LockLost`, even when the loss reached
ZooKeeper but not yet this process (:func:`fence_refusal` finds it behind Spark's error).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from .protocol import Fence, Property

__all__ = ["fence_refusal", "in_locked_statement", "is_connect", "new_query_id",
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


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (``SparkSession.builder.remote(...)``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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
