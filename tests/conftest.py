"""Shared fixtures: one real ZooKeeper per test session (per worker under `make test`'s
pytest-xdist), a unique root per test.

ZooKeeper comes from ZKLOCK_ZK when set, else the project starts its own
server on a free port. If it cannot, the suite fails: it never skips.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import os
import re
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import diagnostics
import pytest
from kazoo.client import KazooClient
from polling import lock_nodes, wait_for, waiting_queries  # noqa: F401  (tests import them from here)
from shuffle import pytest_collection_modifyitems  # noqa: F401  (make flake-hunt's order)

from zklock import LockManager
from zklock.servers.ports import free_port
from zklock.servers.zookeeper import ZkServer


def _parse_between_collections(parse):
    """``ast.parse`` with the cyclic collector paused.

    CPython 3.11 keeps the AST constructor's depth count in interpreter state: a collection
    during ``ast.parse`` that runs a finaliser which formats a traceback (3.11's carets parse
    the line; pytest's unraisable hook formats at once) parses inside the parse and makes the
    outer one raise ``SystemError: AST constructor recursion depth mismatch``
    (python/cpython#106905, pytest-dev/pytest#10763). pytest parses when it reports a
    failure, and Spark Connect's client leaves result iterators whose finaliser raises
    after its session stops: CI saw the report itself fail (INTERNALERROR). Without the
    collector the parse runs no Python code, so nothing can run inside it."""
    @functools.wraps(parse)
    def parse_whole(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return parse_whole


if sys.version_info < (3, 12):
    ast.parse = _parse_between_collections(ast.parse)

# every LockManager of the run (subprocesses too) logs its events where a failed test's report
# finds them (tests/diagnostics.py); a test that sets event_log keeps its own. Set, not
# defaulted: an xdist worker inherits its controller's environment, and would otherwise log
# to the controller's file while its reports read its own
os.environ["ZKLOCK_EVENT_LOG"] = str(diagnostics.EVENT_LOG)


def pytest_report_header(config) -> str:
    """Which ZooKeeper the suite runs on (`make test ZOOKEEPER=pyspark` for 3.9.5)."""
    from zklock.errors import ServerError
    from zklock.servers import zookeeper

    if os.environ.get("ZKLOCK_ZK"):
        return f"zklock: ZooKeeper at ZKLOCK_ZK={os.environ['ZKLOCK_ZK']}"
    try:
        return f"zklock: ZooKeeper servers from {zookeeper.classpath()}"
    except ServerError as exc:  # the session's server fixture fails with it
        return f"zklock: {exc}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the lock events of its time and the tails of the
    ZooKeeper and Spark driver logs (tests/diagnostics.py)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        started = item.stash.get(_STARTED, int(call.start * 1000))
        for title, text in diagnostics.sections(started):
            report.sections.append((title, text))


_STARTED = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_STARTED] = diagnostics.now_ms()


# Tests run with short session timeouts; tickTime 500 ms allows 1 s .. 20 s.
TICK_MS = 500
SESSION_TIMEOUT = 2.0
#: The session of a client that holds locks across Spark jobs (tests/spark's clients, the
#: test Spark's engine client). kazoo drops a connection whose ping goes unanswered for
#: about a third of the session, less up to 0.4 s of jitter (it pings at half its read
#: timeout, two thirds of the session), and a dropped connection loses every set held
#: (lose_on_suspend): with 2 s, a stall of under half a second on a loaded CI machine running
#: three Spark JVMs could lose a test's locks under it.
SPARK_SESSION_TIMEOUT = 10.0


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory):
    """A standalone ZooKeeper for the whole session (None when ZKLOCK_ZK is given)."""
    if os.environ.get("ZKLOCK_ZK"):
        yield None
        return
    server = ZkServer(tmp_path_factory.mktemp("zk"), port=free_port(), tick_time_ms=TICK_MS,
                      force_sync=False, container_check_ms=500)
    server.start(wait=90)  # raises ServerError (a failure, never a skip) when it cannot
    diagnostics.SERVER_LOGS.append(server.log_file)
    yield server
    server.stop()


@pytest.fixture
def unswept_hosts(tmp_path: Path) -> Iterator[str]:
    """A ZooKeeper of the test's own that sweeps no empty object node (container) in the
    test's time: the shared one sweeps every 500 ms, and a test that reasons about a table
    node's child version needs the node to outlive the moments it holds no lock."""
    server = ZkServer(tmp_path / "zk", port=free_port(), tick_time_ms=TICK_MS,
                      force_sync=False, container_check_ms=3_600_000)
    server.start(wait=90)
    diagnostics.SERVER_LOGS.append(server.log_file)
    yield server.connect
    server.stop()


@pytest.fixture(scope="session")
def zk_hosts(zk_server) -> str:
    return os.environ.get("ZKLOCK_ZK") or zk_server.connect


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory):
    """A 3-node ZooKeeper ensemble on loopback, one per test module (its tests break it)."""
    from zklock.servers.ensemble import Ensemble

    ens = Ensemble(tmp_path_factory.mktemp("ensemble"), 3)
    logs = [m.log_file for m in ens.members]
    diagnostics.SERVER_LOGS.extend(logs)
    try:
        ens.start(wait=120)  # a failure, never a skip
        yield ens
    finally:
        ens.stop()  # resumes a paused member before stopping it
        for log in logs:
            diagnostics.SERVER_LOGS.remove(log)


@pytest.fixture
def root() -> str:
    """A znode root no other test uses."""
    return f"/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def session_timeout(request: pytest.FixtureRequest) -> float:
    """The ZooKeeper session of the test's managers, LockingSessions and schedulers: those of
    a test that runs Spark (tests/spark, or one using the shared session) hold their locks
    across Spark jobs (SPARK_SESSION_TIMEOUT); the others' expire quickly."""
    spark_test = request.node.path.parent.name == "spark" or "spark" in request.fixturenames
    return SPARK_SESSION_TIMEOUT if spark_test else SESSION_TIMEOUT


@pytest.fixture
def make_manager(zk_hosts: str, root: str, session_timeout: float):
    """Build LockManagers on the test's root; all are closed at the end."""
    made: list[LockManager] = []

    def make(**kw) -> LockManager:
        kw.setdefault("hosts", zk_hosts)
        kw.setdefault("root", root)
        kw.setdefault("retries", 0)
        kw.setdefault("retry_interval", 0.05)
        kw.setdefault("session_timeout", session_timeout)
        mgr = LockManager(**kw)
        made.append(mgr)
        return mgr

    yield make
    for mgr in made:
        try:
            mgr.close()
        except Exception:
            pass


@pytest.fixture
def manager(make_manager) -> LockManager:
    return make_manager()


@pytest.fixture
def zk(zk_hosts: str):
    """A plain kazoo client for inspecting the tree."""
    client = KazooClient(hosts=zk_hosts)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


class Raised:
    """What :func:`raises_lock_error` caught, as zklock's exception (``value``)."""

    value: Any = None


@contextlib.contextmanager
def raises_lock_error(kind: type, match: Optional[str] = None):
    """Expect zklock's ``kind`` (LockNotAcquired, LockLost, UnsupportedStatement), raised as
    itself (a LockingSession's ``sql()``, zklock's own calls) or as Spark's error whose
    ``ZKLOCK_*`` condition names it (a DataFrame action, a plain session):
    :func:`zklock.spark.lock_error` tells them apart, as a user would."""
    from zklock.spark import lock_error

    raised = Raised()
    with pytest.raises(Exception) as info:
        yield raised
    raised.value = lock_error(info.value)
    assert isinstance(raised.value, kind), f"expected {kind.__name__}, got {info.value!r}"
    if match is not None:
        assert re.search(match, str(raised.value)), (match, str(raised.value))


PYTHON = sys.executable
# Spark's Python workers (and those of the test's subprocess applications) run this
# interpreter, which has pyarrow for Arrow UDFs, not the python3 on PATH
os.environ.setdefault("PYSPARK_PYTHON", PYTHON)
# the servers tests start must not become the user's "last started server" (serverinfo.py)
os.environ["ZKLOCK_POINTER"] = str(Path(tempfile.mkdtemp(prefix="zklock-pointer-"))
                                   / "last-server")
PROJECT = Path(__file__).resolve().parents[1]


# ---- Spark ---------------------------------------------------------------------
#: The root of the locks the test session's Spark engine takes for commands that no
#: LockingSession runs (fixtures' set-up through the plain session).
ENGINE_ROOT = "/zklock-tests-engine"


def spark_line() -> tuple[int, int]:
    """The installed PySpark's (major, minor): what a Spark line does not have is absent from
    its test run, as from docs/spark.md's version table."""
    from importlib.metadata import version

    major, minor = version("pyspark").split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str):
    """One real local SparkSession for the whole test session (about 10 s to start), built
    with zklock's engine extension, whose lock client takes locks under ENGINE_ROOT."""
    import held_commits
    from pyspark.sql import SparkSession

    from zklock.config import Settings
    from zklock.spark import configure, enforce

    warehouse = tmp_path_factory.mktemp("warehouse")
    builder = (SparkSession.builder.master("local[2]").appName("zklock-tests")
               # the tests' hold on a write job (tests/held_commits.py), beside zklock's jar
               .config("spark.jars", str(held_commits.jar()))
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               # Spark 3.5 makes CREATE TABLE without USING a Hive table; 4.0 on do not
               .config("spark.sql.legacy.createHiveTableByDefault", "false")
               .config("spark.driver.memory", "1g")
               # no child lock client (tests/spark/test_lock_process.py tests it in processes
               # of their own): here a statement no client takes is refused, as tests expect
               .config("spark.zklock.lockClient", "none")
               # warnings to a file a failed test's report tails (tests/diagnostics.py)
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile=file:{PROJECT}/tests/log4j2-tests.properties"
                       f" -Dzklock.tests.sparkLog={diagnostics.SPARK_LOG}"))
    session = configure(builder).getOrCreate()
    engine = enforce(session, LockManager(settings=Settings.resolve(dict(
        hosts=zk_hosts, root=ENGINE_ROOT, session_timeout=SPARK_SESSION_TIMEOUT, retries=100,
        retry_interval=0.05))))
    yield session
    engine.close()
    engine.manager.close()
    session.stop()


