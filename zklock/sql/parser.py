"""The SQL zklock adds to Spark, parsed: SHOW LOCKS, EXPLAIN LOCKS, SET zklock.*, LOCK and
UNLOCK TABLE, SHOW LEASE, DROP FORCE LEASE, RECOVER LEASE.

Spark's parser does not know these statements, so a LockingSession (and the scheduler,
which checks what it stores) recognises them first with :mod:`zklock.sql.tokens` and hands
everything else to Spark. The grammar is tiny and fixed, which is why it is written here
rather than by extending Spark's ANTLR grammar (that needs JVM code on the class path);
running them is zklock.spark.sql_runner's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from ..config import HIVE_ALIASES
from ..errors import InvalidArguments
from .tokens import Cursor, tokenize


@dataclass
class ExplainLocks:
    """EXPLAIN LOCKS <statement>."""

    statement: str


@dataclass
class SetZkLock:
    """SET zklock.<key>=<value> (also spark.zklock.<key>); no value shows the setting."""

    key: str
    value: Optional[str]


@dataclass
class Target:
    """A table (with an optional partition spec) or a database named in zklock SQL."""

    database: Optional[str] = None
    table: Optional[list[str]] = None
    partition: dict[str, str] = field(default_factory=dict)


@dataclass
class ShowLocks:
    """SHOW LOCKS [DATABASE db | [db.]t [PARTITION (k='v', ...)]] [EXTENDED]."""

    target: Target = field(default_factory=Target)
    extended: bool = False


@dataclass
class LockTable:
    """LOCK TABLE t [PARTITION (...)] | LOCK DATABASE db  SHARED|EXCLUSIVE [FOR n unit]."""

    target: Target
    mode: str
    seconds: Optional[float] = None


@dataclass
class UnlockTable:
    """UNLOCK TABLE t [PARTITION (...)] | UNLOCK DATABASE db."""

    target: Target


@dataclass
class ShowLease:
    """SHOW LEASE[S] [t [, t ...]]."""

    targets: list[Target] = field(default_factory=list)


@dataclass
class DropForceLease:
    """DROP FORCE LEASE [* | t [, t ...]] (every lease when none is named, or ``*``)."""

    targets: list[Target] = field(default_factory=list)


@dataclass
class RecoverLease:
    """RECOVER LEASE t [PARTITION (...)] | RECOVER LEASE DATABASE db (HDFS's recoverLease)."""

    target: Target


Extension = Union[ShowLocks, ExplainLocks, SetZkLock, LockTable, UnlockTable, ShowLease,
                  DropForceLease, RecoverLease]
_UNITS = {"SECOND": 1, "SECONDS": 1, "MINUTE": 60, "MINUTES": 60, "HOUR": 3600, "HOURS": 3600,
          "DAY": 86400, "DAYS": 86400}


def parse_extension(sql: str) -> Optional[Extension]:
    """The zklock statement ``sql`` is, or None when it is for Spark."""
    try:
        head = tokenize(sql, limit=3)
    except InvalidArguments:
        return None  # not ours (Spark's raw strings, say): Spark's parser decides
    if len(head) < 2 or head[0].kind != "word":
        return None
    first, second = head[0].upper, head[1]
    if first in ("LOCK", "UNLOCK") and second.upper in ("TABLE", "DATABASE", "SCHEMA"):
        cur = Cursor(sql, tokenize(sql), 1)
        target = _target(cur)
        if first == "UNLOCK":
            cur.end()
            return UnlockTable(target)
        mode_tok = cur.take()
        if mode_tok.upper not in ("SHARED", "EXCLUSIVE"):
            raise InvalidArguments(f"expected SHARED or EXCLUSIVE at position {mode_tok.start},"
                                   f" got {mode_tok.text!r}")
        seconds = None
        if cur.keyword("FOR"):
            amount = cur.take()
            unit = cur.take()
            if amount.kind != "number" or unit.upper not in _UNITS:
                raise InvalidArguments(f"expected FOR <n> SECONDS|MINUTES|HOURS|DAYS at"
                                       f" position {amount.start}")
            seconds = float(amount.text) * _UNITS[unit.upper]
        cur.end()
        return LockTable(target, "X" if mode_tok.upper == "EXCLUSIVE" else "S", seconds)
    if first == "SHOW" and second.upper in ("LEASE", "LEASES"):
        cur = Cursor(sql, tokenize(sql), 2)
        return ShowLease(_targets(cur))
    if first == "RECOVER" and second.upper in ("LEASE", "LEASES"):
        cur = Cursor(sql, tokenize(sql), 2)
        if cur.peek() is None or cur.peek().text in (";", "*"):
            raise InvalidArguments("expected RECOVER LEASE <table> [PARTITION (...)]"
                                   " or RECOVER LEASE DATABASE <db>")
        target = _target(cur)
        cur.end()
        return RecoverLease(target)
    if first == "DROP" and second.upper == "FORCE":
        cur = Cursor(sql, tokenize(sql), 2)
        if not cur.keyword("LEASE", "LEASES"):
            raise InvalidArguments("expected DROP FORCE LEASE [table, ...]")
        return DropForceLease(_targets(cur))
    if first == "SHOW" and second.upper == "LOCKS":
        return _show_locks(Cursor(sql, tokenize(sql), 2))
    if first == "EXPLAIN" and second.upper == "LOCKS":
        rest = sql[second.end:].strip()
        if not rest:
            raise InvalidArguments("EXPLAIN LOCKS needs a statement")
        return ExplainLocks(rest.rstrip(";").strip())
    rest = sql[head[0].end:].strip().rstrip(";").strip()
    key_text = rest.partition("=")[0].strip().lower()
    # every zklock key is zklock's to set or refuse: none goes to Spark unread
    if first == "SET" and (key_text.startswith(("zklock.", "spark.zklock."))
                           or key_text in HIVE_ALIASES):
        key, eq, value = rest.partition("=")
        key = key.strip().lower()
        if key.startswith("spark."):
            key = key[len("spark."):]
        return SetZkLock(key, value.strip() if eq else None)
    return None


def _show_locks(cur: Cursor) -> ShowLocks:
    out = ShowLocks()
    tok = cur.peek()
    if tok is not None and tok.text != ";" and tok.upper != "EXTENDED":
        out.target = _target(cur)
    out.extended = cur.keyword("EXTENDED")
    cur.end()
    return out


def _target(cur: Cursor) -> Target:
    """TABLE name [PARTITION (...)] | DATABASE name, or a bare table name."""
    if cur.keyword("DATABASE", "SCHEMA"):
        return Target(database=cur.identifier("database name"))
    cur.keyword("TABLE")
    parts = [cur.identifier("table name")]
    while (nxt := cur.peek()) is not None and nxt.text == ".":
        cur.take()
        parts.append(cur.identifier("table name"))
    if len(parts) > 3:
        raise InvalidArguments(f"bad table name {'.'.join(parts)!r}")
    out = Target(table=parts)
    if cur.keyword("PARTITION"):
        out.partition = _partition_spec(cur)
    return out


def _targets(cur: Cursor) -> list[Target]:
    """Comma-separated targets; none, or the lease API's ``*``, means every one."""
    out: list[Target] = []
    first = cur.peek()
    if first is not None and first.kind == "word" and first.text == "*":
        cur.take()
        cur.end()
        return out
    while (tok := cur.peek()) is not None and tok.text != ";":
        if tok.kind == "word" and tok.text == "*":
            raise InvalidArguments(f"'*' (every lease) cannot be mixed with names, at position"
                                   f" {tok.start}")
        out.append(_target(cur))
        sep = cur.peek()
        if sep is None or sep.text == ";":
            break
        if sep.text != ",":
            raise InvalidArguments(f"expected ',' between names at position {sep.start},"
                                   f" got {sep.text!r}")
        cur.take()
    cur.end()
    return out


def _partition_spec(cur: Cursor) -> dict[str, str]:
    spec: dict[str, str] = {}
    cur.expect("(")
    while True:
        key = cur.identifier("partition column")
        cur.expect("=")
        value = cur.take()
        if value.kind not in ("string", "number", "word"):
            raise InvalidArguments(f"expected a partition value at position {value.start}")
        spec[key] = value.text
        sep = cur.take()
        if sep.text == ")":
            return spec
        if sep.text != ",":
            raise InvalidArguments(f"expected ',' or ')' at position {sep.start}")
