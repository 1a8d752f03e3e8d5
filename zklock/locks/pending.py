"""Releases this process owes but has not sent yet: a hook for a layer that releases off its
callers' path.

Spark's engine releases a completed statement's locks after the statement has returned
(zklock/spark/java/engine/Releases.java): the statement's one crossing to the lock client is
its grant. Until that release reaches ZooKeeper, the statement's lock nodes are still there,
and a request this same process makes right after the statement returned (an acquire, a
lease, SHOW LOCKS) would meet them: denied by a statement that is over, or listing it as a
holder. So every such request of a :class:`~zklock.manager.LockManager` first asks the layers
that owe releases to send them (:func:`settle`). The layer registers one callable per
runtime (:func:`register`); the core knows nothing of Spark.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_settlers: dict[object, Callable[[], None]] = {}
_lock = threading.Lock()


def register(key: object, settler: Callable[[], None]) -> None:
    """Make ``settler`` (send what is owed, and wait until it is sent) run before this
    process's requests; one per ``key`` (a later registration replaces it)."""
    with _lock:
        _settlers[key] = settler


def settle() -> None:
    """Send every release this process owes before a request of its own. A settler that
    fails (its runtime stopped) owes nothing any more: its sessions end its locks."""
    with _lock:
        settlers = list(_settlers.values())
    for settler in settlers:
        try:
            settler()
        except Exception as exc:  # the runtime is gone, and with it what it owed
            log.debug("settling owed releases failed: %s", exc)