class Latch:
    """A SQL function (``latch.name``) that returns its argument once the test opens the
    latch, or after ``limit`` seconds: a statement using it holds its locks until the test has
    seen (and acted on) what it needs, however slowly a loaded machine runs the two. It
    records that a task reached it (:meth:`reached`)."""

    def __init__(self, spark, directory: Path, name: str = "zk_latch", limit: float = 120.0):
        directory.mkdir(parents=True, exist_ok=True)
        self.name, self.gate, self.entered = name, directory / "open", directory / "entered"
        gate, entered = str(self.gate), str(self.entered)

        def wait(x):
            import os
            import time as t

            if not os.path.exists(entered):
                open(entered, "a").close()
            # one deadline for every row, from the first row's arrival (the file's time, seen
            # by every process): counted from the function's registration, it ran out before
            # a statement that a loaded machine ran late even reached it
            until = os.path.getmtime(entered) + limit
            while not os.path.exists(gate) and t.time() < until:
                t.sleep(0.02)  # poll: the gate file
            return x

        spark.udf.register(name, wait, "int")

    def reached(self) -> bool:
        return self.entered.exists()

    def open(self) -> None:
        self.gate.touch()


def make_warehouse(spark) -> str:
    """A fresh database holding sales-like tables: orders (ds, hr), dim, and a view."""
    name = f"w{uuid.uuid4().hex[:10]}"
    for stmt in [
        f"CREATE DATABASE {name}",
        f"CREATE TABLE {name}.orders (id INT, amt DOUBLE, ds STRING, hr INT)"
        " USING parquet PARTITIONED BY (ds, hr)",
        f"CREATE TABLE {name}.archive (id INT, amt DOUBLE, ds STRING, hr INT)"
        " USING parquet PARTITIONED BY (ds, hr)",
        f"CREATE TABLE {name}.events (id INT, ds STRING) USING parquet PARTITIONED BY (ds)",
        f"CREATE TABLE {name}.dim (id INT, name STRING) USING parquet",
        f"CREATE TABLE {name}.staging (id INT, amt DOUBLE, hr INT) USING parquet",
        f"INSERT INTO {name}.orders PARTITION (ds='2024-01-01', hr=1) VALUES (1, 10.0)",
        f"INSERT INTO {name}.orders PARTITION (ds='2024-01-02', hr=1) VALUES (2, 20.0)",
        f"INSERT INTO {name}.dim VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO {name}.staging VALUES (3, 30.0, 7)",
        f"CREATE VIEW {name}.day1 AS SELECT o.id, d.name FROM {name}.orders o"
        f" JOIN {name}.dim d ON o.id = d.id WHERE o.ds = '2024-01-01'",
    ]:
        spark.sql(stmt)
    return name


