"""zklock's planner through a real local Spark Connect server and its plugin.

The module starts two real Spark Connect servers (PySpark's own), in parallel: one with
zklock's plugin, started by ``zklock spark connect-server start`` (the project's own
code, as a user would), and one without it. A Spark Connect session on the first builds
the same warehouse as the ``shared_db`` fixture; every statement of the conformance corpus
and every case of tests/test_spark_planner.py must come back from the plugin with the locks
the classic planner gives (the documented lock table, the expected lists), DataFrames with
the locks the classic planner gives the same DataFrames, refusals as UnsupportedStatement.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pyspark
import pytest
from conftest import (
    PROJECT,
    PYTHON,
    lock_nodes,
    make_warehouse,
    raises_lock_error,
    spark_line,
    wait_for,
    waiting_queries,
)
from pyspark.errors import AnalysisException, ParseException
from test_jvm import rebuilt
from test_spark_corpus import CORPUS, D, absent, documented
from test_spark_planner import DATAFRAME_LOCKS, MORE, NO_LOCKS, SEED_ROWS, dataframes
from zklock.cli.connect_server import SERVER_CLASS, pyspark_home

from zklock import LockManager
from zklock.errors import (
    InvalidArguments,
    InvalidLockObject,
    LockNotAcquired,
    SparkConnectError,
    UnsupportedStatement,
)
from zklock.servers.ports import free_port
from zklock.spark import connect as connect_module
from zklock.spark.connect import plan_locks, plan_statement, plugin_version
from zklock.spark.jvm import build_hash, has_connect_server, module_jar, zklock_version
from zklock.spark.planner import ClassicPlanner

MEMORY = "spark.driver.memory=768m"
#: Spark 4.1 added scripts and EXECUTE IMMEDIATE of any expression (docs/spark.md).
SPARK_41 = spark_line() >= (4, 1)
pytestmark = pytest.mark.skipif(not has_connect_server(), reason="this PySpark has no Spark"
                                " Connect server (PySpark 3.5's pip package does not)")


def cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real ``zklock`` command, in a process of its own."""
    return subprocess.run([PYTHON, "-m", "zklock.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=PROJECT)


class PlainServer:
    """A Spark Connect server started as Spark starts one (spark-submit), with zklock's jar
    and engine extension but not its plugin (no planner for LockingSession clients), and no
    Python of zklock's: its engine starts zklock's lock client as a child process, on the
    test's ZooKeeper under PLAIN_ROOT, for its plain clients' statements."""

    def __init__(self, base: Path, zk_hosts: str) -> None:
        self.port = free_port()
        base.mkdir(parents=True, exist_ok=True)
        home = pyspark_home()
        with open(base / "server.log", "wb") as log:
            self.proc = subprocess.Popen(
                [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                 "--jars", str(module_jar()), "--conf", "spark.sql.extensions=zklock.EngineLocks",
                 "--conf", "spark.plugins=zklock.EnginePlugin",
                 "--conf", f"spark.connect.grpc.binding.port={self.port}",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                 "--conf", "spark.ui.enabled=false", "--conf", MEMORY,
                 "--conf", f"spark.sql.warehouse.dir={base / 'warehouse'}",
                 "--conf", f"spark.zklock.zookeeper.quorum={zk_hosts}",
                 "--conf", f"spark.zklock.root={PLAIN_ROOT}",
                 # a statement waits (by retries) for the set of the one before it, which
                 # the engine releases in the background; a denial comes after 20 attempts
                 "--conf", "spark.zklock.lock.retries=20",
                 "--conf", "spark.zklock.lock.retryInterval=0.05",
                 "--conf", f"spark.zklock.lockClient.python={sys.executable}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=base, start_new_session=True,
                env=dict(os.environ, SPARK_HOME=str(home), SPARK_CONNECT_MODE="0"))

    def wait(self, timeout: float = 120) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the plain Spark Connect server exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)  # poll: the server does not listen yet
        raise AssertionError("the plain Spark Connect server did not listen")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


#: Where the module's zklock server takes the locks of its plain clients' commands.
SERVER_ROOT = "/zklock-tests-connect-server"
#: Where the child lock client of the server Spark's way (PlainServer) takes its locks.
PLAIN_ROOT = "/zklock-tests-plain-connect-server"
#: How often a test's own holder retries on the server's root: a plain client's read holds
#: its S until the server hears its SQL execution end (Spark's listener bus, a moment after
#: the client has its rows) or sends its next request, so another holder asking for X right
#: after one waits for that.
LINGER_RETRIES = 200


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, spark):
    # the worker's classic Spark starts first: PySpark launches its JVM with a fork, and a
    # fork after a Spark Connect client's gRPC threads are running can die before it
    # executes Java (make flake-hunt saw JAVA_GATEWAY_EXITED after gRPC's "epoll_wait error:
    # Bad file descriptor", when a shuffled order made a Connect test a worker's first)
    base = tmp_path_factory.mktemp("connect")
    plain = PlainServer(base / "plain", zk_hosts)  # starts while the plugin's server starts
    state, port = base / "state", free_port()
    events = base / "server-events.jsonl"
    try:
        out = cli("--zk", zk_hosts, "--root", SERVER_ROOT, "--state-dir", state, "spark",
                  "connect-server", "start", "--port", port,
                  "--warehouse", base / "warehouse", "--conf", MEMORY,
                  "--conf", "spark.zklock.lock.retries=1",
                  "--conf", "spark.zklock.lock.retryInterval=0.05",
                  "--conf", f"spark.zklock.eventLog={events}")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"sc://127.0.0.1:{port}"
        plain.wait()
        yield {"state": state, "port": port, "plain_port": plain.port, "base": base,
               "events": events}
        # stopping is tested here, after the module's last test whatever the order
        # (make flake-hunt shuffles a file's tests): stop, then stop again
        assert cli("--state-dir", state, "spark", "connect-server",
                   "stop").stdout.strip() == "stopped"
        after = cli("--state-dir", state, "spark", "connect-server", "status")
        assert after.returncode == 1 and after.stdout.startswith("not running")
        assert cli("--state-dir", state, "spark", "connect-server",
                   "stop").stdout.strip() == "not running"
    finally:
        cli("--state-dir", state, "spark", "connect-server", "stop")
        plain.stop()


def connect(port: int):
    """A Spark Connect session (the Connect builder: the process's classic Spark stays so)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
    # fail fast if the server dies: Spark Connect's default retries for about ten minutes
    session.client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])
    return session


def close(session) -> None:
    """Stop a Connect session without Spark Connect's ten minutes of retries when its
    server is gone already."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session.client.set_retry_policies([DefaultPolicy(max_retries=0)])
    # PySpark 4.0's result iterators release themselves in a finaliser that fails once the
    # session's thread pool is shut down: collect them while it still runs
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RETRIES_EXCEEDED, once the server is gone
        session.stop()


@pytest.fixture(scope="module")
def cs(servers):
    session = connect(servers["port"])
    yield session
    close(session)


@pytest.fixture(scope="module")
def cdb(cs) -> str:
    """The shared_db warehouse, built again through the Connect session."""
    return make_warehouse(cs)


def rows_of(sql_or_df, cs, **kw) -> str:
    """test_spark_corpus's outcome: ``object:mode ...``, ``none``, or what happened."""
    try:
        rows = plan_locks(cs, **sql_or_df, **kw)
    except UnsupportedStatement as exc:
        return "refused: " + str(exc).split(";")[0]
    except Exception as exc:  # Spark's own error
        return "Spark error: " + type(exc).__name__
    return " ".join(f"{o}:{m}" for o, m in rows) or "none"


def test_the_plugin_reports_its_version_and_spark(cs, spark):
    from conftest import java_static

    v = plugin_version(cs)
    assert v == {"plugin": zklock_version(), "protocol": 1, "build": build_hash(),
                 "built_for": pyspark.__version__, "spark": pyspark.__version__,
                 "nodes": java_static(spark, "planner.NodeKinds", "size")}


def test_corpus_through_the_plugin_is_the_documented_lock_table(cs, cdb):
    cs.sql("DECLARE OR REPLACE VARIABLE v_corpus_set INT")
    expected = documented()
    mismatches = []
    for _kind, template in CORPUS:
        if absent(template):
            continue
        got = rows_of({"sql": template.format(d=cdb)}, cs, strict=False).replace(cdb, D)
        if got != expected[template.format(d=D)]:
            mismatches.append((template, got, expected[template.format(d=D)]))
    assert not mismatches, "\n".join(f"{s}\n  plugin: {g}\n  docs:   {e}"
                                     for s, g, e in mismatches)


@pytest.mark.parametrize("sql,expected", SEED_ROWS + MORE + [(s, []) for s in NO_LOCKS],
                         ids=[s[:60] for s, _ in SEED_ROWS + MORE] + NO_LOCKS)
def test_planner_cases_through_the_plugin(cs, cdb, sql, expected):
    got = plan_locks(cs, sql=sql.format(d=cdb), strict=False)
    assert [f"{o}:{m}" for o, m in got] == [e.format(d=cdb) for e in expected]


def test_the_plugin_says_which_statements_run_as_commands(cs, cdb, spark, shared_db):
    classic = ClassicPlanner(spark)
    for sql in ["SELECT * FROM {d}.orders WHERE ds = '2024-01-01'", "VALUES (1)",
                "INSERT INTO {d}.dim VALUES (1, 'a')", "SHOW TABLES", "CACHE TABLE {d}.dim",
                "WITH c AS (SELECT * FROM {d}.staging) INSERT INTO {d}.dim SELECT id, 'w'"
                " FROM c", *(["BEGIN SELECT 1; END"] if SPARK_41 else [])]:
        plan = classic.plan_sql(sql.format(d=shared_db), strict=False)
        rows = [(o.replace(shared_db, cdb), m) for o, m in plan.rows()]
        mine = plan_statement(cs, sql.format(d=cdb), strict=False)
        assert ([(t.obj.name, t.mode.value) for t in mine.targets], mine.is_command) == (
            rows, plan.is_command)


def test_dataframes_lock_as_in_a_classic_session(cs, cdb):
    for df, expected in zip(dataframes(cs, cdb), DATAFRAME_LOCKS):
        assert [f"{o}:{m}" for o, m in plan_locks(cs, df=df)] == [e.format(d=cdb)
                                                                  for e in expected]


def test_a_refusal_is_unsupported_statement_and_bad_names_invalid_arguments(cs, cdb):
    with raises_lock_error(UnsupportedStatement, match="zklock does not lock Call"):
        plan_locks(cs, sql="CALL system.noop()")
    if SPARK_41:
        with raises_lock_error(UnsupportedStatement, match="inside a SQL script"):
            plan_locks(cs, sql="BEGIN DECLARE s STRING DEFAULT 'SELECT 1'; EXECUTE IMMEDIATE s;"
                               " END")
    cs.sql("DECLARE OR REPLACE VARIABLE zk_conn_tbl STRING DEFAULT 'x.y'")
    with pytest.raises(InvalidArguments, match="IDENTIFIER"):
        plan_locks(cs, sql="DROP TABLE IDENTIFIER(zk_conn_tbl)")
    with pytest.raises(InvalidLockObject, match=f"'{cdb}.orders': empty value for partition"
                                                " key 'ds'"):
        plan_locks(cs, sql=f"ALTER TABLE {cdb}.orders ADD PARTITION (ds='', hr=1)")
    with pytest.raises(InvalidArguments, match="refuse or lock"):
        plan_locks(cs, sql="SELECT 1", unknown_statements="maybe")
    assert plan_locks(cs, sql=f"DROP TABLE {cdb}.dim", unknown_statements="lock") == [
        (cdb, "S"), (f"{cdb}.dim", "X")]


def test_sparks_own_errors_come_back_as_sparks(cs, cdb):
    with pytest.raises(ParseException):
        plan_locks(cs, sql="SELEC 1")
    with pytest.raises(AnalysisException):  # strict (a statement about to run): raised
        plan_locks(cs, sql=f"ALTER TABLE {cdb}.dim REPLACE COLUMNS (x INT)")
    assert plan_locks(cs, sql=f"ALTER TABLE {cdb}.dim REPLACE COLUMNS (x INT)",
                      strict=False) == [(cdb, "S"), (f"{cdb}.dim", "X")]


def test_the_plugin_plans_in_the_clients_own_session(cs, cdb):
    """Variables, temporary views and the current database of the client's session (its
    server-side session) are what the plugin plans with."""
    cs.sql(f"DECLARE OR REPLACE VARIABLE zk_conn_target STRING DEFAULT '{cdb}.dim'")
    cs.sql(f"CREATE OR REPLACE TEMPORARY VIEW tv_conn AS SELECT * FROM {cdb}.orders")
    if SPARK_41:  # 4.0 takes a literal or a variable only
        assert_plans_with_the_sessions_variable_and_view(cs, cdb)
    cs.sql(f"USE {cdb}")
    try:
        assert plan_locks(cs, sql="DROP TABLE dim") == [(cdb, "S"), (f"{cdb}.dim", "X")]
    finally:
        cs.sql("USE default")


def assert_plans_with_the_sessions_variable_and_view(cs, cdb) -> None:
    assert plan_locks(cs, sql="EXECUTE IMMEDIATE 'INSERT INTO ' || zk_conn_target"
                              " || ' SELECT id, ''x'' FROM tv_conn WHERE ds = ''2024-01-02'''"
                      ) == [(cdb, "S"), (f"{cdb}.dim", "X"), (f"{cdb}.orders", "S"),
                            # a temporary view's casts hide the pin: every partition, as the
                            # classic planner does (more, never less)
                            (f"{cdb}.orders/ds=2024-01-01", "S"),
                            (f"{cdb}.orders/ds=2024-01-01/hr=1", "S"),
                            (f"{cdb}.orders/ds=2024-01-02", "S"),
                            (f"{cdb}.orders/ds=2024-01-02/hr=1", "S")]


def test_planning_runs_nothing(cs, cdb):
    before = cs.table(f"{cdb}.dim").count()
    plan_locks(cs, sql=f"INSERT INTO {cdb}.dim VALUES (9, 'nine')")
    plan_locks(cs, sql=f"EXECUTE IMMEDIATE 'INSERT INTO {cdb}.dim SELECT 5, \"five\"'")
    if SPARK_41:
        plan_locks(cs, sql=f"BEGIN INSERT INTO {cdb}.dim SELECT 6, 'six'; END")
    assert cs.table(f"{cdb}.dim").count() == before


def test_a_client_of_another_build_is_refused(cs, monkeypatch):
    """Classic and Connect sessions must lock by the same rules: a client whose zklock build
    (its Java sources, its version) differs from the server's plugin is refused, in one line."""
    monkeypatch.setattr(connect_module, "build_hash", lambda: "0" * 16)
    with pytest.raises(SparkConnectError, match=r"the zklock plugin of this Spark Connect"
                       r" server is zklock .* \(build [0-9a-f]+\) and the client is") as err:
        plan_locks(cs, sql="SELECT 1")
    assert "\n" not in str(err.value)


def test_a_server_without_the_plugin_is_one_clear_error(servers):
    bare = connect(servers["plain_port"])
    try:
        with pytest.raises(SparkConnectError, match="has no zklock plugin.*--jars") as err:
            plan_locks(bare, sql="SELECT 1")
        assert "\n" not in str(err.value)
        with pytest.raises(SparkConnectError, match="has no zklock plugin"):
            plugin_version(bare)
    finally:
        close(bare)


def test_an_unreachable_server_is_one_clear_error():
    from pyspark.sql.connect.client.retries import DefaultPolicy

    port = free_port()
    session = connect(port)
    session.client.set_retry_policies([DefaultPolicy(max_retries=1, initial_backoff=10,
                                                     max_backoff=20)])
    try:
        with warnings.catch_warnings():  # PySpark 4.1+ warns RETRIES_EXCEEDED, 4.0 does not
            warnings.simplefilter("ignore")
            with pytest.raises(SparkConnectError, match=f"127.0.0.1:{port} cannot be reached"
                                                        r" \(UNAVAILABLE") as err:
                plan_locks(session, sql="SELECT 1")
        assert "\n" not in str(err.value)
    finally:
        close(session)


def test_a_classic_session_is_refused(spark):
    with pytest.raises(InvalidArguments, match="Spark Connect session"):
        plan_locks(spark, sql="SELECT 1")


def test_cli_start_refuses_a_plugin_built_for_another_spark(servers, tmp_path):
    other = rebuilt(module_jar(), tmp_path / "zklock-connect-3.5.1.jar",
                    f"spark={pyspark.__version__}", "spark=3.5.1")
    out = cli("--state-dir", tmp_path / "state", "spark", "connect-server", "start",
              "--port", free_port(), "--jar", other)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "built for Spark 3.5.1's line but the Spark Connect server under" in out.stderr
    assert f"is Spark {pyspark.__version__}" in out.stderr


def test_cli_start_twice_or_on_a_taken_port_is_one_clear_error(servers, tmp_path):
    again = cli("--state-dir", servers["state"], "spark", "connect-server", "start",
                "--port", servers["port"])
    assert again.returncode == 1 and "already runs" in again.stderr
    taken = cli("--state-dir", tmp_path, "spark", "connect-server", "start",
                "--port", servers["plain_port"])
    assert taken.returncode == 1 and "already in use" in taken.stderr
    for out in (again, taken):
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


# ---- LockingSession over Spark Connect: the same locks, denials and loss handling ----------
@pytest.fixture
def make_connect_locking(cs, zk_hosts, root, session_timeout):
    """LockingSessions wrapping the module's Connect session (each its own ZooKeeper
    session), on the server's root: the server checks a client's locks there."""
    from zklock.spark import LockingSession

    made = []

    def make(session=None, **kw):
        kw.setdefault("hosts", zk_hosts)
        kw.setdefault("root", SERVER_ROOT)
        kw.setdefault("retries", 0)
        kw.setdefault("retry_interval", 0.05)
        kw.setdefault("session_timeout", session_timeout)
        locking = LockingSession(session if session is not None else cs, **kw)
        made.append(locking)
        return locking

    yield make
    for locking in reversed(made):  # the last made first: each puts back what it found
        locking.close()


def ccount(session, table: str) -> int:
    return session.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def test_connect_session_denies_writes_and_leaves_the_table(make_connect_locking, cs, cdb,
                                                            make_manager, zk, root):
    from conftest import lock_nodes, wait_for

    from zklock import LockNotAcquired

    locking = make_connect_locking()
    before = ccount(cs, f"{cdb}.dim")
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    with other.acquire([(f"{cdb}.dim", "X")], query_id="holder-c"):
        with raises_lock_error(LockNotAcquired, match="holder-c"):
            locking.sql(f"INSERT INTO {cdb}.dim VALUES (21, 'c')")
        with raises_lock_error(LockNotAcquired, match="holder-c"):
            locking.createDataFrame([(22, "d")], "id INT, name STRING").write.insertInto(
                f"{cdb}.dim")
        with raises_lock_error(LockNotAcquired, match="holder-c"):
            locking.table(f"{cdb}.dim").collect()  # an action: S on dim
        with pytest.raises(AnalysisException):  # analysed in the server, before any lock
            locking.sql("CALL system.no_such_procedure()")
    assert ccount(cs, f"{cdb}.dim") == before
    assert wait_for(lambda: lock_nodes(zk, SERVER_ROOT) == [], timeout=30)
    locking.sql(f"INSERT INTO {cdb}.dim VALUES (21, 'c')")
    assert ccount(cs, f"{cdb}.dim") == before + 1


def test_connect_query_is_planned_once_in_sql_and_again_by_its_action(
        make_connect_locking, cs, cdb, make_manager):
    """sql(query) over Connect builds the DataFrame on the client after the plugin planned
    it: Spark's errors are still raised by sql(), and the action locks what it reads when it
    runs (a temporary view redefined in between: the new definition's table)."""
    from zklock import LockNotAcquired

    locking = make_connect_locking()
    with pytest.raises(AnalysisException):
        locking.sql(f"SELECT * FROM {cdb}.no_such_table")
    with pytest.raises(ParseException):
        locking.sql("SELEC 1")
    cs.sql(f"CREATE OR REPLACE TEMPORARY VIEW pick AS SELECT id FROM {cdb}.dim")
    df = locking.sql("SELECT count(*) AS n FROM pick")
    assert df.collect()[0].n == ccount(cs, f"{cdb}.dim")
    cs.sql(f"CREATE OR REPLACE TEMPORARY VIEW pick AS SELECT id FROM {cdb}.staging")
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    with other.acquire([(f"{cdb}.staging", "X")], query_id="holder-q"):
        with raises_lock_error(LockNotAcquired, match="holder-q"):
            df.collect()  # reads staging now: S on it is denied
    assert df.collect()[0].n == ccount(cs, f"{cdb}.staging")


def test_connect_session_takes_the_classic_locks(make_connect_locking, cdb, spark, shared_db):
    locking = make_connect_locking()
    classic = ClassicPlanner(spark)
    for template in [
            "INSERT INTO {d}.orders PARTITION (ds='2024-01-01', hr=2) SELECT id, amt"
            " FROM {d}.staging",
            "FROM {d}.staging INSERT INTO {d}.dim SELECT id, 'm'"
            " INSERT INTO {d}.events PARTITION (ds='2024-08-08') SELECT id",
            "SELECT * FROM {d}.day1"]:
        mine = [(o.replace(cdb, "DB"), m) for o, m in
                locking.explain_locks(template.format(d=cdb)).rows()]
        theirs = [(o.replace(shared_db, "DB"), m) for o, m in
                  classic.plan_sql(template.format(d=shared_db), strict=False).rows()]
        assert mine == theirs, template
    assert locking.sql(f"EXPLAIN LOCKS SELECT * FROM {cdb}.dim").collect()[0].object == cdb


def test_a_connect_locking_sessions_reads_list_the_files_again(make_connect_locking, cdb):
    """The server's session keeps a table's file listing; another application adds a file
    under its X lock (here: a copy of one, as its append would, telling this server
    nothing). A Connect LockingSession's next read lists the files again (its grant sees
    that someone locked the table since: FreshListings.java) and counts the new rows."""
    import shutil
    from pathlib import Path
    from urllib.parse import urlparse

    locking = make_connect_locking(retries=100)
    locking.sql(f"CREATE TABLE {cdb}.listed (id INT) USING parquet")
    locking.sql(f"INSERT INTO {cdb}.listed VALUES (1), (2)")
    assert ccount(locking, f"{cdb}.listed") == 2  # listed now, and kept by the server
    location = next(r.data_type for r in locking.sql(
        f"DESCRIBE TABLE EXTENDED {cdb}.listed").collect() if r.col_name == "Location")
    part = next(p for p in Path(urlparse(location).path).iterdir()
                if p.name.startswith("part-"))
    with locking.manager.acquire([(f"{cdb}.listed", "X")]):  # as the other's append holds
        shutil.copy(part, part.with_name("part-99999-another-application.parquet"))
    import pyarrow.parquet

    added = pyarrow.parquet.read_metadata(str(part)).num_rows
    assert added >= 1 and ccount(locking, f"{cdb}.listed") == 2 + added


def test_connect_lock_loss_interrupts_the_statement(make_connect_locking, cs, cdb, zk, root):
    """The server's lock client holds the statement's locks: another client deletes its X
    node while the job runs, and the statement is interrupted with LockLost."""
    import threading
    import uuid
    from pathlib import Path

    from conftest import lock_nodes, wait_for

    from zklock import LockLost

    # the read just before holds its S until the server hears its execution end: wait for it
    locking = make_connect_locking(retries=LINGER_RETRIES)
    before = ccount(cs, f"{cdb}.staging")
    # each row the server's task reaches leaves a marker file in the server's temp directory:
    # the test deletes the node once the job runs, not after a guessed pause
    tmp = Path(cs.sql("SELECT java_method('java.lang.System', 'getProperty',"
                      " 'java.io.tmpdir') AS d").collect()[0].d)
    marker = f"zklock-running-{uuid.uuid4().hex[:8]}-"
    slow = (f"INSERT INTO {cdb}.staging SELECT id, 1.0, 1 FROM range(0, 60, 1, 1)"
            f" WHERE java_method('java.io.File', 'createTempFile', '{marker}', '.mark')"
            f" IS NOT NULL"
            f" AND java_method('java.lang.Thread', 'sleep', CAST(500 AS BIGINT)) IS NULL")

    def written() -> list[str]:
        return [n for n in lock_nodes(zk, SERVER_ROOT) if f"/{cdb}/staging/write-" in n]

    def expire_when_running():
        if wait_for(lambda: bool(written()) and any(tmp.glob(f"{marker}*")), timeout=60):
            zk.delete(written()[0])  # the job is running (60 rows at 0.5 s each)
    killer = threading.Thread(target=expire_when_running)
    killer.start()
    started = time.monotonic()
    try:
        with raises_lock_error(LockLost):
            locking.sql(slow)
    finally:
        killer.join()
        for path in tmp.glob(f"{marker}*"):
            path.unlink(missing_ok=True)
    assert time.monotonic() - started < 25  # 30 s of work, interrupted
    assert ccount(cs, f"{cdb}.staging") == before


def test_the_fencing_token_reaches_the_server_side_tasks(make_connect_locking, cs, cdb):
    """The server's engine runs each locked write under its own job tag (its query id) and
    fencing token (a local property every task sees, for table formats that record it)."""
    import re

    def job_tags(_):
        from pyspark import TaskContext

        context = TaskContext.get()
        return (f"{context.getLocalProperty('spark.job.tags')}"
                f";{context.getLocalProperty('zklock.locks.fencing.token')}")

    from pyspark.sql.types import StringType

    cs.udf.register("zk_job_tags", job_tags, StringType())  # a Python UDF the server runs
    cs.sql(f"CREATE TABLE {cdb}.tokens (t STRING) USING parquet")
    locking = make_connect_locking()
    for _ in range(2):
        locking.sql(f"INSERT INTO {cdb}.tokens SELECT zk_job_tags(1)")
    rows = [r.t.rsplit(";", 1) for r in cs.table(f"{cdb}.tokens").collect()]
    for tags, _ in rows:
        assert any(re.fullmatch(r"zklock-[0-9a-f]{16}", t) for t in tags.split(",")), tags
    first, later = sorted(int(token) for _, token in rows)
    assert later > first  # a later statement, a later token


def test_two_connect_clients_writing_one_partition_are_serialized(make_connect_locking, cs,
                                                                 cdb, servers, zk):
    import threading

    from conftest import lock_nodes, wait_for

    from zklock import LockNotAcquired

    # a table of its own: the module's other tests plan against cdb.orders's partitions
    table = f"{cdb}.serialized"
    cs.sql(f"CREATE TABLE {table} (id INT, amt DOUBLE, ds STRING, hr INT) USING parquet"
           " PARTITIONED BY (ds, hr)")
    second = connect(servers["port"])
    try:
        a = make_connect_locking()
        b = make_connect_locking(second)
        # 6 s of work in one task: b's attempt, made once a holds X, falls inside it
        slow = (f"INSERT INTO {table} PARTITION (ds='2024-09-01', hr=1)"
                f" SELECT id, 1.0 FROM range(0, 12, 1, 1)"
                f" WHERE java_method('java.lang.Thread', 'sleep', CAST(500 AS BIGINT)) IS NULL")
        done = threading.Event()
        failed: list = []

        def first():
            try:
                a.sql(slow)
                done.set()
            except Exception as exc:  # reported below
                failed.append(exc)
        t = threading.Thread(target=first)
        t.start()
        # a holds X on the partition once its write node is there (not after a guessed
        # second: a loaded machine plans and grants more slowly)
        assert wait_for(lambda: any("/serialized/" in n and "/write-" in n
                                    for n in lock_nodes(zk, SERVER_ROOT)), timeout=60), \
            "the first client's write node did not appear within 60 s"
        denied = False
        try:
            b.sql(f"INSERT INTO {table} PARTITION (ds='2024-09-01', hr=1) VALUES (7, 7.0)")
        except LockNotAcquired:
            denied = True
        t.join()
        assert done.is_set(), failed
        assert denied
    finally:
        close(second)


def test_a_connect_locking_sessions_statements_wait_as_it_says(make_connect_locking, cdb,
                                                               make_manager):
    """The server's lock client takes the statements' locks, with the session's own wait
    (carried with each statement: docs/configuration.md), not the server's (retries=1), and
    its SET of them as well."""
    from zklock import LockNotAcquired

    table = f"{cdb}.dim"
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    locking = make_connect_locking(retries=3)
    with other.acquire([(table, "X")], query_id="holder-wait"):
        with raises_lock_error(LockNotAcquired, match="after 4 attempt"):
            locking.sql(f"INSERT INTO {table} VALUES (41, 'w')")
        locking.sql("SET zklock.lock.retries=0")
        with raises_lock_error(LockNotAcquired, match="after 1 attempt"):
            locking.sql(f"INSERT INTO {table} VALUES (41, 'w')")
        with raises_lock_error(LockNotAcquired, match="after 1 attempt"):
            locking.table(table).collect()  # a read waits as the session says too


def test_a_plain_clients_set_decides_how_its_statements_wait(cs, cdb, make_manager):
    """A client that never imported zklock: its SET of zklock's wait keys travels with its
    statements to the server's lock client; a value that does not parse refuses the
    statement in one line naming the key, and takes nothing."""
    table = f"{cdb}.dim"
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    try:
        with other.acquire([(table, "X")], query_id="holder-set"):
            with pytest.raises(Exception, match="lock not acquired after 2 attempt"):
                cs.sql(f"INSERT INTO {table} VALUES (42, 'p')")  # the server's retries=1
            cs.sql("SET spark.zklock.lock.retries=2")
            with pytest.raises(Exception, match="lock not acquired after 3 attempt"):
                cs.sql(f"INSERT INTO {table} VALUES (42, 'p')")
            # a timeout names the whole wait: the server's count (its Spark conf, which
            # Spark copies into every session's conf) does not outweigh it
            cs.conf.unset("spark.zklock.lock.retries")  # (both set: the count, as in Hive)
            cs.sql("SET spark.zklock.lock.timeout=1s")
            started = time.monotonic()
            with pytest.raises(Exception, match="lock not acquired after") as by_time:
                cs.sql(f"INSERT INTO {table} VALUES (42, 'p')")
            assert time.monotonic() - started >= 1.0, str(by_time.value)[:400]
            assert "after 2 attempt(s)" not in str(by_time.value)
            cs.conf.unset("spark.zklock.lock.timeout")
            cs.sql("SET zklock.lock.retries=0")  # SET's short form
            with pytest.raises(Exception, match="lock not acquired after 1 attempt"):
                cs.sql(f"INSERT INTO {table} VALUES (42, 'p')")
            cs.conf.unset("zklock.lock.retries")
        cs.sql("SET spark.zklock.lock.retries=many")
        with pytest.raises(Exception, match="spark.zklock.lock.retries: not an integer"):
            cs.sql(f"INSERT INTO {table} VALUES (42, 'p')")
    finally:
        for key in ("spark.zklock.lock.retries", "spark.zklock.lock.timeout",
                    "zklock.lock.retries"):
            cs.conf.unset(key)  # the server's conf again
    assert [r for r in cs.table(table).collect() if r.id == 42] == []


def test_one_locking_session_per_connect_session(make_connect_locking, cs):
    """As for a classic SparkSession: a second LockingSession would silently change how the
    first one's statements wait (both publish into the session's conf). Refused, and the
    session's conf is left as the first one wrote it; closing puts back what it found."""
    before = cs.conf.get("spark.zklock.lock.retries", None)
    first = make_connect_locking(retries=3)
    with pytest.raises(InvalidArguments, match="wrapped by a LockingSession already"):
        make_connect_locking(retries=5)
    assert cs.conf.get("spark.zklock.lock.retries") == "3"
    first.close()
    assert cs.conf.get("spark.zklock.lock.retries", None) == before
    make_connect_locking(retries=5).close()  # free again


def test_zklock_sql_over_connect(make_connect_locking, cdb):
    locking = make_connect_locking()
    granted = locking.sql(f"LOCK TABLE {cdb}.dim SHARED FOR 1 MINUTE").collect()[0]
    shown = [tuple(r)[:2] for r in locking.sql(f"SHOW LOCKS {cdb}.dim").collect()]
    assert (f"{cdb}.dim", "S") in shown
    locking.sql(f"UNLOCK TABLE {cdb}.dim")
    assert granted.object == f"{cdb}.dim"
    assert locking.sql("SET zklock.lock.retries=3").collect()[0].value == "3"


def test_sysdb_and_scheduled_ddl_over_connect(make_connect_locking, cdb, make_manager,
                                              zk_hosts, root):
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    with other.acquire([(f"{cdb}.dim", "S")], query_id="reader-c"):
        locking = make_connect_locking()
        rows = locking.sql("SELECT object, query_id FROM sysdb.locks").collect()
        assert (f"{cdb}.dim", "reader-c") in [tuple(r) for r in rows]
    locking.close()  # one LockingSession per Connect session
    admin = make_connect_locking(scheduler_root=f"{root}-sched", scheduler_admins="alice",
                                 user="alice")
    created = admin.sql("CREATE SCHEDULED QUERY nightly_c CRON '0 3 * * *' DISABLED AS"
                        f" INSERT INTO {cdb}.dim VALUES (1, 'x')").collect()[0]
    assert created.result == "created"
    names = [r.schedule_name for r in admin.sql(
        "SELECT schedule_name FROM sysdb.scheduled_queries").collect()]
    assert "nightly_c" in names
    with pytest.raises(InvalidArguments, match="does not parse"):
        admin.sql("CREATE SCHEDULED QUERY bad_c CRON '0 3 * * *' AS SELEKT 1")


# ---- plain clients: zklock's server locks their commands ---------------------------------
def server_grants(servers) -> list:
    """The lock sets the module's server granted (its event log), oldest first."""
    try:
        with open(servers["events"]) as f:
            return [e["locks"] for e in map(json.loads, f) if e["event"] == "grant"]
    except FileNotFoundError:
        return []


def test_a_plain_client_is_locked_by_the_server(servers, cs, cdb, make_manager):
    """A client that never imported zklock (``builder.remote(...)`` and nothing else): the
    server takes its command's locks, denies it while another holder keeps X, and otherwise
    takes exactly the locks EXPLAIN LOCKS shows."""
    from conftest import wait_for

    table = f"{cdb}.dim"
    before = ccount(cs, table)
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    insert = f"INSERT INTO {table} VALUES (31, 'plain')"
    with other.acquire([(table, "X")], query_id="holder-plain"):
        with pytest.raises(Exception, match="lock not acquired.*held in X.*holder-plain"):
            cs.sql(insert)
        with pytest.raises(Exception, match="lock not acquired"):
            cs.createDataFrame([(32, "df")], "id INT, name STRING").write.insertInto(table)
    assert ccount(cs, table) == before
    granted = len(server_grants(servers))
    cs.sql(insert)
    assert wait_for(lambda: len(server_grants(servers)) > granted, timeout=10)
    assert server_grants(servers)[-1] == [list(r) for r in plan_locks(cs, sql=insert)]
    assert ccount(cs, table) == before + 1


def test_a_plain_clients_reads_are_locked_by_the_server(servers, cs, cdb, make_manager):
    """The same client's reads: the server's engine takes S on what each reads (its results
    leave through an RDD, held until the SQL execution ends), denies them while another
    holder keeps X, and runs them beside a holder in S."""
    table = f"{cdb}.dim"
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    reads = [lambda: cs.table(table).collect(), lambda: cs.table(table).count(),
             lambda: cs.sql(f"SELECT max(id) FROM {table}").toPandas(),
             lambda: cs.table(table).take(1)]
    with other.acquire([(table, "X")], query_id="holder-reads"):
        for read in reads:
            with pytest.raises(Exception, match="lock not acquired.*held in X.*holder-reads"):
                read()
    with other.acquire([(table, "S")], query_id="reader-beside"):
        for read in reads:
            read()


def block_nodes(zk, table: str) -> list[str]:
    return [n for n in lock_nodes(zk, SERVER_ROOT) if f"/{table.replace('.', '/')}/" in n]


def test_a_connect_block_is_held_by_the_servers_engine(make_connect_locking, cs, cdb,
                                                      make_manager, zk):
    """A Connect LockingSession's holding() block: the server's engine takes its locks, as a
    statement's, and holds them for the client's session until the block ends. What the
    block runs is covered where its locks cover it (a read of what it holds S on, with no
    lock of its own) and refused where they do not (a write there): the table unchanged."""
    from zklock import LockNotAcquired

    locking = make_connect_locking(retries=LINGER_RETRIES)
    table = f"{cdb}.dim"
    before = ccount(cs, table)
    # that read's S lingers until the server hears its execution end, as earlier tests' may
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)
    other = make_manager(root=SERVER_ROOT, retries=0)
    with locking.holding(locking.table(table)) as held:
        assert held.objects == [cdb, table] and all(h.node_path for h in held.held)
        (node,) = [n for n in block_nodes(zk, table) if "/read-" in n]
        assert node in held.node_paths
        assert ccount(locking, table) == before  # covered: no lock of its own
        assert block_nodes(zk, table) == [node]
        with raises_lock_error(UnsupportedStatement, match="block's locks do not cover"):
            locking.sql(f"INSERT INTO {table} VALUES (51, 'outside')")
        with pytest.raises(LockNotAcquired):  # the block's S keeps a writer out
            other.acquire([(table, "X")], query_id="writer")
        other.acquire([(table, "S")], query_id="reader").release()
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)
    assert ccount(cs, table) == before


