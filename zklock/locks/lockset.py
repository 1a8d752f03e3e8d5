"""LockSet: a granted, all-or-none set of locks that knows when it is lost.

Hive, Curator and kazoo all let a holder go on believing it holds a lock
after its session is gone. A LockSet follows its session: it stops being
valid the moment the connection is suspended (or, when so configured, when
the session is reported expired), tells every ``on_lost`` callback once, and
never reports itself held again. If the same session comes back, the session
watcher re-checks that the set's nodes still exist before trusting it again.

Who moves a set between its states is :class:`~zklock.locks.watcher.SessionWatcher`
(its docstring states the state machine), through the public ``mark_*`` methods;
a set reaches its owner only through :class:`SetOwner`, so this module needs
neither the manager nor the watcher.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from ..errors import LockLost
from .lockrequest import LockTarget
from .mode import Mode
from .objects import LockObject

log = logging.getLogger(__name__)


class State(enum.Enum):
    HELD = "held"
    SUSPENDED = "suspended"
    LOST = "lost"
    RELEASED = "released"


@dataclass(frozen=True)
class HeldLock:
    """One granted lock node of a set."""

    target: LockTarget
    object_path: str
    node_path: str
    czxid: int


@dataclass(frozen=True)
class SoleVersion:
    """A table's node as a grant found it, when the set's node there was its only child and
    nothing had changed under it since that node was made: its path, its czxid (which names
    it: a node removed and made again has another) and its cversion (ZooKeeper counts every
    child created or deleted under a node there).

    Every lock on a table or on one of its partitions is a child of the table's node (a
    partition's lock comes with S on its parents: zklock's, and Hive's own lock manager's).
    So a later grant of the same application that finds the same czxid and this cversion
    plus 2 (this set's node deleted, its own made) proves that no one locked the table in
    between, and so that no locked write changed it: Spark's engine then keeps the file
    listing it took under this set instead of listing the table again
    (zklock/spark/java/engine/FreshListings.java)."""

    path: str
    czxid: int
    cversion: int


def sole_versions(held: list[HeldLock], stats: dict[str, Any]) -> dict[LockObject, SoleVersion]:
    """The tables of ``held`` where its node was alone when granted, from the ZnodeStats
    read right behind the grant's create (``stats``, by object path): alone means one child
    and the node's last child change (its pzxid) being the transaction that made the set's
    node, so that nothing was made or deleted there since. (A sequence number will not do:
    ZooKeeper numbers the creates only, where the cversion counts deletes too.) A table the
    set writes (X on it or on one of its partitions) is left out: its files change after
    the listing, under this very set."""
    out: dict[LockObject, SoleVersion] = {}
    if not stats:
        return out
    written = {h.target.obj.table_name for h in held if h.target.mode is Mode.EXCLUSIVE}
    for h in held:
        if h.target.obj.table_name in written:
            continue
        stat = stats.get(h.object_path)
        if stat is not None and h.czxid and stat.numChildren == 1 and stat.pzxid == h.czxid:
            out[h.target.obj] = SoleVersion(h.object_path, stat.czxid, stat.cversion)
    return out


class SetOwner(Protocol):
    """What a LockSet needs from whoever granted it (zklock/locks/watcher.py's SessionWatcher).

    The owner keeps the live sets and the held gauge; a set tells it when it is lost
    (once) and asks it to release its nodes (once), and nothing else.
    """

    @property
    def connect_string(self) -> str:
        """The connect string (with its chroot) of the ZooKeeper holding the set's nodes."""
        ...

    def set_lost(self, lockset: LockSet, reason: str) -> None:
        """The set was just marked lost: record the loss (lock event, held gauge)."""
        ...

    def release_set(self, lockset: LockSet, wait: bool) -> None:
        """Unregister the set and delete its lock nodes and intents (``wait=False``: send
        the delete without waiting for its reply)."""
        ...

    def confirm_set(self, lockset: LockSet) -> None:
        """Read the set's nodes now, and mark it lost where one is gone."""
        ...


class LockSet:
    """Locks granted together; release them together (or use ``with``)."""

    def __init__(self, owner: Optional[SetOwner], held: list[HeldLock],
                 session_id: Optional[int] = None, query_id: str = "",
                 sole: Optional[dict[LockObject, SoleVersion]] = None) -> None:
        self._owner = owner
        self.held = held
        #: the tables where its node was alone when granted (:class:`SoleVersion`)
        self.sole: dict[LockObject, SoleVersion] = sole or {}
        self.session_id = session_id
        self.query_id = query_id
        self.attempts = 1  # > 1 when the grant came after denied attempts (a wait)
        #: whom it waited for: its last denial's blockers, as denials name them ("" if none)
        self.waited_for = ""
        self.set_id = ""  # names the set in lock events (grant, release, loss)
        self.granted_at = time.monotonic()  # its age, for zklock_lock_oldest_held_seconds
        self.counted = False  # its locks are in the held gauge (granted, not yet lost)
        #: intents the request left while it was denied, kept until release so that a
        #: newer request that saw them is never granted beside this set (zklock/locks/intents.py)
        self.intents: list[str] = []
        self._state = State.HELD
        self._reason = ""
        self._callbacks: list[Callable[[LockSet], None]] = []
        self._lock = threading.Lock()

    @classmethod
    def empty(cls) -> LockSet:
        """A valid set holding nothing (concurrency support switched off)."""
        return cls(None, [])

    # ---- what is held -----------------------------------------------------
    @property
    def objects(self) -> list[str]:
        return [h.target.obj.name for h in self.held]

    @property
    def locks(self) -> list[list[str]]:
        """[object, mode] pairs, as lock events record them."""
        return [[h.target.obj.name, h.target.mode.value] for h in self.held]

    @property
    def targets(self) -> list[LockTarget]:
        return [h.target for h in self.held]

    @property
    def node_paths(self) -> list[str]:
        """The full paths of the set's lock nodes (root included, relative to any chroot)."""
        return [h.node_path for h in self.held]

    @property
    def connect_string(self) -> Optional[str]:
        """The connect string (with its chroot) of the ZooKeeper holding the set's nodes;
        None for a set without an owner (concurrency off). Spark's job commit checks the
        nodes there (zklock/spark/java/commit/CommitFence.java)."""
        if self._owner is None:
            return None
        return self._owner.connect_string

    @property
    def fencing_token(self) -> int:
        """The largest czxid of the set's nodes: increases across every later conflicting grant."""
        return max((h.czxid for h in self.held), default=0)

    @property
    def state(self) -> State:
        return self._state

    @property
    def lost_reason(self) -> str:
        """Why the set is not held: the reason it was lost (or suspended); empty while it
        is held and never suspended or lost."""
        return self._reason

    @property
    def is_valid(self) -> bool:
        """True only while the set is held and its session is connected."""
        return self._state is State.HELD

    def confirm(self) -> bool:
        """Is the set still held, every node of it there now? One read, for a caller that
        must not wait for its owner's periodic check to learn of a node deleted a moment ago
        (a failed statement's end, which may have failed for that very reason); a set with
        a node gone is lost from then on."""
        if self._state is State.HELD and self._owner is not None:
            self._owner.confirm_set(self)
        return self.is_valid

    def check(self) -> None:
        """Raise :class:`LockLost` unless the set is still held."""
        if self._state is State.HELD:
            return
        if self._state is State.RELEASED:
            raise LockLost(self.objects, "the lock set was released")
        raise LockLost(self.objects, self._reason or "session lost")

    def on_lost(self, callback: Callable[[LockSet], None]) -> None:
        """Call ``callback(lockset)`` once when the set is lost (at once if it already is)."""
        with self._lock:
            if self._state is not State.LOST:
                self._callbacks.append(callback)
                return
        self._run_callback(callback)

    # ---- state changes (driven by the session watcher, zklock/locks/watcher.py) --
    def mark_suspended(self, reason: str) -> None:
        """HELD -> SUSPENDED: not valid until :meth:`mark_resumed`; no-op in any other state."""
        with self._lock:
            if self._state is State.HELD:
                self._state = State.SUSPENDED
                self._reason = reason

    def mark_resumed(self) -> None:
        """SUSPENDED -> HELD, once its nodes were found still there; no-op otherwise."""
        with self._lock:
            if self._state is State.SUSPENDED:
                self._state = State.HELD
                self._reason = ""

    def mark_lost(self, reason: str) -> bool:
        """HELD or SUSPENDED -> LOST: tell the owner, then every ``on_lost`` callback, once.

        False if the set was already lost or released.
        """
        with self._lock:
            if self._state in (State.LOST, State.RELEASED):
                return False
            self._state = State.LOST
            self._reason = reason
            callbacks, self._callbacks = self._callbacks, []
        log.warning("lock set %s lost: %s", self.objects[:3], reason)
        if self._owner is not None:
            self._owner.set_lost(self, reason)
        for cb in callbacks:
            self._run_callback(cb)
        return True

    def _run_callback(self, cb: Callable[[LockSet], None]) -> None:
        try:
            cb(self)
        except Exception:  # a user's callback must not break the session thread
            log.exception("on_lost callback failed")

    # ---- release ----------------------------------------------------------
    def release(self, wait: bool = True) -> None:
        """Delete the set's nodes in one multi. Idempotent.

        ``wait=False`` sends the multi without waiting for the reply: this
        client's later requests still see the locks gone (ZooKeeper keeps a
        session's order), and the caller saves a round trip.
        """
        with self._lock:
            if self._state is State.RELEASED:
                return
            self._state = State.RELEASED
            self._callbacks = []
        if self._owner is not None and self.held:
            self._owner.release_set(self, wait)

    def __enter__(self) -> LockSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return (f"LockSet({len(self.held)} locks, state={self._state.value},"
                f" token={self.fencing_token})")
