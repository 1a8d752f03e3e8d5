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

Sent is not enough when the request is another session's (another LockManager of the
process): ZooKeeper orders one session's requests, not two sessions'. A release sent
without waiting for its reply (``LockSet.release(wait=False)``) is therefore recorded
(:func:`sent`), and :func:`settle` also waits for the replies still outstanding.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_settlers: dict[object, Callable[[], None]] = {}
_lock = threading.Lock()
#: releases sent without waiting, until ZooKeeper answers them (kazoo's async results)
_in_flight: set[Any] = set()
#: The longest :func:`settle` waits for one outstanding reply. A reply that takes longer
#: means ZooKeeper is out of reach, and the request that follows meets that itself.
REPLY_WAIT_S = 10.0


def register(key: object, settler: Callable[[], None]) -> None:
    """Make ``settler`` (send what is owed, and wait until it is sent) run before this
    process's requests; one per ``key`` (a later registration replaces it)."""
    with _lock:
        _settlers[key] = settler


def sent(reply: Any) -> None:
    """Record a release sent without waiting (kazoo's async result of its multi), until
    ZooKeeper answers it."""
    with _lock:
        _in_flight.add(reply)
    reply.rawlink(_answered)


def _answered(reply: Any) -> None:
    with _lock:
        _in_flight.discard(reply)


def settle() -> None:
    """Send every release this process owes before a request of its own, and wait for
    ZooKeeper's answers to those sent without waiting. A settler that fails (its runtime
    stopped) owes nothing any more: its sessions end its locks."""
    with _lock:
        settlers = list(_settlers.values())
    for settler in settlers:
        try:
            settler()
        except Exception as exc:  # the runtime is gone, and with it what it owed
            log.debug("settling owed releases failed: %s", exc)
    with _lock:
        replies = list(_in_flight)
    for reply in replies:
        reply.wait(REPLY_WAIT_S)
