"""What one acquire attempt comes to: Granted, Denied or Retry.

:meth:`LockManager._attempt <zklock.manager.LockManager>` makes one try at a whole set
(one create multi, its sibling check in the same round trip) and returns exactly one of:

* :class:`Granted` ``(lockset)``: every node was created and no sibling conflicts. The
  caller stamps the set (set id, attempts, lock event), lets the session watcher hand
  it out (zklock/locks/watcher.py) and returns it; should the connection have dropped since
  the check, the watcher has released it again and the caller tries afresh.
* :class:`Denied` ``(conflicts)``: some object conflicts. The attempt has already
  undone what it created and left its intents (zklock/locks/intents.py). The caller counts
  one denied attempt, and either gives up (:class:`~zklock.errors.LockNotAcquired`
  naming the :class:`Conflict` s) or sleeps a jittered interval and retries.
* :class:`Retry` ``(reason, pre_read)``: nothing was decided: an object node raced with
  its creation or removal, the connection was lost mid-multi, or the session changed
  under the check. What the try created is already deleted. The caller tries again at
  once (with a short growing backoff after a few) without counting a denial, reading
  the object nodes first when ``pre_read`` says so, and gives up after
  ``RACE_WINDOW_S`` of such races.

:class:`Conflict` says why an attempt was denied, in lock events, the wait-for view and
the error text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from .listing import LockRecord, ms_to_iso
from .locknode import Child, ChildKind
from .lockrequest import LockTarget
from .lockset import LockSet
from .mode import Mode

#: The kinds of blocker whose node's data says who holds it (a foreign recipe's node and a
#: node zklock cannot interpret do not).
READABLE = frozenset({"lock", "intent", "hive"})


@dataclass
class Conflict:
    """Why an attempt was denied: our request on ``target`` meets ``holder_node``.

    ``kind`` says what the node is: ``lock`` (a zklock lock or lease), ``hive`` (a lock
    node named as Hive names them: Hive's, or zklock's with node_naming=hive; its data
    says whose), ``foreign`` (a recipe follower's lock, holder unknown), ``intent`` (an
    older request queued ahead of us) or ``unknown`` (a child zklock cannot interpret,
    treated as an X lock).
    """

    target: LockTarget
    holder_node: str
    holder_mode: Mode
    record: Optional[LockRecord] = None
    kind: str = "lock"

    @classmethod
    def of(cls, target: LockTarget, object_path: str, child: Child) -> Conflict:
        if child.kind is ChildKind.LOCK:
            assert child.lock is not None
            kind = "hive" if child.lock.hive else "foreign" if child.lock.foreign else "lock"
            return cls(target, f"{object_path}/{child.name}", child.lock.mode, kind=kind)
        if child.kind is ChildKind.INTENT:
            assert child.intent is not None
            return cls(target, f"{object_path}/{child.name}", child.intent.mode, kind="intent")
        return cls(target, f"{object_path}/{child.name}", Mode.EXCLUSIVE, kind="unknown")

    @property
    def readable(self) -> bool:
        """Does its node's data say who holds it (a foreign or unknown node's does not)?"""
        return self.kind in READABLE

    def to_event(self) -> dict[str, Any]:
        """The blocker as lock events and the wait-for view record it."""
        d = self.record.data if self.record is not None else None
        known = self.readable
        return {"object": self.target.obj.name, "requested": self.target.mode.value,
                "held": self.holder_mode.value, "node": self.holder_node, "kind": self.kind,
                "holder": self.describe_holder() if d is not None or not known else None,
                "job": (d.job or d.user) if d is not None and known else None}

    def describe_holder(self) -> str:
        name = self.holder_node.rsplit("/", 1)[1]
        if self.kind == "foreign":
            return f"a foreign lock node {name} (holder unknown)"
        if self.kind == "unknown":
            return f"a node zklock cannot interpret, {name}"
        r = self.record
        if r is None or r.data is None:
            return "a holder that has since released"
        return r.data.who()

    def describe(self) -> str:
        obj = f"{self.target.obj.name} ({self.target.mode.value} requested)"
        name = self.holder_node.rsplit("/", 1)[1]
        if self.kind == "foreign":
            return (f"{obj} is held in {self.holder_mode.value} by a foreign lock node {name}"
                    " (a ZooKeeper recipe client; holder unknown)")
        if self.kind == "unknown":
            return (f"{obj} has a child zklock cannot interpret, {name}: treated as an"
                    " exclusive lock (fail closed); remove it if it is not a lock")
        r = self.record
        who = "a holder that has since released"
        if r is not None and r.data is not None and r.data.extra.get("written_by") == "hive":
            d = r.data
            mode = "EXPLICIT (LOCK TABLE)" if d.kind == "explicit" else "IMPLICIT"
            who = (f"Hive's lock manager (query {d.query_id or '?'}, client {d.host or '?'},"
                   f" {mode}, since {d.acquired_at or r.acquired_at}"
                   + (f", {d.query[:80]!r}" if d.query else "") + ")")
        elif r is not None and r.data is not None:
            d = r.data
            parts = [f"user {d.user or '?'}@{d.host or '?'}"]
            if d.pid:
                parts.append(f"pid {d.pid}")
            if d.query_id:
                parts.append(f"query {d.query_id}")
            if d.app:
                parts.append(f"application {d.app}")
            if r.explicit:
                parts.append(f"lease {r.czxid} of holder {d.holder or d.user}")
            parts.append(f"since {r.acquired_at}")
            if r.explicit and r.end_ms is not None:
                parts.append(f"until {ms_to_iso(r.end_ms)}")
            who = ", ".join(parts)
        if self.kind == "intent":
            return (f"{obj} is queued behind an earlier {self.holder_mode.value} request"
                    f" (intent) of {who}")
        return f"{obj} is held in {self.holder_mode.value} by {who}"


def describe_conflicts(conflicts: list[Conflict], limit: int = 5) -> str:
    """The first ``limit`` conflicts as a denial names them, and how many more there are."""
    text = "; ".join(c.describe() for c in conflicts[:limit])
    return text + (f" (+{len(conflicts) - limit} more)" if len(conflicts) > limit else "")


@dataclass(frozen=True)
class Granted:
    """Every lock of the set is held: hand ``lockset`` out (the session watcher registers
    it and re-checks the connection first)."""

    lockset: LockSet


@dataclass(frozen=True)
class Denied:
    """A conflict denied the attempt; its nodes are undone and its intents left. Count a
    denied attempt: give up naming ``conflicts``, or sleep and retry."""

    conflicts: list[Conflict]


@dataclass(frozen=True)
class Retry:
    """Undecided (a race with object nodes, connection loss mid-multi, the session changed);
    nothing of the try is left. Try again without counting a denial, reading the object
    nodes first if ``pre_read``."""

    reason: str
    pre_read: bool


#: What :meth:`LockManager._attempt <zklock.manager.LockManager>` returns.
Outcome = Union[Granted, Denied, Retry]