def test_a_connect_blocks_loss_is_lock_lost(make_connect_locking, cs, cdb, zk):
    """The block's node deleted by another client: what the block runs next is refused, and
    the block ends with LockLost."""
    from zklock import LockLost

    locking = make_connect_locking(retries=LINGER_RETRIES)
    table = f"{cdb}.staging"
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)  # earlier tests' reads
    with raises_lock_error(LockLost, match="block's locks"):
        with locking.holding(locking.table(table)):
            (node,) = block_nodes(zk, table)
            zk.delete(node)
            with raises_lock_error(LockLost):
                ccount(locking, table)
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)


@pytest.mark.skipif(not SPARK_41, reason="SQL scripts are Spark 4.1's")
def test_a_connect_script_runs_whole_under_one_block(make_connect_locking, cs, cdb,
                                                     make_manager):
    """A SQL script from a Connect LockingSession holds its statements' locks for its whole
    run, in the server: a holder of one of its tables denies the whole script, which then
    changes nothing; released, every statement runs."""
    from zklock import LockNotAcquired

    # tables of its own: the module's others are planned by tests that expect them as seeded
    cs.sql(f"CREATE TABLE {cdb}.script_a (id INT) USING parquet")
    cs.sql(f"CREATE TABLE {cdb}.script_b (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
    locking = make_connect_locking(retries=0)
    script = (f"BEGIN INSERT INTO {cdb}.script_a VALUES (61); INSERT INTO {cdb}.script_b"
              f" PARTITION (ds='2025-01-01') VALUES (61); END")
    tables = (f"{cdb}.script_a", f"{cdb}.script_b")
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    with other.acquire([(tables[1], "X")], query_id="holder-s"):
        with raises_lock_error(LockNotAcquired, match="holder-s"):
            locking.sql(script)
    assert [ccount(cs, t) for t in tables] == [0, 0]
    locking.sql(script)
    assert [ccount(cs, t) for t in tables] == [1, 1]


def test_a_connect_block_its_client_stops_renewing_is_released(cs, cdb, zk):
    """A block lives while its client renews it; one not renewed within its time to live (a
    client that died) is released by the server, and its client's release learns it was
    lost."""
    from zklock import LockLost
    from zklock.locks.lockrequest import normalize
    from zklock.spark.connect import hold_block, release_block, renew_block

    table = f"{cdb}.events"
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)  # earlier tests' reads
    block, nodes = hold_block(cs, normalize([(table, "S")]), "a block whose client stops",
                              ttl=5.0)
    assert block and len(nodes) == 2 and block_nodes(zk, table)
    until = time.monotonic() + 6.0  # longer than its time to live, renewed throughout
    while time.monotonic() < until:
        renew_block(cs, block)
        time.sleep(0.5)  # the client's renewal period, well inside the 5 s
    assert block_nodes(zk, table), "a renewed block was released"
    assert wait_for(lambda: block_nodes(zk, table) == [], timeout=30)  # not renewed: gone
    with raises_lock_error(LockLost, match="did not renew them"):
        release_block(cs, block)


