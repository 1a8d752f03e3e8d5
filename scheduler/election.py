"""Election: who leads a namespace's schedulers, with loss reported at once.

Why not kazoo's ``Election`` recipe: it runs the leader's function in a
blocking call and says nothing when the session is suspended, so a leader
would keep acting while another is being elected. Here every candidate
holds an ephemeral sequential node and the lowest leads. The leader stops
(``on_change(False)``) as soon as its connection is suspended, before the
server can expire its session and let another candidate lead; its writes
carry a version check on its node (:class:`LeaderToken`), so anything
still in flight after its session is gone fails.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Optional

from kazoo.client import KazooState
from kazoo.exceptions import NoNodeError

from .store import LeaderToken, SchedulerStore

log = logging.getLogger(__name__)


class Election:
    """Candidate node, leader check, and state handling for one scheduler process."""

    def __init__(self, store: SchedulerStore, executor_id: str,
                 on_change: Callable[[bool, Optional[LeaderToken]], None]) -> None:
        self.store = store
        self.executor_id = executor_id
        self.on_change = on_change
        self.node: Optional[str] = None
        self.leading = False
        self._lock = threading.RLock()
        self._closed = False

    @property
    def token(self) -> Optional[LeaderToken]:
        return LeaderToken(self.node) if self.node and self.leading else None

    def start(self) -> None:
        with self._lock:
            self.node = self.store.join_election(self.executor_id)
        self.check()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._set(False, "shutting down")
            node, self.node = self.node, None
        if node:
            try:
                self.store.client.delete(node)
            except Exception:
                pass

    def check(self, _event: Any = None) -> None:
        """Lead when our node is the lowest; re-armed by a watch on the candidates."""
        with self._lock:
            if self._closed or self.node is None:
                return
            try:
                kids = self.store.candidates(watch=self._watch)
            except Exception as exc:  # connection trouble: the state listener handles it
                log.debug("election check failed: %s", exc)
                return
            mine = self.node.rsplit("/", 1)[1]
            if mine not in kids:
                # our node is gone (session replaced, or deleted by an admin): stand again
                self._set(False, "candidate node vanished")
                self.node = self.store.join_election(self.executor_id)
                kids = self.store.candidates(watch=self._watch)
                mine = self.node.rsplit("/", 1)[1]
            self._set(kids[0] == mine, "lower candidate" if kids[0] != mine else "")

    def _watch(self, _event: Any) -> None:
        threading.Thread(target=self.check, name="zklock-election", daemon=True).start()

    def on_state(self, state: str) -> None:
        """Kazoo connection states (called off kazoo's thread)."""
        if state == KazooState.SUSPENDED:
            self.suspend()
        elif state == KazooState.LOST:
            with self._lock:
                self._set(False, "ZooKeeper session expired")
                self.node = None
        elif state == KazooState.CONNECTED:
            with self._lock:
                if self._closed:
                    return
                if self.node is None:
                    try:
                        self.node = self.store.join_election(self.executor_id)
                    except Exception as exc:
                        log.warning("could not stand for election again: %s", exc)
                        return
            self.check()

    def suspend(self) -> None:
        """Stop leading now; safe on kazoo's connection thread (takes no lock, no I/O)."""
        self._set(False, "connection to ZooKeeper suspended")

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


def node_exists(store: SchedulerStore, path: str) -> bool:
    try:
        return store.client.exists(path) is not None
    except NoNodeError:
        return False
