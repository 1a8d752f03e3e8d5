"""Which Spark lines zklock supports, and which adapters each gets (zklock/spark/jvm.py).

The module's sources are one tree; what differs per Spark line lives in small adapter classes
under zklock/spark/java/adapters/spark-<line>/, a line holding only those that changed in it.
`make test-compat` runs the Spark-facing tests on the other supported lines; here, the choice
itself.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import PROJECT, PYTHON

from zklock.servers.ports import free_port
from zklock.spark.jvm import (
    ADAPTERS,
    CONNECT_PLUGIN,
    JvmModuleError,
    adapter_line,
    build_jar,
    has_connect_server,
    sources,
    spark_version,
)


@pytest.mark.parametrize("version,line", [("3.5.0", (3, 5)), ("3.5.7", (3, 5)),
                                          ("4.0.0", (4, 0)), ("4.0.5", (4, 0)),
                                          ("4.2.1", (4, 2)), ("4.3.1.dev0", (4, 3))])
def test_each_supported_version_is_its_line(version, line):
    assert adapter_line(version) == line


@pytest.mark.parametrize("version", ["3.4.1", "3.0.0", "4.4.0", "5.0.0"])
def test_an_unsupported_version_is_one_clear_line(version):
    with pytest.raises(JvmModuleError, match=f"zklock supports Spark 3.5 to 4.3; this PySpark"
                                             f" is {version}$"):
        adapter_line(version)


@pytest.mark.parametrize("version,picked", [
    ("3.5.0", {"Datasets": "3.5", "ExecuteImmediate": "3.5", "SaveAsTable": "3.5"}),
    ("4.0.0", {"Datasets": "4.0", "ExecuteImmediate": "4.0", "SaveAsTable": "3.5"}),
    ("4.3.0", {"Datasets": "4.0", "ExecuteImmediate": "4.1", "SaveAsTable": "4.1"}),
])
def test_each_adapter_comes_from_the_newest_line_not_newer_than_spark(version, picked):
    chosen = {p.stem: p.parent.name.removeprefix("spark-") for p in sources(version)
              if p.parent.parent == ADAPTERS}
    assert {k: chosen[k] for k in picked} == picked
    every = {p.stem for p in ADAPTERS.glob("*/*.java")}
    assert set(chosen) == every  # each adapter once, on every line


def test_the_connect_plugin_is_built_only_where_spark_has_a_connect_server():
    assert CONNECT_PLUGIN in sources("4.3.0", connect=True)
    assert CONNECT_PLUGIN not in sources("3.5.0", connect=False)


def test_a_spark_without_a_connect_server_builds_the_pipeline_interceptor_stub(spark, tmp_path):
    """A Spark 4.1+ distribution without its Connect server jar: the interceptor (Connect's
    classes) is not compiled, its no-op copy is, and the jar builds (a failed build would
    leave the application without zklock's module: refused, never unlocked, but broken).
    That copy, run where the Connect server is there after all (an application's
    --packages), refuses the application in one line: its pipeline runs would go unlocked."""
    def starts(connect):
        return [p for p in sources("4.3.0", connect=connect) if p.name == "PipelineStarts.java"]

    assert [p.parent.name for p in starts(True)] == ["spark-4.1"]
    assert [p.parent.name for p in starts(False)] == ["spark-3.5"]
    import pyspark

    jars = tmp_path / "jars"  # the installed Spark's jars but its Connect server's
    jars.mkdir()
    for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar"):
        if not j.name.startswith("spark-connect_"):
            (jars / j.name).symlink_to(j)
    assert not has_connect_server(jars)
    jar = build_jar(spark_version(), jars, tmp_path / "zklock.jar", connect=False)
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
    assert "zklock/adapters/PipelineStarts.class" in names
    assert not any(n.startswith("zklock/ConnectLockPlugin") for n in names)
    # the stub in the running application (a Spark of this line with its Connect server)
    from py4j.protocol import Py4JJavaError

    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
    # over the JVM's class path (Spark's jars), not Spark's loader, which holds the running
    # module's copy of the class (a loader asks its parent first)
    loader = jvm.java.net.URLClassLoader(urls, jvm.java.lang.ClassLoader.getSystemClassLoader())
    stub = jvm.java.lang.Class.forName("zklock.adapters.PipelineStarts", True, loader)
    sc = spark.sparkContext._jsc.sc()
    types = gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = sc.getClass()
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = sc
    register = stub.getMethod("register", types)
    if adapter_line(spark_version()) >= (4, 1) and has_connect_server():
        with pytest.raises(Py4JJavaError, match="which zklock's jar was built without") as err:
            register.invoke(None, args)
        message = str(err.value.java_exception.getCause().getMessage())
        assert "\n" not in message and "zklock spark jar" in message
    else:
        register.invoke(None, args)  # no pipelines on this line: nothing to refuse


@pytest.mark.skipif(has_connect_server(), reason="this PySpark has a Spark Connect server")
def test_connect_server_start_is_one_clear_line_where_spark_has_none(tmp_path):
    out = subprocess.run([PYTHON, "-m", "zklock.cli.main", "--state-dir", str(tmp_path),
                          "spark", "connect-server", "start", "--port", str(free_port())],
                         capture_output=True, text=True, timeout=120, cwd=PROJECT)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "has no Spark Connect server" in out.stderr
