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
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from venvs import SPARK_UID, build_wheel, operator_venv

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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`make dist`'s wheel, for the installed Spark's line (built once for this module)."""
    found = build_wheel(tmp_path_factory.mktemp("dist"))
    line = "{}.{}".format(*jar_line(pyspark.__version__))
    assert f"zklock/spark/jars/zklock-spark-{line}.jar" in zipfile.ZipFile(found).namelist()
    return found


@pytest.mark.docs  # as deployed: in make test-docs, beside the wheel's other installs
def test_a_pipeline_runs_from_the_wheel_as_a_user_without_home_on_a_jre(
        wheel, tmp_path, zk_hosts, root) -> None:
    line = "{}.{}".format(*jar_line(pyspark.__version__))
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


# ---- deployed as platforms deploy it (docs/deploy.md) -----------------------------------

def spark_distribution(base: Path, defaults: dict[str, str]) -> Path:
    """A SPARK_HOME laid out as a Spark distribution, from PySpark's own files: bin/,
    python/ (PySpark as a zip, off every venv's path), jars/ (a directory of its own, for
    zklock's jar to go into), conf/spark-defaults.conf holding ``defaults``."""
    home = base / "spark"
    shipped = Path(pyspark.__file__).parent
    (home / "jars").mkdir(parents=True)
    for jar in (shipped / "jars").iterdir():
        (home / "jars" / jar.name).symlink_to(jar)
    for part in ("bin", "python"):
        (home / part).symlink_to(shipped / part)
    (home / "conf").mkdir()
    (home / "conf" / "spark-defaults.conf").write_text(
        "".join(f"{key} {value}\n" for key, value in defaults.items()))
    return home


def deploy_block(zk_hosts: str, root: str, base: Path, python: Path) -> dict[str, str]:
    """docs/deploy.md's spark-defaults.conf block as an image puts it (its lines as
    written, but the spark.jars and class path lines: the jar is in jars/), pointed at the
    test's ZooKeeper, root and directories."""
    import re

    text = (ROOT / "docs" / "deploy.md").read_text()
    block = text[text.index("A complete `spark-defaults.conf`"):]
    body = re.search(r"```properties\n(.*?)```", block, re.S).group(1)
    conf = dict(line.split(None, 1) for line in body.splitlines()
                if line.strip() and not line.lstrip().startswith("#"))
    assert conf.pop("spark.jars") and conf.pop("spark.driver.extraClassPath")
    assert conf["spark.plugins.defaultList"] == "zklock.EnginePlugin", conf
    del conf["spark.zklock.metrics.port"]  # (a port of its own per process: not here)
    conf.update({"spark.zklock.zookeeper.quorum": zk_hosts, "spark.zklock.root": root,
                 "spark.zklock.eventLog": str(base / "run" / "events.jsonl"),
                 # the Python with zklock, which is not the driver's (spark-sql has none)
                 "spark.zklock.lockClient.python": str(python),
                 "spark.sql.warehouse.dir": str(base / "run" / "warehouse"),
                 "spark.ui.enabled": "false", "spark.driver.memory": "768m"})
    return conf


@pytest.fixture
def image_user() -> Iterator[int]:
    """The official images' user, uid 185; created for the test where the machine has none,
    as their Dockerfile creates it (``useradd -u 185 spark``: Hadoop's login needs a passwd
    entry), and removed after."""
    import pwd

    try:
        pwd.getpwuid(SPARK_UID)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--uid", str(SPARK_UID), "--no-create-home", "--home-dir",
                        "/nonexistent", "--shell", "/usr/sbin/nologin", "zklock-spark"],
                       check=True, timeout=60)
        created = True
    yield SPARK_UID
    if created:
        subprocess.run(["userdel", "zklock-spark"], check=True, timeout=60)


@pytest.fixture(scope="module")
def deployed(wheel) -> Iterator[Path]:
    """A directory every user can read, holding the operator's venv (``venv/``)."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="zklock-deployed-"))
    base.chmod(0o755)
    operator_venv(base, wheel)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def operator_env(base: Path, **more: str) -> dict[str, str]:
    """The environment of a command on the operator's host: no suite variables but which
    ZooKeeper servers run (`make ... ZOOKEEPER=pyspark`)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZKLOCK_", "PYSPARK", "SPARK_")) and k != "PYTHONPATH"
           or k == "ZKLOCK_ZK_JARS"}
    return {**env, **more}


