"""Listing held locks: the records behind ``show``, SHOW LOCKS and ``zklock show``.

The tree is walked breadth-first with every level's getChildren pipelined,
and lock data (for extended listings) is read with pipelined getData, so the
cost is one round trip per tree level plus one, not one per node.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Optional

from .locknode import LockData, LockNodeName
from .mode import Mode
from .objects import LockObject
from .zk import ZkOps


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

    @property
    def kind(self) -> str:
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
            "user": d.user, "host": d.host, "pid": d.pid, "query_id": d.query_id,
            "query": d.query, "acquired_at": self.acquired_at, "kind": self.kind,
            "fencing_token": self.czxid, "session": d.session, "node": self.node,
        })
        if self.explicit:
            out.update({"lease_id": self.czxid, "holder": d.holder,
                        "end_at": ms_to_iso(self.end_ms)})
        return out


def walk(ops: ZkOps, root: str, start: Optional[LockObject] = None,
         extended: bool = False, explicit_only: bool = False,
         depth: Optional[int] = None) -> list[LockRecord]:
    """Every lock node at or below ``start`` (the whole root when None).

    ``explicit_only`` keeps leases only; ``depth=1`` lists the lock nodes of
    ``start`` itself without descending.
    """
    root = root.rstrip("/")
    level = [start.znode(root) if start else root]
    found: list[tuple[str, str, LockNodeName]] = []
    levels = 0
    while level and (depth is None or levels < depth):
        levels += 1
        listing = ops.children_many(level)
        nxt = []
        for path, kids in listing.items():
            if not kids:
                continue
            for kid in kids:
                if path == root and kid.startswith("."):
                    continue  # zklock's own folders (.waits), never a database
                parsed = LockNodeName.parse(kid)
                if parsed is not None:
                    if path != root and (parsed.explicit or not explicit_only):
                        found.append((path, kid, parsed))
                else:
                    nxt.append(f"{path}/{kid}")
        level = nxt
    records = []
    for path, kid, parsed in found:
        parts = path[len(root) + 1:].split("/")
        try:
            obj = LockObject.from_znode_parts(parts)
        except ValueError:
            continue  # a node some other tool put there; not ours to show
        records.append(LockRecord(obj.name, parsed.mode, f"{path}/{kid}", parsed.explicit,
                                  parsed.seq))
    if extended and records:
        data = ops.get_many(r.node for r in records)
        kept = []
        for r in records:
            got = data.get(r.node)
            if got is None:
                continue  # released while we looked
            raw, stat = got
            r.data = LockData.from_bytes(raw)
            r.ctime_ms, r.mtime_ms, r.czxid = stat.ctime, stat.mtime, stat.czxid
            r.ephemeral = bool(stat.ephemeralOwner)
            r.version = stat.version
            kept.append(r)
        records = kept
    records.sort(key=lambda r: (r.object, r.seq))
    return records


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
