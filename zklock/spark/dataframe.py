"""Lock-aware DataFrames: reads lock for the duration of each action, writes lock their target.

Spark's queries are lazy, so a DataFrame from a LockingSession takes its S
locks when an action runs (collect, count, show, toPandas, take, first, head,
tail, foreach, foreachPartition, toLocalIterator, isEmpty, toArrow,
checkpoint, localCheckpoint) and releases them when it returns. Every
DataFrame derived from it (select, filter, join, groupBy().agg(), na, ...)
is lock-aware too, and it remains a real PySpark DataFrame, so it can be
passed anywhere one is expected.

Writes are locked where every write is, in Spark's engine: ``df.write``, ``df.writeTo(t)``
and ``df.mergeInto(t, cond)`` are PySpark's own, run as the session (:mod:`.writes`).
``df.writeStream`` is refused, and ``df.sparkSession`` is the LockingSession.

The lock-aware behaviour is written once, as a mixin (:class:`LockAware`), and put on
PySpark's classic class here and on its Spark Connect class in :mod:`.connect_frames`.

Not covered: ``df.rdd`` and ``df.toJSON()`` (they leave the SQL engine as
RDDs, whose later actions zklock cannot see).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.readwriter import DataFrameReader

from ..errors import UnsupportedStatement
from .classic import ClassicDataFrame as _ClassicDataFrame

if TYPE_CHECKING:
    from .context import SessionContext

ACTIONS = frozenset({
    "collect", "count", "show", "toPandas", "take", "first", "head", "tail", "foreach",
    "foreachPartition", "isEmpty", "toArrow", "checkpoint", "localCheckpoint",
})
_NOT_WRAPPED = ACTIONS | {"toLocalIterator", "write", "writeTo", "mergeInto", "writeStream",
                          "rdd", "na",
                          "stat", "sparkSession", "sql_ctx", "schema", "columns", "dtypes",
                          "isStreaming", "storageLevel"}


class LockAware:
    """What makes a PySpark DataFrame lock-aware; mixed into a DataFrame class first."""

    _zk_session: SessionContext

    @property
    def sparkSession(self) -> SessionContext:
        """The LockingSession: ``df.sparkSession.sql(...)`` locks like the session does."""
        return self._zk_session

    @property
    def writeStream(self) -> Any:
        """Refused: a streaming query writes for ever and cannot hold a statement's locks."""
        raise UnsupportedStatement(
            "zklock does not lock streaming writes (a query that writes for ever cannot hold"
            " a statement's locks); write in batches, or use the bare session explicitly"
            " (LockingSession.spark) and take a lease on the target")

    # ---- reads ------------------------------------------------------------
    def _zk_locked(self, action: str, fn: Any) -> Any:
        return self._zk_session.execution.read(self, action, fn)

    def toLocalIterator(self, prefetchPartitions: bool = False) -> Iterator[Any]:
        """Holds the S locks until the iterator is exhausted or closed."""
        handle = self._zk_session.execution.held_read(self, "toLocalIterator")
        parent = super().toLocalIterator  # type: ignore[misc]

        def rows() -> Iterator[Any]:
            with handle:
                yield from handle.iterate(lambda: parent(prefetchPartitions))
        return rows()

    # ---- writes (locked in Spark's engine) -------------------------------------
    @property
    def write(self) -> Any:
        return self._zk_session.writes(super().write, self)  # type: ignore[misc]

    def writeTo(self, table: str) -> Any:
        return self._zk_session.writes(super().writeTo(table), self)  # type: ignore[misc]

    def mergeInto(self, table: str, condition: Any) -> Any:
        return self._zk_session.writes(super().mergeInto(table, condition),  # type: ignore
                                       self)

    def __repr__(self) -> str:
        return "Locking" + super().__repr__()