OPERATOR_COMMANDS = [
    ["--help"], ["show"], ["show", "--extended"], ["show", "sales.orders", "--json"],
    ["waits"], ["waits", "--json"],
    ["lease", "grab", "sales.orders:X", "--duration", "60s", "--holder", "ops"],
    ["lease", "list"], ["show", "sales.orders", "--extended"],
    ["timeline", "--events", "{events}", "-o", "{base}/timeline.png"],
    ["auth", "digest"], ["monitoring", "rules"], ["monitoring", "dashboard"],
    ["scheduler", "status"], ["schedule", "list"], ["schedule", "show", "nightly"],
    ["schedule", "executions", "nightly"],
    ["server", "start", "--port", "{port}"], ["server", "status"], ["server", "stop"],
    ["completion", "bash"],
]
#: The commands that run Spark: each says, in one line, what to install.
SPARK_COMMANDS = [
    ["sql", "SELECT 1"], ["explain", "SELECT 1"], ["doctor"],
    ["spark", "connect-server", "start", "--port", "{port}"],
    ["spark", "thrift-server", "start", "--port", "{port}"],
    ["metastore", "start", "--port", "{port}"], ["spark", "jar"],
]


@pytest.mark.docs
def test_every_operator_command_runs_from_the_wheel_without_pyspark(
        deployed, tmp_path, zk_hosts, root) -> None:
    """The people on call install the wheel on a bastion, without the spark extra, and
    ask who holds what: every command that does not run Spark works there (on a real
    ZooKeeper), with shell completion; those that run Spark say so in one line."""
    from zklock.servers.ports import free_port

    zklock = deployed / "venv" / "bin" / "zklock"
    # a scheduled query to show, created where PySpark is (its statement is parsed by Spark)
    admin = {"ZKLOCK_ZK": zk_hosts, "ZKLOCK_ROOT": root, "ZKLOCK_SCHEDULER_ADMINS": "ops"}
    made = subprocess.run([str(Path(sys.executable).parent / "zklock"), "schedule", "create",
                           "nightly", "--cron", "0 2 * * *", "INSERT INTO a SELECT * FROM b"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, **admin, "ZKLOCK_USER": "ops"})
    assert made.returncode == 0, made.stderr
    events = tmp_path / "events.jsonl"
    env = operator_env(deployed, ZKLOCK_ZK=zk_hosts, ZKLOCK_ROOT=root,
                       ZKLOCK_EVENT_LOG=str(events))
    fill = {"events": str(events), "base": str(tmp_path), "port": str(free_port())}
    for command in OPERATOR_COMMANDS:
        args = [a.format(**fill) for a in command]
        own = {"server": operator_env(deployed),  # its own ZooKeeper, state under tmp_path
               "auth": {**env, "ZKLOCK_AUTH": "ops:secret"}}
        ran = subprocess.run([str(zklock), *args], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path, env=own.get(args[0], env))
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, (args, ran.stderr)
    assert (tmp_path / "timeline.png").stat().st_size > 0
    complete = subprocess.run([str(zklock)], capture_output=True, text=True, timeout=60,
                              env={**env, "_ZKLOCK_COMPLETE": "bash_complete",
                                   "COMP_WORDS": "zklock sh", "COMP_CWORD": "1"})
    assert complete.returncode == 0 and "show" in complete.stdout, complete
    for command in SPARK_COMMANDS:  # on free ports: another test's server may hold a default
        command = [a.format(port=free_port()) for a in command]
        ran = subprocess.run([str(zklock), *command], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path, env=env)
        lines = ran.stderr.strip().splitlines()
        assert ran.returncode != 0 and len(lines) == 1, (command, ran.stderr)
        assert "pip install 'zklock[spark]'" in lines[0], (command, lines)


