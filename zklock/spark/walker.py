"""The JVM-side plan walker: PlanWalker.java, compiled on first use and loaded into Spark's JVM.

Walking a Catalyst plan from Python costs 20 to 30 py4j calls (0.15 to 0.3 ms
each); the same walk inside the JVM is one call. The source is compiled with
the machine's ``javac`` against the installed Spark's jars into a cache
directory keyed by Spark version and source hash, then loaded through its own
URLClassLoader whose parent is Spark's class loader. Without a JDK (or when
compilation fails) :func:`load` returns None and the planner walks in Python;
``ZKLOCK_JVM_WALKER=0`` forces that. Both walks give the same locks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote_plus

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("PlanWalker.java")
_CLASSES: dict[tuple, Any] = {}


def _spark_jars() -> Optional[Path]:
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
    except Exception:
        return None
    return jars if jars.is_dir() else None


def _javac() -> Optional[str]:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def compiled(spark_version: str) -> Optional[Path]:
    """The directory holding zklock/PlanWalker.class, compiling it if needed."""
    return compile_java("walker", [SOURCE], spark_version)


def compile_java(name: str, sources: list[Path], spark_version: str) -> Optional[Path]:
    """Compile ``sources`` against the installed Spark's jars into a cache directory keyed
    by Spark version and source hash (reused when present); None without a JDK."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    cache = Path(os.environ.get("ZKLOCK_CACHE_DIR", Path.home() / ".cache" / "zklock"))
    target = cache / f"{name}-{spark_version}-{digest}"
    if target.is_dir():
        return target
    javac, jars = _javac(), _spark_jars()
    if javac is None or jars is None:
        log.info("zklock: no javac or Spark jars; %s not compiled", name)
        return None
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache))
    try:
        proc = subprocess.run([javac, "-nowarn", "-cp", f"{jars}/*", "-d", str(tmp),
                               *map(str, sources)], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            log.warning("zklock: %s did not compile: %s", name, proc.stderr.strip()[:500])
            return None
        try:
            tmp.rename(target)
        except OSError:  # another process won the race: use its copy
            pass
        return target if target.is_dir() else None
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("zklock: could not run javac (%s); %s not compiled", exc, name)
        return None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def jvm_class(spark: Any, location: Path, name: str) -> Any:
    """The class ``name`` from ``location`` (a class directory or a jar), loaded into
    ``spark``'s JVM by its own URLClassLoader whose parent is Spark's class loader.

    Loaded once per JVM and location: py4j caches methods by class name, so a second copy
    of the class (from a second loader) would be called with the first one's methods.
    """
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    key = (id(gateway), str(location), name)
    cls = _CLASSES.get(key)
    if cls is None:
        urls = gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(str(location)).toURI().toURL()
        parent = spark._jsparkSession.getClass().getClassLoader()
        loader = jvm.java.net.URLClassLoader(urls, parent)
        cls = _CLASSES[key] = jvm.java.lang.Class.forName(name, True, loader)
    return cls


def load(spark: Any) -> Optional[Any]:
    """A PlanWalker instance inside ``spark``'s JVM, or None (plan in Python)."""
    if os.environ.get("ZKLOCK_JVM_WALKER", "1").lower() in ("0", "false", "no", "off"):
        return None
    try:
        classes = compiled(spark.version)
        if classes is None:
            return None
        jvm = spark._jvm
        gateway = spark.sparkContext._gateway
        parent = spark._jsparkSession.getClass().getClassLoader()
        cls = jvm_class(spark, classes, "zklock.PlanWalker")
        types = gateway.new_array(jvm.java.lang.Class, 1)
        types[0] = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.catalyst.catalog.SessionCatalog", True, parent)
        args = gateway.new_array(jvm.java.lang.Object, 1)
        args[0] = spark._jsparkSession.sessionState().catalog()
        return cls.getConstructor(types).newInstance(args)
    except Exception as exc:  # any JVM surprise: the Python walk still works
        log.warning("zklock: PlanWalker not loaded (%s); planning in Python", exc)
        return None


def parse(text: str) -> list[tuple]:
    """The walker's lines as tuples:

    ("V", db, table) for a permanent view; ("T", namespace, name) for a v2 table;
    ("R", qualified_name, [(col, type)], [(col, [sql literal, ...])], listed or None).
    """
    out: list[tuple] = []
    for line in text.splitlines():
        kind, *fields = line.split("\t")
        if kind in ("V", "T"):
            out.append((kind, unquote_plus(fields[0]), unquote_plus(fields[1])))
            continue
        name, cols_text, pins_text, listed_text = fields
        cols = []
        for item in filter(None, cols_text.split(",")):
            col, _, typ = item.partition(":")
            cols.append((unquote_plus(col), unquote_plus(typ)))
        pins = []
        for item in filter(None, pins_text.split(",")):
            col, _, vals = item.partition("=")
            pins.append((unquote_plus(col), [unquote_plus(v) for v in vals.split("|")]))
        listed = None
        if listed_text.startswith("+"):
            listed = [unquote_plus(v) for v in filter(None, listed_text[1:].split(","))]
        out.append(("R", unquote_plus(name), cols, pins, listed))
    return out
