"""Lock nodes: their names, their order and what they say.

A lock node is a sequential child of an object node, named
``read-<k><attempt>-<seq>`` or ``write-<k><attempt>-<seq>`` where ``<k>`` is
``i`` for an implicit (ephemeral) lock and ``e`` for an explicit lease
(persistent), and ``<attempt>`` is a random id per acquire attempt. The
attempt id is what lets a create retried after connection loss find its own
node instead of leaving an orphan (Curator's "protected" create).

ZooKeeper's sequence counter is a signed 32-bit int per parent and wraps
(kazoo #606). Sequence numbers are compared with serial-number arithmetic
(RFC 1982) over 2**32, so the order stays right across the wrap as long as no
live lock node under an object is older than 2**31 later creates under the
same object. That bound is documented in docs/design.md and tested.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from .mode import Mode

_NAME = re.compile(r"^(read|write)-([ie])([0-9a-f]{24})-(-?\d{1,11})$")
_WRAP = 1 << 32
_HALF = 1 << 31


@dataclass(frozen=True)
class LockNodeName:
    """A parsed lock node name."""

    mode: Mode
    explicit: bool
    attempt: str
    seq: int

    @staticmethod
    def prefix(mode: Mode, explicit: bool, attempt: str) -> str:
        """The name to create (ZooKeeper appends the sequence number)."""
        return f"{mode.node_prefix}-{'e' if explicit else 'i'}{attempt}-"

    @classmethod
    def parse(cls, name: str) -> Optional[LockNodeName]:
        """The parsed name, or None for a child that is not a lock node (an object node)."""
        m = _NAME.match(name)
        if not m:
            return None
        return cls(Mode.from_node_prefix(m.group(1)), m.group(2) == "e", m.group(3),
                   int(m.group(4)))


def seq_before(a: int, b: int) -> bool:
    """True when sequence ``a`` was issued before ``b`` (wrap-safe, RFC 1982)."""
    d = (b - a) % _WRAP
    return 0 < d < _HALF


def blocks(requested: Mode, mine: int, sibling: LockNodeName) -> bool:
    """Seed 001's grant rule: does this sibling deny my node with sequence ``mine``?

    S is denied by a lower-numbered ``write-``; X by any lower-numbered node.
    """
    if not seq_before(sibling.seq, mine):
        return False
    return not requested.compatible_with(sibling.mode)


def conflicts_now(requested: Mode, sibling: LockNodeName) -> bool:
    """Would this existing sibling deny a node created now? (pre-read check)"""
    return not requested.compatible_with(sibling.mode)


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
    extra: dict = field(default_factory=dict)

    def who(self) -> str:
        """The holder in one phrase, as denials and the wait-for view name it."""
        return f"{self.user or '?'}@{self.host or '?'} pid {self.pid} query {self.query_id or '-'}"

    def to_bytes(self) -> bytes:
        data = {k: v for k, v in asdict(self).items() if v not in (None, "", {}) and k != "extra"}
        data.update({k: v for k, v in self.extra.items() if k not in data})
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, raw: Optional[bytes]) -> LockData:
        """Parse tolerantly: a node written by another tool still shows up."""
        try:
            data: Any = json.loads(raw.decode()) if raw else {}
        except (ValueError, UnicodeDecodeError):
            return cls(extra={"raw": raw[:200].decode("utf-8", "replace") if raw else ""})
        if not isinstance(data, dict):
            return cls(extra={"raw": str(data)[:200]})
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        out = cls(**{k: v for k, v in data.items() if k in known})
        out.extra = {k: v for k, v in data.items() if k not in known}
        return out