@pytest.mark.docs
def test_a_spark_distribution_is_locked_by_a_child_in_a_python_without_pyspark(
        deployed, image_user, zk_hosts, root) -> None:
    """docs/deploy.md's image, built as written: a Spark distribution whose PySpark is off
    the venv's path, its block in spark-defaults.conf, the wheel in a venv without PySpark,
    the Dockerfile's `zklock spark jar` step; then spark-sql and spark-submit run as the
    image's user (uid 185, no home) on a JRE. Before the step, no Spark process starts;
    after it, each statement is locked by the child lock client: denied (saying whom it
    waits for) while another holder keeps X, run after the release."""
    import re

    from zklock import LockManager

    base = deployed
    python = base / "venv" / "bin" / "python"
    home = spark_distribution(base, deploy_block(zk_hosts, root, base, python))
    run = base / "run"
    run.mkdir()
    uid = image_user
    os.chown(run, uid, uid)
    app = run / "app.py"
    app.write_text("import sys\nfrom pyspark.sql import SparkSession\n"
                   # spark-sql's catalog: the metastore (Derby) in the same directory
                   "spark = SparkSession.builder.enableHiveSupport().getOrCreate()\n"
                   "spark.sql(f'INSERT INTO t VALUES ({sys.argv[1]})').collect()\n"
                   "spark.stop()\n")
    image = {**operator_env(base), **jre_only(base), "HOME": "/nonexistent",
             "SPARK_HOME": str(home), "PYSPARK_PYTHON": str(python),
             "PYSPARK_DRIVER_PYTHON": str(python)}

    def spark(tool: str, *args: str, retries: int = 200) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(home / "bin" / tool), "--conf", f"spark.zklock.lock.retries={retries}",
             "--conf", "spark.zklock.lock.retryInterval=0.05", *args],
            capture_output=True, text=True, timeout=600, cwd=run, env=image, user=uid,
            group=uid, extra_groups=[])

    # the image built without the jar: no Spark process starts
    for tool, args in (("spark-sql", ["-e", "SELECT 1"]), ("spark-submit", [str(app), "0"])):
        refused = spark(tool, *args)
        assert refused.returncode != 0, refused.stderr[-2000:]
        assert "ClassNotFoundException: zklock.EnginePlugin" in refused.stderr, (
            tool, [ln for ln in refused.stderr.splitlines() if "Exception" in ln][:5])
    # the Dockerfile's step, as written, on this Spark (its version, its SPARK_HOME)
    text = (ROOT / "docs" / "deploy.md").read_text()
    step = re.search(r"&& (zklock spark jar --spark-version (\S+) --output (\S+))", text)
    command = (step.group(1).replace(step.group(2), pyspark.__version__)
               .replace(step.group(3), str(home / "jars")).split())
    placed = subprocess.run([str(python.parent / command[0]), *command[1:]],
                            capture_output=True, text=True, timeout=120,
                            env=operator_env(base))
    assert placed.returncode == 0, placed.stderr
    assert [j.name for j in (home / "jars").glob("zklock*.jar")] == [Path(
        placed.stdout.strip()).name]

    made = spark("spark-sql", "-e", "CREATE TABLE t (id INT) USING parquet;"
                 " INSERT INTO t VALUES (1);")
    assert made.returncode == 0, made.stderr[-3000:]
    assert "WARN FileOutputCommitter" not in made.stderr  # nothing a bare Spark prints not
    holder = LockManager(hosts=zk_hosts, root=root)
    try:
        with holder.acquire([("default.t", "X")], query_id="backfill-42"):
            # (a second of retries: the child's line reaches the JVM's stderr while it waits)
            denied = spark("spark-sql", "-e", "INSERT INTO t VALUES (2)", retries=20)
            submitted = spark("spark-submit", str(app), "3", retries=0)
    finally:
        holder.close()
    assert denied.returncode != 0, denied.stderr[-3000:]
    assert "zklock: lock not acquired" in denied.stderr, denied.stderr[-3000:]
    assert "query backfill-42" in denied.stderr, denied.stderr[-3000:]
    assert ("\nzklock: INSERT INTO t VALUES (2) waits for X on default.t:"
            in denied.stderr), denied.stderr[-3000:]
    assert submitted.returncode != 0, submitted.stderr[-3000:]
    # (a PySpark driver's output, its traceback included, goes to spark-submit's stdout)
    assert "default.t (X requested) is held in X" in submitted.stdout, submitted.stdout[-3000:]
    assert spark("spark-sql", "-e", "INSERT INTO t VALUES (4)").returncode == 0
    after = spark("spark-submit", str(app), "5")
    assert after.returncode == 0, after.stderr[-3000:]
    rows = spark("spark-sql", "-e", "SELECT id FROM t ORDER BY id")
    assert rows.stdout.split() == ["1", "4", "5"], (rows.stdout, rows.stderr[-3000:])
