"""Leftovers (zklock/locks/leftovers.py): what a failed delete leaves in a live session goes
without waiting for a reconnect, and a released node that a server shows again goes at the
next reconnect."""

from __future__ import annotations

from conftest import wait_for
from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from zklock.testing.proxy import FaultProxy

#: Every permission but DELETE, for anyone: ZooKeeper then refuses to delete a child.
NO_DELETE = [make_acl("world", "anyone", read=True, write=True, create=True, admin=True)]


def test_a_release_refused_while_connected_is_retried_until_its_nodes_go(make_manager, zk,
                                                                         root) -> None:
    """ZooKeeper refuses the release's delete (an ACL on the object node) while the session
    stays connected: no reconnect will come to finish it, and the lock stays held by a
    process that let go. Once the refusal is lifted, the node goes, and another manager's
    X is granted."""
    holder, other = make_manager(), make_manager()
    lockset = holder.acquire([("db", "X")], query_id="held")
    [node] = [n for n in lockset.node_paths if n.startswith(f"{root}/db/write-")]
    zk.set_acls(f"{root}/db", NO_DELETE)
    session = holder.session_id

    lockset.release()

    assert zk.exists(node) is not None  # refused: the lock is still there
    assert node in [p for item in holder.leftovers.pending() for p in item.nodes]
    assert [r.data.query_id for r in other.show("db", extended=True)] == ["held"]

    zk.set_acls(f"{root}/db", OPEN_ACL_UNSAFE)
    assert wait_for(lambda: zk.exists(node) is None, timeout=30), node
    assert holder.session_id == session  # no reconnect finished it
    assert wait_for(lambda: not holder.leftovers.pending(), timeout=10)
    other.acquire([("db", "X")], query_id="after").release()


def test_leftovers_of_an_expired_session_are_dropped(make_manager, zk, root) -> None:
    """A leftover belongs to its session: once that session is gone, its ephemeral nodes
    are gone with it, and nothing is retried for it."""
    holder = make_manager()
    holder.leftovers.leave(12345, ["/nowhere/read-0000000001"])
    assert wait_for(lambda: not holder.leftovers.pending(), timeout=10)


def test_a_released_node_a_server_shows_again_goes_at_the_next_reconnect(make_manager,
                                                                         zk_server, zk, root):
    """ZooKeeper 3.8.0 can lose a committed delete on a member that re-syncs
    (ZOOKEEPER-4785): the released node is back, held by a session that let go. Here the
    server is sound, so the node is put back in the holder's session by hand, as the lost
    delete leaves it; the next reconnect (a dropped connection, the session kept) finds it
    and deletes it. A node of another session at the same path is left alone."""
    host, port = zk_server.connect.split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        holder = make_manager(hosts=proxy.connect, session_timeout=4)
        lockset = holder.acquire([("db.t", "X"), ("db.u", "X")], query_id="released")
        mine, theirs = sorted(n for n in lockset.node_paths if "/db/t/" in n or "/db/u/" in n)
        lockset.release()
        session = holder.session_id
        # (makepath: ZooKeeper may have removed the emptied object node, a container)
        holder.client.create(mine, ephemeral=True, makepath=True)  # back, as after the loss
        zk.create(theirs, ephemeral=True, makepath=True)  # another session's, at a released path

        proxy.drop_all()

        assert wait_for(lambda: zk.exists(mine) is None, timeout=30), mine
        assert holder.session_id == session
        assert zk.exists(theirs) is not None
    finally:
        proxy.close()
