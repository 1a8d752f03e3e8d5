"""Election: who leads a namespace's schedulers, with loss reported at once.

Why not kazoo's ``Election`` recipe: it runs the leader's function in a
blocking call and says nothing when the session is suspended, so a leader
would keep acting while another is being elected. Here every candidate
holds an ephemeral sequential node and the lowest leads. The leader stops
(``on_change(False)``) as soon as its connection is suspended, before the
server can expire its session and let another candidate lead; its writes
carry a version check on its node (:class:`LeaderToken`), so anything
still in flight after its session is gone fails.

No ZooKeeper call is made while the election's lock is held, and a
suspension bumps a generation counter: a check that read the candidates
before the suspension cannot make this process lead after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Optional

from kazoo.client import KazooState

from .store import LeaderToken, SchedulerStore

log = logging.getLogger(__name__)

RETRY_S = 1.0


class Election:
    """Candidate node, leader check, and state handling for one scheduler process."""

    def __init__(self, store: SchedulerStore, executor_id: str,
                 on_change: Callable[[bool, Optional[LeaderToken]], None]) -> None:
        self.store = store
        self.executor_id = executor_id
        self.on_change = on_change
        self.node: Optional[str] = None
        self.leading = False
        self._lock = threading.Lock()
        self._closed = False
        self._generation = 0

    @property
    def token(self) -> Optional[LeaderToken]:
        node = self.node
        return LeaderToken(node) if node and self.leading else None

    def start(self) -> None:
        self.check()

    def close(self) -> None:
        self._closed = True  # no lock: close must work while a check waits on ZooKeeper
        self._set(False, "shutting down")
        node, self.node = self.node, None
        if node and self.store.client.connected:
            try:
                self.store.client.delete(node)
            except Exception:
                pass

    def check(self, _event: Any = None) -> None:
        """Lead when our node is the lowest; re-armed by a watch on the candidates."""
        if self._closed:
            return
        generation = self._generation
        try:
            node = self.node
            if node is None:
                node = self.store.join_election(self.executor_id)
                self.node = node
            kids = self.store.candidates(watch=self._watch)
            mine = node.rsplit("/", 1)[1]
            if mine not in kids:
                # our node is gone (session replaced, or deleted by an admin): stand again
                self._set(False, "candidate node vanished")
                self.node = node = self.store.join_election(self.executor_id)
                kids = self.store.candidates(watch=self._watch)
                mine = node.rsplit("/", 1)[1]
        except Exception as exc:  # connection trouble: retry once the connection is back
            log.debug("election check failed: %s", exc)
            if not self._closed and self.store.client.connected:
                self._retry_later()
            return
        with self._lock:
            if self._closed or generation != self._generation \
                    or not self.store.client.connected:
                return  # suspended meanwhile: a later check decides
            self._set(kids[0] == mine, "a lower candidate leads" if kids[0] != mine else "")

    def _retry_later(self) -> None:
        timer = threading.Timer(RETRY_S, self.check)
        timer.daemon = True
        timer.start()

    def _watch(self, event: Any) -> None:
        if self._closed or getattr(event, "path", None) is None:
            return  # a session event: the state listener handles it
        threading.Thread(target=self.check, name="zklock-election", daemon=True).start()

    def suspend(self) -> None:
        """Stop leading now; safe on kazoo's connection thread (no lock wait, no I/O)."""
        self._generation += 1
        self._set(False, "connection to ZooKeeper suspended")

    def on_state(self, state: str) -> None:
        """Kazoo connection states (called off kazoo's thread)."""
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.suspend()
            if state == KazooState.LOST:
                self.node = None  # the session and its ephemeral node are gone
        elif state == KazooState.CONNECTED and not self._closed:
            self.check()

    def _set(self, leading: bool, why: str) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if leading:
            log.warning("scheduler %s is now the leader of namespace %s", self.executor_id,
                        self.store.namespace)
        else:
            log.warning("scheduler %s lost leadership of namespace %s: %s", self.executor_id,
                        self.store.namespace, why)
        try:
            self.on_change(leading, LeaderToken(self.node) if leading and self.node else None)
        except Exception:  # a callback bug must not break the election
            log.exception("leadership callback failed")
