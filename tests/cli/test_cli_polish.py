"""The command line feels finished: help with an example everywhere, exit codes, completion."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from zklock.cli.main import cli


def commands(cmd=cli, path=()):
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from commands(sub, (*path, name))
    yield path


@pytest.mark.parametrize("path", list(commands()), ids=lambda p: " ".join(p) or "zklock")
def test_every_command_has_help_with_an_example(path):
    out = CliRunner().invoke(cli, [*path, "--help"])
    assert out.exit_code == 0, out.output
    assert "Example" in out.output and "Usage:" in out.output


def test_exit_codes(make_manager, zk_hosts, root):
    base = ["--zk", zk_hosts, "--root", root]
    ok = CliRunner().invoke(cli, [*base, "show", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.output) == []
    usage = CliRunner().invoke(cli, [*base, "lease", "grab", "db.t:Q", "--duration", "1m"])
    assert usage.exit_code == 2  # usage error: a bad OBJECT:MODE
    error = CliRunner().invoke(cli, [*base, "show", "db/../x"])
    assert error.exit_code == 1 and "invalid lock object" in error.output
    assert "Traceback" not in error.output
    holder = make_manager()
    with holder.acquire([("db.t", "X")]):
        denied = CliRunner().invoke(cli, [*base, "lease", "grab", "db.t:S", "--duration", "1m"])
    assert denied.exit_code == 3 and "lock not acquired" in denied.output
    bad_duration = CliRunner().invoke(cli, [*base, "lease", "grab", "db.u:S",
                                            "--duration", "soon"])
    assert bad_duration.exit_code == 1 and "bad duration" in bad_duration.output


def test_durations_everywhere(make_manager, zk_hosts, root):
    base = ["--zk", zk_hosts, "--root", root]
    out = CliRunner().invoke(cli, [*base, "lease", "grab", "db.t:X", "--duration", "90s",
                                   "--wait", "500ms"])
    assert out.exit_code == 0, out.output
    lease_id = out.stdout.strip()  # stderr says which holder it belongs to
    assert "only that holder extends or drops it" in out.stderr
    listed = json.loads(CliRunner().invoke(cli, [*base, "lease", "list", "--json"]).output)
    assert [str(x["lease_id"]) for x in listed] == [lease_id]
    assert CliRunner().invoke(cli, [*base, "lease", "reap", "--hard-limit", "1h"]).exit_code == 0
    assert CliRunner().invoke(cli, [*base, "show", "--watch", "--interval", "5ms",
                                    "--count", "1"]).exit_code == 0


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell):
    out = CliRunner().invoke(cli, ["completion", shell])
    assert out.exit_code == 0 and "_ZKLOCK_COMPLETE" in out.output
