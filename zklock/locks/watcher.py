"""SessionWatcher: the one owner of the live lock sets and of their state changes.

Curator and kazoo never tell a lock holder that its session is in doubt: a holder
whose connection is suspended, or whose session expired, goes on believing it holds
its locks while ZooKeeper may already grant them to someone else. We do tell it, at
once: the watcher is the kazoo connection listener of one LockManager, keeps every
implicit set the manager handed out, and moves them through the public ``mark_*``
methods of :class:`~zklock.locks.lockset.LockSet`::

    HELD --connection suspended------------------------------> SUSPENDED
        (with lose_on_suspend, the default: straight to LOST)
    SUSPENDED --reconnected, same session, every node there--> HELD
    HELD | SUSPENDED --session expired, session changed,
                       nodes gone, or re-check failed--------> LOST (on_lost callbacks, once)
    HELD | SUSPENDED --a lock node deleted by anyone---------> LOST
    any --release()------------------------------------------> RELEASED

A lock node can also go while its session lives: an operator's zkCli, Hive's lock manager
closing with ``hive.zookeeper.clean.extra.nodes``, an admin's force-drop. Hive, Curator and
kazoo never notice; a holder here does. While it holds sets, the watcher reads the object
nodes of every held lock every :data:`NODE_CHECK_S` (one pipelined multiRead for all sets,
off the acquire and release path), and a set whose node is gone is lost exactly as after a
session loss: a lock whose node is gone is lost, whoever removed it.

Why a periodic read rather than a ZooKeeper watch per node: ZooKeeper's multiRead, the one
request that reads many nodes, drops the watch flag of its reads, so a watch costs one
request per node, and through kazoo that doubled the cost of an acquire-release of 10
objects and quadrupled it at 1,000 (bench/locks.py). One read per check for every held set
bounds detection at NODE_CHECK_S plus a round trip (measured: docs/reliability.md), and
the fenced commit and the fencing token cover the moment between a delete and its
detection.

A set declared LOST whose session comes back after all still has its ephemeral nodes,
held by a process that let go: the watcher deletes them on reconnect. Leases are
persistent and outlive the session, so they are never registered here.

The races this closes, kept from the manager it was split out of:

* a set is registered *before* the connection state is re-checked
  (:meth:`hand_out`): the listener marks the sets it finds registered, so a set
  registered just after its snapshot would be handed out unmarked; registering
  first means a later drop finds it, and an earlier one is seen by the re-check
  (kazoo sets the state before it calls listeners). A set not HELD at that point is
  backed out (released) and the caller tries again;
* the held gauge counts a lost-then-released set once: loss and release both take
  the set's ``counted`` flag under the watcher's lock, and only the first reports it.

Kazoo calls the listener on its connection thread, which must never block: every
transition runs on a helper thread (:func:`dispatch`).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Optional

from kazoo.client import KazooClient, KazooState

from ..observe import metrics
from ..observe.events import LockEvents, strongest
from ..zk import ZkOps, connect_string
from .lockset import LockSet, State

log = logging.getLogger(__name__)


#: How often the nodes of held sets are checked (the bound on learning that another client
#: deleted one, plus a round trip).
NODE_CHECK_S = 0.2


def dispatch(func: Callable[..., Any], *args: Any) -> None:
    """Run ``func(*args)`` on a daemon helper thread (never on kazoo's connection thread)."""
    threading.Thread(target=func, args=args, name="zklock-session", daemon=True).start()


class SessionWatcher:
    """Keeps one manager's live lock sets and moves them as its session comes and goes.

    It is each set's :class:`~zklock.locks.lockset.SetOwner`. From its manager it needs only
    callables: ``release_nodes(nodes, wait)`` deletes a released set's nodes,
    ``delete_nodes(nodes)`` deletes them now, and ``after_reconnect(session_id)`` runs
    once the sets were re-checked after a reconnect (the manager's own clean-up).
    """

    def __init__(self, client: KazooClient, ops: ZkOps, events: LockEvents,
                 lose_on_suspend: bool, label: str,
                 release_nodes: Callable[[list[str], bool], None],
                 delete_nodes: Callable[[Sequence[str]], None],
                 after_reconnect: Callable[[Optional[int]], None]) -> None:
        self.client = client
        self.ops = ops
        self.events = events
        self.lose_on_suspend = lose_on_suspend
        self.label = label  # names this manager's session in metrics
        self._release_nodes = release_nodes
        self._delete_nodes = delete_nodes
        self._after_reconnect = after_reconnect
        self._sets: weakref.WeakSet[LockSet] = weakref.WeakSet()
        self._lock = threading.Lock()
        #: the latest session seen connected (None before any): whose nodes leftovers are
        self.last_session = self.session_id
        self._closed = threading.Event()
        self._checker: Optional[threading.Thread] = None
        client.add_listener(self._on_state)
        metrics.track_holdings(self)

    def close(self) -> None:
        """Stop watching. Sets still held are lost: nothing checks them any more, so a
        command still running under one is cancelled, not left to finish unguarded. (Their
        nodes go with the manager's ZooKeeper session when it owns one; on a client it was
        given, they stay until each set is released.)"""
        self._lose_all("its LockManager was closed")
        self.client.remove_listener(self._on_state)
        self._closed.set()

    @property
    def session_id(self) -> Optional[int]:
        cid = self.client.client_id
        return cid[0] if cid else None

    def held_ages(self) -> dict[str, float]:
        """The age of the oldest set held now, by its strongest mode (read at a scrape)."""
        now = time.monotonic()
        ages: dict[str, float] = {}
        for s in self._live_sets():
            mode = strongest(s.locks)
            ages[mode] = max(ages.get(mode, 0.0), now - s.granted_at)
        return ages

    # ---- handing sets out ---------------------------------------------------
    def hand_out(self, lockset: LockSet) -> bool:
        """Register a just granted set; False (and the set released again) if the connection
        dropped since its grant check.

        Registering first and then looking at the state closes the window described in
        the module docstring.
        """
        with self._lock:
            self._sets.add(lockset)
        if (self.client.state == KazooState.CONNECTED and self.session_id == lockset.session_id
                and lockset.state is State.HELD):
            self._start_checker()
            return True
        lockset.release()
        return False

    # ---- nodes deleted by others ------------------------------------------------------
    def _start_checker(self) -> None:
        with self._lock:
            if self._checker is not None or self._closed.is_set():
                return
            self._checker = threading.Thread(target=self._check_nodes, daemon=True,
                                             name="zklock-node-check")
        self._checker.start()

    def _check_nodes(self) -> None:
        """Every NODE_CHECK_S while sets are held: is every node of every held set there?"""
        while not self._closed.wait(NODE_CHECK_S):
            sets = [s for s in self._live_sets() if s.state is State.HELD]
            if not sets or self.client.state != KazooState.CONNECTED:
                continue
            try:
                listing = self.ops.children_many({h.object_path for s in sets for h in s.held})
            except Exception as exc:  # connection trouble: the session's transitions judge
                log.debug("could not check held lock nodes: %s", exc)
                continue
            for s in sets:
                self._lost_if_gone(s, [h.node_path for h in s.held
                                       if h.node_path.rsplit("/", 1)[1]
                                       not in (listing.get(h.object_path) or ())])

    def confirm_set(self, lockset: LockSet) -> None:
        """SetOwner: ``lockset``'s nodes read now (LockSet.confirm), on its own session only
        and while connected: a changed or suspended session is the transitions' to judge."""
        if (lockset.state is not State.HELD or not lockset.node_paths
                or self.client.state != KazooState.CONNECTED
                or self.session_id != lockset.session_id):
            return
        stats = self.ops.exists_many(lockset.node_paths)
        self._lost_if_gone(lockset, [p for p, stat in stats.items() if not stat])

    @staticmethod
    def _lost_if_gone(lockset: LockSet, gone: list[str]) -> None:
        if gone and lockset.state is State.HELD:  # a set released meanwhile let them go
            lockset.mark_lost(f"lock node {gone[0]} was deleted by another client (an operator,"
                              " an admin's force-drop, or Hive's clean-up of extra nodes)")

    # ---- SetOwner: what a set asks of us -----------------------------------------
    @property
    def connect_string(self) -> str:
        return connect_string(self.client)

    def set_lost(self, lockset: LockSet, reason: str) -> None:
        with self._lock:
            counted, lockset.counted = lockset.counted, False
        self.events.loss(lockset.set_id, lockset.locks, lockset.query_id, reason, counted)

    def release_set(self, lockset: LockSet, wait: bool) -> None:
        # lock nodes first, intents last: should the multi be chunked, no intent goes
        # while a lock node it protects is still there
        nodes = lockset.node_paths + lockset.intents
        with self._lock:
            self._sets.discard(lockset)
            counted, lockset.counted = lockset.counted, False
        self.events.release(lockset.set_id, lockset.locks, lockset.query_id, counted)
        self._release_nodes(nodes, wait)

    # ---- the session's transitions -------------------------------------------------
    def _on_state(self, state: str) -> None:
        """Kazoo's listener runs on its connection thread: never block it."""
        metrics.session_state(self.label, str(state))
        if state == KazooState.SUSPENDED:
            dispatch(self._on_suspended)
        elif state == KazooState.LOST:
            dispatch(self._lose_all, "ZooKeeper session expired")
        elif state == KazooState.CONNECTED:
            dispatch(self._on_reconnected)

    def _live_sets(self) -> list[LockSet]:
        with self._lock:
            return [s for s in self._sets if s.state in (State.HELD, State.SUSPENDED)]

    def _on_suspended(self) -> None:
        for s in self._live_sets():
            if self.lose_on_suspend:
                s.mark_lost("connection to ZooKeeper suspended; the session may expire")
            else:
                s.mark_suspended("connection to ZooKeeper suspended")

    def _lose_all(self, reason: str) -> None:
        for s in self._live_sets():
            s.mark_lost(reason)

    def _on_reconnected(self) -> None:
        """Re-check suspended sets; delete nodes of sets declared lost that survived."""
        sid = self.session_id
        self.last_session = sid or self.last_session
        with self._lock:
            sets = list(self._sets)
        for s in sets:
            if s.state is State.RELEASED or not s.held:
                continue
            if s.session_id != sid:
                s.mark_lost("ZooKeeper session changed")
                continue
            if s.state is State.LOST:
                try:
                    self._delete_nodes(s.node_paths + s.intents)
                except Exception as exc:
                    log.warning("could not delete nodes of a lost lock set: %s", exc)
                continue
            try:
                stats = self.ops.exists_many(s.node_paths)
            except Exception as exc:
                s.mark_lost(f"could not re-check lock nodes after reconnect: {exc}")
                continue
            if all(stats.values()):
                s.mark_resumed()
            else:
                s.mark_lost("lock nodes vanished while the connection was suspended")
        self._after_reconnect(sid)
