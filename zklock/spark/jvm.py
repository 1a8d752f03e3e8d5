"""zklock's JVM module: the one jar of Java that zklock runs inside Spark.

It holds, under ``java/`` beside this file, one directory per concept: ``engine`` (every
statement Spark executes under its locks: ``EngineLocks`` and the nodes and guard it adds),
``planner`` (the lock rules: ``LockPlanner``, ``PlanWalker``, ``NodeKinds``, ``LockAnswer``),
``commit`` (the commit fence and the isolated committers), ``connect`` (the Spark Connect
plugin) and ``adapters``; and ``protocol.properties``, what Python and Java agree on. It is
compiled once per Spark version with the machine's ``javac`` against the installed
PySpark's jars and cached as ``zklock-spark-<spark version>-<build>.jar`` (the build hashes
the sources and zklock's version), in ``$ZKLOCK_CACHE_DIR`` or ``~/.cache/zklock``.

One source tree serves every supported Spark line: what differs between lines (a class
renamed, a command added) lives in small adapter classes under ``java/adapters/spark-<line>/``,
each named for what it adapts (``ExecuteImmediate``, ``SaveAsTable``...). A line's directory
holds only the adapters that changed in that line: the build takes, for each adapter, the
copy of the newest line not newer than the installed Spark (:func:`sources`). The Spark
Connect plugin is compiled where the installed Spark has its Connect server (PySpark 3.5's
pip package does not).

Without a JDK the Spark layer refuses to run, in one line (:class:`JvmModuleError`): there
is no second planner to fall back to, and falling back to fewer locks is never an option.

In a classic session the jar is loaded by one class loader per JVM (:func:`module_class`);
where :func:`zklock.spark.configure` already put it on the application's class path (the
committers must be there from the start), that loader finds the classes there first, so
each class exists once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

from ..errors import ZkLockError
from . import protocol

HERE = Path(__file__).parent
#: The Java sources, by concept: java/engine (every statement under its locks), java/planner
#: (the lock rules), java/commit (the committers), java/connect (the Spark Connect plugin),
#: java/adapters (what differs between Spark lines). One package, ``zklock``: the class names
#: users put in their Spark conf stay ``zklock.EngineLocks`` and the like.
JAVA = HERE / "java"
#: The Spark Connect plugin: compiled only against a Spark with a Connect server.
CONNECT_PLUGIN = JAVA / "connect" / "ConnectLockPlugin.java"
#: One directory per Spark line, ``spark-<major>.<minor>``: the adapters from that line on.
ADAPTERS = JAVA / "adapters"
#: The Java sources every Spark line shares.
COMMON_SOURCES = sorted(p for p in JAVA.rglob("*.java")
                        if p != CONNECT_PLUGIN and ADAPTERS not in p.parents)
#: The Spark versions zklock supports: from the oldest adapter line up to this one.
NEWEST_SUPPORTED = (4, 3)
#: What the build writes into the jar: zklock's version, the protocol, the build, the Spark.
PROPERTIES = "zklock/module.properties"
#: The request format of the Connect plugin (ConnectLockPlugin.PROTOCOL).
PROTOCOL = protocol.CONNECT_PROTOCOL


class JvmModuleError(ZkLockError):
    """zklock's JVM module cannot be built or loaded here (no JDK, no PySpark jars, a
    compile error): the Spark layer refuses to run rather than lock less."""


@functools.cache
def zklock_version() -> str:
    """The installed zklock's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zklock")
    except PackageNotFoundError:
        return "0+unknown"


def adapter_lines() -> list[tuple[int, int]]:
    """The Spark lines with adapters of their own, oldest first."""
    lines = []
    for d in ADAPTERS.glob("spark-*"):
        major, minor = d.name.removeprefix("spark-").split(".")
        lines.append((int(major), int(minor)))
    return sorted(lines)


def adapter_line(version: str) -> tuple[int, int]:
    """The Spark line of ``version`` (``(4, 2)`` for 4.2.1). Raises :class:`JvmModuleError`
    for a version zklock does not support."""
    parts = version.split(".")
    line = (int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0))
    oldest = adapter_lines()[0]
    if line < oldest or line > NEWEST_SUPPORTED:
        raise JvmModuleError(
            f"zklock supports Spark {oldest[0]}.{oldest[1]} to"
            f" {NEWEST_SUPPORTED[0]}.{NEWEST_SUPPORTED[1]}; this PySpark is {version}")
    return line


def sources(version: str, connect: bool | None = None) -> list[Path]:
    """Every Java source of the module for Spark ``version`` (one jar, one tree): the common
    sources, each adapter from the newest line not newer than ``version``, and the Connect
    plugin where the Spark has a Connect server (``connect``; by default, whether the
    installed one has)."""
    if connect is None:
        connect = has_connect_server()
    line = adapter_line(version)
    adapters: dict[str, Path] = {}
    for major, minor in adapter_lines():
        if (major, minor) <= line:
            for src in (ADAPTERS / f"spark-{major}.{minor}").glob("*.java"):
                adapters[src.name] = src  # a newer line's copy replaces an older one's
    return (COMMON_SOURCES + ([CONNECT_PLUGIN] if connect else [])
            + [adapters[name] for name in sorted(adapters)])


def has_connect_server(jars: Path | None = None) -> bool:
    """Does the Spark whose jars are in ``jars`` (by default, the installed PySpark's) carry
    its Connect server? PySpark 4's pip package does, 3.5's does not."""
    return any((jars or _spark_jars()).glob("spark-connect_*.jar"))


