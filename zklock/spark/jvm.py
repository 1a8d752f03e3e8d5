"""zklock's JVM module: the one jar of Java that zklock runs inside Spark.

It holds, under ``java/`` beside this file, one directory per concept: ``engine`` (every
statement Spark executes under its locks: ``EngineLocks`` and the nodes and guard it adds),
``planner`` (the lock rules: ``LockPlanner``, ``PlanWalker``, ``NodeKinds``, ``LockAnswer``),
``commit`` (the commit fence and the isolated committers), ``connect`` (the Spark Connect
plugin) and ``adapters``; and ``protocol.properties``, what Python and Java agree on, from
which the build generates the module's ``zklock.Protocol`` (protocol.java_source).

Where the jar comes from (:func:`module_jar`), first match wins, each only when its build
(a hash of the sources for the installed Spark and zklock's version) is this zklock's:

1. a zklock jar (``zklock*.jar``) already in the installed Spark's ``jars/``, placed there
   by an image builder (``zklock spark jar``); one of another build there is refused, since
   Spark loads its classes before any other copy;
2. the jar of the installed Spark's line that a wheel carries (``jars/`` beside this file,
   built by ``make dist``: no JDK and no write needed);
3. compiled on first use with the machine's ``javac`` against the installed PySpark's jars
   and cached as ``zklock-spark-<spark version>-<build>.jar`` in :func:`cache_dir` (a
   source or editable install).

Every jar targets the oldest Java its Spark line runs on (:func:`java_release`): Java 8
for Spark 3.5, Java 17 for 4.x.

One source tree serves every supported Spark line: what differs between lines (a class
renamed, a command added) lives in small adapter classes under ``java/adapters/spark-<line>/``,
each named for what it adapts (``ExecuteImmediate``, ``SaveAsTable``...). A line's directory
holds only the adapters that changed in that line: the build takes, for each adapter, the
copy of the newest line not newer than the installed Spark (:func:`sources`). The Spark
Connect plugin is compiled where the installed Spark has its Connect server (PySpark 3.5's
pip package does not).

Where no jar can be had (a source install without a JDK), the Spark layer refuses to run,
in one line (:class:`JvmModuleError`): there is no second planner to fall back to, and
falling back to fewer locks is never an option.

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

from ..config import env_name, from_environment
from ..errors import ZkLockError
from ..servers.java import jdk_tool
from . import protocol

HERE = Path(__file__).parent
#: The Java sources, a package per folder. java/ itself (package ``zklock``): what users name
#: in their Spark conf or catch (the extension, the Connect plugin, the committers, the
#: refusal) and the protocol shared with Python, so those names never move; java/engine
#: (``zklock.engine``: every statement under its locks), java/planner (``zklock.planner``: the
#: lock rules), java/commit (``zklock.commit``: the fence and the staging), and
#: java/adapters (``zklock.adapters``: what differs between Spark lines; a source folder per
#: line, from which :func:`sources` takes each class from the newest line at or below the
#: running Spark's).
JAVA = HERE / "java"
#: The source the build generates from protocol.properties and the settings table
#: (protocol.java_source), compiled with the rest.
GENERATED = "zklock/Protocol.java"
#: The Spark Connect plugin: compiled only against a Spark with a Connect server.
CONNECT_PLUGIN = JAVA / "ConnectLockPlugin.java"
#: One directory per Spark line, ``spark-<major>.<minor>``: the adapters from that line on.
ADAPTERS = JAVA / "adapters"
#: Adapters whose copies from some line on use Spark Connect's server classes: such a copy
#: is compiled only against a Spark with a Connect server; without one, the older line's
#: copy stays (PipelineStarts: no Connect server, no pipeline run to lock).
CONNECT_ADAPTERS = {"PipelineStarts.java": (4, 1)}
#: The Java sources every Spark line shares.
COMMON_SOURCES = sorted(p for p in JAVA.rglob("*.java")
                        if p != CONNECT_PLUGIN and ADAPTERS not in p.parents)
#: The Spark versions zklock supports: from the oldest adapter line up to this one.
NEWEST_SUPPORTED = (4, 3)
#: What the build writes into the jar: zklock's version, the protocol, the build, the Spark.
PROPERTIES = "zklock/module.properties"
#: The request format of the Connect plugin (ConnectLockPlugin.PROTOCOL).
PROTOCOL = protocol.Version.CONNECT
#: The jars a wheel carries, one per Spark line: ``zklock-spark-<line>.jar`` (make dist).
PACKAGED = HERE / "jars"


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


def jar_line(version: str) -> tuple[int, int]:
    """The line whose adapters a jar for Spark ``version`` is built from: the newest line
    with adapters of its own not newer than ``version`` (4.1 for 4.3.0). One jar serves the
    whole line."""
    line = adapter_line(version)
    return max(ln for ln in adapter_lines() if ln <= line)


def served_lines(version: str) -> list[str]:
    """The Spark lines (``"4.1"``, ...) a jar built for ``version`` serves: those whose
    :func:`jar_line` is its own. The build writes them into the jar, whose Spark plugin
    refuses to start any other Spark (EnginePlugin.java)."""
    oldest, line = adapter_lines()[0], jar_line(version)
    return [f"{major}.{minor}" for major in range(oldest[0], NEWEST_SUPPORTED[0] + 1)
            for minor in range(10) if oldest <= (major, minor) <= NEWEST_SUPPORTED
            and jar_line(f"{major}.{minor}.0") == line]


def java_release(version: str) -> str:
    """The Java release a jar for Spark ``version`` targets: the oldest its line runs on
    (Spark 3.5 runs on Java 8, 11 and 17; Spark 4 needs 17)."""
    return "8" if adapter_line(version) < (4, 0) else "17"


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
                needs_connect = CONNECT_ADAPTERS.get(src.name)
                if not connect and needs_connect is not None and (major, minor) >= needs_connect:
                    continue  # it needs the Connect server this Spark lacks
                adapters[src.name] = src  # a newer line's copy replaces an older one's
    return (COMMON_SOURCES + ([CONNECT_PLUGIN] if connect else [])
            + [adapters[name] for name in sorted(adapters)])


def has_connect_server(jars: Path | None = None) -> bool:
    """Does the Spark whose jars are in ``jars`` (by default, the installed PySpark's) carry
    its Connect server? PySpark 4's pip package does, 3.5's does not."""
    return any((jars or _spark_jars()).glob("spark-connect_*.jar"))


@functools.cache
def build_hash(version: str | None = None, connect: bool | None = None) -> str:
    """What the jar is built from: its Java sources for Spark ``version`` (by default the
    installed one, with or without the Connect plugin as :func:`sources` decides) and
    zklock's version (computed once per process: the installed sources do not change
    under a running client)."""
    digest = hashlib.sha256()
    for src in sources(version or spark_version(), connect):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    digest.update(GENERATED.encode() + b"\0" + protocol.java_source().encode())
    digest.update(zklock_version().encode() + b"\0" + java_release(version or spark_version())
                  .encode())
    return digest.hexdigest()[:16]


def check_pyspark() -> None:
    """Raise :class:`JvmModuleError`, one line, when the installed PySpark is not one zklock
    supports (before an import error deep in the Spark layer says it less clearly)."""
    try:
        installed = spark_version()  # what the module is built for
    except ImportError:
        raise JvmModuleError("PySpark 3.5 to 4.3 is not installed here, and zklock's Spark"
                             " layer and its commands need it: pip install 'zklock[spark]'"
                             ) from None
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


def _javac() -> str:
    found = jdk_tool("javac")
    if found is None:
        raise JvmModuleError("zklock's JVM module (its lock planner) is compiled on first use"
                             " from a source install and needs a JDK: install zklock from its"
                             " wheel (make dist), which carries the jar, or a JDK with javac"
                             " 17+ (apt-get install openjdk-17-jdk-headless), or set JAVA_HOME")
    return found


_BUILD_LOCK = threading.Lock()


@functools.cache
def module_jar() -> Path:
    """The module's jar for the installed Spark: one already in Spark's ``jars/``, the
    wheel's, or compiled now (see the module's docstring), found once per process. Raises
    :class:`JvmModuleError`, one line, when none can be had."""
    version, build = spark_version(), build_hash()
    placed = [j for j in sorted(_spark_jars().glob("zklock*.jar")) if jar_info(j)]
    for jar in placed:
        info = jar_info(jar)
        if info.get("build") != build:
            raise JvmModuleError(
                f"{jar} is a zklock jar of another build (zklock {info.get('version')}, build"
                f" {info.get('build')}, not {build}) and Spark loads it before any other:"
                f" replace it with this zklock's (zklock spark jar --output {jar.parent})")
        return jar
    return jar_for(version)


def in_spark_jars(jar: Path) -> bool:
    """Is ``jar`` one Spark puts on every class path itself (its installed ``jars/``)?"""
    return jar.parent == _spark_jars()


def jar_for(version: str | None = None) -> Path:
    """The module's jar for Spark ``version`` (by default the installed one), for an image
    builder to place in that Spark's ``jars/``: the installed Spark's own (built if need
    be), else the one this wheel carries for the version's line, chosen by ``version``
    alone, so that a host without PySpark (an image's build stage) has it too. Raises
    :class:`JvmModuleError` when there is none: a source install builds only for the
    PySpark it runs with, and without PySpark the version must be named."""
    try:
        installed: str | None = spark_version()
        jar_line(installed)
    except ImportError:
        installed = None
    except JvmModuleError:  # a PySpark zklock does not support: the named version decides
        if version is None:
            raise
        installed = None
    if version is None and installed is None:
        raise JvmModuleError("no PySpark here to take the Spark version from: name it"
                             " (zklock spark jar --spark-version 3.5.4), or pip install"
                             " 'zklock[spark]'")
    if installed is not None and (version is None or jar_line(version) == jar_line(installed)):
        shipped = packaged_jar(installed)
        if jar_info(shipped).get("build") == build_hash():
            return shipped
        jar = cache_dir() / f"zklock-spark-{installed}-{build_hash()}.jar"
        with _BUILD_LOCK:
            if not jar.exists():
                build_jar(installed, _spark_jars(), jar, connect=has_connect_server())
        return jar
    assert version is not None
    shipped = packaged_jar(version)
    if jar_info(shipped).get("version") != zklock_version():
        major, minor = jar_line(version)
        builds = (f"a source install builds only for its own PySpark, {installed}"
                  if installed else "a source install builds only for an installed PySpark")
        raise JvmModuleError(f"this zklock carries no jar for Spark {major}.{minor} ({builds}):"
                             " install zklock's wheel (make dist)")
    return shipped


def packaged_jar(version: str) -> Path:
    """Where a wheel keeps its jar for Spark ``version``'s line (it may not exist)."""
    major, minor = jar_line(version)
    return PACKAGED / f"zklock-spark-{major}.{minor}.jar"


def cache_dir() -> Path:
    """A writable directory for compiled jars: ``$ZKLOCK_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/zklock``, else ``~/.cache/zklock`` where the home can be written, else
    ``<temp dir>/zklock-<uid>``. An empty variable counts as unset (never the current
    directory); a relative one is refused. Official Spark images run as a user without a
    home (uid 185, ``HOME=/nonexistent``), which the temp directory serves."""
    explicit = from_environment("cache_dir") or ""
    candidates = []
    if explicit:
        if not os.path.isabs(explicit):
            raise JvmModuleError(f"{env_name('cache_dir')} must be an absolute path, not"
                                 f" {explicit!r}")
        candidates.append(Path(explicit))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is to be ignored
        candidates.append(Path(xdg) / "zklock")
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        candidates.append(Path(home) / ".cache" / "zklock")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(Path(tempfile.gettempdir()) / f"zklock-{uid}")
    tried = []
    for where in candidates[:1] if explicit else candidates:
        try:
            where.mkdir(parents=True, exist_ok=True)
            if os.access(where, os.W_OK | os.X_OK):
                return where
            tried.append(f"{where} (not writable)")
        except OSError as exc:
            tried.append(f"{where} ({exc.strerror or exc})")
    raise JvmModuleError("zklock's JVM module needs a writable cache directory to compile"
                         f" into, and has none: {'; '.join(tried)}; set"
                         f" {env_name('cache_dir')}, or install zklock from its wheel, which"
                         " needs none")


def build_jar(version: str, spark_jars: Path, jar: Path, connect: bool) -> Path:
    """Compile the module for Spark ``version`` against ``spark_jars`` (for the oldest Java
    its line runs on) into ``jar``, written whole or not at all."""
    build = build_hash(version, connect)
    jar.parent.mkdir(parents=True, exist_ok=True)
    classes = Path(tempfile.mkdtemp(prefix="zklock-classes-", dir=jar.parent))
    try:
        try:
            generated = classes / "src" / GENERATED  # (not packed: only *.class is)
            generated.parent.mkdir(parents=True)
            generated.write_text(protocol.java_source())
            srcs = [*sources(version, connect), generated]
            proc = subprocess.run([_javac(), "-nowarn", "--release", java_release(version),
                                   "-cp", f"{spark_jars}/*", "-d", str(classes),
                                   *map(str, srcs)],
                                  capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise JvmModuleError(f"zklock's JVM module could not be compiled: {exc}") from None
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln),
                         proc.stderr.strip()[:300])
            raise JvmModuleError(f"zklock's JVM module does not compile against Spark"
                                 f" {version}: {first}")
        tmp = jar.parent / f"{jar.name}.{os.getpid()}.tmp"
        major, minor = jar_line(version)
        props = (f"version={zklock_version()}\nprotocol={PROTOCOL}\nbuild={build}\n"
                 f"spark={version}\nline={major}.{minor}\njava={java_release(version)}\n"
                 f"serves={','.join(served_lines(version))}\n")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: zklock\n")
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
            z.writestr(PROPERTIES, props)
        tmp.replace(jar)  # atomic: a concurrent builder's copy is the same jar
    finally:
        shutil.rmtree(classes, ignore_errors=True)
    return jar


def jar_info(jar: Path) -> dict[str, str]:
    """What :func:`build_jar` wrote into ``jar`` (version, protocol, build, spark, line,
    java); empty for a jar that is not zklock's, or no jar."""
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
    jar = _named_jar(spark) or module_jar()
    key = (id(gateway), str(jar))
    with _LOADERS_LOCK:
        loader = _LOADERS.get(key)
        if loader is None:
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
            parent = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
            loader = _LOADERS[key] = jvm.java.net.URLClassLoader(urls, parent)
    return jvm.java.lang.Class.forName(f"zklock.{name}", True, loader)


def _named_jar(spark: Any) -> Path | None:
    """This zklock's jar where the application's ``spark.jars`` names one (an image builder's
    or an operator's, checked by :func:`zklock.spark.configure`): used as it is, never built
    again; None otherwise."""
    for named in str(spark.sparkContext.getConf().get("spark.jars", "") or "").split(","):
        path = Path(named.strip().removeprefix("file:"))
        if named.strip() and jar_info(path).get("build") == build_hash():
            return path
    return None


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
