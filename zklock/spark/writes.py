"""A LockingSession's writes: PySpark's own writers and catalog, locked in Spark's engine.

zklock's engine extension locks every command Spark runs (engine.py, EngineGuard.java), so
a LockingSession has no write path of its own. ``df.write``, ``df.writeTo(t)``,
``df.mergeInto(t, cond)`` and ``session.catalog`` are PySpark's, wrapped only for what the
engine cannot do from the JVM:

- in a classic session, the commands they run are the session's (engine.as_owner): the
  engine's lock client takes their locks with the session's manager, retries and commit
  staging, so ``SET zklock.lock.timeout`` and the session's root apply to them;
- a denial, a loss or a refusal is raised as zklock's exception (LockNotAcquired, LockLost,
  UnsupportedStatement: engine.python_error), not as Spark's wrapping of it;
- Spark 4.0's ``saveAsTable`` drops an overwritten table before it runs any command, where
  the engine cannot see it: there the session locks the whole call itself (X on the table,
  S on the DataFrame's sources), and the engine finds its commands covered;
- where Spark does not lock in its engine (a session built without
  ``zklock.spark.configure``, a Connect server without zklock's extension), a write is
  refused before it runs: nothing else would lock it.

Over Spark Connect the server's lock client takes the locks (zklock's Connect server, on
its root); the client cannot lend it its manager.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

from .dataframe import adopt

if TYPE_CHECKING:
    from .context import SessionContext

#: Catalog methods that only read the catalog or change this session's state: they run
#: even where Spark does not lock in its engine (every other one needs it).
CATALOG_READS = frozenset({
    "currentCatalog", "setCurrentCatalog", "listCatalogs", "currentDatabase",
    "setCurrentDatabase", "listDatabases", "getDatabase", "databaseExists", "listTables",
    "getTable", "listFunctions", "functionExists", "getFunction", "listColumns", "tableExists",
    "listPartitions", "listViews", "getTableProperties", "getCreateTableString", "isCached",
    "cacheTable", "uncacheTable", "clearCache", "refreshTable", "refreshByPath",
    "dropTempView", "dropGlobalTempView", "registerFunction",
})


#: PySpark's modules of write builders (classic and Connect): a step's result stays wrapped.
BUILDER_MODULES = frozenset({"readwriter", "merge"})


class EngineWrites:
    """A PySpark writer, merge builder or catalog whose calls write as ``session`` (see the
    module). What a call returns stays wrapped when it is a builder step of the same kind
    (``mode()``, ``option()``, ``whenMatched()``...) and lock-aware when it is a DataFrame."""

    def __init__(self, inner: Any, session: SessionContext, reads: frozenset[str] = frozenset(),
                 df: Any = None, paths: Optional[list[str]] = None) -> None:
        self._inner = inner
        self._session = session
        self._reads = reads
        self._df = df  # the DataFrame a writer writes (None for the catalog)
        #: the "path" options given along the builder chain (shared by its steps)
        self._paths: list[str] = paths if paths is not None else []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not callable(value):
            return value
        if name in self._reads:
            return functools.partial(self._adopted, value)

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            self._paths.extend(_path_options(name, args, kwargs))
            with self._session.writing():
                if name == "saveAsTable" and self._df is not None:
                    table = str(args[0] if args else kwargs["name"])
                    return self._session.save_as_table(
                        table, self._df, tuple(self._paths),
                        lambda: self._adopted(value, *args, **kwargs))
                return self._adopted(value, *args, **kwargs)
        return call

    def __dir__(self) -> list[str]:
        return dir(self._inner)

    def __repr__(self) -> str:
        return f"EngineWrites({self._inner!r})"

    def _adopted(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(*args, **kwargs)
        if type(out).__module__.rsplit(".", 1)[-1] in BUILDER_MODULES:
            return EngineWrites(out, self._session, self._reads, self._df, self._paths)
        return adopt(out, self._session)


def _path_options(method: str, args: tuple, kwargs: dict[str, Any]) -> list[str]:
    """The "path" a builder call sets: ``option("path", p)``, ``options(path=p)``, or a
    ``path=`` keyword of the final call."""
    if method == "option" and len(args) >= 2 and str(args[0]).lower() == "path":
        return [str(args[1])]
    return [str(v) for k, v in kwargs.items() if k.lower() == "path" and v is not None]
