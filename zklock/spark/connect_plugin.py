"""zklock's planner for the JVM: the Spark Connect plugin jar, and the same planner over py4j.

A Spark Connect client has no Catalyst of its own, so the locks of its statements
and DataFrames are planned in the Connect server, by ``ConnectLockPlugin.java``
(a Spark Connect relation plugin) calling ``LockPlanner.java``, the rules of
``planner.py`` in Java, which reads partitions and views through
``PlanWalker.java`` like the classic planner.

What each plan node class means stays defined once, in ``nodes.py``: this module
writes that table (``node-kinds.tsv``) into the jar, and LockPlanner.java loads it
from its class path. The jar is compiled with the machine's ``javac`` against the
installed PySpark's jars (as ``commit.committer_jar`` does) and cached as
``zklock-connect-<spark version>-<hash>.jar``, the hash covering the Java sources
and the node table, so editing nodes.py builds a new jar.

The same jar loaded into a classic SparkSession's JVM (:func:`load`) gives
:class:`JvmLockPlanner`, which the parity test runs beside ``planner.py`` on every
statement of the conformance corpus.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from ..errors import (
    InvalidArguments,
    InvalidLockObject,
    SparkConnectError,
    UnsupportedStatement,
)
from . import nodes
from .walker import compile_java, jvm_class

HERE = Path(__file__).parent
SOURCES = [HERE / "PlanWalker.java", HERE / "LockPlanner.java", HERE / "ConnectLockPlugin.java"]
#: Where LockPlanner.java and ConnectLockPlugin.java look for what the build wrote.
NODE_TABLE = "zklock/node-kinds.tsv"
PROPERTIES = "zklock/connect-plugin.properties"
#: The class Spark Connect loads (spark.connect.extensions.relation.classes).
PLUGIN_CLASS = "zklock.ConnectLockPlugin"
PLUGIN_SETTING = "spark.connect.extensions.relation.classes"
#: The request format (ConnectLockPlugin.PROTOCOL): both sides must speak the same one.
PROTOCOL = 1


class PluginBuildError(SparkConnectError):
    """The plugin jar cannot be built here (no JDK, no PySpark jars, a compile error)."""


#: planner.py's sets of node names that LockPlanner.java reads from the table too.
PLANNER_SETS = ("VIEW_DDL", "KNOWN_QUERIES", "STATEMENT_CONTAINERS")


def node_table() -> str:
    """``nodes.NODE_KINDS`` and ``nodes.WRITE_WORDS`` (and planner.py's sets of node names
    and pin limit) as the resource LockPlanner.java reads: ``node<TAB>name<TAB>KIND``,
    ``word<TAB>text``, ``set<TAB>SET<TAB>name`` and ``value<TAB>NAME<TAB>value`` lines."""
    from . import planner

    lines = ["# generated from zklock/spark/nodes.py by zklock/spark/connect_plugin.py"]
    lines += [f"node\t{name}\t{kind.name}" for name, kind in sorted(nodes.NODE_KINDS.items())]
    lines += [f"word\t{word}" for word in nodes.WRITE_WORDS]
    for set_name in PLANNER_SETS:
        lines += [f"set\t{set_name}\t{name}" for name in sorted(getattr(planner, set_name))]
    lines.append(f"value\tMAX_PINNED\t{planner.MAX_PINNED}")
    return "\n".join(lines) + "\n"


@functools.cache
def zklock_version() -> str:
    """The installed zklock's version (what the plugin reports as its own)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zklock")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def build_hash() -> str:
    """What the jar is built from: the Java sources, the node table and zklock's version.

    Computed once per process (about 0.5 ms, and every plan request sends it): the
    installed sources and node table do not change under a running client."""
    digest = hashlib.sha256()
    for src in SOURCES:
        digest.update(src.read_bytes())
    digest.update(node_table().encode())
    digest.update(zklock_version().encode())
    return digest.hexdigest()[:16]


def spark_version() -> str:
    """The Spark version of the installed PySpark (whose jars the plugin is compiled against)."""
    import pyspark

    return str(pyspark.__version__)


def plugin_jar() -> Path:
    """``zklock-connect-<spark version>-<hash>.jar`` (plugin, planner, walker, node table),
    built on first use in zklock's cache directory.

    Raises :class:`PluginBuildError` without a JDK or when the sources do not compile
    against the installed Spark.
    """
    version = spark_version()
    build = build_hash()
    classes = compile_java("connect", SOURCES, version)
    if classes is None:
        raise PluginBuildError(
            "zklock's Spark Connect plugin could not be compiled: it needs a JDK (javac, 17+)"
            f" and PySpark {version}'s jars (see the log for the compiler's message)")
    jar = classes.parent / f"zklock-connect-{version}-{build}.jar"
    if jar.exists():
        return jar
    tmp = classes.parent / f"{jar.name}.{os.getpid()}.tmp"
    props = (f"version={zklock_version()}\nprotocol={PROTOCOL}\nbuild={build}\n"
             f"spark={version}\n")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: zklock\n")
        for f in sorted(classes.rglob("*.class")):
            z.write(f, f.relative_to(classes).as_posix())
        z.writestr(NODE_TABLE, node_table())
        z.writestr(PROPERTIES, props)
    tmp.replace(jar)
    return jar


