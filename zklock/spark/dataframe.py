"""Lock-aware DataFrames: reads lock for the duration of each action, writes lock their target.

Spark's queries are lazy, so a DataFrame from a LockingSession takes its S
locks when an action runs (collect, count, show, toPandas, take, first, head,
tail, foreach, foreachPartition, toLocalIterator, isEmpty, toArrow,
checkpoint, localCheckpoint) and releases them when it returns. Every
DataFrame derived from it (select, filter, join, groupBy().agg(), na, ...)
is lock-aware too, and it remains a real PySpark DataFrame, so it can be
passed anywhere one is expected.

Writers lock their target: ``df.write.insertInto/saveAsTable`` and
``df.writeTo(t).append/overwrite/overwritePartitions/create/replace/
createOrReplace`` take X on the table (X on the pinned partition for
``overwrite(condition)`` when the condition pins it), and S on the
DataFrame's sources. ``df.write.save(path)`` and ``parquet/csv/json/orc/text/
xml(path)`` take X on every catalog table stored at, above or below the path
(a write inside a table's directory is a write to that table); ``jdbc``
writes outside the catalog, so only its sources are locked.
``df.mergeInto(t, cond)...merge()`` takes X on t and S on the sources.
``df.writeStream`` is refused, and ``df.sparkSession`` is the LockingSession.

The lock-aware behaviour is written once, as mixins (:class:`LockAware`,
:class:`WriterLocks`, :class:`WriterV2Locks`), and put on PySpark's classic
classes here and on its Spark Connect classes in :mod:`.connect_frames`.

Not covered: ``df.rdd`` and ``df.toJSON()`` (they leave the SQL engine as
RDDs, whose later actions zklock cannot see).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Optional

from pyspark.sql.classic.dataframe import DataFrame as _ClassicDataFrame
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter, DataFrameWriterV2

from ..errors import UnsupportedStatement

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
#: Path writes of DataFrameWriter: X on catalog tables stored there, S on the sources.
PATH_WRITES = ("parquet", "csv", "json", "orc", "text", "xml", "jdbc")


class LockAware:
    """What makes a PySpark DataFrame lock-aware; mixed into a DataFrame class first."""

    _zk_session: SessionContext
    #: the writer classes of this kind of session (set by the concrete class)
    _zk_writer: type
    _zk_writer_v2: type

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

    # ---- writes -----------------------------------------------------------
    @property
    def write(self) -> Any:
        return self._zk_writer(self)

    def writeTo(self, table: str) -> Any:
        return self._zk_writer_v2(self, table)

    def mergeInto(self, table: str, condition: Any) -> Any:
        return LockingMerge(super().mergeInto(table, condition), self, table)  # type: ignore

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


# ---- writers --------------------------------------------------------------------
class PathOption:
    """Remembers a writer's ``path`` option: where save() writes, or a table's location,
    so the write also locks the catalog tables stored there. Shared by both writers."""

    _zk_path: Optional[str] = None

    def option(self, key: str, value: Any) -> Any:
        if key.lower() == "path":
            self._zk_path = str(value)
        super().option(key, value)  # type: ignore[misc]
        return self

    def options(self, **options: Any) -> Any:
        for key, value in options.items():
            self.option(key, value)
        return self


class WriterLocks(PathOption):
    """``df.write`` that locks the target table in X and the sources in S; mixed into a
    DataFrameWriter class first."""

    _zk_df: Any

    def _locked(self, table: Optional[str], what: str, fn: Any,
                path: Optional[str] = None) -> Any:
        """Run the write ``fn``: X on ``table`` or on the catalog tables stored at the
        written path (a write inside a table's location is a write to that table)."""
        session = self._zk_df._zk_session
        paths = tuple(p for p in (path, self._zk_path) if p)  # saveAsTable's "path" too
        return session.execution.write(self._zk_df, table, what, fn, paths=paths)

    def insertInto(self, tableName: str, overwrite: Optional[bool] = None) -> None:
        parent = super().insertInto  # type: ignore[misc]
        return self._locked(tableName, f"insertInto {tableName}",
                            lambda: parent(tableName, overwrite))

    def saveAsTable(self, name: str, format: Optional[str] = None, mode: Optional[str] = None,
                    partitionBy: Any = None, **options: Any) -> None:
        parent = super().saveAsTable  # type: ignore[misc]
        return self._locked(name, f"saveAsTable {name}",
                            lambda: parent(name, format, mode, partitionBy, **options))

    def save(self, path: Optional[str] = None, format: Optional[str] = None,
             mode: Optional[str] = None, partitionBy: Any = None, **options: Any) -> None:
        parent = super().save  # type: ignore[misc]
        target = path or next((str(v) for k, v in options.items() if k.lower() == "path"),
                              None)
        return self._locked(None, f"save {target or ''}".strip(),
                            lambda: parent(path, format, mode, partitionBy, **options),
                            path=target)


def _path_write(name: str) -> Any:
    def method(self: WriterLocks, *args: Any, **kwargs: Any) -> Any:
        parent = getattr(super(WriterLocks, self), name)
        target = args[0] if args else kwargs.get("path", kwargs.get("url", ""))
        path = None if name == "jdbc" else (target or None)
        return self._locked(None, f"{name} {target}".strip(),
                            lambda: parent(*args, **kwargs), path=path)
    method.__name__ = name
    method.__doc__ = getattr(DataFrameWriter, name).__doc__
    return method


for _name in PATH_WRITES:
    setattr(WriterLocks, _name, _path_write(_name))


class WriterV2Locks(PathOption):
    """``df.writeTo(table)`` that locks the table in X and the sources in S; mixed into a
    DataFrameWriterV2 class first."""

    _zk_df: Any
    _zk_table: str

    def _locked(self, what: str, fn: Any, condition: Any = None) -> Any:
        session = self._zk_df._zk_session
        paths = (self._zk_path,) if self._zk_path else ()
        return session.execution.write(self._zk_df, self._zk_table,
                                       f"writeTo {self._zk_table} {what}", fn, paths=paths,
                                       condition=condition)

    def append(self) -> None:
        return self._locked("append", super().append)  # type: ignore[misc]

    def overwrite(self, condition: Any) -> None:
        parent = super().overwrite  # type: ignore[misc]
        return self._locked("overwrite", lambda: parent(condition), condition=condition)

    def overwritePartitions(self) -> None:
        return self._locked("overwritePartitions",
                            super().overwritePartitions)  # type: ignore[misc]

    def create(self) -> None:
        return self._locked("create", super().create)  # type: ignore[misc]

    def replace(self) -> None:
        return self._locked("replace", super().replace)  # type: ignore[misc]

    def createOrReplace(self) -> None:
        return self._locked("createOrReplace", super().createOrReplace)  # type: ignore[misc]


class LockingMerge(Adopting):
    """``df.mergeInto(t, cond)...merge()``: X on the target, S on the source, during merge()."""

    def __init__(self, inner: Any, df: LockAware, table: str) -> None:
        super().__init__(inner, self._step)
        self._df, self._table = df, table

    def _step(self, out: Any) -> Any:
        """Keep every step of the builder (whenMatched().updateAll() ...) lock-aware."""
        if type(out).__name__.endswith("MergeIntoWriter"):
            self._inner = out
            return self
        if type(out).__module__.startswith("pyspark"):
            return Adopting(out, self._step)
        return out

    def merge(self) -> None:
        session = self._df._zk_session
        return session.execution.write(self._df, self._table, f"mergeInto {self._table}",
                                       self._inner.merge)


# ---- PySpark's classic classes ------------------------------------------------------
class LockingWriter(WriterLocks, DataFrameWriter):
    """``df.write`` of a classic session."""

    def __init__(self, df: LockingDataFrame) -> None:
        super().__init__(df)
        self._zk_df = df


class LockingWriterV2(WriterV2Locks, DataFrameWriterV2):
    """``df.writeTo(table)`` of a classic session."""

    def __init__(self, df: LockingDataFrame, table: str) -> None:
        super().__init__(df, table)
        self._zk_df = df
        self._zk_table = table


class LockingDataFrame(LockAware, _ClassicDataFrame):
    """A classic PySpark DataFrame whose actions and writes take zklock locks."""

    _zk_writer = LockingWriter
    _zk_writer_v2 = LockingWriterV2

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
