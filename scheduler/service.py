"""SchedulerService: one `zklock scheduler run` process, an executor and a leader candidate.

It owns one ZooKeeper session: its executor node, its election candidate
and the locks its runs take all live in it, so a process that dies or is
partitioned loses all three together. Connection states are handled off
kazoo's thread: SUSPENDED stops leading at once; a reconnect re-checks
the election; a new session registers the executor again and stands for
election again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from kazoo.client import KazooClient, KazooState

from zklock.config import Settings
from zklock.manager import LockManager, connect

from .election import Election
from .executor import Executor, new_executor_id, now_ms
from .leader import Leader
from .runner import Runner
from .store import LeaderToken, SchedulerStore, local_executor_info

log = logging.getLogger(__name__)


class SchedulerService:
    """Start with :meth:`start`; :meth:`stop` leaves in order (runs finish, leadership ends)."""

    def __init__(self, settings: Settings, runner: Runner,
                 client: Optional[KazooClient] = None, namespace: Optional[str] = None,
                 pool_size: Optional[int] = None, quiet_period: Optional[float] = None,
                 on_leadership: Optional[Callable[[bool], None]] = None) -> None:
        self.settings = settings
        self.runner = runner
        self._own_client = client is None
        self.client = client if client is not None else connect(settings)
        self.store = SchedulerStore(self.client, settings, namespace)
        self.id = new_executor_id()
        started = now_ms()
        quiet = settings.scheduler_quiet_period if quiet_period is None else quiet_period
        self.info = local_executor_info(
            self.id, settings.scheduler_pool_size if pool_size is None else pool_size, started,
            started + int(quiet * 1000))
        self.executor = Executor(self.store, settings, runner, self.info)
        self.election = Election(self.store, self.id, self._on_leadership)
        self.on_leadership = on_leadership
        self.leader: Optional[Leader] = None
        self._manager: Optional[LockManager] = None
        self._events: queue.Queue = queue.Queue()
        self._control = threading.Thread(target=self._control_loop, name="zklock-scheduler",
                                         daemon=True)
        self._lock = threading.Lock()
        self._leader_lock = threading.Lock()
        self._stopped = False

    # ---- lifecycle --------------------------------------------------------------
    def start(self) -> SchedulerService:
        self.store.ensure()
        self.store.register_executor(self.info)
        self.client.add_listener(self._on_state)
        self._control.start()
        self.executor.start()
        self.election.start()
        return self

    def stop(self, wait: bool = True) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.client.remove_listener(self._on_state)
        leader = self.leader
        self.election.close()
        self._stop_leader()
        if leader is not None:
            leader.stop(wait=True)  # it writes nothing more once this returns
        self.executor.stop(wait=wait)
        self._events.put(None)
        try:
            self.client.delete(f"{self.store.executors}/{self.id}")
        except Exception:
            pass
        if self._manager is not None:
            self._manager.close()
        if self._own_client:
            self.client.stop()
            self.client.close()

    def __enter__(self) -> SchedulerService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def is_leader(self) -> bool:
        return self.election.leading

    # ---- leadership ---------------------------------------------------------------
    def _on_leadership(self, leading: bool, token: Optional[LeaderToken]) -> None:
        """Called under the election's lock: start or stop the leader loop, never block."""
        with self._leader_lock:
            self._stop_leader(wait=False)
            if leading and token is not None and not self._stopped:
                self.leader = Leader(self.store, self.settings, token, reap=self._reap,
                                     on_deposed=self._deposed).start()
        if self.on_leadership is not None:
            self.on_leadership(leading)

    def _stop_leader(self, wait: bool = True) -> None:
        leader, self.leader = self.leader, None
        if leader is not None:
            leader.stop(wait=wait)

    def _deposed(self) -> None:
        """The leader's fenced write failed: let the election find out where we stand."""
        threading.Thread(target=self.election.check, name="zklock-election",
                         daemon=True).start()

    def _reap(self) -> list[int]:
        if self._manager is None:
            self._manager = LockManager(client=self.client, settings=self.settings)
        return self._manager.reap_leases()

    # ---- connection states ----------------------------------------------------------
    def _on_state(self, state: str) -> None:
        """Kazoo's connection thread: stop leading at once, do the rest elsewhere."""
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.election.suspend()
            self.executor.set_connected(False)
        self._events.put(state)

    def _control_loop(self) -> None:
        while True:
            state = self._events.get()
            if state is None:
                return
            try:
                if state == KazooState.LOST:
                    self.election.on_state(state)
                elif state == KazooState.CONNECTED:
                    self.store.register_executor(self.info)
                    self.executor.set_connected(True)
                    self.election.on_state(state)
            except Exception as exc:
                log.warning("scheduler could not handle %s: %s", state, exc)
                time.sleep(0.5)
                if state == KazooState.CONNECTED and self.client.connected:
                    self._events.put(state)


def describe_status(store: SchedulerStore) -> dict[str, Any]:
    """Leader, live executors and what each runs: what `zklock scheduler status` prints."""
    leader = store.leader_id()
    executors = store.live_executors()
    if leader is not None and leader not in executors:
        leader = None  # a candidate node whose executor node is gone: not serving
    rows = []
    for ex_id, info in sorted(executors.items()):
        rows.append({"executor": ex_id, "host": info.host, "pid": info.pid,
                     "leader": ex_id == leader, "pool_size": info.pool_size,
                     "quiet_until": info.quiet_until, "running": list(info.running)})
    return {"namespace": store.namespace, "leader": leader, "executors": rows}