def jar_info(jar: Path) -> dict[str, str]:
    """What :func:`plugin_jar` wrote into ``jar``'s properties (version, protocol, build,
    spark); empty for a jar that is not zklock's plugin."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read(PROPERTIES).decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


class JvmLockPlanner:
    """LockPlanner.java inside a classic SparkSession's JVM, through py4j.

    Its answers are ``planner.py``'s: ``plan_sql(sql)`` and ``plan_dataframe(df)`` give the
    lists ``plan_parsed(...).rows()`` and ``plan_dataframe(df)`` give (the parity test checks
    every corpus statement), and a refusal raises the same error.

    Methods are called through ``java.lang.reflect.Method`` objects of this instance's own
    class: py4j caches methods by class name, and a second jar (another node table) loaded
    into the same JVM has a class of the same name.
    """

    def __init__(self, java_planner: Any, spark: Any) -> None:
        self._planner = java_planner
        self._spark = spark
        self._gateway = spark.sparkContext._gateway
        self._methods = {str(m.getName()): m for m in java_planner.getClass().getMethods()
                         if str(m.getName()) in ("planSql", "planStatement", "planDataFrame",
                                                 "planWrite", "nodeTable")}

    def _call(self, name: str, *args: Any) -> str:
        """Invoke a method of LockPlanner.java, raising Spark's errors as PySpark does."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import UnknownException, convert_exception

        array = self._gateway.new_array(self._gateway.jvm.java.lang.Object, len(args))
        for i, arg in enumerate(args):
            array[i] = arg
        try:
            return str(self._methods[name].invoke(self._planner, array))
        except Py4JJavaError as exc:
            cause = exc.java_exception.getCause()  # inside the InvocationTargetException
            converted = convert_exception(cause) if cause is not None else None
            if converted is not None and not isinstance(converted, UnknownException):
                raise converted from None
            raise

    def plan_sql(self, sql: str, strict: bool = False) -> list[tuple[str, str]]:
        """The locks of ``sql`` as (object, mode) in acquisition order (``strict=False``:
        EXPLAIN LOCKS, a statement the analyzer rejects is planned from its parsed form)."""
        return parse_rows(self._call("planSql", sql, strict))

    def plan_statement(self, sql: str, strict: bool = False
                       ) -> tuple[list[tuple[str, str]], bool]:
        """(locks, whether Spark runs ``sql`` as a command): ``plan_sql`` with planner.py's
        ``LockPlan.is_command``."""
        text = self._call("planStatement", sql, strict)
        kind, _, rest = text.partition("\n")
        if not kind.startswith("KIND\t"):
            return parse_rows(text), True  # a refusal line: parse_rows raises it
        return parse_rows(rest), kind == "KIND\tcommand"

    def plan_dataframe(self, df: Any) -> list[tuple[str, str]]:
        """The S locks an action on the classic DataFrame ``df`` takes."""
        return parse_rows(self._call("planDataFrame", df._jdf))

    def plan_write(self, table: Optional[str], df: Any = None,
                   partition: Optional[dict[str, Any]] = None,
                   paths: Sequence[str] = ()) -> list[tuple[str, str]]:
        """A DataFrame write's locks: X on ``table`` (or its static ``partition`` prefix) and
        on the catalog tables at, above or below ``paths``; the locks of ``df`` besides."""
        from py4j.java_collections import ListConverter, MapConverter

        client = self._gateway._gateway_client
        spec = (MapConverter().convert({str(k): str(v) for k, v in partition.items()}, client)
                if partition is not None else None)
        jpaths = ListConverter().convert([str(p) for p in paths], client)
        source = df._jdf.queryExecution().logical() if df is not None else None
        return parse_rows(self._call("planWrite", table, spec, jpaths, source))

    def node_table(self) -> str:
        """The node table the JVM side loaded (``name<TAB>KIND`` lines, then the words)."""
        return self._call("nodeTable")


def invalid_object(payload: str) -> InvalidLockObject:
    """objects.py's error for LockPlanner.java's ``[name, reason]`` (JSON) of a bad name."""
    (name, reason), _ = json.JSONDecoder().raw_decode(payload.strip())
    return InvalidLockObject(name, reason)


def parse_rows(text: str) -> list[tuple[str, str]]:
    """LockPlanner.java's answer as (object, mode) pairs; its refusal line raised as the
    error planner.py raises (UnsupportedStatement, InvalidArguments, InvalidLockObject)."""
    if text.startswith("ERROR\t"):
        raise UnsupportedStatement(text[len("ERROR\t"):].strip())
    if text.startswith("INVALID\t"):
        raise InvalidArguments(text[len("INVALID\t"):].strip())
    if text.startswith("OBJECT\t"):
        raise invalid_object(text[len("OBJECT\t"):])
    out = []
    for line in text.splitlines():
        obj, _, mode = line.rpartition("\t")
        out.append((obj, mode))
    return out


def load(spark: Any, unknown_statements: str = "refuse") -> JvmLockPlanner:
    """LockPlanner.java in ``spark``'s JVM (a classic SparkSession), from the plugin jar."""
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    parent = spark._jsparkSession.getClass().getClassLoader()
    cls = jvm_class(spark, plugin_jar(), "zklock.LockPlanner")
    types = gateway.new_array(jvm.java.lang.Class, 2)
    types[0] = jvm.java.lang.Class.forName("org.apache.spark.sql.classic.SparkSession", True,
                                           parent)
    types[1] = jvm.java.lang.Class.forName("java.lang.String")
    args = gateway.new_array(jvm.java.lang.Object, 2)
    args[0] = spark._jsparkSession
    args[1] = unknown_statements
    return JvmLockPlanner(cls.getConstructor(types).newInstance(args), spark)
