"""Scheduled-query DDL: the grammar, its errors, and what each form means (no ZooKeeper)."""

from __future__ import annotations

import pytest
from zklock.scheduler.ddl import (
    AlterScheduledQuery,
    CreateScheduledQuery,
    DropScheduledQuery,
    parse_scheduled_ddl,
)

from zklock.errors import InvalidArguments
from zklock.sql.parser import parse_extension


def test_create_forms():
    d = parse_scheduled_ddl("create scheduled query Compact cron '0 */10 * * * *'"
                            " executed as 'etl' disabled defined as"
                            " INSERT OVERWRITE TABLE t SELECT * FROM s;")
    assert isinstance(d, CreateScheduledQuery)
    assert (d.name, d.executed_as, d.enabled) == ("compact", "etl", False)
    assert d.statement == "INSERT OVERWRITE TABLE t SELECT * FROM s"
    assert d.schedule.kind == "cron" and d.schedule.timezone == "UTC"
    d = parse_scheduled_ddl("CREATE SCHEDULED QUERY s EVERY 2 HOURS OFFSET BY '00:30'"
                            " TIMEZONE 'Asia/Tokyo' AS SELECT 1")
    assert d.schedule.kind == "every" and d.schedule.timezone == "Asia/Tokyo"
    assert d.schedule.next_after(0) == 30 * 60 * 1000
    d = parse_scheduled_ddl("CREATE SCHEDULED QUERY s EVERY DAY AT '02:30' AS SELECT 1")
    assert d.schedule.next_after(0) == (2 * 3600 + 30 * 60) * 1000
    d = parse_scheduled_ddl("CREATE SCHEDULED QUERY s EVERY MINUTE ENABLED AS SELECT 1")
    assert d.schedule.next_after(1) == 60_000 and d.enabled


def test_alter_and_drop_forms():
    assert parse_scheduled_ddl("ALTER SCHEDULED QUERY q EXECUTE") == \
        AlterScheduledQuery("q", "execute")
    assert parse_scheduled_ddl("ALTER SCHEDULED QUERY q DISABLE").action == "disable"
    assert parse_scheduled_ddl("ALTER SCHEDULED QUERY q SET ENABLED").action == "enable"
    a = parse_scheduled_ddl("ALTER SCHEDULED QUERY q EXECUTED AS 'bob'")
    assert (a.action, a.executed_as) == ("executed_as", "bob")
    a = parse_scheduled_ddl("ALTER SCHEDULED QUERY q DEFINED AS SELECT 2")
    assert (a.action, a.statement) == ("defined_as", "SELECT 2")
    a = parse_scheduled_ddl("ALTER SCHEDULED QUERY q CRON '0 0 * * *' TIMEZONE 'Europe/Oslo'")
    assert a.action == "schedule" and a.schedule.timezone == "Europe/Oslo"
    assert parse_scheduled_ddl("DROP SCHEDULED QUERY q;") == DropScheduledQuery("q")


@pytest.mark.parametrize("sql, where", [
    ("CREATE SCHEDULED QUERY q CRON '0 61 * * *' AS SELECT 1", "'61' is out of range.*position 30"),
    ("CREATE SCHEDULED QUERY q CRON 0 * * * * AS SELECT 1", "quoted string"),
    ("CREATE SCHEDULED QUERY q EVERY 0 MINUTES AS SELECT 1", "positive"),
    ("CREATE SCHEDULED QUERY q EVERY 5 WEEKS AS SELECT 1", "position 33"),
    ("CREATE SCHEDULED QUERY q EVERY 1 HOUR OFFSET BY '2:00' AS SELECT 1", "position"),
    ("CREATE SCHEDULED QUERY q EVERY 1 HOUR AS", "statement"),
    ("CREATE SCHEDULED QUERY q EVERY 1 HOUR SELECT 1", "position 38"),
    ("CREATE SCHEDULED QUERY 9lives EVERY 1 HOUR AS SELECT 1", "bad scheduled query name"),
    ("CREATE SCHEDULED QUERY `a/b` EVERY 1 HOUR AS SELECT 1", "bad scheduled query name"),
    ("CREATE SCHEDULED QUERY q CRON '* * * * *' TIMEZONE 'Nowhere/Land' AS SELECT 1",
     "Nowhere/Land"),
    ("ALTER SCHEDULED QUERY q DISABLE ENABLE", "one thing at a time"),
    ("ALTER SCHEDULED QUERY q RENAME TO r", "expected one of"),
    ("DROP SCHEDULED QUERY q r", "unexpected"),
    ("CREATE SCHEDULED QUERY q CRON '0 0 12 ? * 2 2030' AS SELECT 1", "year"),
])
def test_errors_point_at_the_bad_part(sql, where):
    with pytest.raises(InvalidArguments, match=where.replace("?", r"\?")):
        parse_scheduled_ddl(sql)


def test_quartz_sunday_is_one():
    d = parse_scheduled_ddl("CREATE SCHEDULED QUERY q CRON '0 0 12 ? * 1' AS SELECT 1")
    import datetime as dt

    t = d.schedule.next_after(0)
    assert dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).weekday() == 6  # Sunday


def test_other_statements_are_not_ddl():
    for sql in ("SELECT 1", "CREATE TABLE scheduled (a INT)", "DROP TABLE q",
                "ALTER TABLE scheduled ADD COLUMNS (b INT)", "SHOW LOCKS"):
        assert parse_scheduled_ddl(sql) is None
    assert parse_extension("CREATE SCHEDULED QUERY q EVERY 1 HOUR AS SELECT 1") is None
