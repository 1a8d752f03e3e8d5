"""Leases: explicit, time-bound locks in the same queues as implicit ones.

The lease API (docs/leases.md) with HDFS's soft and hard limits.

A lease is a set of *persistent* sequential ``read-``/``write-`` nodes (marked
explicit in their names) under the same object nodes as implicit locks, so
both kinds conflict by the same rule. Unlike Hive's explicit locks, a lease
ends by itself:

* time comes from ZooKeeper only: a lease starts at its nodes' ctime and
  ends at their mtime + duration; "now" is the mtime of a write to the lock
  root. A client with a skewed clock can neither steal nor overstay a lease;
* soft limit (HDFS): a contender treats a lease past its end as absent;
* hard limit: :meth:`Leases.reap` deletes leases expired for longer than
  ``lease_hard_limit`` (the scheduler leader runs it, and so does
  :class:`~zklock.leases.reaper.LeaseReaper`, ``zklock lease reap --every``);
* a lease belongs to its holder, unique per process by default
  (``user@host:pid:random``, as HDFS's ``DFSClient_<id>``): only the holder
  renews, extends or drops it; an admin force-drops anyone's, and anyone may
  recover (drop) one past its soft limit;
* renewal (:meth:`Leases.extend`, :class:`~zklock.leases.renewer.LeaseRenewer`) is a
  versioned setData of every node, so a lease dropped or taken over cannot
  be renewed by mistake.

The lease id is the czxid of the creating multi (its fencing token): unique,
increasing with time, and given by ZooKeeper, never by a client counter.
All nodes of a lease share the attempt id in their names, which is how a
lease's nodes are found together.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from kazoo.exceptions import BadVersionError, NoNodeError

from ..config import Settings, parse_duration
from ..errors import (
    ExceedsMaxLeaseTime,
    InvalidArguments,
    LeaseAlreadyExists,
    LeaseNotFound,
    LockLost,
    LockNotAcquired,
    NotLeaseHolder,
)
from ..locks.listing import LockRecord, ms_to_iso, walk
from ..locks.locknode import LockData, LockNodeName, seq_before
from ..locks.lockrequest import LockSpec, normalize
from ..locks.mode import Mode
from ..locks.objects import LockObject
from ..zk import MultiFailed, ZkOps

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from ..locks.lockrequest import LockTarget
    from ..locks.lockset import LockSet
    from ..observe.events import LockEvents

#: Leases up to this many objects list them in each node, so one object finds them all.
MAX_LISTED_OBJECTS = 200

_PROCESS_TOKENS: dict[int, str] = {}


def process_holder(user: str) -> str:
    """The default lease holder: ``user@host:pid:random``, unique per process (a forked
    child gets its own), like HDFS's ``DFSClient_<task>_<random>_<thread>``."""
    pid = os.getpid()
    token = _PROCESS_TOKENS.get(pid)
    if token is None:
        token = _PROCESS_TOKENS.setdefault(pid, secrets.token_hex(4))
    return f"{user}@{socket.gethostname()}:{pid}:{token}"


@dataclass
class Lease:
    """One lease: the lease API's HiveLease (user, lease_id, objects, start/end, type, holder)."""

    lease_id: int
    holder: str
    user: str
    host: str
    duration_s: float
    start_ms: int
    end_ms: int
    records: list[LockRecord] = field(default_factory=list)

    @property
    def objects(self) -> list[tuple[str, str]]:
        """(object, lease_type) with lease_type ``s`` or ``x``, parents included."""
        return [(r.object, r.mode.value.lower()) for r in self.records]

    @property
    def leaves(self) -> list[str]:
        """The objects asked for (parents added in S for them left out)."""
        names = [r.object for r in self.records]
        objs = [LockObject.parse(n) for n in names]
        return [n for n, o in zip(names, objs)
                if not any(o != other and o.contains(other) for other in objs)]

    @property
    def start_utc(self) -> str:
        return ms_to_iso(self.start_ms)

    @property
    def end_utc(self) -> str:
        return ms_to_iso(self.end_ms)

    def expired(self, now_ms: int) -> bool:
        return now_ms > self.end_ms

    def to_dict(self) -> dict[str, Any]:
        return {"lease_id": self.lease_id, "holder": self.holder, "user": self.user,
                "host": self.host, "objects": [f"{o}:{t.upper()}" for o, t in self.objects],
                "start_utc": self.start_utc, "end_utc": self.end_utc,
                "duration_s": self.duration_s}


