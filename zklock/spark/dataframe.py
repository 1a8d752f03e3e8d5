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
DataFrame's sources. ``df.write.save(path)``, ``parquet/csv/json/orc/text/
xml(path)`` and ``jdbc`` write outside the catalog, so only their sources are
locked. ``df.mergeInto(t, cond)...merge()`` takes X on t and S on the sources.

Not covered: ``df.rdd`` and ``df.toJSON()`` (they leave the SQL engine as
RDDs, whose later actions zklock cannot see), and streaming queries.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

from pyspark.sql.classic.dataframe import DataFrame as _ClassicDataFrame
from pyspark.sql.group import GroupedData
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter, DataFrameWriterV2

from ..errors import UnsupportedStatement

if TYPE_CHECKING:
    from .session import LockingSession

ACTIONS = frozenset({
    "collect", "count", "show", "toPandas", "take", "first", "head", "tail", "foreach",
    "foreachPartition", "isEmpty", "toArrow", "checkpoint", "localCheckpoint",
})
_NOT_WRAPPED = ACTIONS | {"toLocalIterator", "write", "writeTo", "mergeInto", "writeStream",
                          "rdd", "na",
                          "stat", "sparkSession", "sql_ctx", "schema", "columns", "dtypes",
                          "isStreaming", "storageLevel"}


class LockingDataFrame(_ClassicDataFrame):
    """A PySpark DataFrame whose actions and writes take zklock locks."""

    def __init__(self, df: _ClassicDataFrame, session: LockingSession) -> None:
        super().__init__(df._jdf, session.spark)
        self._zk_session = session

    @property
    def sparkSession(self) -> LockingSession:  # type: ignore[override]
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
        session = self._zk_session
        return session.run_read(self, action, fn)

    def toLocalIterator(self, prefetchPartitions: bool = False) -> Iterator[Any]:
        """Holds the S locks until the iterator is exhausted or closed."""
        session = self._zk_session
        handle = session.open_read(self, "toLocalIterator")
        parent = super().toLocalIterator

        def rows() -> Iterator[Any]:
            with handle:
                yield from handle.iterate(lambda: parent(prefetchPartitions))
        return rows()

    # ---- writes -----------------------------------------------------------
    @property
    def write(self) -> DataFrameWriter:
        return LockingWriter(self)

    def writeTo(self, table: str) -> DataFrameWriterV2:
        return LockingWriterV2(self, table)

    def mergeInto(self, table: str, condition: Any) -> Any:
        return _LockingMerge(super().mergeInto(table, condition), self, table)

    def __repr__(self) -> str:
        return "Locking" + super().__repr__()


def _action(name: str) -> Any:
    base = getattr(_ClassicDataFrame, name)

    @functools.wraps(base)
    def method(self: LockingDataFrame, *args: Any, **kwargs: Any) -> Any:
        return self._zk_locked(name, lambda: base(self, *args, **kwargs))
    return method


def _transform(name: str) -> Any:
    base = getattr(_ClassicDataFrame, name)

    @functools.wraps(base)
    def method(self: LockingDataFrame, *args: Any, **kwargs: Any) -> Any:
        return adopt(base(self, *args, **kwargs), self._zk_session)
    return method


def adopt(value: Any, session: LockingSession) -> Any:
    """Make DataFrames (and groupings of them) coming out of Spark lock-aware."""
    if isinstance(value, LockingDataFrame):
        return value
    if isinstance(value, _ClassicDataFrame):
        return LockingDataFrame(value, session)
    if isinstance(value, GroupedData):
        return _Adopting(value, lambda v: adopt(v, session))
    return value


class _Adopting:
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


def adopting(builder: Any, session: LockingSession) -> Any:
    """A PySpark builder (a stream reader, ...) whose every step stays wrapped and whose
    DataFrames come out lock-aware."""
    def step(out: Any) -> Any:
        out = adopt(out, session)
        if isinstance(out, LockingDataFrame) or not type(out).__module__.startswith("pyspark"):
            return out
        return _Adopting(out, step)
    return _Adopting(builder, step)


for _name in ACTIONS:
    setattr(LockingDataFrame, _name, _action(_name))
for _name, _value in vars(_ClassicDataFrame).items():
    if _name.startswith("_") and _name not in ("__getitem__",):
        continue
    if _name in _NOT_WRAPPED or not callable(_value) or isinstance(
            _value, (property, staticmethod, classmethod)):
        continue
    setattr(LockingDataFrame, _name, _transform(_name))


