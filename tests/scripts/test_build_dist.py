"""make dist (scripts/build_dist.py): the wheel carries zklock's JVM module, and a pipeline
runs from it where Spark images run it.

The wheel is built (for the installed Spark's line: the other lines' builds are the same
code against other jars) and installed, not editable, in a fresh virtualenv. Its
dependencies (PySpark, kazoo, ...) come from the suite's own virtualenv through a ``.pth``
path entry rather than a second 400 MB download; zklock itself is the wheel's (checked).
The pipeline then runs as an official Spark image's user would: no home, no cache
variables, and a JRE: ``java`` alone, with no ``javac`` anywhere on the PATH; and on
``local-cluster[2,1,1024]``, whose executors are JVMs of their own that get zklock's jar as
a cluster's do (spark.jars, served by the driver).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pyspark

from zklock.servers.java import jdk_tool
from zklock.spark.jvm import jar_line

ROOT = Path(__file__).resolve().parents[2]


def jre_only(tmp_path: Path) -> dict[str, str]:
    """PATH and JAVA_HOME of a machine with a JRE only: this JDK's ``java`` in a home of its
    own, and every other command of the PATH except the JDK's tools."""
    java = Path(jdk_tool("java")).resolve()
    jdk_home = java.parent.parent
    jre = tmp_path / "jre" / "bin"
    jre.mkdir(parents=True)
    (jre / "java").symlink_to(java)
    commands = tmp_path / "bin"
    commands.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = Path(entry.path).resolve()
            if (commands / entry.name).exists() or jdk_home in target.parents:
                continue
            (commands / entry.name).symlink_to(entry.path)
    return {"PATH": f"{jre}{os.pathsep}{commands}", "JAVA_HOME": str(jre.parent)}


def test_a_pipeline_runs_from_the_wheel_as_a_user_without_home_on_a_jre(
        tmp_path, zk_hosts, root) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_dist.py"), "--spark",
                    pyspark.__version__, "--out", str(dist)], check=True, timeout=900)
    wheel = next(dist.glob("zklock-*.whl"))
    line = "{}.{}".format(*jar_line(pyspark.__version__))
    assert f"zklock/spark/jars/zklock-spark-{line}.jar" in zipfile.ZipFile(wheel).namelist()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    Path(site.stdout.strip(), "suite-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ZKLOCK_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH", "SPARK_HOME")}
    env.update(jre_only(tmp_path), HOME=str(blocker / "home"))
    run = tmp_path / "run"
    run.mkdir()
    out = subprocess.run([str(python), str(ROOT / "tests" / "scripts" / "wheel_pipeline.py"),
                          zk_hosts, root, str(tmp_path / "warehouse")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=run)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["zklock"].startswith(str(venv)), seen  # the wheel's zklock, not the tree's
    assert seen["jar"] == str(Path(seen["zklock"]).parent / "spark" / "jars"
                              / f"zklock-spark-{line}.jar"), seen
    assert seen["javac"] is None, seen  # a JRE: nothing could have been compiled
    assert seen["denied"] == {"session": True, "plain": True}, seen
    assert seen["rows"] == [1, 4, 5], seen
    # the one zklock jar the driver served its executors (JVMs of their own, whose zklock
    # committers wrote every row above) is the wheel's
    assert [j.rsplit("/", 1)[1] for j in seen["spark_jars"] if "zklock" in j] == [
        f"zklock-spark-{line}.jar"], seen
    assert [p.name for p in run.iterdir() if p.name not in ("spark-warehouse",
                                                            "metastore_db", "derby.log")] == []


def test_every_package_of_the_tree_is_in_the_wheel() -> None:
    """setup.cfg lists the packages the wheel carries: a new package (a folder with an
    __init__.py) that it misses works in the editable install and is absent from the wheel."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    roots = {"zklock": ROOT / "zklock", "zklock.cli": ROOT / "cli",
             "zklock.scheduler": ROOT / "scheduler"}
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            if "__pycache__" not in parts:
                found.add(".".join((name, *parts)))
    assert found == listed, (found - listed, listed - found)
