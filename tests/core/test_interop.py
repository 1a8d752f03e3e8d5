"""Interoperability: a client following ZooKeeper's shared-lock recipe literally shares
zklock's queues, and a node zklock cannot interpret is never skipped.

The recipe client here is a raw kazoo client: ``read-``/``write-`` plus ZooKeeper's
sequence number under the object's znode, and the recipe's own grant rule (S waits
for a lower ``write-``, X for any lower sibling), reading a sibling's sequence number
from the last ten characters of its name, as the recipe says.
"""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from conftest import wait_for
from kazoo.client import KazooClient
from zklock.cli.main import cli

from zklock import LockNotAcquired
from zklock.locks.locknode import ChildKind, classify


@pytest.fixture
def raw(zk_hosts):
    client = KazooClient(hosts=zk_hosts)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


class RecipeClient:
    """ZooKeeper's shared-lock recipe, written literally (no zklock code)."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client, self.path = client, path

    def lock(self, mode: str) -> str:
        """Create the lock node (ephemeral, sequential); return its path."""
        self.client.ensure_path(self.path)
        prefix = "read-" if mode == "S" else "write-"
        return self.client.create(f"{self.path}/{prefix}", b"recipe", ephemeral=True,
                                  sequence=True)

    def granted(self, node: str) -> bool:
        """The recipe's check: any lower write- (for S) or any lower lock (for X) denies."""
        name = node.rsplit("/", 1)[1]
        mine = int(name[-10:])
        for kid in self.client.get_children(self.path):
            if not kid.startswith(("read-", "write-")) or kid == name:
                continue
            if int(kid[-10:]) < mine and (name.startswith("write-")
                                          or kid.startswith("write-")):
                return False
        return True


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_a_recipe_writer_blocks_zklock_and_is_listed(make_manager, raw, root, zk_hosts):
    recipe = RecipeClient(raw, f"{root}/db/t")
    node = recipe.lock("X")
    assert recipe.granted(node)
    mgr = make_manager()
    with pytest.raises(LockNotAcquired, match="foreign lock node write-0000000000"):
        mgr.acquire([("db.t/p=1", "S")])
    (rec,) = [r for r in mgr.show("db.t", extended=True) if r.origin != "zklock"]
    assert (rec.object, rec.mode.value, rec.kind) == ("db.t", "X", "foreign")
    out = cli_run("--zk", zk_hosts, "--root", root, "show", "--extended")
    assert "foreign" in out.output and "write-0000000000" in out.output
    assert "holder unknown" in out.output
    # the wait-for view names it
    waiter = make_manager(retries=1000, retry_interval=0.05)
    got: list = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire([("db.t", "X")])))
    t.start()
    try:
        assert wait_for(lambda: mgr.waits.list(), timeout=10)
        (w,) = mgr.waits.list()
        assert any(b["kind"] == "foreign" and b["node"] == node for b in w.blockers)
        rows = json.loads(cli_run("--zk", zk_hosts, "--root", root, "waits",
                                  "--json").output)
        assert "foreign lock node write-0000000000" in json.dumps(rows)
    finally:
        raw.delete(node)
        t.join(20)
    assert got and got[0].is_valid
    got[0].release()


def test_grant_rule_holds_both_ways_with_recipe_nodes_on_both_sides(make_manager, raw, root):
    """The recipe denies by deleting its node, as zklock does (Hive's deny-and-retry)."""
    mgr, other = make_manager(), make_manager()
    recipe = RecipeClient(raw, f"{root}/db/t")
    low_reader = recipe.lock("S")                        # below zklock's nodes
    assert recipe.granted(low_reader)
    mine = mgr.acquire([("db.t", "S")])                  # S with S: granted
    high_writer = recipe.lock("X")                       # above zklock's nodes
    assert not recipe.granted(high_writer)               # the recipe sees zklock's read-
    raw.delete(high_writer)
    high_reader = recipe.lock("S")                       # S above zklock's S: granted
    assert recipe.granted(high_reader)
    with pytest.raises(LockNotAcquired, match="foreign"):
        other.acquire([("db.t", "X")])                   # recipe readers below and above
    with other.acquire([("db.t/p=1", "S")]):             # S with S on every side
        pass
    raw.delete(low_reader)
    raw.delete(high_reader)
    mine.release()
    writer = recipe.lock("X")
    assert recipe.granted(writer)                        # alone: the recipe writer holds
    with pytest.raises(LockNotAcquired, match="held in X by a foreign lock"):
        other.acquire([("db.t", "S")])                   # zklock waits for it
    raw.delete(writer)
    with other.acquire([("db.t", "X")]):
        late = recipe.lock("S")
        assert not recipe.granted(late)                  # the recipe waits for zklock's X
        raw.delete(late)


def test_wrapped_sequence_numbers_of_recipe_nodes_are_locks(make_manager, raw, root):
    """ZooKeeper formats a wrapped (negative) counter as %010d: '-000000005'."""
    raw.ensure_path(f"{root}/db/t")
    node = raw.create(f"{root}/db/t/write--000000005", ephemeral=True)
    assert classify("write--000000005", 2).lock.seq == -5
    assert classify("write--2147483648", 2).lock.seq == -(2**31)
    with pytest.raises(LockNotAcquired, match="foreign"):
        make_manager().acquire([("db.t", "S")])
    raw.delete(node)


@pytest.mark.parametrize("name", ["LOCK-SHARED-nosequence", "x__lock__0000000003",
                                  "read-nosequence", "Orders"])
def test_a_child_zklock_cannot_interpret_fails_closed_and_is_shown(make_manager, raw, root,
                                                                   zk_hosts, name):
    raw.ensure_path(f"{root}/db/t")
    raw.create(f"{root}/db/t/{name}")
    assert classify(name, 2).kind is ChildKind.UNKNOWN
    mgr = make_manager()
    with pytest.raises(LockNotAcquired, match=f"cannot interpret, {name}"):
        mgr.acquire([("db.t/p=1", "S")])
    (rec,) = [r for r in mgr.show() if r.origin != "zklock"]
    assert (rec.object, rec.kind, rec.mode.value) == ("db.t", "unknown", "X")
    out = cli_run("--zk", zk_hosts, "--root", root, "show")
    assert out.exit_code == 0 and "cannot interpret" in out.output
    # zklock never deletes what it cannot interpret, not even when breaking locks
    mgr.force_drop_lease(["db.t"], include_implicit=True)
    assert raw.exists(f"{root}/db/t/{name}")
    raw.delete(f"{root}/db/t/{name}")
    with mgr.acquire([("db.t/p=1", "S")]):
        pass


def test_partitions_and_tables_stay_objects(make_manager):
    """Object nodes are never taken for unknown children: zklock's own names at each level."""
    assert classify("orders", 1).kind is ChildKind.OBJECT
    assert classify("ds=2024-01-01", 2).kind is ChildKind.OBJECT
    assert classify("hr=1", 3).kind is ChildKind.OBJECT
    assert classify("ds=1", 1).kind is ChildKind.UNKNOWN       # no partition under a database
    assert classify(".waits", 0).kind is ChildKind.AREA
    mgr = make_manager()
    with mgr.acquire([("db.t/ds=1/hr=2", "X"), ("db.u", "S")]):
        with make_manager().acquire([("db.t/ds=2", "X")]):     # siblings stay independent
            assert {r.kind for r in mgr.show()} == {"implicit"}
