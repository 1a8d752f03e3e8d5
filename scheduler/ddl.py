"""Hive's scheduled-query DDL: CREATE, ALTER and DROP SCHEDULED QUERY.

Grammar (keywords case-insensitive)::

    CREATE SCHEDULED QUERY <name> <schedule> [EXECUTED AS '<user>']
        [ENABLED | DISABLED] [DEFINED] AS <statement>
    ALTER SCHEDULED QUERY <name> ( <schedule> | EXECUTED AS '<user>' | ENABLE[D]
        | DISABLE[D] | DEFINED AS <statement> | EXECUTE )
    DROP SCHEDULED QUERY <name>

    <schedule> := CRON '<expr>' [TIMEZONE '<zone>']
                | EVERY [<n>] SECOND[S]|MINUTE[S]|HOUR[S]|DAY[S]
                    [AT '<time>' | OFFSET BY '<time>'] [TIMEZONE '<zone>']

``TIMEZONE`` is zklock's addition (Hive has one server-wide zone). The
statement is kept as written; the session validates it with Spark's parser.
Spark does not know these statements, so, like zklock's other SQL, they are
recognised with the small tokenizer of :mod:`zklock.sql.tokens`
before Spark sees the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from zklock.errors import InvalidArguments
from zklock.sql.tokens import Cursor, Token, tokenize

from .model import check_name
from .schedule import Schedule, cron, every

_UNITS = {"SECOND", "SECONDS", "MINUTE", "MINUTES", "HOUR", "HOURS", "DAY", "DAYS"}


@dataclass
class CreateScheduledQuery:
    name: str
    schedule: Schedule
    statement: str
    statement_pos: int
    executed_as: Optional[str] = None
    enabled: bool = True


@dataclass
class AlterScheduledQuery:
    """Exactly one change: ``action`` is schedule, executed_as, enable, disable,
    defined_as or execute."""

    name: str
    action: str
    schedule: Optional[Schedule] = None
    executed_as: Optional[str] = None
    statement: Optional[str] = None
    statement_pos: int = 0


@dataclass
class DropScheduledQuery:
    name: str


ScheduledDdl = Union[CreateScheduledQuery, AlterScheduledQuery, DropScheduledQuery]


def is_scheduled_ddl(sql: str) -> bool:
    """True when ``sql`` starts CREATE|ALTER|DROP SCHEDULED QUERY (cheap; no full parse)."""
    try:
        head = tokenize(sql, limit=3)
    except InvalidArguments:
        return False
    return (len(head) >= 2 and head[0].upper in ("CREATE", "ALTER", "DROP")
            and head[1].upper == "SCHEDULED")


def parse_scheduled_ddl(sql: str) -> Optional[ScheduledDdl]:
    """The scheduled-query statement ``sql`` is, or None when it is not one.

    Raises InvalidArguments, with the position of the bad part, when it is
    one but malformed.
    """
    if not is_scheduled_ddl(sql):
        return None
    tokens = tokenize(sql)
    cur = Cursor(sql, tokens, 1)
    verb = tokens[0].upper
    cur.expect("SCHEDULED")
    cur.expect("QUERY")
    name = _name(cur)
    if verb == "DROP":
        cur.end()
        return DropScheduledQuery(name)
    if verb == "CREATE":
        return _create(cur, name)
    return _alter(cur, name)


def _name(cur: Cursor) -> str:
    tok = cur.take()
    if tok.kind not in ("word", "quoted"):
        raise InvalidArguments(f"expected a scheduled query name at position {tok.start},"
                               f" got {tok.text!r}")
    try:
        return check_name(tok.text)
    except InvalidArguments as exc:
        raise InvalidArguments(f"{exc} (at position {tok.start})") from None


def _string(cur: Cursor, what: str) -> Token:
    tok = cur.take()
    if tok.kind != "string":
        raise InvalidArguments(f"expected {what} as a quoted string at position {tok.start},"
                               f" got {tok.text!r}")
    return tok


def _schedule(cur: Cursor, first: Token) -> Schedule:
    """CRON ... or EVERY ..., ``first`` being the CRON/EVERY token already taken."""
    if first.upper == "CRON":
        expr = _string(cur, "the cron expression")
        zone = _timezone(cur)
        try:
            return cron(expr.text, zone)
        except InvalidArguments as exc:
            raise InvalidArguments(f"{exc} (at position {expr.start})") from None
    n = 1
    tok = cur.take()
    if tok.kind == "number":
        if not (tok.text.isascii() and tok.text.isdigit()) or int(tok.text) < 1:
            raise InvalidArguments(f"EVERY needs a positive whole number at position"
                                   f" {tok.start}, got {tok.text!r}")
        n = int(tok.text)
        tok = cur.take()
    if tok.upper not in _UNITS:
        raise InvalidArguments(f"expected SECOND(S), MINUTE(S), HOUR(S) or DAY at position"
                               f" {tok.start}, got {tok.text!r}")
    unit = tok.upper
    at = offset = None
    pos = tok.start
    if cur.keyword("AT"):
        t = _string(cur, "a time such as '02:30'")
        at, pos = t.text, t.start
    elif cur.keyword("OFFSET"):
        cur.expect("BY")
        t = _string(cur, "an offset such as '00:05' or '30s'")
        offset, pos = t.text, t.start
    zone = _timezone(cur)
    try:
        return every(n, unit, at=at, offset=offset, timezone=zone)
    except InvalidArguments as exc:
        raise InvalidArguments(f"{exc} (at position {pos})") from None


def _timezone(cur: Cursor) -> str:
    if cur.keyword("TIMEZONE"):
        return _string(cur, "a timezone such as 'Europe/Paris'").text
    return "UTC"


def _statement(cur: Cursor) -> tuple[str, int]:
    tok = cur.peek()
    if tok is None:
        raise InvalidArguments("AS must be followed by the statement to schedule")
    text = cur.sql[tok.start:].strip().rstrip(";").strip()
    if not text:
        raise InvalidArguments("AS must be followed by the statement to schedule")
    return text, tok.start


def _create(cur: Cursor, name: str) -> CreateScheduledQuery:
    first = cur.take()
    if first.upper not in ("CRON", "EVERY"):
        raise InvalidArguments(f"expected CRON '<expr>' or EVERY <n> <unit> at position"
                               f" {first.start}, got {first.text!r}")
    schedule = _schedule(cur, first)
    executed_as, enabled = None, True
    while True:
        tok = cur.take()
        if tok.upper == "EXECUTED":
            cur.expect("AS")
            executed_as = _user(cur)
        elif tok.upper in ("ENABLED", "ENABLE"):
            enabled = True
        elif tok.upper in ("DISABLED", "DISABLE"):
            enabled = False
        elif tok.upper == "DEFINED":
            cur.expect("AS")
            break
        elif tok.upper == "AS":
            break
        else:
            raise InvalidArguments(f"expected EXECUTED AS, ENABLED, DISABLED or [DEFINED] AS"
                                   f" at position {tok.start}, got {tok.text!r}")
    statement, pos = _statement(cur)
    return CreateScheduledQuery(name, schedule, statement, pos, executed_as, enabled)


def _user(cur: Cursor) -> str:
    tok = cur.take()
    if tok.kind not in ("string", "word", "quoted") or not tok.text.strip():
        raise InvalidArguments(f"expected a user name at position {tok.start}")
    user = tok.text.strip()
    if any(c.isspace() or ord(c) < 32 for c in user) or len(user) > 128:
        raise InvalidArguments(f"bad user name {user!r} at position {tok.start}")
    return user


def _alter(cur: Cursor, name: str) -> AlterScheduledQuery:
    tok = cur.take()
    word = tok.upper
    if word in ("CRON", "EVERY"):
        out = AlterScheduledQuery(name, "schedule", schedule=_schedule(cur, tok))
    elif word == "EXECUTED":
        cur.expect("AS")
        out = AlterScheduledQuery(name, "executed_as", executed_as=_user(cur))
    elif word in ("ENABLE", "ENABLED"):
        out = AlterScheduledQuery(name, "enable")
    elif word in ("DISABLE", "DISABLED"):
        out = AlterScheduledQuery(name, "disable")
    elif word == "SET" and (nxt := cur.peek()) is not None and nxt.upper in (
            "ENABLED", "DISABLED"):
        cur.take()
        out = AlterScheduledQuery(name, "enable" if nxt.upper == "ENABLED" else "disable")
    elif word == "EXECUTE":
        out = AlterScheduledQuery(name, "execute")
    elif word == "DEFINED":
        cur.expect("AS")
        statement, pos = _statement(cur)
        return AlterScheduledQuery(name, "defined_as", statement=statement, statement_pos=pos)
    else:
        raise InvalidArguments(
            f"expected one of CRON, EVERY, EXECUTED AS, ENABLE, DISABLE, DEFINED AS or EXECUTE"
            f" at position {tok.start}, got {tok.text!r}")
    tail = cur.peek()
    if tail is not None and tail.text != ";":
        raise InvalidArguments(f"ALTER SCHEDULED QUERY changes one thing at a time: unexpected"
                               f" {tail.text!r} at position {tail.start}")
    return out
