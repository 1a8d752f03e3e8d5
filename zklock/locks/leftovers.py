"""Leftovers: lock nodes a failed delete left in a live session, deleted until they are gone.

A release, an attempt's clean-up or a request's intent sweep can fail (the connection
drops, the retry's deadline passes, ZooKeeper refuses). If the session then expires, its
ephemeral nodes go with it and nothing is left to do. If it survives, the nodes stay held by
a process that believes it let go: a stuck lock, denying every conflicting request for as
long as that process runs. Kazoo and Curator leave this to the caller (Curator's
``InterProcessMutex.release`` throws, and the node stays); Hive's lock manager retries an
unlock a fixed number of times, then gives up and logs.

Here each leftover is remembered with the session it belongs to and deleted:

* after every reconnect of that session (the session watcher calls :meth:`on_reconnect`
  once it has re-checked the held sets), and
* while connected, by a helper thread that retries with a growing pause until nothing of
  the live session is left. A failure can come after the reconnect that should have
  cleared it (the delete's retry outlasted the drop, or ZooKeeper refused it while
  connected); left for the next reconnect, such a node stays until the next connection
  drop, which may be hours away.

Leftovers of another session are dropped: that session's ephemeral nodes are gone already.

A delete that succeeded can come back too. ZooKeeper 3.8.0 to 3.8.3 and 3.9.0 to 3.9.1 can
lose a committed transaction on a follower that re-syncs with a new leader by DIFF while
members die (ZOOKEEPER-4785): under an hour of chaos, a release's multi delete, committed
and logged by the leader, was missing on the two other members, and the S lock it had
deleted held off another application's X for six minutes while its owner ran on. A
follower that re-syncs drops its clients, so a client can see such a node again only
after a reconnect: after each one, the nodes this session released in the last
:data:`RECHECK_S` are read once (one pipelined read), and any still there in this session
is deleted again, with a warning naming the server bug.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

#: The helper's pauses between tries while connected: from FIRST_PAUSE_S, doubling to
#: MAX_PAUSE_S (a refusal, such as an ACL, may take an operator to lift).
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 2.0

#: How long released nodes are re-checked after each reconnect, and how many at most.
RECHECK_S = 600.0
RECHECK_MAX = 10_000


@dataclass(frozen=True)
class Leftover:
    """What one failed delete left in ``session``: ``nodes`` by path, and/or an
    ``attempt``'s nodes by its object paths and the id its node names carry."""

    session: Optional[int]
    nodes: tuple[str, ...] = ()
    attempt: Optional[tuple[tuple[str, ...], str]] = None


class Leftovers:
    """The leftovers of one manager's session, and the helper that deletes them.

    ``delete_nodes(nodes)`` deletes nodes by path; ``sweep_attempt(paths, attempt_id)``
    deletes the nodes under ``paths`` that carry ``attempt_id`` (both ride out a connection
    loss up to their own deadline, and raise if they cannot finish); ``exists_many(paths)``
    reads their stats in one round trip.
    """

    def __init__(self, client: KazooClient, delete_nodes: Callable[[Sequence[str]], None],
                 sweep_attempt: Callable[[Sequence[str], str], None],
                 exists_many: Callable[[Sequence[str]], dict[str, Optional[ZnodeStat]]]
                 ) -> None:
        self.client = client
        self.delete_nodes = delete_nodes
        self.sweep_attempt = sweep_attempt
        self.exists_many = exists_many
        self._pending: list[Leftover] = []
        #: (when, session, path) of the nodes released lately, oldest first
        self._released: deque[tuple[float, Optional[int], str]] = deque(maxlen=RECHECK_MAX)
        self._lock = threading.Lock()
        self._helper_running = False
        self._closed = threading.Event()

    def leave(self, session: Optional[int], nodes: Sequence[str] = (),
              attempt: Optional[tuple[Sequence[str], str]] = None) -> None:
        """Remember what a failed delete left in ``session``, and delete it as soon as that
        session is connected."""
        item = Leftover(session, tuple(nodes),
                        None if attempt is None else (tuple(attempt[0]), attempt[1]))
        with self._lock:
            self._pending.append(item)
            start = not self._helper_running and not self._closed.is_set()
            self._helper_running = self._helper_running or start
        if start:
            threading.Thread(target=self._clear, name="zklock-leftovers", daemon=True).start()

    def pending(self) -> list[Leftover]:
        with self._lock:
            return list(self._pending)

    def released(self, session: Optional[int], nodes: Sequence[str]) -> None:
        """Note nodes ``session`` just released, for the re-check after a reconnect."""
        now = time.monotonic()
        with self._lock:
            self._released.extend((now, session, n) for n in nodes)

    def on_reconnect(self, session: Optional[int]) -> None:
        """``session`` just reconnected (the session watcher calls this once it has
        re-checked the held sets): delete its leftovers, and its released nodes that are
        back."""
        self._retry(session)
        try:
            self._recheck_released(session)
        except Exception as exc:  # the next reconnect reads them again
            log.warning("could not re-check released lock nodes after a reconnect: %s", exc)

    def _retry(self, session: Optional[int]) -> None:
        """Delete the leftovers of ``session``; drop other sessions'. What fails again
        stays, for the helper or the next reconnect."""
        with self._lock:
            items, self._pending = self._pending, []
        for item in items:
            if item.session != session:
                continue  # that session is gone, and its ephemeral nodes with it
            try:
                if item.nodes:
                    self.delete_nodes(list(item.nodes))
                if item.attempt is not None:
                    self.sweep_attempt(list(item.attempt[0]), item.attempt[1])
            except Exception as exc:
                with self._lock:
                    self._pending.append(item)
                log.warning("could not delete lock nodes a failed delete left behind: %s", exc)

    def _recheck_released(self, session: Optional[int]) -> None:
        """Delete again the nodes ``session`` released lately that a server shows again."""
        horizon = time.monotonic() - RECHECK_S
        with self._lock:
            while self._released and self._released[0][0] < horizon:
                self._released.popleft()
            paths = list(dict.fromkeys(p for _, s, p in self._released if s == session))
        if session is None or not paths:
            return
        back = [p for p, stat in self.exists_many(paths).items()
                if stat is not None and stat.ephemeralOwner == session]
        if back:
            log.warning("%d lock node(s) this session deleted are back after a reconnect (%s):"
                        " the ZooKeeper server lost a committed delete (ZOOKEEPER-4785, fixed"
                        " in 3.8.4 and 3.9.2); deleting them again", len(back), back[0])
            self.delete_nodes(back)

    def close(self) -> None:
        """Stop the helper (the manager is closing its session, or leaving it to its owner)."""
        self._closed.set()

    def _clear(self) -> None:
        """The helper: while anything is pending, try whenever the session is connected."""
        pause = FIRST_PAUSE_S
        while not self._closed.wait(pause):
            if self.client.state == KazooState.CONNECTED:
                cid = self.client.client_id
                self._retry(cid[0] if cid else None)
            with self._lock:
                if not self._pending:
                    self._helper_running = False
                    return
            pause = min(pause * 2, MAX_PAUSE_S)
        with self._lock:
            self._helper_running = False
