"""Every CLI error is one line on stderr starting ``zklock:``, with no traceback, and the exit
codes the help lists: 1 error, 2 usage, 3 lock not acquired. Property-based: malformed hosts,
roots, objects, durations and files, for every command that takes them (against a real
ZooKeeper, so that well-formed parts get as far as they can)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zklock.cli.main import cli

from zklock.locks.mode import Mode

junk = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               min_size=1, max_size=20)


def _is_mode(text: str) -> bool:
    try:
        Mode.parse(text)
        return True
    except ValueError:
        return False


#: Junk where a lock mode goes: never one Mode.parse accepts ("S", " x", "shared"), which
#: would make a well-formed lease grab that succeeds.
bad_modes = junk.filter(lambda w: not _is_mode(w))
bad_hosts = st.sampled_from(["127.0.0.1:abc", "h:0", ":2181", "a:1,,b", "h:99999"])
bad_durations = st.sampled_from(["-5m", "0s", "soon", "5 parsecs", "1e400s", ""])
bad_objects = st.sampled_from(["a.b.c.d", "db.t/=1", "db.t/k=", "read-x", "x" * 300, "a..b",
                               "db.t/k=v/\x01", "db./k=v", ".t", "db.read-t"])


def one_error_line(result, codes=(1, 2)) -> None:
    assert result.exit_code in codes, (result.exit_code, result.output)
    err = result.stderr
    assert "Traceback" not in result.output and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("zklock: "), err


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hosts=bad_hosts, command=st.sampled_from([["show"], ["waits"], ["lease", "list"]]))
def test_malformed_hosts(hosts, command):
    one_error_line(CliRunner().invoke(cli, ["--zk", hosts, *command]))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=bad_objects, duration=bad_durations, word=junk, mode=bad_modes,
       which=st.integers(0, 6))
def test_malformed_arguments(zk_hosts, root, obj, duration, word, mode, which):
    base = ["--zk", zk_hosts, "--root", root]
    args = [
        ["show", obj],
        ["lease", "grab", f"{obj}:X", "--duration", "5m"],
        ["lease", "grab", "db.t:X", "--duration", duration],
        ["lease", "grab", f"db.t:{mode}", "--duration", "5m"],
        ["lease", "extend", word],
        ["timeline", "--events", f"/nonexistent/{abs(hash(word))}.jsonl"],
        ["lease", "force-drop", obj],
    ][which]
    one_error_line(CliRunner().invoke(cli, base + args))


@pytest.mark.parametrize("args", [["nosuch"], ["show", "--nosuch"], ["lease"],
                                  ["lease", "grab"], ["--root"]])
def test_usage_errors_exit_2_in_one_line(args):
    result = CliRunner().invoke(cli, args)
    if args == ["lease"]:  # a group without a command prints its help, as click does
        assert result.exit_code in (0, 2)
        return
    one_error_line(result, codes=(2,))
