"""Listing held locks: the records behind ``show``, SHOW LOCKS and ``zklock show``.

The tree is walked breadth-first with every level's getChildren pipelined,
and lock data (for extended listings) is read with pipelined getData, so the
cost is one round trip per tree level plus one, not one per node.

Every child is classified (:func:`zklock.locks.locknode.classify`) and none is
skipped: zklock's locks and leases, Hive's lock nodes (``hive``, with Hive's lock
data: query id, lock time, mode, query string, client), recipe followers' locks
(``foreign``, holder unknown), intents (when asked for) and nodes zklock cannot
interpret (``unknown``, listed as X because that is how the grant check treats them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Optional

from ..zk import ZkOps
from .locknode import ChildKind, LockData, LockNodeName, classify
from .mode import Mode
from .objects import LockObject


def ms_to_iso(ms: Optional[int]) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class LockRecord:
    """One held lock (or lease): object, mode and, when extended, its holder."""

    object: str
    mode: Mode
    node: str
    explicit: bool
    seq: int
    data: Optional[LockData] = None
    ctime_ms: Optional[int] = None
    mtime_ms: Optional[int] = None
    czxid: Optional[int] = None
    ephemeral: Optional[bool] = None
    version: Optional[int] = None
    #: zklock (a lock or lease of ours), hive (Hive's lock manager's), foreign (a recipe
    #: follower's lock), intent (a waiting request's place in the queue) or unknown (a
    #: node zklock cannot interpret)
    origin: str = "zklock"

    @property
    def kind(self) -> str:
        if self.origin != "zklock":
            return self.origin
        return "explicit" if self.explicit else "implicit"

    @property
    def acquired_at(self) -> str:
        """Server-side creation time of the lock node (ZooKeeper's clock, not the client's)."""
        return ms_to_iso(self.ctime_ms)

    @property
    def end_ms(self) -> Optional[int]:
        """For a lease: when it ends, judged from its node's mtime (server time)."""
        if not self.explicit or self.data is None or self.data.duration_s is None:
            return None
        if self.mtime_ms is None:
            return None
        return int(self.mtime_ms + self.data.duration_s * 1000)

    def to_dict(self, extended: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"object": self.object, "mode": self.mode.value}
        if not extended:
            return out
        d = self.data or LockData()
        out.update({
            "user": d.user, "host": d.host, "pid": d.pid, "app": d.app, "query_id": d.query_id,
            "query": d.query, "acquired_at": self.acquired_at, "kind": self.kind,
            "fencing_token": self.czxid, "session": d.session, "node": self.node,
        })
        if self.explicit:
            out.update({"lease_id": self.czxid, "holder": d.holder,
                        "end_at": ms_to_iso(self.end_ms)})
        if self.origin == "intent":
            out["ticket"] = d.ticket
        return out


def walk(ops: ZkOps, root: str, start: Optional[LockObject] = None,
         extended: bool = False, explicit_only: bool = False,
         depth: Optional[int] = None, intents: bool = False) -> list[LockRecord]:
    """Every lock node at or below ``start`` (the whole root when None).

    ``explicit_only`` keeps leases only; ``depth=1`` lists the lock nodes of
    ``start`` itself without descending; ``intents`` adds waiting requests'
    intents. Foreign locks and nodes zklock cannot interpret are always listed
    (except with ``explicit_only``).
    """
    root = root.rstrip("/")
    first = len(start.znode_parts()) if start else 0
    level = [(start.znode(root) if start else root, first)]
    found: list[tuple[str, int, str, Any]] = []
    levels = 0
    while level and (depth is None or levels < depth):
        levels += 1
        listing = ops.children_many(p for p, _ in level)
        deep = dict(level)
        nxt = []
        for path, kids in listing.items():
            at = deep[path]
            for kid in kids or ():
                c = classify(kid, at)
                if c.kind is ChildKind.OBJECT:
                    nxt.append((f"{path}/{kid}", at + 1))
                elif c.kind is ChildKind.AREA:
                    continue  # zklock's own folders at the root (.waits), never a database
                elif c.kind is ChildKind.LOCK and at > 0:
                    assert c.lock is not None
                    if c.lock.explicit or not explicit_only:
                        found.append((path, at, kid, c))
                elif c.kind is ChildKind.INTENT:
                    if intents and not explicit_only:
                        found.append((path, at, kid, c))
                elif not explicit_only:  # unknown (or a lock node right under the root)
                    found.append((path, at, kid, None))
        level = nxt
    records = []
    for path, at, kid, c in found:
        rel = path[len(root) + 1:]
        obj_name = "(root)"
        if at > 0:
            try:
                obj_name = LockObject.from_znode_parts(rel.split("/")).name
            except ValueError:
                c, obj_name = None, rel
        if c is None:
            records.append(LockRecord(obj_name, Mode.EXCLUSIVE, f"{path}/{kid}", False, 0,
                                      origin="unknown"))
        elif c.lock is not None:
            origin = "hive" if c.lock.hive else "foreign" if c.lock.foreign else "zklock"
            records.append(LockRecord(obj_name, c.lock.mode, f"{path}/{kid}", c.lock.explicit,
                                      c.lock.seq, origin=origin))
        else:
            records.append(LockRecord(obj_name, c.intent.mode, f"{path}/{kid}", False,
                                      c.intent.seq, origin="intent"))
    if extended and records:
        # other clients' nodes may not be readable by us (their ACLs): their stat is enough,
        # and exists needs no permission. Hive's lock data is open: it says who holds it.
        readable = ("zklock", "intent", "hive")
        ours = [r for r in records if r.origin in readable]
        theirs = [r for r in records if r.origin not in readable]
        data = ops.get_many(r.node for r in ours)
        stats = ops.exists_many(r.node for r in theirs) if theirs else {}
        kept = []
        for r in records:
            if r.origin in readable:
                got = data.get(r.node)
                if got is None:
                    continue  # released while we looked
                raw, stat = got
                r.data = LockData.from_bytes(raw)
                if r.origin == "hive" and r.data.extra.get("written_by") != "hive":
                    r.origin = "zklock"  # ours, named for Hive (node_naming=hive)
                    r.explicit = r.data.kind == "explicit"
            else:
                stat = stats.get(r.node)
                if stat is None:
                    continue
                r.data = LockData()
            r.ctime_ms, r.mtime_ms, r.czxid = stat.ctime, stat.mtime, stat.czxid
            r.ephemeral = bool(stat.ephemeralOwner)
            r.version = stat.version
            kept.append(r)
        # an intent beside its own request's lock node is that holder's, not a waiter's
        owners = {(r.node.rsplit("/", 1)[0], r.data.session, r.data.ticket) for r in kept
                  if r.origin == "zklock" and r.data is not None and r.data.ticket}
        records = [r for r in kept if r.origin != "intent" or r.data is None
                   or (r.node.rsplit("/", 1)[0], r.data.session, r.data.ticket) not in owners]
    records.sort(key=lambda r: (r.object, r.origin == "intent", r.seq))
    return records


