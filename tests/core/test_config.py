"""Settings precedence and the reference page staying in step with the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from zklock.config import SETTINGS, Level, Settings, parse_duration
from zklock.errors import InvalidArguments


def test_precedence():
    conf = {"spark.zklock.lock.retries": "7", "spark.zklock.root": "/from-spark"}
    env = {"ZKLOCK_RETRIES": "3", "ZKLOCK_ROOT": "/from-env", "ZKLOCK_RETRY_INTERVAL": "250ms"}
    s = Settings.resolve({"root": "/explicit"}, spark_conf=conf, environ=env)
    assert (s.root, s.retries, s.retry_interval) == ("/explicit", 7, 0.25)
    s = Settings.resolve(environ=env)
    assert (s.root, s.retries) == ("/from-env", 3)
    s = Settings.resolve(environ={})
    assert (s.root, s.retries, s.timeout, s.support_concurrency) == ("/warehouse", None, 1800,
                                                                     True)
    assert Settings.resolve(spark_conf={"spark.zklock.lock.timeout": "10m"}).timeout == 600
    with pytest.raises(InvalidArguments, match="ZKLOCK_LOCK_TIMEOUT"):
        Settings.resolve(environ={"ZKLOCK_LOCK_TIMEOUT": "0s"})


def test_bad_values_name_their_source():
    with pytest.raises(InvalidArguments, match="ZKLOCK_RETRIES"):
        Settings.resolve(environ={"ZKLOCK_RETRIES": "many"})
    with pytest.raises(InvalidArguments, match="unknown setting"):
        Settings.resolve({"retires": 3})
    assert parse_duration("1h") == 3600 and parse_duration("500ms") == 0.5
    with pytest.raises(InvalidArguments):
        parse_duration("soon")


def test_reference_page_lists_every_setting():
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for s in SETTINGS:
        assert f"`{s.name}`" in page and s.env in page
        if s.spark:
            assert s.spark in page


def test_settings_defaults_match_the_table():
    plain = Settings()
    for s in SETTINGS:
        assert getattr(plain, s.name) == s.default, s.name


def test_a_client_anywhere_finds_the_last_server_started(tmp_path):
    """The state directory is relative: a client started elsewhere follows the pointer the
    last `zklock server start` left."""
    from zklock.servers import serverinfo

    started = tmp_path / "project" / ".zklock"
    started.mkdir(parents=True)
    serverinfo.write(started, serverinfo.ServerInfo("127.0.0.1:31999", pid=1))
    elsewhere = tmp_path / "elsewhere" / ".zklock"
    assert Settings.resolve({"state_dir": str(elsewhere)}).connect_string() == \
        "127.0.0.1:31999"
    elsewhere.parent.mkdir()
    serverinfo.write(elsewhere.parent, serverinfo.ServerInfo("127.0.0.1:31998", pid=1))
    assert Settings.resolve({"state_dir": str(elsewhere.parent)}).connect_string() == \
        "127.0.0.1:31998"  # its own state directory first


def test_a_call_rides_out_an_outage_for_operation_timeout_or_three_sessions():
    assert Settings.resolve({"session_timeout": 10}, environ={}).outage_deadline == 30
    assert Settings.resolve({"session_timeout": 1}, environ={}).outage_deadline == 15
    assert Settings.resolve(environ={"ZKLOCK_OPERATION_TIMEOUT": "6s"}).outage_deadline == 6
    with pytest.raises(InvalidArguments, match="more than 0"):
        Settings.resolve({"operation_timeout": "0s"})
    with pytest.raises(InvalidArguments, match="at least 1s"):
        Settings.resolve({"operation_timeout": "500ms"})
    with pytest.raises(InvalidArguments, match="finite"):
        Settings.resolve({"operation_timeout": "1e400"})


def test_changed_settings_are_parsed_and_checked_as_resolved_ones_are():
    base = Settings.resolve(environ={})
    assert base.with_(operation_timeout="6s", retries="3").outage_deadline == 6
    assert base.with_(retries="3").retries == 3
    with pytest.raises(InvalidArguments, match="operation_timeout"):
        base.with_(operation_timeout="0s")
    with pytest.raises(InvalidArguments, match="unknown setting"):
        base.with_(retires=3)


# ---- one precedence for every setting (docs/configuration.md, "Precedence") ------------
#: A value for each setting a LockingSession uses, one per level, so that the value found
#: names the level it came from.
VALUES = {
    "retries": {Level.ENVIRONMENT: 1, Level.SPARK_CONF: 2, Level.MANAGER: 3, Level.SESSION: 4,
                Level.SESSION_SET: 5, Level.CALL: 6},
    "retry_interval": {Level.ENVIRONMENT: 0.1, Level.SPARK_CONF: 0.2, Level.MANAGER: 0.3,
                       Level.SESSION: 0.4, Level.SESSION_SET: 0.5, Level.CALL: 0.6},
    "timeout": {Level.ENVIRONMENT: 11.0, Level.SPARK_CONF: 12.0, Level.MANAGER: 13.0,
                Level.SESSION: 14.0, Level.SESSION_SET: 15.0, Level.CALL: 16.0},
    "support_concurrency": {Level.ENVIRONMENT: False, Level.SPARK_CONF: True,
                            Level.MANAGER: False, Level.SESSION: True,
                            Level.SESSION_SET: False},
    "node_naming": {Level.ENVIRONMENT: "hive", Level.SPARK_CONF: "recipe",
                    Level.MANAGER: "hive", Level.SESSION: "recipe", Level.SESSION_SET: "hive"},
}
BY_NAME = {s.name: s for s in SETTINGS}


def layered(name: str, levels: list[Level]) -> Settings:
    """Settings built the way zklock builds a LockingSession's, with ``name`` set at each of
    ``levels``: the manager from its arguments and the environment; the session from its
    keyword arguments, the Spark conf and the environment, over the manager's; SET over
    that."""
    setting, values = BY_NAME[name], VALUES[name]
    env = {setting.env: str(values[Level.ENVIRONMENT])} if Level.ENVIRONMENT in levels else {}
    conf = ({setting.spark: str(values[Level.SPARK_CONF])}
            if Level.SPARK_CONF in levels else {})
    mine = {name: values[Level.MANAGER]} if Level.MANAGER in levels else {}
    ours = {name: values[Level.SESSION]} if Level.SESSION in levels else {}
    manager = Settings.resolve(mine, environ=env)
    session = Settings.resolve(ours, spark_conf=conf, environ=env, level=Level.SESSION)
    settings = session.over(manager)
    if Level.SESSION_SET in levels:
        settings = settings.with_(Level.SESSION_SET, **{name: values[Level.SESSION_SET]})
    return settings


LEVELS = [Level.ENVIRONMENT, Level.SPARK_CONF, Level.MANAGER, Level.SESSION, Level.SESSION_SET]
CASES = [(name, levels) for name in VALUES
         for levels in ([[lv] for lv in LEVELS]                      # each level alone
                        + [[a, b] for a in LEVELS for b in LEVELS if a < b]  # each pair
                        + [LEVELS])]                                   # all at once


@pytest.mark.parametrize("name,levels", CASES,
                         ids=[f"{n}-{'+'.join(lv.name for lv in ls)}" for n, ls in CASES])
def test_the_strongest_level_that_set_a_value_wins(name, levels):
    settings = layered(name, levels)
    strongest = max(levels)
    assert getattr(settings, name) == VALUES[name][strongest]
    assert settings.level(name) is strongest


@pytest.mark.parametrize("name", list(VALUES))
def test_a_default_never_overrides_a_value_set_anywhere(name):
    for level in LEVELS:
        settings = layered(name, [level])
        assert getattr(settings, name) == VALUES[name][level], level
    assert layered(name, []).level(name) is Level.DEFAULT
    assert getattr(layered(name, []), name) == BY_NAME[name].default


def test_a_managers_retries_outlive_a_sessions_default_timeout():
    """The README's pattern: LockingSession(spark, manager=LockManager(retries=1, ...)).
    The session's timeout is its default: the manager's count decides."""
    wait = layered("retries", [Level.MANAGER]).wait()
    assert (wait.retries, wait.timeout) == (3, None)


@pytest.mark.parametrize("count,time", [(a, b) for a in LEVELS for b in LEVELS])
def test_retries_and_timeout_the_stronger_level_decides_a_tie_goes_to_the_count(count, time):
    settings = layered("retries", [count])
    time_value = VALUES["timeout"][time]
    if time is Level.SESSION_SET:
        settings = settings.with_(Level.SESSION_SET, timeout=time_value)
    else:
        settings = layered("timeout", [time]).with_(count, retries=VALUES["retries"][count])
    wait = settings.wait()
    if count >= time:
        assert (wait.retries, wait.timeout) == (VALUES["retries"][count], None)
    else:
        assert (wait.retries, wait.timeout) == (None, time_value)


def test_a_calls_arguments_are_strongest_and_its_timeout_beats_any_count():
    settings = layered("retries", LEVELS)
    assert settings.wait(retries=6).retries == 6
    assert settings.wait(timeout=16).timeout == 16 and settings.wait(timeout=16).retries is None
    assert settings.wait(retry_interval=0.6).interval == 0.6
    assert settings.wait(retries=6, timeout=16).retries == 6  # a tie: the count


def test_a_timeout_set_after_a_count_waits_by_time_and_the_reverse_counts():
    """SET is sequential: the later SET decides, whichever it is (sql.py unsets retries when
    a timeout is SET)."""
    base = layered("retries", [Level.MANAGER])
    by_time = base.with_(Level.SESSION_SET, retries=2).with_(Level.SESSION_SET, timeout=9,
                                                             retries=None)
    assert (by_time.wait().retries, by_time.wait().timeout) == (None, 9)
    counted = by_time.with_(Level.SESSION_SET, retries=2)
    assert (counted.wait().retries, counted.wait().timeout) == (2, None)


def test_hive_names_are_the_spark_conf_level_and_zklock_keys_win_there():
    conf = {"hive.lock.numretries": "8", "hive.support.concurrency": "false"}
    s = Settings.resolve(spark_conf=conf, environ={"ZKLOCK_RETRIES": "1"})
    assert (s.retries, s.level("retries"), s.support_concurrency) == (8, Level.SPARK_CONF,
                                                                       False)
    s = Settings.resolve(spark_conf={**conf, "spark.zklock.lock.retries": "4"}, environ={})
    assert s.retries == 4


# ---- a statement's session conf, carried to its lock client --------------------------
def client(**levels: tuple[Level, object]) -> Settings:
    """A lock client's settings with each name set at its level (name=(level, value))."""
    settings = Settings.resolve(environ={})
    for name, (level, value) in levels.items():
        settings = settings.with_(level, **{name: value})
    return settings


