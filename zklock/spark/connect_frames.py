"""Lock-aware DataFrames and writers of Spark Connect sessions.

The same behaviour as :mod:`.dataframe` (its mixins), on PySpark's Spark Connect classes:
an action holds S on what it reads, a write holds X on its target, and what derives from
a lock-aware DataFrame stays lock-aware. Kept apart because PySpark's Connect client needs
extra packages (grpcio, pandas, pyarrow: ``zklock[connect]``) that a classic pipeline does
not install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.connect.dataframe import DataFrame as _ConnectDataFrame
from pyspark.sql.connect.readwriter import DataFrameWriter, DataFrameWriterV2

from .dataframe import (
    Adopting,
    LockAware,
    WriterLocks,
    WriterV2Locks,
    adopt,
    install,
    register_adopter,
)

if TYPE_CHECKING:
    from .context import SessionContext


class LockingConnectWriter(WriterLocks, DataFrameWriter):
    """``df.write`` of a Spark Connect session."""

    def __init__(self, df: LockingConnectDataFrame) -> None:
        super().__init__(df._plan, df._session)
        self._zk_df = df


class LockingConnectWriterV2(WriterV2Locks, DataFrameWriterV2):
    """``df.writeTo(table)`` of a Spark Connect session."""

    def __init__(self, df: LockingConnectDataFrame, table: str) -> None:
        super().__init__(df._plan, df._session, table)
        self._zk_df = df
        self._zk_table = table


class LockingConnectDataFrame(LockAware, _ConnectDataFrame):
    """A Spark Connect DataFrame whose actions and writes take zklock locks."""

    _zk_writer = LockingConnectWriter
    _zk_writer_v2 = LockingConnectWriterV2

    def __init__(self, df: _ConnectDataFrame, session: SessionContext) -> None:
        super().__init__(df._plan, session.spark)
        self._zk_session = session


install(LockingConnectDataFrame, _ConnectDataFrame)


def adopt_connect(value: Any, session: SessionContext) -> Any:
    """:func:`~zklock.spark.dataframe.adopt` for Spark Connect values."""
    if isinstance(value, _ConnectDataFrame):
        return LockingConnectDataFrame(value, session)
    if type(value).__name__ == "GroupedData":
        return Adopting(value, lambda v: adopt(v, session))
    return value


register_adopter(adopt_connect)
