"""Fencing at the resource, and a 3-node ensemble that the project starts and breaks."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from click.testing import CliRunner
from conftest import PYTHON, wait_for
from zklock.cli.main import cli

from zklock import LockManager
from zklock.locks.fencing import FencedResource, StaleToken

PAUSED_HOLDER = """
import sys
from zklock import LockManager
from zklock.locks.fencing import FencedResource, StaleToken
m = LockManager(hosts=sys.argv[1], root=sys.argv[2], session_timeout=2, retries=0)
res = FencedResource(m.client, sys.argv[3])
held = m.acquire([("db.t", "X")], query_id="paused")
res.write(held.fencing_token, b"first write")
print(held.fencing_token, flush=True)
sys.stdin.readline()              # SIGSTOPped and resumed while waiting here
try:
    res.write(held.fencing_token, b"late write")
    print("accepted", flush=True)
except StaleToken as exc:
    print("rejected", exc, flush=True)
except Exception as exc:          # its session may be gone: the write never happens
    print("failed", type(exc).__name__, flush=True)
"""


def test_paused_holders_late_write_is_rejected(zk_hosts, root, make_manager, zk):
    resource = f"{root}-resources/db.t"
    proc = subprocess.Popen([PYTHON, "-c", PAUSED_HOLDER, zk_hosts, root, resource],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        old_token = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGSTOP)          # a long GC pause
        b = make_manager(retries=100, retry_interval=0.1)
        held = b.acquire([("db.t", "X")])           # granted once A's session expired
        assert held.fencing_token > old_token
        FencedResource(b.client, resource).write(held.fencing_token, b"new holder")
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        # whether the reconnect lets it try (rejected) or not (failed), it cannot write
        assert answer.startswith(("rejected", "failed")), answer
        raw, _ = zk.get(resource)
        assert raw.endswith(b"new holder")
        held.release()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait()


def test_fenced_resource_rules(zk, root):
    res = FencedResource(zk, f"{root}-res/x")
    assert res.highest() is None
    z1 = res.write(10, b"a")
    z2 = res.write(10, b"b")   # the same holder writes again
    z3 = res.write(12, b"c")
    assert z1 < z2 < z3        # each write says where it landed in the resource's order
    with pytest.raises(StaleToken, match="11 is stale") as refused:
        res.write(11, b"d")
    assert refused.value.zxid == z3
    assert res.highest() == 12
    z4 = res.observe(15)       # a reader took the object over: the old writer is refused
    assert z4 > z3
    with pytest.raises(StaleToken):
        res.write(12, b"e")
    assert res.observe(3) == z4  # an older reader never fails, and changes nothing
    raw, _ = zk.get(f"{root}-res/x")
    assert raw == b"15\nc"


def acquire_eventually(mgr, locks, timeout: float = 40.0):
    """Acquire, retrying connection loss while the client moves to a live member; the last
    error if it never gets in."""
    errors: list[Exception] = []

    def attempt():
        try:
            return mgr.acquire(locks)
        except Exception as exc:
            errors.append(exc)
            return None
    got = wait_for(attempt, timeout=timeout, step=0.2)
    if got is None:
        raise errors[-1]
    return got


def test_ensemble_survives_leader_kill_and_follower_pause(ensemble, root):
    hosts = ensemble.connect
    a = LockManager(hosts=hosts, root=root, retries=0, session_timeout=4)
    try:
        leader = ensemble.leader()
        assert leader is not None
        ensemble.kill(leader)
        ensemble.wait_serving(60)
        assert ensemble.leader() not in (None, leader)
        got = acquire_eventually(a, [("db.t", "X")])
        assert got.is_valid
        got.release()
        ensemble.restart(leader)  # back to three before the next fault
        on = a.client._connection._socket.getpeername()[1]  # the member `a` talks to
        follower = next(i for i in range(3) if i != ensemble.leader()
                        and ensemble.members[i].pid() and ensemble.members[i].port != on)
        ensemble.pause(follower)
        try:
            # a quorum remains: work goes on
            acquire_eventually(a, [("db.u", "S")]).release()
        finally:
            ensemble.resume(follower)
        assert wait_for(lambda: all(m["mode"] in ("leader", "follower")
                                    for m in ensemble.status()), timeout=60)
    finally:
        a.close()


def test_cli_starts_an_ensemble(tmp_path):
    state = str(tmp_path / "state")
    out = CliRunner().invoke(cli, ["--state-dir", state, "server", "start", "--ensemble", "3"])
    try:
        assert out.exit_code == 0, out.output
        assert out.output.strip().count(",") == 2
        status = CliRunner().invoke(cli, ["--state-dir", state, "server", "status", "--json"])
        members = json.loads(status.output)
        assert sorted(m["mode"] for m in members) == ["follower", "follower", "leader"]
        shown = CliRunner().invoke(cli, ["--state-dir", state, "show"])
        assert shown.exit_code == 0   # other commands find the ensemble
    finally:
        stop = CliRunner().invoke(cli, ["--state-dir", state, "server", "stop"])
    assert stop.output.strip() == "stopped"
