"""For users coming from Hive: its setting names, its SHOW LOCKS output, and scheduled
executions that join the locks they hold."""

from __future__ import annotations

import pytest
from conftest import Latch, lock_nodes, raises_lock_error, wait_for

from zklock import LockNotAcquired
from zklock.errors import InvalidArguments


def count(spark, table: str) -> int:
    spark.catalog.refreshTable(table)
    return spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0].n


def test_set_hive_support_concurrency_false_turns_locking_off(locking, make_manager, db,
                                                              spark, zk, root):
    other = make_manager()
    with other.acquire([(f"{db}.dim", "X")], query_id="holder-h"):
        with raises_lock_error(LockNotAcquired):
            locking.sql(f"INSERT INTO {db}.dim VALUES (11, 'h')")
        assert locking.sql("SET hive.support.concurrency=false").collect()[0].value == "false"
        locking.sql(f"INSERT INTO {db}.dim VALUES (11, 'h')")  # as in Hive: no locks at all
        assert locking.sql("SET hive.support.concurrency").collect()[0].value == "false"
        assert locking.sql("SET zklock.support.concurrency").collect()[0].value == "false"
        locking.sql("SET hive.support.concurrency=true")
        with raises_lock_error(LockNotAcquired):
            locking.sql(f"INSERT INTO {db}.dim VALUES (12, 'h')")
    assert count(spark, f"{db}.dim") == 3


def test_hive_retry_settings_through_set(locking):
    assert locking.sql("SET hive.lock.numretries=7").collect()[0].value == "7"
    assert locking.sql("SET zklock.lock.retries").collect()[0].value == "7"
    assert locking.sql("SET hive.lock.sleep.between.retries=2s").collect()[0].value == "2.0"
    with pytest.raises(InvalidArguments, match="cannot change in a running session"):
        locking.sql("SET hive.zookeeper.quorum=elsewhere:2181")
    assert locking.sql("SET hive.zookeeper.namespace").collect()[0].value.startswith("/test-")


def test_hive_names_in_spark_conf(spark, zk_hosts, root):
    from zklock.spark import LockingSession

    keys = {"hive.lock.numretries": "4", "hive.lock.sleep.between.retries": "250ms",
            "hive.zookeeper.quorum": zk_hosts, "hive.zookeeper.namespace": root[1:],
            "hive.support.concurrency": "false"}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        session = LockingSession(spark)
        s = session.settings
        assert (s.retries, s.retry_interval, s.hosts, s.root, s.support_concurrency) == (
            4, 0.25, zk_hosts, root, False)
        session.close()
        spark.conf.set("spark.zklock.lock.retries", "9")  # zklock's own key wins
        again = LockingSession(spark)
        assert again.settings.retries == 9
        again.close()
    finally:
        for key in [*keys, "spark.zklock.lock.retries"]:
            spark.conf.unset(key)


def test_show_locks_as_hive_prints_them(locking, make_manager, db):
    other = make_manager()
    with other.acquire([(f"{db}.orders/ds=2024-01-01/hr=1", "X"), (f"{db}.dim", "S")],
                       query_id="q-hive", query="INSERT INTO orders ..."):
        locking.sql("SET zklock.showLocks.format=hive")
        rows = [tuple(r) for r in locking.sql("SHOW LOCKS").collect()]
        assert (f"{db}@orders@ds=2024-01-01/hr=1", "EXCLUSIVE") in rows
        assert (f"{db}@orders", "SHARED") in rows
        assert (db, "SHARED") in rows
        assert (f"{db}@dim", "SHARED") in rows
        extended = [tuple(r) for r in locking.sql(f"SHOW LOCKS {db}.dim EXTENDED").collect()]
        assert extended[0] == (f"{db}@dim", "SHARED")
        assert [k for k, _ in extended[1:]][0] == "LOCK_QUERYID:q-hive"
        assert extended[2][0].startswith("LOCK_TIME:") and extended[2][0][10:].isdigit()
        assert extended[3][0] == "LOCK_MODE:IMPLICIT"
        assert extended[4][0] == "LOCK_QUERYSTRING:INSERT INTO orders ..."
        locking.sql("SET zklock.showLocks.format=zklock")
        assert locking.sql("SHOW LOCKS").columns[:2] == ["object", "mode"]