def install(cls: type, base: type) -> None:
    """Wrap ``base``'s actions (lock for their duration) and transformations (their result
    is lock-aware) on ``cls``."""
    for name in ACTIONS:
        if hasattr(base, name):
            setattr(cls, name, _action(base, name))
    for name, value in vars(base).items():
        if name.startswith("_") and name not in ("__getitem__",):
            continue
        if name in _NOT_WRAPPED or not callable(value) or isinstance(
                value, (property, staticmethod, classmethod, functools.cached_property)):
            continue
        setattr(cls, name, _transform(base, name))


def _action(base: type, name: str) -> Any:
    method_of_base = getattr(base, name)

    @functools.wraps(method_of_base)
    def method(self: LockAware, *args: Any, **kwargs: Any) -> Any:
        return self._zk_locked(name, lambda: method_of_base(self, *args, **kwargs))
    return method


def _transform(base: type, name: str) -> Any:
    method_of_base = getattr(base, name)

    @functools.wraps(method_of_base)
    def method(self: LockAware, *args: Any, **kwargs: Any) -> Any:
        return adopt(method_of_base(self, *args, **kwargs), self._zk_session)
    return method


def adopt(value: Any, session: SessionContext) -> Any:
    """Make DataFrames (and groupings of them) coming out of Spark lock-aware."""
    if isinstance(value, LockAware):
        return value
    if isinstance(value, _ClassicDataFrame):
        return LockingDataFrame(value, session)
    for adopter in _ADOPTERS:
        adopted = adopter(value, session)
        if adopted is not value:
            return adopted
    if type(value).__name__ == "GroupedData":
        return Adopting(value, lambda v: adopt(v, session))
    return value


#: Adopters of DataFrame kinds defined elsewhere: connect_frames registers Spark Connect's
#: (kept apart because PySpark's Connect client needs packages a classic pipeline lacks).
_ADOPTERS: list[Callable[[Any, Any], Any]] = []


def register_adopter(adopter: Callable[[Any, Any], Any]) -> None:
    """Add ``adopter(value, session)``: a lock-aware version of ``value``, or ``value``
    itself when it is not of the adopter's kind."""
    if adopter not in _ADOPTERS:
        _ADOPTERS.append(adopter)


class Adopting:
    """A helper object (GroupedData, a merge builder step, ...) whose call results pass
    through ``adopt_result``, so what comes out of it stays lock-aware."""

    def __init__(self, inner: Any, adopt_result: Any) -> None:
        self._inner = inner
        self._adopt_result = adopt_result

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return self._adopt_result(value)

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._adopt_result(value(*args, **kwargs))
        return call


def adopting(builder: Any, session: SessionContext) -> Any:
    """A PySpark builder (a stream reader, ...) whose every step stays wrapped and whose
    DataFrames come out lock-aware."""
    def step(out: Any) -> Any:
        out = adopt(out, session)
        if isinstance(out, LockAware) or not type(out).__module__.startswith("pyspark"):
            return out
        return Adopting(out, step)
    return Adopting(builder, step)


# ---- PySpark's classic classes ------------------------------------------------------
class LockingDataFrame(LockAware, _ClassicDataFrame):
    """A classic PySpark DataFrame whose actions take zklock locks."""

    def __init__(self, df: _ClassicDataFrame, session: SessionContext) -> None:
        super().__init__(df._jdf, session.spark)
        self._zk_session = session


install(LockingDataFrame, _ClassicDataFrame)


class LockingReader(DataFrameReader):
    """``session.read``: every DataFrame it returns is lock-aware (tables lock; paths do not)."""

    def __init__(self, session: SessionContext) -> None:
        super().__init__(session.spark)
        self._zk_session = session

    def _df(self, jdf: Any) -> LockingDataFrame:
        return LockingDataFrame(super()._df(jdf), self._zk_session)

    def table(self, tableName: str) -> LockingDataFrame:
        self._zk_session.refresh_system_views(tableName)
        return super().table(tableName)  # type: ignore[return-value]