def test_a_block_tag_a_session_does_not_hold_is_refused(servers, make_connect_locking, cs,
                                                       cdb):
    """An operation tag naming a block: a forged id, or another session's block, runs
    nothing; the table is unchanged."""
    locking = make_connect_locking(retries=LINGER_RETRIES)
    before = ccount(cs, f"{cdb}.dim")
    other = connect(servers["port"])
    try:
        with locking.holding(locking.table(f"{cdb}.staging")) as held:
            for block in ("forged-0000", held.query_id):
                other.addTag(f"zklock-block-{block}")
                try:
                    with pytest.raises(Exception, match="holds no block"):
                        other.sql(f"INSERT INTO {cdb}.dim VALUES (41, 'forged')")
                finally:
                    other.removeTag(f"zklock-block-{block}")
    finally:
        close(other)
    assert ccount(cs, f"{cdb}.dim") == before


def test_a_server_started_as_spark_starts_one_locks_plain_clients_through_its_child(
        servers, zk_hosts):
    """Spark's own way of starting a Connect server never runs zklock's Python: its engine
    starts the lock client as a child process, which takes a plain client's locks. While
    another holder keeps X on the table the write is denied and changes nothing; then it
    runs."""
    bare = connect(servers["plain_port"])
    holder = LockManager(hosts=zk_hosts, root=PLAIN_ROOT, retries=LINGER_RETRIES,
                         retry_interval=0.05)
    try:
        bare.sql("CREATE TABLE child_locked (id INT) USING parquet")
        with holder.acquire([("default.child_locked", "X")], query_id="holder"):
            with pytest.raises(Exception) as caught:
                bare.sql("INSERT INTO child_locked VALUES (1)")
            first = str(caught.value).strip().splitlines()[0]
            assert "default.child_locked (X requested) is held in X" in first, first
        bare.sql("INSERT INTO child_locked VALUES (2)")
        assert [r.id for r in bare.sql("SELECT id FROM child_locked").collect()] == [2]
        assert bare.sql("SELECT 1 AS one").collect()[0].one == 1
    finally:
        holder.close()
        close(bare)


