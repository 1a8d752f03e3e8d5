"""One precedence for every setting, on every path a LockingSession locks (docs/
configuration.md, "Precedence"): its ``sql()`` commands, its DataFrame actions, its
``df.write``, and the plain session's commands, which the engine locks through the lock
client the LockingSession installed.

The same setting is set at several levels (environment, Spark conf, LockManager, LockingSession,
SET) and the value used is read from behaviour: the attempts the event log records for the
denial, the time to the denial (bounded from below by the settings: a lower bound is what a
loaded machine cannot break), whether a statement runs at all beside an X holder, and the
names of the lock nodes a running statement holds. The pure layering is tabulated whole in
tests/core/test_config.py; here each level is shown to reach each path.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import Latch, lock_nodes, wait_for
from test_spark_engine import no_lock_client

from zklock import LockManager
from zklock.errors import LockNotAcquired
from zklock.locks.locknode import LockNodeName
from zklock.observe.events import read_events
from zklock.spark import LockingSession, enforce, lock_error

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PATHS = ["sql", "action", "write", "plain"]


def run_path(path: str, session: LockingSession, table: str, value: str = "'p'") -> None:
    """One statement on ``table`` by ``path``; ``value`` is the name column's expression."""
    if path == "sql":
        session.sql(f"INSERT INTO {table} SELECT 7, {value}")
    elif path == "action":
        session.table(table).selectExpr("id", f"{value} AS v").collect()
    elif path == "write":
        session.sql(f"SELECT 7 AS id, {value} AS name").write.insertInto(table)
    else:  # the plain session: the engine's lock client the LockingSession installed
        session.spark.sql(f"INSERT INTO {table} SELECT 7, {value}")


def outcome(path: str, session: LockingSession, table: str) -> tuple[str, float]:
    """("ran" | "denied", seconds) of one statement by ``path``."""
    started = time.monotonic()
    try:
        run_path(path, session, table)
    except Exception as exc:
        error = lock_error(exc)
        assert isinstance(error, LockNotAcquired), (path, exc)
        return "denied", time.monotonic() - started
    return "ran", time.monotonic() - started


def attempts_of_last_denial(manager: LockManager, log: Path) -> int:
    manager.events.flush()
    finals = [e for e in read_events([str(log)]) if e["event"] == "denial" and e["final"]]
    assert finals, "no final denial in the event log"
    return finals[-1]["attempt"]


@pytest.fixture
def blocked(spark, db, make_manager):
    """``db.dim`` held in X by another holder for the test."""
    holder = make_manager(retries=0)
    with holder.acquire([(f"{db}.dim", "X")], query="the holder"):
        yield f"{db}.dim"


@pytest.fixture
def build(spark, zk_hosts, root, session_timeout, tmp_path, monkeypatch):
    """build(manager={...}, session={...}, spark_conf={...}, env={...}, set={...}): a
    LockingSession over a LockManager with settings at each level, and the engine's lock
    client its own; everything is undone after the test."""
    made: list[tuple[LockingSession, LockManager]] = []
    conf_keys: list[str] = []
    log = tmp_path / "events.jsonl"

    def make(manager=None, session=None, spark_conf=None, env=None, set=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, str(value))
        for key, value in (spark_conf or {}).items():
            spark.conf.set(key, str(value))
            conf_keys.append(key)
        mgr = LockManager(hosts=zk_hosts, root=root, session_timeout=session_timeout,
                          event_log=str(log), **(manager or {}))
        locking = LockingSession(spark, manager=mgr, **(session or {}))
        made.append((locking, mgr))
        for key, value in (set or {}).items():
            locking.sql(f"SET {key}={value}")
        return locking, mgr, log

    with no_lock_client(spark):  # the LockingSession's client is the engine's for the test
        yield make
        for locking, mgr in made:
            locking.close()
            mgr.close()
    for key in conf_keys:
        spark.conf.unset(key)


