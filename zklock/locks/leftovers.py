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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from kazoo.client import KazooClient, KazooState

log = logging.getLogger(__name__)

#: The helper's pauses between tries while connected: from FIRST_PAUSE_S, doubling to
#: MAX_PAUSE_S (a refusal, such as an ACL, may take an operator to lift).
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 2.0


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
    loss up to their own deadline, and raise if they cannot finish).
    """

    def __init__(self, client: KazooClient, delete_nodes: Callable[[Sequence[str]], None],
                 sweep_attempt: Callable[[Sequence[str], str], None]) -> None:
        self.client = client
        self.delete_nodes = delete_nodes
        self.sweep_attempt = sweep_attempt
        self._pending: list[Leftover] = []
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

    def on_reconnect(self, session: Optional[int]) -> None:
        """Delete the leftovers of ``session`` (just reconnected); drop other sessions'.
        What fails again stays, for the helper or the next reconnect."""
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

    def close(self) -> None:
        """Stop the helper (the manager is closing its session, or leaving it to its owner)."""
        self._closed.set()

    def _clear(self) -> None:
        """The helper: while anything is pending, try whenever the session is connected."""
        pause = FIRST_PAUSE_S
        while not self._closed.wait(pause):
            if self.client.state == KazooState.CONNECTED:
                cid = self.client.client_id
                self.on_reconnect(cid[0] if cid else None)
            with self._lock:
                if not self._pending:
                    self._helper_running = False
                    return
            pause = min(pause * 2, MAX_PAUSE_S)
        with self._lock:
            self._helper_running = False