@pytest.fixture
def db(spark) -> str:
    """A warehouse database of the test's own, dropped afterwards."""
    name = make_warehouse(spark)
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture(scope="session")
def shared_db(spark) -> str:
    """A warehouse database shared by tests that only read or plan (never modify) it."""
    return make_warehouse(spark)




@pytest.fixture
def make_locking(spark, zk_hosts: str, root: str, session_timeout: float):
    """Build LockingSessions on the test's root (each with its own ZooKeeper session), each
    over a SparkSession of its own (``spark.newSession()``: shared catalog, own conf, temp
    views and functions). A LockingSession is the lock client of every statement its
    SparkSession runs, so the test's plain ``spark`` keeps the engine's root. ``conf``: SQL
    settings of that SparkSession."""
    from zklock.spark import LockingSession

    made = []

    def make(conf: Optional[dict] = None, **kw):
        kw.setdefault("hosts", zk_hosts)
        kw.setdefault("root", root)
        kw.setdefault("retries", 0)
        kw.setdefault("retry_interval", 0.05)
        kw.setdefault("session_timeout", session_timeout)
        plain = spark.newSession()
        for key, value in (conf or {}).items():
            plain.conf.set(key, value)
        session = LockingSession(plain, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


@pytest.fixture
def locking(make_locking):
    return make_locking()


# ---- scheduler -----------------------------------------------------------------------
ADMIN = "alice"


@pytest.fixture
def sched_conf(zk_hosts: str, root: str, session_timeout: float) -> dict:
    """Settings of a test's scheduler namespace: its own root, fast progress, no quiet."""
    return dict(hosts=zk_hosts, root=root, scheduler_root=f"{root}-sched",
                scheduler_admins=ADMIN, user=ADMIN, session_timeout=session_timeout,
                retries=0, retry_interval=0.05, scheduler_quiet_period=0,
                scheduler_progress_interval=0.2, scheduler_progress_timeout=5)


@pytest.fixture
def make_scheduler(spark, sched_conf: dict):
    """Start SchedulerServices (each with its own ZooKeeper session) running real Spark."""
    from zklock.scheduler.runner import SparkRunner
    from zklock.scheduler.service import SchedulerService

    from zklock.config import Settings
    from zklock.manager import connect

    made = []

    def make(pool_size: int = 2, **kw):
        settings = Settings.resolve({**sched_conf, **kw})
        client = connect(settings)
        runner = SparkRunner(spark, settings, client)
        service = SchedulerService(settings, runner, client=client, pool_size=pool_size)
        made.append((service, runner, client))
        return service.start()

    yield make
    for service, runner, client in made:
        service.stop()
        runner.close()
        client.stop()
        client.close()


@pytest.fixture
def admin_session(make_locking, sched_conf: dict):
    """A LockingSession of the scheduler admin (CREATE SCHEDULED QUERY ... works)."""
    return make_locking(**sched_conf)


def java_static(spark, cls: str, method: str, *args):
    """Call the static method ``zklock.<cls>.<method>`` of zklock's JVM module in ``spark``'s
    JVM (py4j reaches only the application's classes by name; the module has its loader)."""
    from py4j.java_collections import ListConverter

    from zklock.spark.jvm import module_class

    for m in module_class(spark, cls).getMethods():
        if str(m.getName()) == method and m.getParameterCount() == len(args):
            gateway = spark.sparkContext._gateway
            array = gateway.new_array(spark._jvm.java.lang.Object, len(args))
            for i, arg in enumerate(args):
                if isinstance(arg, list):  # py4j converts lists only when they are arguments
                    arg = ListConverter().convert(arg, gateway._gateway_client)
                array[i] = arg
            return m.invoke(None, array)
    raise AttributeError(f"zklock.{cls} has no static {method}/{len(args)}")


@pytest.fixture
def without_nodes(spark):
    """``remove(*names)`` takes plan node classes out of zklock's node table (NodeKinds.java,
    in this JVM) for one test: what a Spark with commands zklock never classified is like."""
    removed = []

    def remove(*names: str) -> None:
        removed.append(java_static(spark, "planner.NodeKinds", "unclassify", list(names)))

    yield remove
    for kinds in removed:
        java_static(spark, "planner.NodeKinds", "restore", kinds)


# ---- the lock watcher's checks ------------------------------------------------------
class NodeChecks:
    """Counts the reads of held lock nodes by ``mgr``'s watcher (zklock/locks/watcher.py: one
    ``children_many`` every NODE_CHECK_S while it holds sets, one at a time), so that a test
    can wait until a check has judged a change, instead of guessing how long that takes."""

    def __init__(self, mgr, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[bool] = []  # one per read started: True once it returned
        real, reads = mgr.watcher.ops, self.reads

        class Counting:
            def __getattr__(self, name: str):
                return getattr(real, name)

            def children_many(self, paths):
                i = len(reads)
                reads.append(False)
                listing = real.children_many(paths)
                reads[i] = True
                return listing

        monkeypatch.setattr(mgr.watcher, "ops", Counting())

    def mark(self) -> int:
        """Call once the change is made: reads counted after this began after it."""
        return len(self.reads)

    def judged_since(self, mark: int) -> bool:
        """A read begun after ``mark`` returned and the checker acted on it: the watcher reads
        one check at a time, so a later read has begun only once that check was done."""
        return any(self.reads[mark:-1])