# ---- retries: the attempts of a denial -----------------------------------------------
FAST = {"retry_interval": 0.05}
COUNT_CASES = {
    # the README's pattern: the manager's count, under a session that sets nothing
    "manager": (dict(manager=dict(retries=1, **FAST)), 2),
    "session over manager": (dict(manager=dict(retries=1, **FAST), session=dict(retries=2)), 3),
    "SET over session": (dict(manager=FAST, session=dict(retries=1),
                              set={"zklock.lock.retries": 3}), 4),
    "spark conf over environment": (dict(manager=FAST, env={"ZKLOCK_RETRIES": 1},
                                         spark_conf={"spark.zklock.lock.retries": 2}), 3),
    "manager over spark conf": (dict(manager=dict(retries=1, **FAST),
                                     spark_conf={"spark.zklock.lock.retries": 2}), 2),
    "environment": (dict(manager=FAST, env={"ZKLOCK_RETRIES": 2}), 3),
    "hive's name in SET": (dict(manager=dict(retries=1, **FAST),
                                set={"hive.lock.numretries": 2}), 3),
}


@pytest.mark.parametrize("case", list(COUNT_CASES))
def test_the_count_set_at_the_strongest_level_decides_on_every_path(case, blocked, build):
    levels, attempts = COUNT_CASES[case]
    locking, mgr, log = build(**levels)
    for path in PATHS:
        result, _ = outcome(path, locking, blocked)
        assert result == "denied", path
        assert attempts_of_last_denial(mgr, log) == attempts, path


# ---- timeout against retries: a wait by time -----------------------------------------
TIME_CASES = {
    "session timeout over manager retries": dict(manager=dict(retries=1, **FAST),
                                                 session=dict(timeout=1.5)),
    "manager timeout over spark conf retries": dict(
        manager=dict(timeout=1.5, **FAST), spark_conf={"spark.zklock.lock.retries": 1}),
    "SET timeout over session retries": dict(manager=FAST, session=dict(retries=1),
                                             set={"zklock.lock.timeout": "1500ms"}),
}


@pytest.mark.parametrize("case", list(TIME_CASES))
def test_a_timeout_set_at_a_stronger_level_waits_by_time_on_every_path(case, blocked, build):
    locking, mgr, log = build(**TIME_CASES[case])
    for path in PATHS:
        result, seconds = outcome(path, locking, blocked)
        assert result == "denied", path
        # the request waits until its 1.5 s deadline: no sooner (a count of 1 at 50 ms
        # would give up in about 0.1 s); a loaded machine only makes it later
        assert seconds >= 1.5, (path, seconds)
        assert attempts_of_last_denial(mgr, log) > 2, path


# ---- retry_interval: the time a count of retries takes -------------------------------
INTERVAL_CASES = {
    "session over manager": dict(manager=dict(retries=2, retry_interval=0.05),
                                 session=dict(retry_interval=0.5)),
    "manager over spark conf": dict(manager=dict(retries=2, retry_interval=0.5),
                                    spark_conf={"spark.zklock.lock.retryInterval": "50ms"}),
    "SET over manager": dict(manager=dict(retries=2, retry_interval=0.05),
                             set={"zklock.lock.retryInterval": "500ms"}),
}


@pytest.mark.parametrize("case", list(INTERVAL_CASES))
def test_the_interval_set_at_the_strongest_level_paces_every_path(case, blocked, build):
    locking, mgr, log = build(**INTERVAL_CASES[case])
    for path in PATHS:
        result, seconds = outcome(path, locking, blocked)
        assert result == "denied" and attempts_of_last_denial(mgr, log) == 3, path
        # two pauses of 0.5 s jittered by at most -25%: at least 0.75 s; two of 50 ms
        # would take about 0.1 s
        assert seconds >= 2 * 0.5 * 0.75, (path, seconds)


# ---- support_concurrency: whether a statement locks at all ---------------------------
CONCURRENCY_CASES = {
    "manager off": (dict(manager=dict(support_concurrency=False, retries=0)), "ran"),
    "session on over manager off": (dict(manager=dict(support_concurrency=False, retries=0),
                                         session=dict(support_concurrency=True)), "denied"),
    "SET off over session on": (dict(manager=dict(retries=0),
                                     session=dict(support_concurrency=True),
                                     set={"zklock.support.concurrency": "false"}), "ran"),
    "spark conf off": (dict(manager=dict(retries=0),
                            spark_conf={"spark.zklock.support.concurrency": "false"}), "ran"),
    "manager on over spark conf off": (
        dict(manager=dict(retries=0, support_concurrency=True),
             spark_conf={"spark.zklock.support.concurrency": "false"}), "denied"),
}


