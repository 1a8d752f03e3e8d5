"""Where zklock's JVM module jar comes from (zklock/spark/jvm.py), and what it targets.

Each case runs ``module_jar()`` in a Python of its own, with the environment a Spark image
gives it (no home, an empty variable, a Spark whose ``jars/`` an image builder filled):
real compiles, real jars, nothing patched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from zklock.spark import protocol
from zklock.spark.jvm import (
    ADAPTERS,
    JAVA,
    PROPERTIES,
    JvmModuleError,
    adapter_line,
    build_hash,
    cache_dir,
    has_connect_server,
    jar_info,
    module_jar,
    sources,
    spark_version,
)

PYSPARK_JARS = Path(__import__("pyspark").__file__).parent / "jars"


def resolve(tmp_path: Path, cwd: Path | None = None,
            **env: str | None) -> subprocess.CompletedProcess:
    """``module_jar()`` in a fresh Python with ``env`` over this one's (None unsets)."""
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("ZKLOCK_CACHE_DIR", "XDG_CACHE_HOME")}
    for key, value in env.items():
        if value is None:
            run_env.pop(key, None)
        else:
            run_env[key] = value
    return subprocess.run(
        [sys.executable, "-c", "from zklock.errors import ZkLockError\n"
         "from zklock.spark.jvm import module_jar\n"
         "try:\n    print(module_jar())\n"
         "except ZkLockError as e:\n    print('error:', e)\n"],
        capture_output=True, text=True, timeout=600, env=run_env, cwd=cwd or tmp_path)