def holders_behind_intents(ops: ZkOps, intent_nodes: list[str]
                           ) -> dict[str, tuple[str, Mode, LockData, Any]]:
    """Of these intents, those whose request already holds its lock on the same object, and
    that lock: intent node -> (lock node, mode, data, stat).

    A granted set keeps its intents until it releases (zklock/locks/intents.py says why), so an
    intent beside its owner's lock node is a holder's, not a place in a queue: who asks
    "who blocks me?" must read it as the holder it is. Two pipelined reads, only on the
    paths that describe a denial or list waits and intents."""
    if not intent_nodes:
        return {}
    parents = {n.rsplit("/", 1)[0] for n in intent_nodes}
    listing = ops.children_many(parents)
    locks = [f"{p}/{k}" for p, kids in listing.items() for k in kids or ()
             if (name := LockNodeName.parse(k)) is not None and (not name.foreign or name.hive)]
    got = ops.get_many(list(intent_nodes) + locks)
    owners: dict[tuple[str, str, int], tuple[str, Mode, LockData, Any]] = {}
    for node in locks:
        item = got.get(node)
        name = LockNodeName.parse(node.rsplit("/", 1)[1])
        if item is None or name is None:
            continue
        data = LockData.from_bytes(item[0])
        if data.ticket:
            owners[(node.rsplit("/", 1)[0], data.session, data.ticket)] = (
                node, name.mode, data, item[1])
    out = {}
    for node in intent_nodes:
        item = got.get(node)
        if item is None:
            continue
        data = LockData.from_bytes(item[0])
        owner = owners.get((node.rsplit("/", 1)[0], data.session, data.ticket))
        if data.ticket and owner is not None:
            out[node] = owner
    return out


def hive_display_name(obj: str) -> str:
    """An object as Hive's SHOW LOCKS names it: ``db@table@k=v/k2=v2`` (``db`` for a
    database)."""
    head, _, partition = obj.partition("/")
    parts = head.split(".", 1) + ([partition] if partition else [])
    return "@".join(parts)


def hive_rows(records: list[LockRecord], extended: bool) -> list[tuple[str, Optional[str]]]:
    """SHOW LOCKS as Hive prints it: ``db@table@part`` and SHARED/EXCLUSIVE, and with
    EXTENDED the LOCK_QUERYID, LOCK_TIME (epoch ms), LOCK_MODE (IMPLICIT/EXPLICIT) and
    LOCK_QUERYSTRING lines after each lock, as rows of their own."""
    out: list[tuple[str, Optional[str]]] = []
    for r in records:
        out.append((hive_display_name(r.object),
                    "EXCLUSIVE" if r.mode is Mode.EXCLUSIVE else "SHARED"))
        if extended:
            d = r.data
            out += [(f"LOCK_QUERYID:{d.query_id if d and d.query_id else ''}", None),
                    (f"LOCK_TIME:{r.ctime_ms if r.ctime_ms is not None else ''}", None),
                    (f"LOCK_MODE:{'EXPLICIT' if r.explicit else 'IMPLICIT'}", None),
                    (f"LOCK_QUERYSTRING:{d.query if d and d.query else ''}", None)]
    return out
