"""LockingCatalog: ``spark.catalog`` whose every mutating method takes its locks, or is refused.

PySpark's Catalog changes tables without SQL: ``createTable``, ``dropTable``,
``truncateTable``, ``recoverPartitions``, ``createDatabase`` ... Each such method
takes the locks of the SQL statement it stands for, planned by the same
LockPlanner (``dropTable(t)`` locks as ``DROP TABLE t`` does), so there is one
definition of what locks what. Methods that only read the catalog, or only touch
session-local state (temporary views, the cache, the current database), pass
through. A method zklock does not know, for example one a newer PySpark adds, is
refused until it is classified here: fail closed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedStatement
from ..mode import Mode

if TYPE_CHECKING:
    from .context import SessionContext

#: Methods that read the catalog or change only this session's state: no lock.
PASS_THROUGH = frozenset({
    "currentCatalog", "setCurrentCatalog", "listCatalogs", "currentDatabase",
    "setCurrentDatabase", "listDatabases", "getDatabase", "databaseExists", "listTables",
    "getTable", "listFunctions", "functionExists", "getFunction", "listColumns", "tableExists",
    "listPartitions", "listViews", "getTableProperties", "getCreateTableString", "isCached",
    "cacheTable",  # lazy: the data is read (and S-locked) by the action that fills the cache
    "uncacheTable", "clearCache", "refreshTable", "refreshByPath", "dropTempView",
    "dropGlobalTempView", "registerFunction",
})

#: Mutating methods and the SQL statement whose locks they take ({} is the name argument).
AS_STATEMENT = {
    "dropTable": "DROP TABLE {}",
    "dropView": "DROP VIEW {}",
    "createDatabase": "CREATE DATABASE {}",
    "dropDatabase": "DROP DATABASE {}",
    "truncateTable": "TRUNCATE TABLE {}",
    "analyzeTable": "ANALYZE TABLE {} COMPUTE STATISTICS",
    "recoverPartitions": "ALTER TABLE {} RECOVER PARTITIONS",
}
#: Mutating methods that create a table: X on it (and S on its database).
CREATES_TABLE = frozenset({"createTable", "createExternalTable"})


class LockingCatalog:
    """The wrapped session's Catalog, with locks on every method that changes tables."""

    def __init__(self, session: SessionContext) -> None:
        self._session = session
        self._catalog = session.spark.catalog

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._catalog, name)
        if name.startswith("_") or name in PASS_THROUGH or not callable(value):
            return value
        if name in AS_STATEMENT or name in CREATES_TABLE:
            return self._locked(name, value)
        raise UnsupportedStatement(
            f"zklock does not know whether Catalog.{name} changes tables, so it is refused;"
            " use SQL, or the bare session explicitly (LockingSession.spark.catalog)")

    def __dir__(self) -> list[str]:
        return sorted(PASS_THROUGH | set(AS_STATEMENT) | CREATES_TABLE)

    def _locked(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        session = self._session
        first = next(iter(inspect.signature(method).parameters))

        def call(*args: Any, **kwargs: Any) -> Any:
            target = str(args[0] if args else kwargs[first])
            if name in CREATES_TABLE:
                targets = session.planner.plan_write(target)
            else:
                targets = session.planner.plan_sql(AS_STATEMENT[name].format(target),
                                                   strict=False).targets
            if not any(t.mode is Mode.EXCLUSIVE for t in targets) and name != "analyzeTable":
                raise UnsupportedStatement(f"zklock found nothing to lock for Catalog.{name}"
                                           f"({target!r}), so it is refused")
            return session.execution.locked(targets, f"Catalog.{name} {target}",
                                      lambda: method(*args, **kwargs))
        call.__name__ = name
        call.__doc__ = method.__doc__
        return call