@pytest.mark.parametrize("case", list(CONCURRENCY_CASES))
def test_whether_statements_lock_follows_the_strongest_level_on_every_path(case, blocked,
                                                                          build):
    levels, expected = CONCURRENCY_CASES[case]
    locking, _, _ = build(**levels)
    for path in PATHS:
        assert outcome(path, locking, blocked)[0] == expected, path


# ---- node_naming: the names of the nodes a running statement holds -------------------
NAMING_CASES = {
    "manager hive": (dict(manager=dict(node_naming="hive")), True),
    "session recipe over manager hive": (dict(manager=dict(node_naming="hive"),
                                              session=dict(node_naming="recipe")), False),
    "spark conf hive over environment recipe": (
        dict(env={"ZKLOCK_NODE_NAMING": "recipe"},
             spark_conf={"spark.zklock.lock.nodeNaming": "hive"}), True),
    "SET hive over session recipe": (dict(session=dict(node_naming="recipe"),
                                          set={"zklock.lock.nodeNaming": "hive"}), True),
}


@pytest.mark.parametrize("case", list(NAMING_CASES))
def test_node_names_follow_the_strongest_level_on_every_path(case, spark, db, build, zk, root,
                                                            tmp_path):
    levels, hive = NAMING_CASES[case]
    locking, _, _ = build(**levels)
    table_node = f"{root}/{db}/dim"
    for n, path in enumerate(PATHS):
        latch = Latch(locking, tmp_path / f"latch-{n}")  # the statement holds its locks until
        failed: list[BaseException] = []                # the test has read their names

        def run(path=path, failed=failed, latch=latch):
            try:
                run_path(path, locking, f"{db}.dim", f"CAST({latch.name}(7) AS STRING)")
            except BaseException as exc:  # reported below
                failed.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        try:
            # the table's object node is a container the server may sweep between two
            # reads, once the previous path's locks are gone: lock_nodes reads it as empty
            names = wait_for(lambda: [n.rsplit("/", 1)[1] for n in lock_nodes(zk, table_node)
                                      if n.rsplit("/", 2)[1] == "dim"], timeout=60)
            assert names, f"{path}: no lock node appeared on {table_node} within 60 s"
        finally:
            latch.open()
            runner.join(120)
        assert not runner.is_alive() and not failed, (path, failed)
        parsed = [LockNodeName.parse(k) for k in names]
        assert all(p.hive is hive for p in parsed), (path, names)


# ---- a plain session's own wait: its conf, carried to the engine's lock client ---------
@pytest.fixture
def enforced(spark, zk_hosts, root, session_timeout, tmp_path):
    """enforced(**settings): the application's lock client made by enforce() with
    ``settings``, over a LockManager that sets only a fast retry interval; the plain
    session's conf changes are the test's, put back after it."""
    log = tmp_path / "events.jsonl"
    made = []
    keys = ("spark.zklock.lock.retries", "spark.zklock.lock.timeout", "hive.lock.numretries")
    before = {k: spark.conf.get(k, None) for k in keys}

    def make(**settings):
        mgr = LockManager(hosts=zk_hosts, root=root, session_timeout=session_timeout,
                          event_log=str(log), **FAST)
        made.append((enforce(spark, manager=mgr, **settings), mgr))
        return mgr, log

    with no_lock_client(spark):
        yield make
        for client, mgr in made:
            client.close()
            mgr.close()
    for key, value in before.items():
        spark.conf.unset(key) if value is None else spark.conf.set(key, value)


@pytest.mark.parametrize("set_,settings,attempts", [
    ({"spark.zklock.lock.retries": 2}, {}, 3),
    ({"hive.lock.numretries": 1}, {}, 2),
    # an enforce() argument is set above the session's conf
    ({"spark.zklock.lock.retries": 2}, {"retries": 0}, 1),
], ids=["zklock key", "hive's name", "enforce() argument over SET"])
def test_a_plain_sessions_set_decides_how_its_statements_wait(set_, settings, attempts,
                                                              blocked, enforced, spark):
    mgr, log = enforced(**settings)
    for key, value in set_.items():
        spark.sql(f"SET {key}={value}")
    with pytest.raises(Exception) as denied:
        spark.sql(f"INSERT INTO {blocked} SELECT 7, 'p'")
    assert isinstance(lock_error(denied.value), LockNotAcquired), denied.value
    assert attempts_of_last_denial(mgr, log) == attempts


