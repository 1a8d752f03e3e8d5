"""Spark's JVM as zklock needs it: the parser, the analyzer and Catalyst plans, via py4j.

This is the one module that knows Spark's internal class names. Every call
crosses py4j (about 0.1 ms each), so helpers fetch a whole Scala collection
in one call (``mkString``) instead of element by element. Errors raised by
Spark reach the caller as PySpark's own exceptions (ParseException,
AnalysisException, ...), never as raw Py4JJavaError.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.errors.exceptions.captured import capture_sql_exception

T = TypeVar("T")
# Joins the items of a Scala collection rendered in one py4j call. Random per process, so
# no name or partition value (text anyone may write) can contain it and split an item.
SEP = f"\u0001{secrets.token_hex(8)}\u0001"
ARROW = " -> "  # how a Scala Map renders an entry


def option_text(text: str) -> str | None:
    """``Some(v)`` -> v, ``None`` -> None (a Scala Option rendered by ``mkString``)."""
    if text.startswith("Some(") and text.endswith(")"):
        return text[5:-1]
    return None


def captured(func: Callable[..., T]) -> Callable[..., T]:
    """Raise Spark's exceptions as PySpark exceptions (what ``spark.sql`` does)."""
    return capture_sql_exception(func)  # type: ignore[no-any-return]


class SparkJvm:
    """Handles on one SparkSession's JVM side."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.jss = spark._jsparkSession
        self.jvm = spark._jvm
        state = self.jss.sessionState()
        self.parser = state.sqlParser()
        self.state = state
        self.catalog = state.catalog()
        jvm = self.jvm
        modes = getattr(jvm.org.apache.spark.sql.execution,
                        "CommandExecutionMode$").__getattr__("MODULE$")
        self._skip, self._all = modes.SKIP(), modes.ALL()
        patterns = getattr(jvm.org.apache.spark.sql.catalyst.trees, "TreePattern$")
        self.plan_expression = patterns.__getattr__("MODULE$").PLAN_EXPRESSION()
        logical = jvm.org.apache.spark.sql.catalyst.plans.logical
        self._logical_plan = logical.LogicalPlan._java_lang_class
        self._command = logical.Command._java_lang_class
        self._dataset = jvm.org.apache.spark.sql.classic.Dataset
        # py4j resolves a dotted class name one package per round trip: resolve once.
        self._option = jvm.scala.Option
        self._none = self._option.apply(None)
        self._table_identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier
        self._converters = jvm.scala.jdk.javaapi.CollectionConverters
        self._path: Any = None  # Hadoop's Path class, resolved on first delete_path
        self._hadoop_conf: Any = None

    # ---- parse, analyze, run ----------------------------------------------
    @captured
    def parse(self, sql: str) -> Any:
        return self.parser.parsePlan(sql)

    @captured
    def analyze(self, plan: Any) -> Any:
        """The analyzed plan, without executing commands (they run in :meth:`run`)."""
        return self.state.executePlan(plan, self._skip).analyzed()

    @captured
    def query_execution(self, plan: Any) -> tuple[Any, Any]:
        """(QueryExecution, analyzed plan): analysis runs now, commands only when run."""
        qe = self.state.executePlan(plan, self._all)
        return qe, qe.analyzed()

    @captured
    def run_query_execution(self, walker: Any, qe: Any) -> Any:
        """Execute through PlanWalker.run, reusing the analysis zklock planned from."""
        from pyspark.sql.classic.dataframe import DataFrame

        return DataFrame(walker.run(qe), self.spark)

    @captured
    def run(self, analyzed: Any) -> Any:
        """Execute an analyzed plan as ``spark.sql`` would (commands run eagerly here)."""
        from pyspark.sql.classic.dataframe import DataFrame

        return DataFrame(self._dataset.ofRows(self.jss, analyzed), self.spark)

    def is_command(self, plan: Any) -> bool:
        return bool(self._command.isInstance(plan))

    def is_logical_plan(self, obj: Any) -> bool:
        return bool(self._logical_plan.isInstance(obj))

    # ---- Scala values -------------------------------------------------------
    def strings(self, seq: Any) -> list[str]:
        """A Scala Seq of strings (or of anything, by ``toString``) in one call."""
        text = seq.mkString(SEP)
        return text.split(SEP) if text else []

    @staticmethod
    def items(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    def mapping(self, scala_map: Any) -> dict[str, str]:
        """A Scala Map of strings as a dict, in one call (iterating py4j's JavaMap is slow).

        Option values come back as ``Some(v)``/``None``: see :func:`option_text`.
        """
        entries = self.strings(scala_map)  # each entry renders as "key -> value"
        if all(entry.count("->") == 1 for entry in entries):
            return dict(entry.split(ARROW) for entry in entries)
        # A key or value holds "->" itself: read keys and values apart (same order).
        return dict(zip(self.strings(scala_map.keys()), self.strings(scala_map.values())))

    @staticmethod
    def option(opt: Any) -> Any:
        return opt.get() if opt.isDefined() else None

    # ---- catalog --------------------------------------------------------------
    def current_database(self) -> str:
        return str(self.catalog.getCurrentDatabase())

    def is_temp_view(self, name: str) -> bool:
        return bool(self.catalog.getTempView(name).isDefined())

    def table_identifier(self, db: str, table: str) -> Any:
        return self._table_identifier(table, self._option.apply(db))

    def partition_schema(self, catalog_table: Any) -> list[tuple[str, str]]:
        """(name, type) of a catalog table's partition columns, in order."""
        fields = json.loads(catalog_table.partitionSchema().json())["fields"]
        return [(f["name"], f["type"] if isinstance(f["type"], str) else "complex")
                for f in fields]

    def table_metadata(self, db: str, table: str) -> Any:
        return self.catalog.getTableMetadata(self.table_identifier(db, table))

    def table_location(self, db: str, table: str) -> str | None:
        """The table's storage location URI; None for a missing table or one without."""
        ident = self.table_identifier(db, table)
        if not self.catalog.tableExists(ident):
            return None
        uri = self.catalog.getTableMetadata(ident).storage().locationUri()
        return str(uri.get().toString()) if uri.isDefined() else None

    def delete_path(self, path: str) -> bool:
        """Delete a file or directory tree through Hadoop's FileSystem (False: not there)."""
        if self._path is None:
            self._path = self.jvm.org.apache.hadoop.fs.Path
            self._hadoop_conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        target = self._path(path)
        return bool(target.getFileSystem(self._hadoop_conf).delete(target, True))

    def qualify(self, path: str) -> str:
        """``path`` as its file system's fully qualified URI (``/x`` -> ``file:/x``)."""
        if self._path is None:
            self._path = self.jvm.org.apache.hadoop.fs.Path
            self._hadoop_conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        target = self._path(path)
        return str(target.getFileSystem(self._hadoop_conf).makeQualified(target).toString())

    def table_locations(self) -> list[tuple[str, str, str]]:
        """(database, table, qualified location) of every catalog table that has one: one
        metastore listing per database."""
        external = self.catalog.externalCatalog()
        out = []
        for db in self.strings(external.listDatabases()):
            names = external.listTables(db)
            if names.isEmpty():
                continue
            for table in self.items(external.getTablesByName(db, names)):
                uri = table.storage().locationUri()
                if uri.isDefined():
                    out.append((db, str(table.identifier().table()),
                                self.qualify(str(uri.get().toString()))))
        return out

    def partition_names(self, catalog_table: Any) -> list[str]:
        """Every partition of a table as Hive's escaped ``k=v/k=v`` name."""
        return self.strings(self.catalog.listPartitionNames(catalog_table.identifier(),
                                                             self._none))