@functools.cache
def build_hash() -> str:
    """What the jar is built from: its Java sources for the installed Spark and zklock's
    version (computed once per process: the installed sources do not change under a
    running client)."""
    digest = hashlib.sha256()
    for src in [*sources(spark_version()), protocol.FILE]:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    digest.update(zklock_version().encode())
    return digest.hexdigest()[:16]


def check_pyspark() -> None:
    """Raise :class:`JvmModuleError`, one line, when the installed PySpark is not one zklock
    supports (before an import error deep in the Spark layer says it less clearly)."""
    try:
        installed = spark_version()  # what the module is built for
    except ImportError:
        raise JvmModuleError("zklock.spark needs PySpark 3.5 to 4.3: pip install"
                             " 'zklock[spark]'") from None
    adapter_line(installed)


def spark_version() -> str:
    """The version of the Spark whose jars the module is compiled against (its spark-core
    jar's; PySpark's own version where the jar's name says none)."""
    import pyspark

    for jar in _spark_jars().glob("spark-core_*.jar"):
        version = jar.stem.split("-", 2)[-1]  # spark-core_2.13-4.0.0
        if version[:1].isdigit():
            return version
    return str(pyspark.__version__)


def _spark_jars() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    jars = Path(_find_spark_home()) / "jars"
    if not jars.is_dir():
        raise JvmModuleError(f"zklock's JVM module needs PySpark's jars; {jars} is missing")
    return jars


def jdk_tool(name: str) -> str | None:
    """``$JAVA_HOME/bin/<name>`` (java, javac) when it exists, else ``name`` on the PATH;
    None when neither is there."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def _javac() -> str:
    found = jdk_tool("javac")
    if found is None:
        raise JvmModuleError("zklock's JVM module (its lock planner) is compiled on first use"
                             " and needs a JDK: install one with javac 17+ (apt-get install"
                             " openjdk-17-jdk-headless) or set JAVA_HOME")
    return found


_BUILD_LOCK = threading.Lock()


def module_jar() -> Path:
    """The module's jar for the installed Spark, built on first use (raises
    :class:`JvmModuleError` when it cannot be)."""
    version, build = spark_version(), build_hash()
    cache = Path(os.environ.get("ZKLOCK_CACHE_DIR", Path.home() / ".cache" / "zklock"))
    jar = cache / f"zklock-spark-{version}-{build}.jar"
    with _BUILD_LOCK:
        if jar.exists():
            return jar
        cache.mkdir(parents=True, exist_ok=True)
        classes = Path(tempfile.mkdtemp(prefix="zklock-classes-", dir=cache))
        try:
            try:
                srcs = sources(version)
                proc = subprocess.run([_javac(), "-nowarn", "-cp", f"{_spark_jars()}/*",
                                       "-d", str(classes), *map(str, srcs)],
                                      capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as exc:
                raise JvmModuleError(f"zklock's JVM module could not be compiled: {exc}"
                                     ) from None
            if proc.returncode != 0:
                first = next((ln for ln in proc.stderr.splitlines() if "error" in ln),
                             proc.stderr.strip()[:300])
                raise JvmModuleError(f"zklock's JVM module does not compile against Spark"
                                     f" {version}: {first}")
            tmp = cache / f"{jar.name}.{os.getpid()}.tmp"
            props = (f"version={zklock_version()}\nprotocol={PROTOCOL}\nbuild={build}\n"
                     f"spark={version}\n")
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: zklock\n")
                for f in sorted(classes.rglob("*.class")):
                    z.write(f, f.relative_to(classes).as_posix())
                z.writestr(PROPERTIES, props)
                z.write(protocol.FILE, protocol.JAR_ENTRY)
            tmp.replace(jar)  # atomic: a concurrent builder's copy is the same jar
        finally:
            shutil.rmtree(classes, ignore_errors=True)
    return jar


def jar_info(jar: Path) -> dict[str, str]:
    """What :func:`module_jar` wrote into ``jar`` (version, protocol, build, spark); empty for
    a jar that is not zklock's."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read(PROPERTIES).decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


_LOADERS: dict[tuple[int, str], Any] = {}
_LOADERS_LOCK = threading.Lock()


def module_class(spark: Any, name: str) -> Any:
    """The class ``zklock.<name>`` of the module in a classic ``spark``'s JVM.

    One class loader per JVM and jar, whose parent is Spark's (so a jar already on the
    application's class path is used from there): py4j caches methods by class name, so a
    second copy of a class would be called with the first one's methods.
    """
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    jar = module_jar()
    key = (id(gateway), str(jar))
    with _LOADERS_LOCK:
        loader = _LOADERS.get(key)
        if loader is None:
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
            parent = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
            loader = _LOADERS[key] = jvm.java.net.URLClassLoader(urls, parent)
    return jvm.java.lang.Class.forName(f"zklock.{name}", True, loader)


def new_instance(spark: Any, name: str, types: list[str], args: list[Any]) -> Any:
    """``new zklock.<name>(args)`` in ``spark``'s JVM (constructor picked by parameter types)."""
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    loader = spark._jsparkSession.getClass().getClassLoader()
    jtypes = gateway.new_array(jvm.java.lang.Class, len(types))
    for i, t in enumerate(types):
        jtypes[i] = jvm.java.lang.Class.forName(t, True, loader)
    jargs = gateway.new_array(jvm.java.lang.Object, len(args))
    for i, a in enumerate(args):
        jargs[i] = a
    return module_class(spark, name).getConstructor(jtypes).newInstance(jargs)