def test_scheduled_execution_joins_show_locks(admin_session, make_scheduler, db, zk, root,
                                              spark, tmp_path):
    s = admin_session
    # the scheduled run (in this Spark) holds its locks until the test has seen the join
    latch = Latch(spark, tmp_path / "latch")
    s.sql(f"CREATE SCHEDULED QUERY slowins CRON '0 3 * * *' DISABLED AS INSERT INTO {db}.dim"
          f" SELECT 13, CAST({latch.name}(1) AS STRING)")
    make_scheduler()
    s.sql("ALTER SCHEDULED QUERY slowins EXECUTE")
    try:
        assert wait_for(lambda: lock_nodes(zk, root) != [], timeout=60), \
            "the scheduled run's locks did not show within 60 s"

        def joined():
            return [tuple(r) for r in s.sql(
                "SELECT l.object, e.schedule_name FROM sysdb.locks l JOIN"
                " sysdb.scheduled_executions e ON l.query_id = e.executor_query_id"
                " WHERE e.state = 'EXECUTING'").collect()]
        # the execution's state reaches EXECUTING through the store, maybe after its locks
        assert wait_for(lambda: (f"{db}.dim", "slowins") in joined(), timeout=60), joined()
    finally:
        latch.open()


def test_an_insert_into_a_partition_hive_holds_is_denied(locking, spark, db, zk_hosts, root):
    """Hive's own lock manager (tests/hivelocks.py) holds X on a partition, as HiveServer2
    writing it would: a LockingSession INSERT there is denied and the table is unchanged."""
    from hivelocks import HiveLocks

    hive = HiveLocks(spark, zk_hosts, root)
    before = count(spark, f"{db}.orders")
    held = hive.lock_all([(db, "S"), (f"{db}/orders", "S"), (f"{db}/orders/ds=2024-01-01", "S"),
                          (f"{db}/orders/ds=2024-01-01/hr=1", "X")])
    assert held is not None
    try:
        with raises_lock_error(LockNotAcquired, match="Hive's lock manager"):
            locking.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=1)"
                        " VALUES (5, 5.0)")
        assert count(spark, f"{db}.orders") == before
    finally:
        hive.release(held)
    locking.sql(f"INSERT INTO {db}.orders PARTITION (ds='2024-01-01', hr=1) VALUES (5, 5.0)")
    assert count(spark, f"{db}.orders") == before + 1


#: A value each setting a running session may change accepts, unlike its default.
SET_VALUES = {"timeout": ("5m", 300.0), "retries": ("3", 3), "retry_interval": ("2s", 2.0),
              "support_concurrency": ("false", False), "isolate_commits": ("false", False),
              "unknown_statements": ("lock", "lock"), "node_naming": ("hive", "hive"),
              "show_locks_format": ("hive", "hive"), "engine_reads": ("warn", "warn"),
              "wait_notice": ("false", False), "stream_lock_lost": ("retry", "retry")}


def test_set_knows_every_setting_from_the_one_table(locking, spark):
    """Every zklock key of the settings table, by each of its names (with and without
    ``spark.``), and Hive's: a key a running session may change is applied; any other, and
    a zklock key no setting has, is refused in one line; none reaches Spark's conf but what
    the session itself publishes for the engine, put back when it closes."""
    from zklock.config import HIVE_ALIASES, SETTABLE, SETTINGS

    assert set(SET_VALUES) == SETTABLE
    keys = [k for s in SETTINGS for k in s.set_keys] + list(HIVE_ALIASES)
    before = {k: spark.conf.get("spark." + k, None) for k in keys}
    for setting in SETTINGS:
        for key in setting.set_keys:
            for written in (key, "spark." + key):
                if setting.name in SETTABLE:
                    text, value = SET_VALUES[setting.name]
                    locking.sql(f"SET {written}={text}")
                    assert getattr(locking.settings, setting.name) == value, written
                else:
                    with pytest.raises(InvalidArguments, match="cannot change in a running"):
                        locking.sql(f"SET {written}=x")
                    (row,) = locking.sql(f"SET {written}").collect()  # shown, not changed
                    assert row.key == key, row
    with pytest.raises(InvalidArguments, match="unknown zklock setting"):
        locking.sql("SET spark.zklock.lock.retrys=3")
    locking.close()
    assert {k: spark.conf.get("spark." + k, None) for k in keys} == before
    assert spark.conf.get("spark.zklock.lock.retrys", None) is None