class LeaseOwner(Protocol):
    """What :class:`Leases` needs from its LockManager (zklock/manager.py), stated here so
    that this module does not depend on the manager."""

    client: KazooClient
    ops: ZkOps
    root: str
    settings: Settings
    events: LockEvents

    @property
    def lease_holder(self) -> str: ...

    def ensure_root(self) -> None: ...

    def lock_data(self, query_id: Optional[str], query: Optional[str], kind: str,
                  **extra: Any) -> LockData: ...

    def acquire_targets(self, targets: list[LockTarget], data: LockData, explicit: bool,
                        retries: Optional[int] = None, retry_interval: Optional[float] = None,
                        query_id: str = "", deadline: Optional[float] = None,
                        error: type[LockNotAcquired] = LockNotAcquired) -> LockSet: ...

    def delete_nodes(self, nodes: Sequence[str]) -> None: ...


class Leases:
    """The lease operations of one LockManager (``mgr.grab_lease`` and friends delegate here)."""

    def __init__(self, manager: LeaseOwner) -> None:
        self.mgr = manager
        #: the nodes of the leases this manager took, by lease id: they cover its own
        #: implicit locks (:meth:`covers`)
        self._taken: dict[int, frozenset[str]] = {}

    def covers(self, holder_node: str) -> bool:
        """Is ``holder_node`` a node of a lease this manager took? Its own statements do not
        wait for it (docs/leases.md, "Your own leases"). A node that is gone, or past its
        end, counts as absent for everyone anyway."""
        return any(holder_node in nodes for nodes in self._taken.values())

    # ---- time -------------------------------------------------------------------
    def now_ms(self) -> int:
        """ZooKeeper's clock: the mtime of a write to the lock root."""
        self.mgr.ensure_root()
        return int(self.mgr.ops.with_retry(self.mgr.client.set, self.mgr.root, b"").mtime)

    # ---- grab -------------------------------------------------------------------
    def grab(self, objs: Iterable[LockSpec], duration_s: Union[float, str],
             wait_s: Union[float, str] = 0, holder: Optional[str] = None) -> int:
        duration = parse_duration(duration_s, positive=True)
        wait = parse_duration(wait_s)
        limit = self.mgr.settings.max_lease_s
        if duration > limit:
            raise ExceedsMaxLeaseTime(f"a lease of {duration:g}s exceeds the maximum of"
                                      f" {limit:g}s (max_lease_s)")
        targets = normalize(objs)
        if not targets:
            raise InvalidArguments("a lease needs at least one object")
        if holder is not None and (not isinstance(holder, str) or not holder.strip()):
            raise InvalidArguments(f"a lease holder is a non-empty name, got {holder!r}")
        data = self.mgr.lock_data(None, "lease", kind="explicit",
                                  holder=holder or self.mgr.lease_holder, duration_s=duration)
        if len(targets) <= MAX_LISTED_OBJECTS:  # lets find() complete a lease from one object
            data.extra["objects"] = [t.obj.name for t in targets]
        interval = self.mgr.settings.retry_interval
        if wait:
            interval = min(interval, max(wait / 10, 0.05))
        lockset = self.mgr.acquire_targets(
            targets, data, explicit=True, retry_interval=interval,
            deadline=time.monotonic() + wait, error=LeaseAlreadyExists)
        self._taken[lockset.fencing_token] = frozenset(lockset.node_paths)
        return lockset.fencing_token

    # ---- finding leases --------------------------------------------------------
    def records(self, objs: Optional[Sequence[Union[str, LockObject]]] = None,
                explicit_only: bool = True) -> list[LockRecord]:
        """Lock records at or below ``objs`` (and directly on their parents)."""
        mgr = self.mgr
        if not objs:
            found = mgr.ops.with_retry(walk, mgr.ops, mgr.root, None, True, explicit_only)
        else:
            found = []
            parents: set[LockObject] = set()
            for raw in objs:
                obj = LockObject.parse(raw)
                found += mgr.ops.with_retry(walk, mgr.ops, mgr.root, obj, True, explicit_only)
                parents.update(obj.parents())
            for parent in parents:  # a lease's parent nodes sit directly on them
                found += mgr.ops.with_retry(walk, mgr.ops, mgr.root, parent, True,
                                            explicit_only, 1)
        unique = {r.node: r for r in found}
        return sorted(unique.values(), key=lambda r: (r.object, r.seq))

    def list(self, objs: Optional[Sequence[Union[str, LockObject]]] = None,
             include_expired: bool = True) -> list[Lease]:
        """Leases with a node at or below ``objs``; without ``include_expired`` only those
        whose end is not past (the lease API's ``end_utc >= now``, on ZooKeeper's clock)."""
        leases = self._all(objs)
        if not include_expired and leases:
            now = self.now_ms()
            leases = [lease for lease in leases if not lease.expired(now)]
        return leases

    def _all(self, objs: Optional[Sequence[Union[str, LockObject]]]) -> list[Lease]:
        groups: dict[str, list[LockRecord]] = {}
        for r in self.records(objs):
            name = LockNodeName.parse(r.node.rsplit("/", 1)[1])
            if name is not None:
                groups.setdefault(name.attempt, []).append(r)
        leases = [self._lease(rs) for rs in groups.values()]
        if objs:  # parents were read to complete each lease; keep leases on objs themselves
            wanted = [LockObject.parse(o) for o in objs]
            leases = [lease for lease in leases
                      if any(w.contains(LockObject.parse(r.object))
                             for r in lease.records for w in wanted)]
        return sorted(leases, key=lambda lease: lease.lease_id)

    @staticmethod
    def _lease(records: list[LockRecord]) -> Lease:
        first = records[0]
        d = first.data or LockData()
        duration = float(d.duration_s or 0)
        start = min(r.ctime_ms or 0 for r in records)
        end = min((r.mtime_ms or 0) for r in records) + int(duration * 1000)
        return Lease(max(r.czxid or 0 for r in records), d.holder or d.user, d.user, d.host,
                     duration, start, end, records)

    def find(self, lease_id: int, objs: Optional[Sequence[Union[str, LockObject]]] = None
             ) -> Lease:
        if not isinstance(lease_id, int) or isinstance(lease_id, bool) or lease_id <= 0:
            raise InvalidArguments(f"a lease id is a positive integer, got {lease_id!r}")
        for lease in self.list(objs):
            if lease.lease_id == lease_id:
                return self._complete(lease) if objs else lease
        raise LeaseNotFound(f"no lease {lease_id}" + (f" on {', '.join(map(str, objs))}"
                                                     if objs else ""))

    def _complete(self, lease: Lease) -> Lease:
        """All nodes of a lease found through some of its objects."""
        d = lease.records[0].data
        names = (d.extra.get("objects") if d is not None else None) or None
        if not names:
            return self.find(lease.lease_id)  # not recorded (huge lease): search everything
        attempt = LockNodeName.parse(lease.records[0].node.rsplit("/", 1)[1]).attempt
        mgr = self.mgr
        paths = {LockObject.parse(n).znode(mgr.root): n for n in names}
        listing = mgr.ops.with_retry(mgr.ops.children_many, paths.keys())
        nodes = [f"{p}/{kid}" for p, kids in listing.items() for kid in kids or ()
                 if attempt in kid]
        got = mgr.ops.with_retry(mgr.ops.get_many, nodes)
        records = []
        for node in nodes:
            item = got.get(node)
            name = LockNodeName.parse(node.rsplit("/", 1)[1])
            if item is None or name is None:
                continue
            raw, stat = item
            records.append(LockRecord(paths[node.rsplit("/", 1)[0]], name.mode, node, True,
                                      name.seq, LockData.from_bytes(raw), stat.ctime,
                                      stat.mtime, stat.czxid, False, stat.version))
        return self._lease(sorted(records, key=lambda r: r.object)) if records else lease

    # ---- extend, drop ----------------------------------------------------------
    def _own(self, lease: Lease, holder: Optional[str], action: str) -> Lease:
        mine = holder or self.mgr.lease_holder
        if lease.holder != mine:
            raise NotLeaseHolder(
                f"cannot {action} lease {lease.lease_id}: it is held by {lease.holder}, not by"
                f" {mine} (only its holder may; an admin can force-drop it, and anyone can"
                " recover it once it has expired)")
        return lease

    def extend(self, lease_id: int, objs: Optional[Sequence[Union[str, LockObject]]] = None,
               holder: Optional[str] = None) -> Lease:
        lease = self._own(self.find(lease_id, objs), holder, "extend")
        now = self.now_ms()
        if lease.expired(now) and self.taken_over(lease):
            raise LockLost([o for o, _ in lease.objects],
                           f"lease {lease_id} expired at {lease.end_utc} and was taken over")
        max_ms = int(self.mgr.settings.max_lease_s * 1000)
        if now + lease.duration_s * 1000 - lease.start_ms > max_ms:
            raise ExceedsMaxLeaseTime(
                f"extending lease {lease_id} past {ms_to_iso(lease.start_ms + max_ms)} would"
                f" exceed the maximum lifetime of {self.mgr.settings.max_lease_s:g}s")
        self.renew([lease])
        return self.find(lease_id, objs)

    def renew(self, leases: Sequence[Lease]) -> None:
        """Push every node of ``leases`` to now + duration in one multi (versioned)."""
        ops = self.mgr.ops
        writes = []
        for lease in leases:
            for r in lease.records:
                version = r.version if r.version is not None else -1
                writes.append(ops.set_op(r.node, (r.data or LockData()).to_bytes(), version))
        try:
            ops.multi_chunked(writes)
        except Exception as exc:
            err = getattr(exc, "error", exc)
            if isinstance(err, (BadVersionError, NoNodeError)):
                raise LockLost([o for lease in leases for o, _ in lease.objects],
                               "a lease was dropped, reaped or changed while renewing") from None
            raise

    def drop(self, lease_id: int, objs: Optional[Sequence[Union[str, LockObject]]] = None,
             holder: Optional[str] = None) -> Lease:
        lease = self._own(self.find(lease_id, objs), holder, "drop")
        self.mgr.delete_nodes([r.node for r in lease.records])
        self._taken.pop(lease_id, None)
        self.mgr.events.release(f"lease:{lease_id}", [list(o) for o in lease.objects], "",
                                counted=False)
        return lease

    def force_drop(self, objs: Optional[Sequence[Union[str, LockObject]]],
                   include_implicit: bool = False) -> int:
        """Drop every lease at or below ``objs`` (all when empty); implicit locks too if asked
        (and recipe followers' and Hive's locks: they are locks, and Hive's linger after a
        cancelled query). Nodes zklock cannot interpret are never deleted: what they are is
        not known."""
        locks = ("zklock", "foreign", "hive")
        if not objs:
            nodes = [r.node for r in self.records(None, explicit_only=not include_implicit)
                     if r.origin in locks]
        else:
            nodes = [r.node for lease in self.list(objs)
                     for r in self._complete(lease).records]
            if include_implicit:
                wanted = [LockObject.parse(o) for o in objs]
                nodes += [r.node for r in self.records(objs, explicit_only=False)
                          if not r.explicit and r.origin in locks
                          and any(w.contains(LockObject.parse(r.object)) for w in wanted)]
        nodes = list(dict.fromkeys(nodes))
        self.mgr.delete_nodes(nodes)
        self.mgr.events.force_drop([[str(o), "*"] for o in objs] if objs else [["*", "*"]],
                                   len(nodes))
        return len(nodes)

    def recover(self, obj: Union[str, LockObject]) -> list[int]:
        """HDFS recoverLease: drop the leases on ``obj`` that are past their soft limit."""
        target = LockObject.parse(obj)
        now = self.now_ms()
        dropped = []
        on_obj = {lease.lease_id for lease in self.list([target])
                  if any(r.object == target.name for r in lease.records)}
        for lease in self.list():
            if lease.lease_id in on_obj and lease.expired(now):
                self.mgr.delete_nodes([r.node for r in lease.records])
                dropped.append(lease.lease_id)
        return dropped

    def reap(self, hard_limit_s: Optional[float] = None) -> list[int]:
        """Delete leases expired for longer than the hard limit; empty object nodes go too."""
        limit = self.mgr.settings.lease_hard_limit_s if hard_limit_s is None else hard_limit_s
        now = self.now_ms()
        reaped = []
        for lease in self.list():
            if now - lease.end_ms > limit * 1000:
                try:
                    self.mgr.delete_nodes([r.node for r in lease.records])
                except MultiFailed:
                    continue
                reaped.append(lease.lease_id)
        return reaped

    def taken_over(self, lease: Lease) -> bool:
        """True when a contender took the expired lease over (it deletes the nodes it skips)."""
        lease = self._complete(lease)
        d = lease.records[0].data if lease.records else None
        names = (d.extra.get("objects") if d is not None else None) or None
        if names:
            return len(lease.records) < len(names)
        paths = {r.node.rsplit("/", 1)[0]: r for r in lease.records}
        listing = self.mgr.ops.with_retry(self.mgr.ops.children_many, paths.keys())
        for path, r in paths.items():
            mine = LockNodeName.parse(r.node.rsplit("/", 1)[1])
            for kid in listing.get(path) or ():
                sib = LockNodeName.parse(kid)
                if sib is None or mine is None or sib.attempt == mine.attempt:
                    continue
                incompatible = Mode.EXCLUSIVE in (sib.mode, mine.mode)
                if incompatible and seq_before(mine.seq, sib.seq):
                    return True
        return False

    def live(self, holder_nodes: Sequence[str]) -> set[str]:
        """Of these explicit holder nodes, the ones not past their soft limit.

        An expired node is taken over: deleted with a version check, so a
        renewal that got in first wins (BadVersion: still live) and the
        expired holder's next renewal fails (its node is gone).
        """
        got = self.mgr.ops.get_many(holder_nodes)
        if not got:
            return set()
        now = self.now_ms()
        out = set()
        for node, item in got.items():
            if item is None:
                continue
            raw, stat = item
            d = LockData.from_bytes(raw)
            if d.duration_s is None or stat.mtime + d.duration_s * 1000 >= now:
                out.add(node)
                continue
            try:
                self.mgr.client.delete(node, version=stat.version)
            except BadVersionError:
                out.add(node)  # renewed just now
            except NoNodeError:
                pass
        return out