LOCAL_CONNECT = """
import sys
import time
from pyspark.sql import SparkSession
from zklock import LockManager, LockNotAcquired
from zklock.spark import LockingSession, configure
hosts, root, warehouse = sys.argv[1:4]
spark = configure(SparkSession.builder.master("local[1]").config("spark.api.mode", "connect")
                  .config("spark.sql.warehouse.dir", warehouse)
                  .config("spark.ui.enabled", "false")).getOrCreate()
print("session", type(spark).__module__)
locking = LockingSession(spark, hosts=hosts, root=root, retries=0)
spark.sql("CREATE TABLE t (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")  # locked
insert = "INSERT INTO t PARTITION (ds='a') VALUES (1)"
print("locks", " ".join(f"{o}:{m}" for o, m in locking.explain_locks(insert).rows()))
other = LockManager(hosts=hosts, root=root)
with other.acquire([("default.t", "X")], query_id="holder"):
    try:
        locking.sql(insert)
    except LockNotAcquired:
        print("denied")
locking.sql(insert)
print("rows", locking.table("t").count())
# a busy listener bus (each SQL event held 30 ms, as a loaded server's may be): a read's S is
# released when its execution has ended, not when the bus says so, so the client's next
# statement never meets it
classic = SparkSession._instantiatedSession  # the classic session serving the client
from pyspark.java_gateway import ensure_callback_server_started
ensure_callback_server_started(classic.sparkContext._gateway)
class BusyListener:
    def __getattr__(self, name):
        return lambda *event: time.sleep(0.03) if name == "onOtherEvent" else None
    class Java:
        implements = ["org.apache.spark.scheduler.SparkListenerInterface"]
busy = BusyListener()
classic.sparkContext._jsc.sc().addSparkListener(busy)
for i in range(10):
    locking.table("t").count()
    locking.sql(insert)  # one attempt (retries=0)
print("rows", locking.table("t").count())
classic.sparkContext._jsc.sc().removeSparkListener(busy)
locking.close()
other.close()
spark.stop()
"""


