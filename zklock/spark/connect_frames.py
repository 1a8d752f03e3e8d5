"""Lock-aware DataFrames of Spark Connect sessions.

The same behaviour as :mod:`.dataframe` (its mixin), on PySpark's Spark Connect class: an
action holds S on what it reads, a write is locked by the server's engine, and what derives
from a lock-aware DataFrame stays lock-aware. Kept apart because PySpark's Connect client needs
extra packages (grpcio, pandas, pyarrow: ``zklock[connect]``) that a classic pipeline does
not install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.connect.dataframe import DataFrame as _ConnectDataFrame

from .dataframe import Adopting, LockAware, adopt, install, register_adopter

if TYPE_CHECKING:
    from .context import SessionContext


class LockingConnectDataFrame(LockAware, _ConnectDataFrame):
    """A Spark Connect DataFrame whose actions take zklock locks."""

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
