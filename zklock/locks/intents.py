"""Intents: a denied request's place in the queue, so that nobody starves (issue 13).

Hive's protocol (and ours before intents) denies a conflicting request and
lets it retry the whole set later, keeping no memory of it: a writer facing
a stream of overlapping readers can be denied for ever, and so can a reader
facing a stream of writers. Queue-based recipes (Curator, ZooKeeper's own)
avoid that by waiting in the queue; we do not wait in ZooKeeper.

A request denied with retries left takes a *ticket*, the zxid of its denied
create multi (unique, and ordered as ZooKeeper ordered the transactions), and
leaves an *intent* on every object it wants, in the mode it wants it there:
an ephemeral sequential child ``.intent-<s|x>-<ticket>-<seq>`` of the object
node, created in the same multi that undoes the denied attempt. A request is
then denied on an object by an intent of a conflicting mode with an older
ticket, as PostgreSQL's lock manager denies a request that conflicts with one
queued ahead of it. Intents sit beside the lock nodes, so the sibling read
that already follows the create multi sees them: no extra round trip, and an
uncontended request never writes one.

The intent's owner may disregard a conflicting zklock lock node created after
its intent (a higher sequence number) by a request with a newer ticket or
none: that node's writer honours intents (``protocol`` 2 in its data), read
the siblings after creating it, saw the intent and is undoing its attempt. A
granted implicit set keeps its intents until it releases (in the same
multi), so such a writer can never read the siblings after the intent went
and before the holder let go. Leases outlive their session and their
ephemeral intents, so a lease never disregards anything. docs/design.md
("Fairness") has the argument that this neither deadlocks nor livelocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Optional

from .locknode import (
    Child,
    ChildKind,
    IntentName,
    LockData,
    blocks,
    classify,
    conflicts_now,
    intent_blocks,
    seq_before,
)
from .lockrequest import LockTarget
from .mode import Mode
from .objects import is_object_component


@dataclass
class Request:
    """One acquire call across its attempts: its ticket, its intents and its lock data."""

    targets: list[LockTarget]
    paths: dict[LockTarget, str]
    explicit: bool
    data: LockData
    raw: bytes = b""
    #: how its lock nodes are named and what they hold: recipe (``raw``) or hive (Hive's
    #: lock data carrying this record and the attempt id: :meth:`node_data`)
    naming: str = "recipe"
    client_ip: str = ""
    ticket: int = 0  # 0 until the first denial
    #: object path -> our intent nodes under it (normally one)
    intents: dict[str, list[str]] = field(default_factory=dict)
    #: the current attempt will be retried if denied: leave intents when it is
    leave_intents: bool = False
    #: a multi leaving intents lost its reply: ZooKeeper may hold intents of this request
    #: that :attr:`intents` does not list (found by ticket when the request ends)
    unsure_intents: bool = False

    def __post_init__(self) -> None:
        self.levels = {t: (1 if t.obj.table is None else 2 + len(t.obj.partition))
                       for t in self.targets}
        if not self.raw:
            self.raw = self.data.to_bytes()

    def node_data(self, attempt: str) -> bytes:
        """What an attempt's lock nodes hold. Hive's names carry no attempt id, so with
        node_naming=hive the id is in the data, where a retried create finds its nodes."""
        if self.naming != "hive":
            return self.raw
        record = LockData(**{**self.data.__dict__, "extra": {**self.data.extra,
                                                              "attempt": attempt}})
        return record.hive_bytes(self.client_ip)

    @property
    def may_disregard(self) -> bool:
        """Whether this request may disregard newer zklock nodes behind its intents."""
        return self.ticket != 0 and not self.explicit

    def take_ticket(self, zxid: int) -> None:
        """The first denial's create multi gives the ticket; later lock nodes record it."""
        if self.ticket or zxid <= 0:
            return
        self.ticket = zxid
        self.data.ticket = zxid
        self.raw = self.data.to_bytes()

    def saw(self, path: str, own: list[Child]) -> None:
        """Record our intents found in a fresh listing of ``path`` (none: they are gone)."""
        if own:
            self.intents[path] = [f"{path}/{c.name}" for c in own]
        else:
            self.intents.pop(path, None)

    def gone(self, path: str) -> None:
        self.intents.pop(path, None)

    def missing_intents(self) -> list[LockTarget]:
        """Targets without an intent of ours (as far as the last listings told)."""
        return [t for t in self.targets if self.paths[t] not in self.intents]

    def intent_prefix(self, target: LockTarget) -> str:
        return f"{self.paths[target]}/{IntentName.prefix(target.mode, self.ticket)}"

    def intent_nodes(self) -> list[str]:
        return [n for nodes in self.intents.values() for n in nodes]

    def intent_marker(self) -> str:
        """What every intent name of this request, and no other node's name, contains: its
        ticket as :class:`~zklock.locks.locknode.IntentName` writes it."""
        return f"-{self.ticket:016x}-"


@dataclass
class View:
    """What one object's children say about our request there."""

    conflicts: list[Child] = field(default_factory=list)
    #: conflicting zklock lock nodes created after our intent: their writers defer to us
    #: unless their data says otherwise (checked by the caller)
    behind: list[Child] = field(default_factory=list)
    own: list[Child] = field(default_factory=list)


#: what an uncontended listing says (shared, never modified)
NOTHING = View()


def judge(kids: Optional[Iterable[str]], level: int, mode: Mode, mine: Optional[int],
          attempt: str, ticket: int, may_disregard: bool, own_name: str = "") -> View:
    """Apply the grant rule, the intent rule and the fail-closed rule to one listing.

    ``mine`` is the sequence number of our lock node ``own_name`` (None in the
    pre-read, before it exists: then every conflicting lock counts). Lock nodes of
    our own attempt and intents of our own ticket are ours, never conflicts. An
    uncontended listing (our node and object nodes) returns :data:`NOTHING`
    without building anything: this runs for every object of every attempt.
    """
    view: Optional[View] = None
    locks: list[Child] = []
    for kid in kids or ():
        if kid == own_name:
            continue
        if kid[:1] not in ("r", "w", ".") and is_object_component(kid, level + 1):
            continue  # an object node one level down: the common case, decided cheaply
        if view is None:
            view = View()
        c = classify(kid, level)
        if c.kind is ChildKind.LOCK:
            n = c.lock
            assert n is not None
            if not n.foreign and n.attempt == attempt:
                continue
            if blocks(mode, mine, n) if mine is not None else conflicts_now(mode, n):
                locks.append(c)
        elif c.kind is ChildKind.INTENT:
            i = c.intent
            assert i is not None
            if ticket and i.ticket == ticket:
                view.own.append(c)
            elif intent_blocks(mode, ticket, i):
                view.conflicts.append(c)
        elif c.kind is ChildKind.UNKNOWN:
            view.conflicts.append(c)  # fail closed: it may be a lock we cannot read
    if view is None:
        return NOTHING
    for c in locks:
        n = c.lock
        assert n is not None
        if (may_disregard and not n.foreign
                and any(seq_before(o.seq, n.seq) for o in view.own)):
            view.behind.append(c)
        else:
            view.conflicts.append(c)
    return view


def defers_to(data: LockData, ticket: int, protocol: int) -> bool:
    """Whether the writer of a lock node with ``data`` denies itself on our intent."""
    theirs = data.ticket if isinstance(data.ticket, int) else 0
    honours = isinstance(data.protocol, int) and data.protocol >= protocol
    return honours and (theirs == 0 or theirs > ticket)