def test_a_local_connect_session_built_with_configure_gets_the_plugin(zk_hosts, root,
                                                                      tmp_path):
    """The issue's first case: ``spark.api.mode=connect`` with a local master, where PySpark
    starts the Connect server in the process. configure() adds zklock's plugin, so the
    session plans, denies and writes as a classic one. (Its own process: a process with a
    classic session would reuse that session's JVM, which has no plugin.) With the server's
    listener bus slow, a read's S is gone before the client's next statement, which takes
    X at its one attempt (before ExecutionEnds.releaseEnded, 39 of 40 were denied)."""
    out = subprocess.run([sys.executable, "-c", LOCAL_CONNECT, zk_hosts, root,
                          str(tmp_path / "wh")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    lines = [line for line in out.stdout.splitlines() if line.split(" ")[0] in
             ("session", "locks", "denied", "rows")]
    assert out.returncode == 0 and lines == [
        "session pyspark.sql.connect.session",
        "locks default:S default.t:S default.t/ds=a:X",
        "denied",
        "rows 1",
        "rows 11"], (out.stdout[-2000:], out.stderr[-3000:])


def test_cli_status(servers):
    """The module's server, as `status` shows it (the fixture's teardown tests `stop`)."""
    out = cli("--state-dir", servers["state"], "spark", "connect-server", "status", "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["running"] and st["port"] == servers["port"] and st["pid"]
    assert Path(st["jar"]).name.startswith(f"zklock-spark-{pyspark.__version__}-")
    assert st["spark"] == pyspark.__version__
    text = cli("--state-dir", servers["state"], "spark", "connect-server", "status")
    assert text.stdout.startswith(f"running, pid {st['pid']}; sc://127.0.0.1:{servers['port']}")


def test_a_plain_clients_statements_reuse_the_servers_connections_to_python(servers, cs, cdb):
    """Spark Connect runs each operation on a thread of its own; the engine calls the server's
    lock client from threads that keep their py4j connection (PythonCalls.java), so the
    hosting Python does not gain a thread (one per py4j connection) per statement."""
    out = cli("--state-dir", servers["state"], "spark", "connect-server", "status", "--json")
    tasks = Path(f"/proc/{json.loads(out.stdout)['pid']}/task")
    table = f"{cdb}.dim"

    def statements(n: int) -> None:
        for i in range(n):
            cs.sql(f"INSERT INTO {table} VALUES ({100 + i}, 'reuse')")
            cs.table(table).count()

    # (each INSERT, at its one retry, finds the previous count's S gone: its request carries
    # the release of reads whose execution ended, ExecutionEnds.releaseEnded)
    statements(3)  # the caller threads, the release sender and the lock manager start
    before = len(list(tasks.iterdir()))
    statements(15)  # 30 operations, each a call to Python
    # a few caller threads (a statement's call, the release sender's, and one started each
    # time a call came while the others were on their way back to wait, which a loaded
    # machine makes more of: the 4.0 compatibility run beside three spark-pipelines
    # applications grew more than 5), but fewer than one per statement
    grown = len(list(tasks.iterdir())) - before
    assert grown < 15, grown


def test_a_connect_clients_stream_is_locked_per_batch(cs, cdb, make_manager, tmp_path):
    """A writeStream from a Spark Connect client: the server's engine locks each micro-batch
    (denied while another holder keeps X on the table: the server waits as its settings say,
    here one retry), and commits it into the table once, with no _spark_metadata."""
    table = f"{cdb}.streamed"
    cs.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
    source = tmp_path / "source"
    source.mkdir()
    for f in range(2):
        (source / f"part-{f}.json").write_text(
            "".join(f'{{"id": {f * 5 + r}, "ds": "d"}}\n' for r in range(5)))

    def start(name: str):
        return (cs.readStream.schema("id INT, ds STRING").json(str(source)).writeStream
                .option("checkpointLocation", str(tmp_path / name))
                .trigger(availableNow=True).toTable(table))

    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    with other.acquire([(table, "X")], query_id="holder-stream"):
        denied = start("denied")
        with pytest.raises(Exception, match="micro-batch 0|holder-stream"):
            denied.awaitTermination(120)
            raise AssertionError(f"the batch ran under another holder's X: {denied.exception()}")
    assert ccount(cs, table) == 0
    query = start("ran")
    query.awaitTermination(120)
    assert query.exception() is None
    assert ccount(cs, table) == 10
    place = cs.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'") \
        .first().data_type.replace("file:", "")
    assert not (Path(place) / "_spark_metadata").exists()
    assert (Path(place) / "_zklock" / "batches" / query.id).is_dir()


def test_a_plain_clients_session_lock_ends_with_its_session(servers, cdb, make_manager):
    """LOCK TABLE from a Connect client without a LockingSession: a session lock held by
    the server for that client's session (engine/SessionLocks.java), released when the
    client closes its session without UNLOCK TABLE (SessionEnds.java)."""
    table = f"{cdb}.dim"
    client = connect(servers["port"])
    other = make_manager(root=SERVER_ROOT)
    try:
        client.sql(f"LOCK TABLE {table} EXCLUSIVE")
        (held,) = other.show(table, extended=True)
        assert held.data.query.startswith(f"LOCK TABLE {table} EXCLUSIVE")
        with pytest.raises(LockNotAcquired):
            other.acquire([(table, "S")]).release()
    finally:
        close(client)
    assert wait_for(lambda: not other.show(table), timeout=60)


@pytest.mark.skipif(not SPARK_41, reason="declarative pipelines are Spark 4.1's")
def test_a_pipeline_run_takes_its_datasets_as_it_starts(servers, cdb, make_manager, tmp_path):
    """A declarative pipeline's run over Spark Connect, as spark-pipelines makes it (a
    graph, its two views, StartRun): while another holds one of its datasets, the run is
    refused in one line and creates neither; otherwise it runs whole, and its X on both is
    released when its operation ends, though its session stays open."""
    from pyspark.pipelines.spark_connect_graph_element_registry import (
        SparkConnectGraphElementRegistry,
    )
    from pyspark.pipelines.spark_connect_pipeline import (
        create_dataflow_graph,
        handle_pipeline_events,
        start_run,
    )

    client = connect(servers["port"])
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    views = [f"{cdb}.sdp_count", f"{cdb}.sdp_newest"]
    try:
        graph = create_dataflow_graph(client, default_catalog=None, default_database=cdb,
                                      sql_conf={})
        SparkConnectGraphElementRegistry(client, graph).register_sql(
            f"CREATE MATERIALIZED VIEW sdp_count AS SELECT count(*) AS n FROM {cdb}.dim;\n"
            f"CREATE MATERIALIZED VIEW sdp_newest AS SELECT max(id) AS m FROM {cdb}.dim;\n",
            tmp_path / "views.sql")

        def run() -> None:
            handle_pipeline_events(start_run(client, graph, full_refresh=None,
                                             full_refresh_all=False, refresh=None, dry=False,
                                             storage=(tmp_path / "storage").as_uri()))

        with other.acquire([(views[1], "X")], query_id="holder-sdp"):
            with pytest.raises(Exception, match="lock not acquired.*holder-sdp") as refused:
                run()
            assert "Traceback" not in str(refused.value)
        assert not any(client.catalog.tableExists(v) for v in views)  # nothing created
        run()
        assert client.table(views[0]).collect()[0][0] == ccount(client, f"{cdb}.dim")
        assert client.table(views[1]).count() == 1
        # released with the run's operation, the client's session still open
        assert wait_for(lambda: not other.show(views[0]) and not other.show(views[1]),
                        timeout=60)
        other.acquire([(v, "X") for v in views], query_id="after-sdp").release()
    finally:
        close(client)


def runs_waiting(zk) -> bool:
    """Does a pipeline's run wait for its locks on the module's server?"""
    return any("spark-pipelines run" in q for q in waiting_queries(zk, SERVER_ROOT))


@pytest.mark.soak  # a fault case of a minute: make soak-spark, keeping make test's quarter hour
@pytest.mark.skipif(not SPARK_41, reason="declarative pipelines are Spark 4.1's")
def test_a_pipeline_run_whose_client_left_as_it_waited_holds_nothing(servers, cdb, zk,
                                                                     make_manager, tmp_path):
    """A run waiting for a holder of its dataset, its client gone meanwhile (its session
    stopped): when the holder releases, the run takes nothing for good and creates
    nothing."""
    import threading

    from pyspark.pipelines.spark_connect_graph_element_registry import (
        SparkConnectGraphElementRegistry,
    )
    from pyspark.pipelines.spark_connect_pipeline import (
        create_dataflow_graph,
        handle_pipeline_events,
        start_run,
    )

    client = connect(servers["port"])
    client.conf.set("spark.zklock.lock.retries", "6000")  # the run waits, as its SET says
    view = f"{cdb}.sdp_left"
    other = make_manager(root=SERVER_ROOT, retries=LINGER_RETRIES)
    graph = create_dataflow_graph(client, default_catalog=None, default_database=cdb,
                                  sql_conf={})
    SparkConnectGraphElementRegistry(client, graph).register_sql(
        f"CREATE MATERIALIZED VIEW sdp_left AS SELECT count(*) AS n FROM {cdb}.dim;\n",
        tmp_path / "left.sql")
    ended: list[BaseException] = []

    def run() -> None:
        try:
            handle_pipeline_events(start_run(client, graph, full_refresh=None,
                                             full_refresh_all=False, refresh=None, dry=False,
                                             storage=(tmp_path / "storage").as_uri()))
        except BaseException as e:  # the client's own end: what the test waits for
            ended.append(e)

    held = other.acquire([(view, "X")], query_id="holder-left")
    waiting = threading.Thread(target=run)
    try:
        waiting.start()
        assert wait_for(lambda: runs_waiting(zk), timeout=120)
        close(client)
        waiting.join(60)
    finally:
        held.release()
    # the run's wait ends (granted, then released at once, or refused: its session ended)
    assert wait_for(lambda: not runs_waiting(zk), timeout=120)
    assert wait_for(lambda: not other.show(view), timeout=60)
    other.acquire([(view, "X")], query_id="after-left").release()
    checker = connect(servers["port"])
    try:
        assert not checker.catalog.tableExists(view)
    finally:
        close(checker)


@pytest.mark.parametrize("lock_client", ["python", "child"])
def test_an_interrupted_statement_stops_waiting_at_once_and_holds_nothing(
        servers, cdb, zk, zk_hosts, make_manager, lock_client):
    """A client's statement waiting for another holder's X, interrupted (Spark Connect's
    interruptTag, as a notebook's stop button does): it ends at once, while the holder still
    holds, with its wait withdrawn (`zklock waits`) and nothing taken or written; before,
    it waited out its whole lock timeout. Through the server's lock client in its Python
    and through the child lock client of a server Spark's way (GrantAhead.now)."""
    import threading

    port, root = ((servers["port"], SERVER_ROOT) if lock_client == "python"
                  else (servers["plain_port"], PLAIN_ROOT))
    client = connect(port)
    table = f"{cdb}.dim" if lock_client == "python" else "default.interrupted_wait"
    other = make_manager(root=root, retries=LINGER_RETRIES)
    ended: list[BaseException] = []
    try:
        if lock_client == "child":
            client.sql(f"CREATE TABLE IF NOT EXISTS {table} (id INT, name STRING)"
                       " USING parquet")
        before = client.table(table).count()
        client.sql("SET spark.zklock.lock.retries=6000")  # 5 minutes of retries
        insert = f"INSERT INTO {table} VALUES (77, 'interrupted')"

        def run() -> None:
            client.addTag("zklock-interrupted-wait")
            try:
                client.sql(insert)
            except BaseException as e:  # the interruption: what the test waits for
                ended.append(e)

        with other.acquire([(table, "X")], query_id="holder-interrupt"):
            waiting = threading.Thread(target=run, daemon=True)
            waiting.start()
            assert wait_for(lambda: any(insert in q for q in waiting_queries(zk, root)),
                            timeout=120), "the INSERT never waited"
            client.interruptTag("zklock-interrupted-wait")
            waiting.join(60)
            assert not waiting.is_alive() and ended, "the interrupted INSERT went on waiting"
            assert wait_for(lambda: not any(insert in q for q in waiting_queries(zk, root)))
            assert [h.data.query_id for h in other.show(table, extended=True)] == [
                "holder-interrupt"]
        other.acquire([(table, "X")], query_id="after-interrupt", retries=0).release()
        client.sql("RESET spark.zklock.lock.retries")
        assert client.table(table).count() == before
    finally:
        close(client)
