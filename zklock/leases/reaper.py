"""LeaseReaper: leases past the hard limit are deleted without any scheduler running.

HDFS's NameNode checks the hard limit in a monitor thread of its own. zklock
has no server of its own, so the reaper is a loop that any long-lived process
runs: ``zklock lease reap --every 5m`` as a service, or
``LeaseReaper(manager, every=300).start()`` inside a process one already runs
(the scheduler leader reaps as well). Several may run, for availability: each
round, the one whose session holds the ephemeral node ``<root>/.reaper`` reaps
and the others stand by; when that session ends (the process stopped or
died), the next round of another takes over. Reaping twice would be harmless
anyway (a lease's nodes are deleted once; a second delete finds nothing), the
election only keeps the work and the log lines in one place.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from kazoo.exceptions import NodeExistsError, NoNodeError

from ..config import Settings
from ..errors import InvalidArguments
from ..observe import metrics
from ..zk import ZkOps

log = logging.getLogger(__name__)

REAPER = ".reaper"


@dataclass
class ReapRound:
    """What one round did: whether this process reaped, who reaps, which leases went."""

    leading: bool
    leader: str
    reaped: list[int] = field(default_factory=list)


class ReapingManager(Protocol):
    """What the reaper needs of its LockManager (zklock/manager.py, which imports this
    package: the protocol keeps the dependency one way)."""

    settings: Settings
    root: str
    client: Any
    ops: ZkOps

    @property
    def session_id(self) -> Optional[int]: ...

    def ensure_root(self) -> None: ...

    def reap_leases(self, hard_limit_s: Optional[float] = None) -> list[int]: ...


class LeaseReaper:
    """Reap leases expired for longer than the hard limit, every ``every`` seconds."""

    def __init__(self, manager: ReapingManager, every: float,
                 hard_limit_s: Optional[float] = None,
                 on_round: Optional[Callable[[ReapRound], None]] = None) -> None:
        if every <= 0:
            raise InvalidArguments(f"the reaper's interval must be > 0, got {every!r}")
        self.manager = manager
        self.every = every
        self.hard_limit_s = hard_limit_s
        self.on_round = on_round
        self.name = f"{manager.settings.effective_user}@{socket.gethostname()}:{os.getpid()}"
        self.path = f"{manager.root.rstrip('/')}/{REAPER}"
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def round(self) -> ReapRound:
        """Take the reaper's node if free; reap if it is ours."""
        mgr = self.manager
        mgr.ensure_root()
        try:
            mgr.ops.with_retry(mgr.client.create, self.path, self.name.encode(),
                               ephemeral=True)
        except NodeExistsError:
            pass
        try:
            raw, stat = mgr.ops.with_retry(mgr.client.get, self.path)
        except NoNodeError:  # its holder just went: the next round takes it
            return ReapRound(False, "")
        leader = raw.decode("utf-8", "replace")
        if stat.ephemeralOwner != mgr.session_id:
            return ReapRound(False, leader)
        return ReapRound(True, leader, mgr.reap_leases(self.hard_limit_s))

    def run(self, rounds: int = 0) -> None:
        """Reap every ``every`` seconds until :meth:`stop` (or ``rounds`` rounds)."""
        done = 0
        while not self._stop.is_set():
            try:
                result = self.round()
            except Exception as exc:  # ZooKeeper away, say: try again next round
                log.warning("lease reaper round failed: %s", exc)
                result = None
            if result is not None:
                # the alert "the lease reaper is not running" reads its age
                metrics.REAPER_ROUND.labels(self.manager.root).set_to_current_time()
                if self.on_round is not None:
                    self.on_round(result)
            done += 1
            if rounds and done >= rounds:
                return
            self._stop.wait(self.every)

    def start(self) -> LeaseReaper:
        self._thread = threading.Thread(target=self.run, name="zklock-lease-reaper",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the current round and give up the reaper's node."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            _, stat = self.manager.client.get(self.path)
            if stat.ephemeralOwner == self.manager.session_id:
                self.manager.client.delete(self.path, version=stat.version)
        except Exception:
            pass  # ephemeral: it goes with the session anyway

    def __enter__(self) -> LeaseReaper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
