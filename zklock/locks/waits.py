"""Waits: who is waiting for whom, for `zklock waits` (a wait-for view).

A request denied with retries left publishes an ephemeral node
``<root>/.waits/<id>`` saying what it wants, its ticket (its place in the
queue its intents hold, zklock/locks/intents.py) and which nodes blocked its last
attempt: holders, intents queued ahead of it, recipe followers' locks and
nodes zklock cannot interpret; each retry updates it and the grant (or
giving up) deletes it. Only a denied request writes here, so an uncontended lock pays nothing,
and a waiter that dies takes its node with its session. ``.waits`` cannot
clash with a database: lock object names never start with a dot.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol

from kazoo.exceptions import NodeExistsError

from .attempt import READABLE
from .listing import holders_behind_intents

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from ..config import Settings
    from ..zk import ZkOps
    from .attempt import Conflict
    from .locknode import LockData

log = logging.getLogger(__name__)

WAITS = ".waits"
#: Wanted objects and blockers kept in a wait node (the view shows the first few anyway).
MAX_ITEMS = 50


@dataclass
class Wait:
    """One request still retrying."""

    id: str
    user: str
    job: str
    host: str
    pid: int
    query_id: str
    query: str
    wants: list = field(default_factory=list)
    blockers: list = field(default_factory=list)
    since_ms: int = 0
    attempt: int = 0
    updated_ms: int = 0
    #: the request's place in the queue (the zxid of its first denial; 0: no intents)
    ticket: int = 0
    intents: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class WaitsOwner(Protocol):
    """What :class:`Waits` needs from its LockManager (zklock/manager.py), stated here so
    that this module does not depend on the manager."""

    client: KazooClient
    ops: ZkOps
    root: str
    settings: Settings


class Waits:
    """Publishes this manager's waiting requests and lists everyone's."""

    def __init__(self, manager: WaitsOwner) -> None:
        self.mgr = manager
        self.base = f"{manager.root.rstrip('/')}/{WAITS}"

    def publish(self, wait_id: Optional[str], wanted: list[list[str]], data: LockData,
                conflicts: list[Conflict], attempt: int, started: float,
                intents: bool = True) -> Optional[str]:
        """Create or update the wait node; never fails the request (returns its id).
        ``intents``: does the request leave intents (its settings')."""
        import time

        now = int(time.time() * 1000)
        wait = Wait(id=wait_id or secrets.token_hex(8), user=data.user, job=data.job or data.user,
                    host=data.host or socket.gethostname(), pid=data.pid or os.getpid(),
                    query_id=data.query_id, query=data.query[:200], wants=wanted[:MAX_ITEMS],
                    blockers=[c.to_event() for c in conflicts[:MAX_ITEMS]],
                    since_ms=now - int((time.monotonic() - started) * 1000), attempt=attempt,
                    updated_ms=now, ticket=data.ticket,
                    intents=bool(data.ticket) and intents)
        raw = json.dumps(wait.to_dict(), separators=(",", ":")).encode()
        path = f"{self.base}/{wait.id}"
        client = self.mgr.client
        try:
            if wait_id is None:
                try:
                    client.create(path, raw, ephemeral=True, makepath=True)
                except NodeExistsError:
                    client.set(path, raw)
            else:
                client.set_async(path, raw)
        except Exception as exc:  # the wait-for view is best effort
            log.debug("could not publish a wait: %s", exc)
        return wait.id

    def withdraw(self, wait_id: str) -> None:
        try:
            self.mgr.client.delete_async(f"{self.base}/{wait_id}")
        except Exception:
            pass

    def list(self) -> list[Wait]:
        """Every waiting request in queue order (by ticket: the first denied first), each
        blocker's holder read now (one round trip): the waiter records only the blocking
        node, so a denial costs it no read."""
        from .locknode import LockData

        ops = self.mgr.ops
        ids = (ops.children_many([self.base]).get(self.base)) or []
        got = ops.get_many(f"{self.base}/{i}" for i in ids)
        out = []
        for raw_stat in got.values():
            if raw_stat is None:
                continue  # granted meanwhile
            try:
                data = json.loads(raw_stat[0].decode())
                out.append(Wait(**{k: data[k] for k in Wait.__dataclass_fields__ if k in data}))
            except (ValueError, TypeError):
                continue  # not ours
        def readable(b: dict) -> bool:  # a foreign or unknown node's data names nobody
            return bool(b.get("node")) and b.get("kind", "lock") in READABLE

        try:  # an intent beside its request's own lock node is that holder's
            owners = holders_behind_intents(ops, [b["node"] for w in out for b in w.blockers
                                                  if b.get("kind") == "intent"
                                                  and b.get("node")])
        except Exception:
            owners = {}
        for w in out:
            for b in w.blockers:
                if b.get("node") in owners:
                    node, mode, _, _ = owners[b["node"]]
                    b.update(kind="lock", node=node, held=mode.value)
            unique = {(b.get("object"), b.get("node")): b for b in w.blockers}
            w.blockers = list(unique.values())
        holders = ops.get_many(b["node"] for w in out for b in w.blockers if readable(b))
        for w in out:
            for b in w.blockers:
                if not readable(b):
                    continue
                held = holders.get(b.get("node", ""))
                if held is None:
                    b.setdefault("holder", None)
                    b["holder"] = b["holder"] or "a holder that has since released"
                    continue
                d = LockData.from_bytes(held[0])
                b["holder"], b["job"] = d.who(), d.job or d.user
        out.sort(key=lambda w: (w.ticket == 0, w.ticket, w.since_ms))  # queue order
        return out
