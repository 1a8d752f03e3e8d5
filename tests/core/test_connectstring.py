"""The connect string is read once, by kazoo's rules: every malformed one is one clear
InvalidArguments (a one-line ``zklock:`` error in the CLI) before any connection is tried,
and every well-formed one means what kazoo will connect to. Property-based, over strings
built from the parts people get wrong, and over arbitrary text."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from zklock.cli.main import cli

from zklock import LockManager
from zklock.config import Settings
from zklock.connectstring import ConnectString
from zklock.errors import InvalidArguments

hosts = st.sampled_from(["127.0.0.1", "localhost", "zk-1.example.com", "", "::1", "[::1]",
                         "[::1", "[fe80::1]", "é.example", " h ", "h h", "-h", "h_1",
                         "1.2.3.4.5", "x" * 70, "ＺＫ", "\t"])
ports = st.sampled_from(["", ":", ":2181", ":1", ":65535", ":0", ":00", ":65536", ":-1",
                         ":99999", ":abc", ":2181:9", ": 1", ":1 ", ":٣", ":+5", ":1e3"])
chroots = st.sampled_from(["", "/", "/a", "/a/b", "/a/", "/a//b", "/a/../b", "/./x", "/..",
                           "/a b", "/é", "/a/b/."])
servers = st.builds(lambda h, p: h + p, hosts, ports)
built = st.builds(lambda ss, c, pad: pad + ",".join(ss) + c + pad,
                  st.lists(servers, min_size=0, max_size=3), chroots,
                  st.sampled_from(["", " ", "\n"]))
strings = st.one_of(built, st.text(max_size=30))


@settings(max_examples=400, deadline=None)
@given(text=strings)
def test_a_string_is_refused_in_one_line_or_means_what_kazoo_reads(text):
    try:
        parsed = ConnectString.parse(text)
    except InvalidArguments as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("ZooKeeper connect string")
        return
    client = KazooClient(hosts=parsed.text)  # kazoo reads it as parsed (nothing connects)
    try:
        assert [(h, p) for h, p in client.hosts] == list(parsed.servers)
        assert (client.chroot or "") == parsed.chroot
        assert all(0 < p < 65536 for _, p in parsed.servers)
    finally:
        client.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=built, command=st.sampled_from([["show"], ["waits"], ["lease", "list"],
                                            ["lease", "grab", "db.t:X", "--duration", "1m"],
                                            ["lease", "force-drop", "--all", "--yes"],
                                            ["lease", "reap"], ["scheduler", "status"],
                                            ["schedule", "list"]]))
def test_every_command_answers_a_malformed_string_in_one_line(text, command):
    state = random.getstate()  # the commands' own jitter must not look like the strategy's
    try:
        answers_in_one_line(text, command)
    finally:
        random.setstate(state)


def answers_in_one_line(text: str, command: list[str]) -> None:
    try:
        ConnectString.parse(text)
    except InvalidArguments:
        pass
    else:
        return  # well-formed: tested against the real server below
    results = [CliRunner().invoke(cli, ["--zk", text, *command])]
    if text:  # an empty variable is an unset one
        results.append(CliRunner().invoke(cli, command, env={"ZKLOCK_ZK": text}))
    for result in results:
        assert result.exit_code == 1, (result.exit_code, result.output)
        assert "Traceback" not in result.output
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("zklock: "), result.stderr
        assert "connect string" in lines[0]


@pytest.mark.parametrize("text", ["127.0.0.1:2181:9", "127.0.0.1:2181/chroot/../x", "::1",
                                  "h:0", "a,,b", "",
                                  # what kazoo's URL parsing would read as something else
                                  "zk1:2181?x=1", "zk1#:2182", "ops@zk1:2182", "loc\nalhost",
                                  "zk1:", "127.1", "2130706433", "010.0.0.1", "0x7f.1",
                                  "999.1.1.1", "a:1, b:2", "[1.2.3.4]"])
def test_the_manager_and_every_source_refuse_a_malformed_string_before_connecting(text):
    with pytest.raises(InvalidArguments, match="ZooKeeper connect string"):
        LockManager(hosts=text)
    if text:  # an empty value is no value in the environment and the Spark conf
        with pytest.raises(InvalidArguments, match="ZKLOCK_ZK: ZooKeeper connect string"):
            Settings.resolve(environ={"ZKLOCK_ZK": text})
        for key in ("spark.zklock.zookeeper.quorum", "spark.zklock.zookeeper.hosts",
                    "hive.zookeeper.quorum"):
            with pytest.raises(InvalidArguments, match=f"{key}: ZooKeeper connect string"):
                Settings.resolve(spark_conf={key: text}, environ={})


def test_the_two_strings_that_reached_a_traceback_are_one_line():
    for text, fault in [("127.0.0.1:2181:9", "more than one ':'"),
                        ("127.0.0.1:2181/chroot/../x", "relative paths")]:
        result = CliRunner().invoke(cli, ["--zk", text, "show"])
        assert result.exit_code == 1
        assert result.stderr.strip().count("\n") == 0 and fault in result.stderr, result.stderr
        assert repr(text) in result.stderr


def test_well_formed_variants_of_the_real_server_connect(zk_hosts, zk, root):
    """Whitespace, a second server, an empty port, a chroot (kazoo's rules) all connect."""
    port = zk_hosts.rsplit(":", 1)[1]
    zk.ensure_path(f"{root}/chroot")
    for text in [f" 127.0.0.1:{port} ", f"localhost:{port}", f"127.0.0.1:{port},localhost:{port}",
                 f"127.0.0.1:{port}{root}/chroot", f"127.0.0.1:{port}{root}//chroot/"]:
        mgr = LockManager(hosts=text, root="/warehouse", retries=0)
        try:
            with mgr.acquire([("db.t", "X")]) as locks:
                assert locks.is_valid
        finally:
            mgr.close()
    assert zk.exists(f"{root}/chroot/warehouse/db/t")  # the chroot was honoured