def test_a_plain_sessions_timeout_replaces_the_clients_count(blocked, enforced, spark):
    """A session that names a timeout names its whole wait: the lock client's count from the
    Spark conf does not outweigh it."""
    spark.conf.set("spark.zklock.lock.retries", "0")
    enforced()  # its count: the Spark conf's as it started, one attempt
    spark.conf.unset("spark.zklock.lock.retries")
    spark.sql("SET spark.zklock.lock.timeout=1.5s")
    started = time.monotonic()
    with pytest.raises(Exception) as denied:
        spark.sql(f"INSERT INTO {blocked} SELECT 7, 'p'")
    assert isinstance(lock_error(denied.value), LockNotAcquired), denied.value
    assert time.monotonic() - started >= 1.5


def test_a_session_that_fails_to_start_leaves_its_conf_as_it_was(build, spark):
    """A second LockingSession over a wrapped SparkSession is refused, and writes nothing
    into the session's conf (the first one's statements would wait as it said)."""
    from zklock.errors import InvalidArguments

    locking, mgr, _ = build(manager=FAST, session=dict(retries=2))
    assert spark.conf.get("spark.zklock.lock.retries") == "2"
    with pytest.raises(InvalidArguments, match="wrapped by a LockingSession already"):
        LockingSession(spark, manager=mgr, retries=0)
    assert spark.conf.get("spark.zklock.lock.retries") == "2"
    locking.close()
    assert spark.conf.get("spark.zklock.lock.retries", None) is None


# ---- what a new session and SET may change -------------------------------------------
def test_a_new_session_locks_as_its_parent_each_value_at_its_level(build):
    from zklock.config import Level

    locking, _, _ = build(manager=dict(retries=1), session=dict(isolate_commits=False),
                          set={"zklock.lock.retryInterval": "50ms"})
    child = locking.newSession()
    try:
        assert child.settings == locking.settings
        assert {n: child.settings.level(n) for n in ("retries", "isolate_commits",
                                                     "retry_interval", "timeout")} == {
            "retries": Level.MANAGER, "isolate_commits": Level.SESSION,
            "retry_interval": Level.SESSION_SET, "timeout": Level.DEFAULT}
        # isolate_commits=False reached its session's conf, which its write jobs read
        assert child.spark.conf.get("spark.zklock.isolateCommits") == "false"
        assert child.settings.wait().retries == 1
    finally:
        child.close()


def test_a_running_session_changes_how_it_locks_never_where(build):
    from zklock.errors import InvalidArguments

    locking, _, _ = build(manager=FAST)
    for fixed in ({"root": "/elsewhere"}, {"hosts": "127.0.0.1:1"}, {"session_timeout": 1}):
        with pytest.raises(InvalidArguments, match="cannot change"):
            locking.set(**fixed)
    for bad in ("-1", "1.5", "many"):
        with pytest.raises(InvalidArguments, match="zklock.lock.retries"):
            locking.sql(f"SET zklock.lock.retries={bad}")
    assert locking.sql("SET zklock.lock.retries=2").collect()[0].value == "2"


def test_hive_names_are_read_where_spark_users_keep_them(spark):
    """Hive's names reach zklock from Spark's Hadoop conf (hive-site.xml, which Spark loads
    into it) and as ``spark.hadoop.hive.*`` (what spark-submit passes on; it drops a bare
    ``--conf hive.*``); a session's own ``SET hive.*`` comes first."""
    from zklock.spark.lock_client import settings_of

    hadoop = spark._jsc.hadoopConfiguration()
    hadoop.set("hive.zookeeper.namespace", "from_hive_site")
    spark.conf.set("spark.hadoop.hive.lock.numretries", "4")
    try:
        settings = settings_of(spark, {})
        assert (settings.root, settings.retries) == ("/from_hive_site", 4)
        spark.conf.set("hive.lock.numretries", "5")
        assert settings_of(spark, {}).retries == 5
    finally:
        hadoop.unset("hive.zookeeper.namespace")
        spark.conf.unset("spark.hadoop.hive.lock.numretries")
        spark.conf.unset("hive.lock.numretries")
