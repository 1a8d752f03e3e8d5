"""LeaseRenewer: keeps every lease of one holder alive, like HDFS's LeaseRenewer.

The holder defaults to the manager's :attr:`~zklock.LockManager.lease_holder`,
unique per process, so two processes of one user never renew each other's
leases (HDFS makes its client name unique for the same reason).

One thread per renewer. Each round lists the holder's leases and renews all
of them in one multi (a versioned setData of every node) at half the
shortest duration. A lease that was dropped, reaped or taken over makes the
multi fail; the round then renews the leases one by one, reports each lost
one to ``on_lost(lease_id, error)`` and in :attr:`lost`, and carries on with
the rest. The renewer stops by itself when the holder has no lease left, and
rides out ZooKeeper outages (it retries on the next round).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Optional, Protocol

from ..errors import LockLost, ZkLockError
from ..locks.objects import LockObject
from .lease import Lease, Leases

log = logging.getLogger(__name__)


class LeaseOwner(Protocol):
    """What the renewer needs of its LockManager (zklock/manager.py, which imports this
    package: the protocol keeps the dependency one way)."""

    leases: Leases

    @property
    def lease_holder(self) -> str: ...

    def list_lease(self, objs: Optional[Sequence[str | LockObject]] = None,
                   include_expired: bool = False) -> list[Lease]: ...


class LeaseRenewer:
    """Renew all leases of ``holder`` until they are dropped (or :meth:`stop`)."""

    def __init__(self, manager: LeaseOwner, holder: Optional[str] = None,
                 on_lost: Optional[Callable[[int, Exception], None]] = None,
                 min_interval: float = 0.05) -> None:
        self.manager = manager
        self.holder = holder or manager.lease_holder
        self.on_lost = on_lost
        self.min_interval = min_interval
        self.lost: dict[int, Exception] = {}
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> LeaseRenewer:
        self._thread = threading.Thread(target=self._run, name=f"zklock-renewer-{self.holder}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> LeaseRenewer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def mine(self) -> list[Lease]:
        """The holder's leases, expired ones too (one may still be renewed if nobody took
        it over); never another holder's, even of the same user."""
        return [lease for lease in self.manager.list_lease(include_expired=True)
                if lease.holder == self.holder and lease.lease_id not in self.lost]

    def renew_once(self) -> Optional[float]:
        """One round; the seconds to the next one, or None when no lease is left."""
        book = self.manager.leases
        leases = self.mine()
        if not leases:
            return None
        now = book.now_ms()
        alive = []
        for lease in leases:
            if lease.expired(now) and book.taken_over(lease):
                self._report(lease.lease_id, LockLost(
                    [o for o, _ in lease.objects],
                    f"lease {lease.lease_id} expired at {lease.end_utc} and was taken over"))
            else:
                alive.append(lease)
        try:
            book.renew(alive)
        except LockLost:
            for lease in alive:  # find which: each again, freshly read
                try:
                    book.renew([book.find(lease.lease_id)])
                except (LockLost, ZkLockError) as exc:
                    self._report(lease.lease_id, exc)
        self.renewals += 1
        return max(self.min_interval, min(lease.duration_s for lease in leases) / 2)

    def _report(self, lease_id: int, exc: Exception) -> None:
        self.lost[lease_id] = exc
        log.warning("lease %s could not be renewed: %s", lease_id, exc)
        if self.on_lost is not None:
            try:
                self.on_lost(lease_id, exc)
            except Exception:
                log.exception("on_lost callback failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self.renew_once()
            except Exception as exc:  # ZooKeeper away, say: try again next round
                log.warning("lease renewal round failed: %s", exc)
                wait = 1.0
            if wait is None:
                return
            self._stop.wait(wait)
