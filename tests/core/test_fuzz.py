"""Fuzzed inputs: no unhandled exception, no lock left on an error path, a clear message.

Property-based (hypothesis) over lock-object names and partition specs, zklock's SQL
extensions, the scheduled-query DDL, cron expressions and CLI arguments. Every bad input
must raise zklock's own error type (a one-line message), never anything else.
"""

from __future__ import annotations

from click.testing import CliRunner
from conftest import lock_nodes
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from zklock.cli.main import cli
from zklock.scheduler.ddl import parse_scheduled_ddl
from zklock.scheduler.schedule import cron, every

from zklock.errors import InvalidArguments, LockNotAcquired, ZkLockError
from zklock.locks.objects import LockObject
from zklock.sql.parser import parse_extension

NASTY = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
SQLISH = st.lists(st.sampled_from([
    "CREATE", "ALTER", "DROP", "SCHEDULED", "QUERY", "q1", "CRON", "EVERY", "AS", "SELECT",
    "1", "'0 * * * *'", "'x'", "MINUTES", "DAY", "AT", "OFFSET", "BY", "'00:05'", "(", ")",
    ",", ";", "=", "EXECUTED", "ENABLE", "DISABLE", "DEFINED", "EXECUTE", "TIMEZONE",
    "'Europe/Paris'", "LOCK", "UNLOCK", "TABLE", "DATABASE", "PARTITION", "SHARED",
    "EXCLUSIVE", "FOR", "SHOW", "LOCKS", "LEASE", "FORCE", "EXPLAIN", "SET", "zklock.x",
    "`t`", "db.t", "'", "\"", "--", "/*", "ds", "'2024'", "-1", "9999999999999"]),
    max_size=14).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(NASTY)
def test_lock_object_names(text):
    try:
        obj = LockObject.parse(text)
    except ZkLockError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert LockObject.parse(obj.name) == obj
    assert "//" not in obj.znode("/w") and "/../" not in obj.znode("/w")


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(NASTY, NASTY, max_size=3), st.sampled_from(["db.t", "sales.orders"]))
def test_partition_specs(spec, table):
    text = table + "".join(f"/{k}={v}" for k, v in spec.items())
    try:
        obj = LockObject.parse(text)
    except ZkLockError:
        return
    assert obj.table_name in ("db.t", "sales.orders")


@settings(max_examples=500, deadline=None)
@given(st.one_of(SQLISH, NASTY))
def test_sql_extensions_and_scheduled_ddl(text):
    for parse in (parse_extension, parse_scheduled_ddl):
        try:
            parse(text)
        except InvalidArguments as exc:
            assert str(exc)


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.lists(st.sampled_from(["*", "0", "59", "60", "*/5", "1-5", "MON", "?", "L", "W",
                              "5#2", "JAN", "0-7", "7", "24", "31", "1,2", "@daily", "x", ""]),
             min_size=1, max_size=8).map(" ".join), NASTY),
    st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Mars/Base"]))
def test_cron_expressions(expr, zone):
    try:
        s = cron(expr, zone)
    except InvalidArguments as exc:
        assert str(exc)
        return
    t = s.next_after(1_700_000_000_000)
    assert t > 1_700_000_000_000 and s.next_after(t) > t


@settings(max_examples=300, deadline=None)
@given(st.integers(-5, 100), st.sampled_from(["SECOND", "MINUTES", "hour", "DAY", "WEEK", ""]),
       st.one_of(st.none(), NASTY, st.sampled_from(["00:05", "1h", "30s", "25:00", "500ms"])))
@example(1, "SECOND", "\u00b2")  # a digit to str.isdigit() that int() refuses
@example(1, "SECOND", "\u0663")  # an Arabic-Indic three
def test_every_forms(n, unit, offset):
    try:
        s = every(n, unit, offset=offset)
    except InvalidArguments as exc:
        assert str(exc)
        return
    assert s.next_after(0) > 0


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(NASTY, st.sampled_from(
    ["show", "lease", "grab", "list", "drop", "--duration", "--wait", "1m", "x", "db.t:X",
     "--json", "waits", "schedule", "run-now", "--namespace", "../x", "timeline",
     "--since", "-o", "force-drop", "--yes", "extend", "-1", "reap", "--hard-limit"])),
    max_size=6))
def test_cli_arguments(zk_hosts, root, make_manager, tmp_path, monkeypatch, args):
    if "server" in args or "completion" in args:
        return
    # in a directory of its own (`timeline` writes timeline.png where it runs), without the
    # suite's event log (tests/diagnostics.py): a drawing of it would be slow and large
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["--zk", zk_hosts, "--root", root, *args],
                             env={"ZKLOCK_CONNECT_TIMEOUT": "2s", "ZKLOCK_EVENT_LOG": ""})
    assert out.exit_code in (0, 1, 2, 3), (args, out.output)
    assert "Traceback" not in out.output, (args, out.output)
    if out.exception is not None:
        assert isinstance(out.exception, SystemExit), (args, repr(out.exception))


def test_no_lock_left_on_error_paths(make_manager, zk, root):
    a = make_manager()
    for bad in ([("db/../x", "X")], [("db.t", "Q")], [("", "S")], [("db.t/=1", "X")],
                [("db.t", "X"), ("db\x00.u", "S")]):
        try:
            a.acquire(bad)
        except (ZkLockError, ValueError):
            pass
    holder = make_manager()
    with holder.acquire([("db.t", "X")]):
        try:
            a.acquire([("db.u", "X"), ("db.t", "S")])  # all or none: db.u is not kept
        except LockNotAcquired:
            pass
        assert {n.split("/")[-2] for n in lock_nodes(zk, root)} == {"db", "t"}
    assert lock_nodes(zk, root) == []