def rebuilt(jar: Path, copy: Path, old: str, new: str) -> Path:
    """A copy of zklock's ``jar`` whose properties say ``new`` instead of ``old`` (a jar of
    another build, or for another Spark)."""
    with zipfile.ZipFile(jar) as src, zipfile.ZipFile(copy, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == PROPERTIES:
                data = data.replace(old.encode(), new.encode())
            dst.writestr(item, data)
    return copy


def not_a_directory(tmp_path: Path) -> str:
    """A path nothing can create: it lies below a file (as a home that does not exist and
    cannot be made, for root too)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return str(blocker / "home")


def test_the_cache_is_the_variable_then_xdg_then_home_then_temp(tmp_path, monkeypatch):
    monkeypatch.delenv("ZKLOCK_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert cache_dir() == tmp_path / "home" / ".cache" / "zklock"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "zklock"
    monkeypatch.setenv("ZKLOCK_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"
    # empty values are unset, never the current directory; a relative XDG value is ignored
    monkeypatch.setenv("ZKLOCK_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", not_a_directory(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert cache_dir() == tmp_path / "tmp" / f"zklock-{os.getuid()}"


def test_a_cache_that_cannot_be_had_is_one_zklock_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ZKLOCK_CACHE_DIR", not_a_directory(tmp_path))
    with pytest.raises(JvmModuleError, match="needs a writable cache directory") as err:
        cache_dir()
    assert "a-file/home" in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv("ZKLOCK_CACHE_DIR", "relative/cache")
    with pytest.raises(JvmModuleError, match="must be an absolute path"):
        cache_dir()


def test_without_a_home_the_module_is_built_in_the_temp_directory(tmp_path):
    """An official Spark image's user (HOME=/nonexistent) from a source install: built in
    the temp directory, nothing written where it runs."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "cwd").mkdir()
    out = resolve(tmp_path, cwd=tmp_path / "cwd", HOME=not_a_directory(tmp_path),
                  ZKLOCK_CACHE_DIR="", XDG_CACHE_HOME=None, TMPDIR=str(tmp_path / "tmp"))
    jar = Path(out.stdout.strip())
    assert jar.parent == tmp_path / "tmp" / f"zklock-{os.getuid()}", out.stdout + out.stderr
    assert jar_info(jar)["build"] == build_hash()
    assert list((tmp_path / "cwd").iterdir()) == []


def test_the_jar_targets_the_oldest_java_of_its_spark_line():
    """Spark 3.5 runs on Java 8: its jar's class files are Java 8's (major version 52),
    read from the jar; Spark 4's need Java 17 (61)."""
    import pyspark

    expected = 52 if adapter_line(pyspark.__version__) < (4, 0) else 61
    with zipfile.ZipFile(module_jar()) as jar:
        majors = {int.from_bytes(jar.read(name)[6:8], "big") for name in jar.namelist()
                  if name.endswith(".class")}
        assert jar.read(PROPERTIES).decode().count(f"java={8 if expected == 52 else 17}") == 1
    assert majors == {expected}


def test_each_java_package_is_its_folder():
    """java/ is the package zklock, each folder below it a package of its own; the source
    folders of adapters/, one per Spark line, are all zklock.adapters."""
    import re

    for src in sources(spark_version()):
        folder = src.parent.relative_to(JAVA)
        expected = ("zklock.adapters" if ADAPTERS in src.parents
                    else ".".join(("zklock", *folder.parts)))
        declared = re.search(r"^package ([\w.]+);", src.read_text(), re.M)
        assert declared and declared.group(1) == expected, src


def test_the_classes_python_and_users_name_are_in_the_jar():
    """Every class name protocol.properties gives (the ones users write in their Spark conf
    among them) is a class of the jar, at that name: the packages may change, those names
    do not."""
    named = {v for k, v in vars(protocol.JvmClass).items() if k.isupper()}
    named.add(protocol.JvmClass.COMMIT_PROTOCOL)
    if not has_connect_server():  # PySpark 3.5's pip package: no plugin to build
        named.discard(protocol.JvmClass.CONNECT_PLUGIN)
    with zipfile.ZipFile(module_jar()) as jar:
        classes = {n.removesuffix(".class").replace("/", ".") for n in jar.namelist()}
    assert named <= classes, named - classes


def spark_home_with(tmp_path: Path, placed: Path) -> Path:
    """A Spark home whose ``jars/`` holds PySpark's jars and ``placed``, as an image
    builder's ``COPY zklock.jar $SPARK_HOME/jars/``."""
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for jar in PYSPARK_JARS.iterdir():
        (home / "jars" / jar.name).symlink_to(jar)
    (home / "jars" / placed.name).symlink_to(placed)
    return home


def test_a_jar_placed_in_sparks_jars_is_used(tmp_path):
    placed = tmp_path / "zklock-placed.jar"
    placed.write_bytes(module_jar().read_bytes())
    home = spark_home_with(tmp_path, placed)
    out = resolve(tmp_path, SPARK_HOME=str(home), ZKLOCK_CACHE_DIR=not_a_directory(tmp_path))
    assert out.stdout.strip() == str(home / "jars" / placed.name), out.stdout + out.stderr


def test_a_placed_jar_of_another_build_is_refused_in_one_line(tmp_path):
    """Spark loads its jars/ first: a stale zklock there would be the one that runs."""
    stale = rebuilt(module_jar(), tmp_path / "zklock-stale.jar", f"build={build_hash()}",
                    "build=0000000000000000")
    out = resolve(tmp_path, SPARK_HOME=str(spark_home_with(tmp_path, stale)))
    assert out.stdout.startswith("error: ") and out.stdout.count("\n") == 1, out.stdout
    assert "a zklock jar of another build" in out.stdout
    assert "zklock spark jar --output" in out.stdout


def test_configure_uses_the_zklock_jar_spark_jars_names(tmp_path):
    """An operator's spark.jars naming this zklock's jar: no second one is added; naming one
    of another build is one line (Spark would load whichever comes first)."""
    from pyspark.sql import SparkSession

    from zklock.spark import configure

    named = tmp_path / "zklock-operator.jar"
    named.write_bytes(module_jar().read_bytes())
    builder = configure(SparkSession.Builder().config("spark.jars", f"/opt/other.jar,{named}"))
    assert builder._options["spark.jars"] == f"/opt/other.jar,{named}"
    stale = rebuilt(named, tmp_path / "zklock-stale.jar", f"build={build_hash()}",
                    "build=0000000000000000")
    with pytest.raises(JvmModuleError, match="a zklock jar of another build") as err:
        configure(SparkSession.Builder().config("spark.jars", str(stale)))
    assert "\n" not in str(err.value)


def test_a_pipelines_run_is_locked_wherever_its_connect_server_starts(spark):
    """configure() and zklock's plugin (as the SparkContext starts) name zklock's Spark
    Connect interceptor, where a declarative pipeline's run takes its locks (Spark 4.1+:
    adapters/PipelineStarts.java), once, after the interceptors the application names."""
    from conftest import spark_line
    from pyspark.sql import SparkSession

    from zklock.spark import configure
    from zklock.spark.application import PIPELINES_SINCE
    from zklock.spark.jvm import module_class
    from zklock.spark.protocol import Conf, JvmClass

    key, own = Conf.CONNECT_INTERCEPTORS, "com.example.Audit"
    wanted = (f"{own},{JvmClass.PIPELINE_STARTS}" if spark_line() >= PIPELINES_SINCE
              and has_connect_server() else own)
    builder = configure(SparkSession.Builder().config(key, own))
    assert builder._options[key] == wanted
    assert configure(builder)._options[key] == wanted
    jvm, gateway, sc = spark._jvm, spark.sparkContext._gateway, spark.sparkContext._jsc.sc()
    types = gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = sc.getClass()
    register = module_class(spark, "adapters.PipelineStarts").getMethod("register", types)
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = sc
    conf = sc.conf()
    before = conf.get(key, "")
    for _ in range(2):
        register.invoke(None, args)
    named = [n for n in conf.get(key, "").split(",") if n]
    if spark_line() >= PIPELINES_SINCE:
        assert named.count(JvmClass.PIPELINE_STARTS) == 1, named
    else:
        assert conf.get(key, "") == before


def test_the_plugin_refuses_a_spark_its_jar_is_not_built_for(spark):
    """EnginePlugin's check, in the JVM: the running Spark's line must be one the jar serves
    (jvm.served_lines, written into the jar), the extension must be named, and one build
    only may be on the class path; each refusal is one line naming the fix."""
    from py4j.protocol import Py4JJavaError

    from zklock.spark.jvm import jar_info, module_class, module_jar, served_lines

    plugin = module_class(spark, "EnginePlugin")
    jvm = spark._jvm
    ours = jar_info(module_jar())
    assert ours["serves"].split(",") == served_lines(ours["spark"])

    def modules(*infos: dict) -> object:
        listed = jvm.java.util.ArrayList()
        for info in infos:
            props = jvm.java.util.Properties()
            for key, value in info.items():
                props.setProperty(key, value)
            listed.add(props)
        return listed

    string, listing = (jvm.java.lang.Class.forName(n) for n in ("java.lang.String",
                                                              "java.util.List"))
    types = spark.sparkContext._gateway.new_array(jvm.java.lang.Class, 3)
    types[0], types[1], types[2] = string, string, listing
    check = plugin.getMethod("check", types)

    def refusal(extensions: str, version: str, *infos: dict) -> str:
        args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 3)
        args[0], args[1], args[2] = extensions, version, modules(*infos)
        try:
            check.invoke(None, args)
        except Py4JJavaError as exc:  # an InvocationTargetException: the plugin's own
            return str(exc.java_exception.getCause().getMessage())
        return ""

    other = "4.0" if spark.version.startswith("3.") else "3.5"  # a line not running here
    other_line = {**ours, "serves": other, "spark": f"{other}.1"}
    assert refusal(" zklock.EngineLocks , x.Ext", spark.version, ours) == ""
    assert "does not name zklock.EngineLocks" in refusal("io.delta.Ext", spark.version, ours)
    told = refusal("zklock.EngineLocks", spark.version, other_line)
    assert f"built for Spark {other}.1 (lines {other}), not for this Spark {spark.version}" in told
    assert "zklock spark jar --spark-version" in told
    two = refusal("zklock.EngineLocks", spark.version, ours, {**ours, "build": "0ther"})
    assert "zklock jars of different builds" in two