def test_a_statements_session_conf_counts_at_the_spark_conf_level():
    """Over the client's Spark conf, environment and defaults; under what was set above
    (an enforce() argument, a LockManager's)."""
    server = client(retries=(Level.SPARK_CONF, 1), retry_interval=(Level.ENVIRONMENT, 2))
    mine = server.for_statement({"spark.zklock.lock.retries": "4",
                                 "hive.lock.sleep.between.retries": "0.1"})
    assert (mine.wait().retries, mine.wait().interval) == (4, 0.1)
    assert server.for_statement({}).wait().retries == 1
    above = client(retries=(Level.SESSION, 1), retry_interval=(Level.MANAGER, 2))
    mine = above.for_statement({"spark.zklock.lock.retries": "4",
                                "spark.zklock.lock.retryInterval": "0.1"})
    assert (mine.wait().retries, mine.wait().interval) == (1, 2)


def test_a_session_that_names_a_timeout_or_a_count_names_its_whole_wait():
    """The lock client's count from its Spark conf does not outweigh a session's timeout."""
    server = client(retries=(Level.SPARK_CONF, 1))
    by_time = server.for_statement({"spark.zklock.lock.timeout": "5s"}).wait()
    assert (by_time.retries, by_time.timeout) == (None, 5)
    counted = client(timeout=(Level.SPARK_CONF, 60)).for_statement(
        {"hive.lock.numretries": "3"}).wait()
    assert (counted.retries, counted.timeout) == (3, None)
    # a count set above the Spark conf stays: the session's timeout cannot outweigh it
    kept = client(retries=(Level.SESSION, 1)).for_statement({"spark.zklock.lock.timeout": "5"})
    assert (kept.wait().retries, kept.wait().timeout) == (1, None)


def test_a_statement_carries_only_how_it_waits():
    """A session's conf never turns a shared server's locking off, nor moves its root."""
    server = client()
    mine = server.for_statement({"spark.zklock.support.concurrency": "false",
                                 "spark.zklock.root": "/elsewhere",
                                 "hive.support.concurrency": "false"})
    assert mine == server and mine.support_concurrency


def test_a_carried_value_that_does_not_parse_names_its_key():
    with pytest.raises(InvalidArguments, match="spark.zklock.lock.retries: .*'many'"):
        client().for_statement({"spark.zklock.lock.retries": "many"})


def test_sets_short_form_is_carried_and_a_carried_interval_has_a_floor():
    """A plain session's ``SET zklock.lock.retries=2`` lands in its conf as written; a
    client's conf cannot make a shared lock client retry in a tight loop."""
    mine = client().for_statement({"zklock.lock.retries": "2",
                                   "spark.zklock.lock.retryInterval": "0"})
    assert (mine.wait().retries, mine.wait().interval) == (2, 0.01)
    both = client().for_statement({"zklock.lock.retries": "2", "spark.zklock.lock.retries": "5"})
    assert both.wait().retries == 5