class LockingWriter(DataFrameWriter):
    """``df.write`` that locks the target table in X and the sources in S."""

    def __init__(self, df: LockingDataFrame) -> None:
        super().__init__(df)
        self._zk_df = df
        self._zk_path: Optional[str] = None  # a "path" option: where save() writes

    def option(self, key: str, value: Any) -> LockingWriter:
        if key.lower() == "path":
            self._zk_path = str(value)
        super().option(key, value)
        return self

    def options(self, **options: Any) -> LockingWriter:
        for key, value in options.items():
            self.option(key, value)
        return self

    def _locked(self, table: Optional[str], what: str, fn: Any,
                path: Optional[str] = None) -> Any:
        """Run the write ``fn``: X on ``table`` or on the catalog tables stored at the
        written path (a write inside a table's location is a write to that table)."""
        session = self._zk_df._zk_session
        paths = tuple(p for p in (path, self._zk_path) if p)  # saveAsTable's "path" too
        return session.run_write(self._zk_df, table, None, what, fn, paths=paths)

    def insertInto(self, tableName: str, overwrite: Optional[bool] = None) -> None:
        parent = super().insertInto
        return self._locked(tableName, f"insertInto {tableName}",
                            lambda: parent(tableName, overwrite))

    def saveAsTable(self, name: str, format: Optional[str] = None, mode: Optional[str] = None,
                    partitionBy: Any = None, **options: Any) -> None:
        parent = super().saveAsTable
        return self._locked(name, f"saveAsTable {name}",
                            lambda: parent(name, format, mode, partitionBy, **options))

    def save(self, path: Optional[str] = None, format: Optional[str] = None,
             mode: Optional[str] = None, partitionBy: Any = None, **options: Any) -> None:
        parent = super().save
        target = path or next((str(v) for k, v in options.items() if k.lower() == "path"),
                              None)
        return self._locked(None, f"save {target or ''}".strip(),
                            lambda: parent(path, format, mode, partitionBy, **options),
                            path=target)


def _path_write(name: str) -> Any:
    base = getattr(DataFrameWriter, name)

    @functools.wraps(base)
    def method(self: LockingWriter, *args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.get("path", kwargs.get("url", ""))
        path = None if name == "jdbc" else (target or None)
        return self._locked(None, f"{name} {target}".strip(),
                            lambda: base(self, *args, **kwargs), path=path)
    return method


for _name in ("parquet", "csv", "json", "orc", "text", "xml", "jdbc"):
    if hasattr(DataFrameWriter, _name):  # X on catalog tables stored there, S on sources
        setattr(LockingWriter, _name, _path_write(_name))


class _LockingMerge(_Adopting):
    """``df.mergeInto(t, cond)...merge()``: X on the target, S on the source, during merge()."""

    def __init__(self, inner: Any, df: LockingDataFrame, table: str) -> None:
        super().__init__(inner, self._step)
        self._df, self._table = df, table

    def _step(self, out: Any) -> Any:
        """Keep every step of the builder (whenMatched().updateAll() ...) lock-aware."""
        if type(out).__name__.endswith("MergeIntoWriter"):
            self._inner = out
            return self
        if type(out).__module__.startswith("pyspark"):
            return _Adopting(out, self._step)
        return out

    def merge(self) -> None:
        session = self._df._zk_session
        return session.run_write(self._df, self._table, None, f"mergeInto {self._table}",
                                  self._inner.merge)


class LockingWriterV2(DataFrameWriterV2):
    """``df.writeTo(table)`` that locks the table in X and the sources in S."""

    def __init__(self, df: LockingDataFrame, table: str) -> None:
        super().__init__(df, table)
        self._zk_df = df
        self._zk_table = table
        self._zk_path: Optional[str] = None  # a "path" option: the table's location

    def option(self, key: str, value: Any) -> LockingWriterV2:
        if key.lower() == "path":
            self._zk_path = str(value)
        super().option(key, value)
        return self

    def options(self, **options: Any) -> LockingWriterV2:
        for key, value in options.items():
            self.option(key, value)
        return self

    def _locked(self, what: str, fn: Any, partition: Optional[dict] = None) -> Any:
        session = self._zk_df._zk_session
        paths = (self._zk_path,) if self._zk_path else ()
        return session.run_write(self._zk_df, self._zk_table, partition,
                                 f"writeTo {self._zk_table} {what}", fn, paths=paths)

    def append(self) -> None:
        parent = super().append
        return self._locked("append", parent)

    def overwrite(self, condition: Any) -> None:
        parent = super().overwrite
        pins = self._zk_df._zk_session.planner.column_pins(self._zk_table, condition)
        return self._locked("overwrite", lambda: parent(condition), partition=pins)

    def overwritePartitions(self) -> None:
        parent = super().overwritePartitions
        return self._locked("overwritePartitions", parent)

    def create(self) -> None:
        parent = super().create
        return self._locked("create", parent)

    def replace(self) -> None:
        parent = super().replace
        return self._locked("replace", parent)

    def createOrReplace(self) -> None:
        parent = super().createOrReplace
        return self._locked("createOrReplace", parent)


class LockingReader(DataFrameReader):
    """``session.read``: every DataFrame it returns is lock-aware (tables lock; paths do not)."""

    def __init__(self, session: LockingSession) -> None:
        super().__init__(session._spark)
        self._zk_session = session

    def _df(self, jdf: Any) -> LockingDataFrame:
        return LockingDataFrame(super()._df(jdf), self._zk_session)

    def table(self, tableName: str) -> LockingDataFrame:
        self._zk_session.refresh_system_views(tableName)
        return super().table(tableName)  # type: ignore[return-value]
