"""Lock nodes, intents and everything else an object node's children can be.

A lock node is a sequential child of an object node whose name starts with
``read-`` or ``write-`` and ends in ZooKeeper's sequence suffix (``%010d``: ten
digits, or a minus sign and nine or ten digits). That is ZooKeeper's own
shared-lock recipe, so a client following the recipe literally
(``write-0000000001``) takes part in the same queue: whatever else such a name
holds, it is a lock, of the mode its prefix says (a *foreign* lock when zklock
cannot tell its holder from its name).

zklock's own lock nodes are named ``read-<k><attempt>-<seq>`` or
``write-<k><attempt>-<seq>`` where ``<k>`` is ``i`` for an implicit
(ephemeral) lock and ``e`` for an explicit lease (persistent), and
``<attempt>`` is a random id per acquire attempt. The attempt id is what lets
a create retried after connection loss find its own node instead of leaving
an orphan (Curator's "protected" create).

Hive's ZooKeeperHiveLockManager names its lock nodes ``LOCK-SHARED-<seq>``,
``LOCK-EXCLUSIVE-<seq>`` and ``LOCK-SEMI_SHARED-<seq>`` under the same object
layout, in the same sequence counter per object node: they are locks too, read
as S, X and (see :data:`HIVE_MODES`) S, and ordered with zklock's nodes by their
sequence numbers. With ``node_naming=hive`` zklock names its own nodes so
(Hive's parser takes the number right after the mode, so nothing else can be in
the name), and its node data is Hive's (:meth:`LockData.hive_bytes`).

An *intent* (``.intent-<s|x>-<ticket>-<seq>``, ephemeral and sequential) is
left by a denied request that will retry: the place in the queue that
deny-and-retry otherwise forgets (docs/design.md, "Fairness"). Its name starts
with a dot, which no database, table or partition key can, so it is never
mistaken for an object node.

Any other child is either an object node one level down (a table under a
database, ``k=v`` under a table or partition) or a node zklock cannot
interpret; :func:`classify` tells which, and such a node is never skipped:
the grant check treats it as an exclusive lock (fail closed) and ``show``
lists it.

ZooKeeper's sequence counter is a signed 32-bit int per parent and wraps
(kazoo #606). Sequence numbers are compared with serial-number arithmetic
(RFC 1982) over 2**32, so the order stays right across the wrap as long as no
live lock node under an object is older than 2**31 later creates under the
same object. That bound is documented in docs/design.md and tested.
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
import json
import re
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any, Optional

from .mode import Mode
from .objects import is_object_component

_ZKLOCK_HEAD = re.compile(r"^(read|write)-([ie])([0-9a-f]{24})-$")
#: zklock's own names with a positive sequence number: the common case, parsed in one match
_ZKLOCK_FAST = re.compile(r"(read|write)-([ie])([0-9a-f]{24})-([0-9]{10})")
_INTENT_HEAD = re.compile(r"^\.intent-([sx])-([0-9a-f]{16})-$")
_DIGITS10 = re.compile(r"[0-9]{10}")
_DIGITS9 = re.compile(r"[0-9]{9}")
_WRAP = 1 << 32
_HALF = 1 << 31
INTENT_PREFIX = ".intent-"
#: Hive's lock node names: ``LOCK-<mode>-`` and the sequence number.
HIVE_PREFIX = "LOCK-"
#: Hive's modes as zklock reads them. Hive's own lock manager lets a SEMI_SHARED holder
#: block nobody (its conflict check looks at SHARED and EXCLUSIVE nodes only) while the
#: mode stands for a write in progress: zklock reads it as S, so its X waits (more, never
#: less) and its S does not.
HIVE_MODES = {"SHARED": Mode.SHARED, "EXCLUSIVE": Mode.EXCLUSIVE, "SEMI_SHARED": Mode.SHARED}
#: Version of the lock protocol zklock's lock nodes record in their data. 2: the writer of
#: the node honours intents (it denies itself on seeing an older conflicting intent), which
#: is what lets an intent's owner disregard that node (docs/design.md, "Fairness").
PROTOCOL = 2


def split_sequence(name: str) -> Optional[tuple[str, int]]:
    """``(head, seq)`` when ``name`` ends in ZooKeeper's sequence suffix, else None.

    ZooKeeper appends ``String.format("%010d", seq)``: ten digits, or for a
    negative (wrapped) counter a minus sign and nine digits, or ten digits
    below -999999999. The recipe's prefixes end in ``-``, so such a ten-digit
    negative shows as ``--`` followed by ten digits.
    """
    if len(name) >= 10 and _DIGITS10.fullmatch(name, len(name) - 10):
        head, value = name[:-10], int(name[-10:])
        if head.endswith("--") and 10**9 <= value <= _HALF:
            return head[:-1], -value
        return (head, value) if value < _HALF else None
    if len(name) >= 10 and name[-10] == "-" and _DIGITS9.fullmatch(name, len(name) - 9):
        return name[:-10], -int(name[-9:])
    return None


@dataclass(frozen=True)
class LockNodeName:
    """A parsed lock node name: zklock's own, a recipe follower's (``foreign``), or one
    named as Hive names them (``hive``, also ``foreign``: its name says no holder)."""

    mode: Mode
    explicit: bool
    attempt: str  # "" for a foreign node
    seq: int
    foreign: bool = False
    hive: bool = False

    @staticmethod
    def prefix(mode: Mode, explicit: bool, attempt: str, naming: str = "recipe") -> str:
        """The name to create (ZooKeeper appends the sequence number)."""
        if naming == "hive":
            return f"{HIVE_PREFIX}{'EXCLUSIVE' if mode is Mode.EXCLUSIVE else 'SHARED'}-"
        return f"{mode.node_prefix}-{'e' if explicit else 'i'}{attempt}-"

    @classmethod
    def parse(cls, name: str) -> Optional[LockNodeName]:
        """The parsed lock node, or None for a child that is not a lock node."""
        if name.startswith(HIVE_PREFIX):
            return cls._parse_hive(name)
        if not name.startswith(("read-", "write-")):
            return None
        m = _ZKLOCK_FAST.fullmatch(name)
        if m is not None and int(m.group(4)) < _HALF:
            return cls(Mode.SHARED if m.group(1) == "read" else Mode.EXCLUSIVE,
                       m.group(2) == "e", m.group(3), int(m.group(4)))
        split = split_sequence(name)
        if split is None:
            return None
        head, seq = split
        m = _ZKLOCK_HEAD.match(head)
        if m is None:
            return cls(Mode.from_node_prefix(head.split("-", 1)[0]), False, "", seq, True)
        return cls(Mode.from_node_prefix(m.group(1)), m.group(2) == "e", m.group(3), seq)

    @classmethod
    def _parse_hive(cls, name: str) -> Optional[LockNodeName]:
        split = split_sequence(name)
        if split is None:
            return None
        head, seq = split
        mode = HIVE_MODES.get(head[len(HIVE_PREFIX):-1]) if head.endswith("-") else None
        if mode is None:
            return None
        return cls(mode, False, "", seq, foreign=True, hive=True)


@dataclass(frozen=True)
class IntentName:
    """A parsed intent: the mode its request wants and its place in the queue (ticket)."""

    mode: Mode
    ticket: int
    seq: int

    @staticmethod
    def prefix(mode: Mode, ticket: int) -> str:
        return f"{INTENT_PREFIX}{mode.value.lower()}-{ticket:016x}-"

    @classmethod
    def parse(cls, name: str) -> Optional[IntentName]:
        if not name.startswith(INTENT_PREFIX):
            return None
        split = split_sequence(name)
        if split is None:
            return None
        m = _INTENT_HEAD.match(split[0])
        if m is None:
            return None
        return cls(Mode.SHARED if m.group(1) == "s" else Mode.EXCLUSIVE, int(m.group(2), 16),
                   split[1])


class ChildKind(enum.Enum):
    LOCK = "lock"        # read-/write- with a sequence number (zklock's or foreign)
    INTENT = "intent"    # a waiting request's place in the queue
    OBJECT = "object"    # an object node one level down
    AREA = "area"        # zklock's own folders at the root (.waits, .reaper)
    UNKNOWN = "unknown"  # anything else: never skipped, treated as an exclusive lock


@dataclass(frozen=True)
class Child:
    """One child of an object node (or of the root), classified."""

    name: str
    kind: ChildKind
    lock: Optional[LockNodeName] = None
    intent: Optional[IntentName] = None

    @property
    def seq(self) -> int:
        if self.lock is not None:
            return self.lock.seq
        if self.intent is not None:
            return self.intent.seq
        return 0


def classify(name: str, level: int) -> Child:
    """What the child ``name`` of a node ``level`` deep below the root is.

    ``level`` is 0 for the root, 1 for a database, 2 for a table, 3+ for a partition.
    """
    lock = LockNodeName.parse(name)
    if lock is not None:
        return Child(name, ChildKind.LOCK, lock=lock)
    if name.startswith("."):
        if level == 0:
            return Child(name, ChildKind.AREA)
        intent = IntentName.parse(name)
        if intent is not None:
            return Child(name, ChildKind.INTENT, intent=intent)
        return Child(name, ChildKind.UNKNOWN)
    if is_object_component(name, level + 1):
        return Child(name, ChildKind.OBJECT)
    return Child(name, ChildKind.UNKNOWN)


def seq_before(a: int, b: int) -> bool:
    """True when sequence ``a`` was issued before ``b`` (wrap-safe, RFC 1982)."""
    d = (b - a) % _WRAP
    return 0 < d < _HALF


def blocks(requested: Mode, mine: int, sibling: LockNodeName) -> bool:
    """The recipe's grant rule (Hive's): does this sibling deny my node with sequence ``mine``?

    S is denied by a lower-numbered ``write-``; X by any lower-numbered node.
    """
    if not seq_before(sibling.seq, mine):
        return False
    return not requested.compatible_with(sibling.mode)


def conflicts_now(requested: Mode, sibling: LockNodeName) -> bool:
    """Would this existing sibling deny a node created now? (pre-read check)"""
    return not requested.compatible_with(sibling.mode)


def intent_blocks(requested: Mode, ticket: int, intent: IntentName) -> bool:
    """Does another request's intent deny a request holding ``ticket`` (0: none yet)?

    Only an older intent (a smaller ticket: it was denied first) of a conflicting
    mode does. A request without a ticket is newer than every intent.
    """
    if ticket and intent.ticket >= ticket:
        return False
    return not requested.compatible_with(intent.mode)


@dataclass
class LockData:
    """The JSON a lock node holds: who, where, for which query, since when."""

    user: str = ""
    host: str = ""
    pid: int = 0
    session: str = ""
    query_id: str = ""
    query: str = ""
    acquired_at: str = ""
    kind: str = "implicit"
    holder: str = ""
    job: str = ""
    duration_s: Optional[float] = None
    ticket: int = 0  # the request's place in the queue once it was denied (0: none)
    protocol: int = 0  # PROTOCOL when written by a zklock that honours intents
    app: str = ""  # the Spark application id of the holder, when a Spark layer took it
    extra: dict = field(default_factory=dict)

    def who(self) -> str:
        """The holder in one phrase, as denials and the wait-for view name it: a lease by
        its holder (whoever renews or drops it), a statement's lock by its process and query."""
        if self.holder and self.duration_s is not None:
            return f"the lease of {self.holder} ({self.user or '?'}@{self.host or '?'})"
        return f"{self.user or '?'}@{self.host or '?'} pid {self.pid} query {self.query_id or '-'}"

    def to_bytes(self) -> bytes:
        return json.dumps(self._fields(), separators=(",", ":"), ensure_ascii=False).encode()

    def _fields(self) -> dict[str, Any]:
        # the fields as they are: dataclasses.asdict deep-copies each, a cost on every
        # acquire that JSON does not need
        data = {f.name: v for f in dataclass_fields(self)
                if (v := getattr(self, f.name)) not in (None, "", {}) and f.name != "extra"
                and not (f.name == "ticket" and not v)}
        data.update({k: v for k, v in self.extra.items() if k not in data})
        return data

    def hive_bytes(self, client_ip: str) -> bytes:
        """Hive's lock data, ``queryId:lockTime:IMPLICIT|EXPLICIT:queryString:clientIp``,
        which Hive's SHOW LOCKS reads, then ``:zklock=<base64 of this record's JSON>``:
        Hive splits on ':' and reads five fields, so a sixth carries zklock's own record
        (holder, session, ticket, protocol) where Hive never trips over it. Hive strips
        nothing from a query string, and a ':' in it would shift Hive's fields: here it
        is written as a space."""
        ms = _iso_to_ms(self.acquired_at) or int(dt.datetime.now(dt.timezone.utc)
                                                 .timestamp() * 1000)
        own = base64.urlsafe_b64encode(self.to_bytes()).decode()
        fields = [self.query_id.replace(":", "_") or "zklock", str(ms),
                  "EXPLICIT" if self.kind == "explicit" else "IMPLICIT",
                  " ".join(self.query.replace(":", " ").split()), client_ip,
                  f"{HIVE_OWN}{own}"]
        return ":".join(fields).encode()

    @classmethod
    def from_bytes(cls, raw: Optional[bytes]) -> LockData:
        """Parse tolerantly: a node written by another tool still shows up, and a node in
        Hive's format (Hive's, or zklock's with node_naming=hive) reads as Hive wrote it."""
        try:
            data: Any = json.loads(raw.decode()) if raw else {}
        except (ValueError, UnicodeDecodeError):
            hive = cls.from_hive(raw)
            if hive is not None:
                return hive
            return cls(extra={"raw": raw[:200].decode("utf-8", "replace") if raw else ""})
        if not isinstance(data, dict):
            return cls(extra={"raw": str(data)[:200]})
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        out = cls(**{k: v for k, v in data.items() if k in known})
        out.extra = {k: v for k, v in data.items() if k not in known}
        for name in ("ticket", "protocol"):  # compared as numbers: anything else means none
            value = getattr(out, name)
            if not isinstance(value, int) or isinstance(value, bool):
                setattr(out, name, 0)
        return out

    @classmethod
    def from_hive(cls, raw: Optional[bytes]) -> Optional[LockData]:
        """Hive's ``queryId:lockTime:IMPLICIT|EXPLICIT:queryString[:clientIp]`` (and zklock's
        own record after it); None for anything else."""
        try:
            fields = raw.decode().split(":") if raw else []
        except UnicodeDecodeError:
            return None
        if len(fields) < 4 or fields[2] not in ("IMPLICIT", "EXPLICIT"):
            return None
        own = next((f[len(HIVE_OWN):] for f in fields[5:] if f.startswith(HIVE_OWN)), None)
        if own is not None:
            try:
                return cls.from_bytes(base64.urlsafe_b64decode(own.encode()))
            except (ValueError, TypeError):
                pass
        acquired = ""
        if fields[1].isascii() and fields[1].isdigit():
            acquired = dt.datetime.fromtimestamp(int(fields[1]) / 1000, tz=dt.timezone.utc
                                                 ).isoformat(timespec="milliseconds")
        return cls(query_id=fields[0], query=fields[3], acquired_at=acquired,
                   host=fields[4] if len(fields) > 4 else "", user="hive",
                   kind="explicit" if fields[2] == "EXPLICIT" else "implicit",
                   extra={"written_by": "hive"})


#: How zklock's own record starts in Hive's lock data (a sixth field Hive ignores).
HIVE_OWN = "zklock="


def _iso_to_ms(text: str) -> Optional[int]:
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, TypeError):
        return None
