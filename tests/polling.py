"""Waiting for a condition, and listing lock nodes: what the suite's tests and the
applications they run in processes of their own (tests/spark/cluster_app.py) both need,
without conftest's fixtures."""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient


def wait_for(cond, timeout: float = 30.0, step: float = 0.05) -> Any:
    """Poll ``cond`` until it holds or ``timeout`` passes; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    return cond()


def lock_nodes(client: KazooClient, path: str) -> list[str]:
    """Every lock node below ``path`` (recursively)."""
    from kazoo.exceptions import NoNodeError

    from zklock.locks.locknode import LockNodeName

    out = []
    try:
        kids = client.get_children(path)
    except NoNodeError:  # an empty container node the server swept meanwhile
        return out
    for kid in kids:
        full = f"{path}/{kid}"
        if LockNodeName.parse(kid):
            out.append(full)
        else:
            out.extend(lock_nodes(client, full))
    return out


def sessions_expired(ensemble, sessions: set[int]) -> bool:
    """Has the ensemble's leader expired every one of ``sessions``? (False while no member
    leads: nobody can say.)"""
    from zklock.errors import ServerError

    try:
        return not sessions & ensemble.sessions()
    except (ServerError, OSError):
        return False


def sessions_left(ensemble, member: int, sessions: set[int]) -> bool:
    """Has every one of ``sessions`` (connected to ``member`` when it stalled) either moved
    to another member or expired? What a member stalled past the session timeout does to
    its clients."""
    from zklock.errors import ServerError

    try:
        kept = ensemble.sessions()
    except (ServerError, OSError):
        return False
    elsewhere = set().union(*(ensemble.connected_sessions(i)
                              for i in range(ensemble.size) if i != member))
    return all(s not in kept or s in elsewhere for s in sessions)


def waiting_queries(client: KazooClient, root: str) -> list[str]:
    """The queries waiting for locks under ``root`` (its wait records, zklock waits)."""
    import json

    from kazoo.exceptions import NoNodeError

    waits, found = f"{root}/.waits", []
    for child in client.get_children(waits) if client.exists(waits) else []:
        try:
            found.append(json.loads(client.get(f"{waits}/{child}")[0])["query"])
        except NoNodeError:  # (ended meanwhile)
            pass
    return found
