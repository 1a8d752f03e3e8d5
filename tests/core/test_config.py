"""Settings precedence and the reference page staying in step with the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from zklock.config import SETTINGS, Settings, parse_duration
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


@pytest.mark.parametrize("hosts", ["127.0.0.1:abc", "", "h:0", "h:70000", ":2181", "a:1,,b"])
def test_a_bad_connect_string_is_one_clear_error(hosts):
    with pytest.raises(InvalidArguments, match="ZooKeeper connect string"):
        Settings.resolve({"hosts": hosts})


def test_connect_strings_zookeeper_accepts_are_kept():
    for hosts in ["127.0.0.1:2181", "zk1,zk2:2182/chroot", "[::1]:2181", "h"]:
        assert Settings.resolve({"hosts": hosts}).hosts == hosts


def test_a_client_anywhere_finds_the_last_server_started(tmp_path):
    """The state directory is relative: a client started elsewhere follows the pointer the
    last `zklock server start` left."""
    from zklock import serverinfo

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
