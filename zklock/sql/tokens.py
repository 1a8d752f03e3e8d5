"""SQL text as tokens: the one tokenizer of zklock's own SQL and the scheduler's DDL.

Spark's parser does not know zklock's statements (SHOW LOCKS, LOCK TABLE, ...) or the
scheduler's (CREATE SCHEDULED QUERY ...), so they are recognised first with this small
tokenizer, before anything reaches Spark. It knows quotes, backticks, comments and
punctuation, which is all those tiny fixed grammars need; it needs no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import InvalidArguments


@dataclass(frozen=True)
class Token:
    kind: str  # word | quoted (backticks) | string | number | punct
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


_PUNCT = "(),.=;:"
def tokenize(sql: str, limit: Optional[int] = None) -> list[Token]:
    """Tokens of ``sql`` (at most ``limit``); raises InvalidArguments on an unclosed quote."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n and (limit is None or len(out) < limit):
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("--", i):
            nl = sql.find("\n", i)
            i = n if nl < 0 else nl + 1
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            if close < 0:
                raise InvalidArguments("unclosed /* comment")
            i = close + 2
        elif ch in "'\"`":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise InvalidArguments(f"unclosed {ch} quote at position {i}")
                c = sql[j]
                if c == "\\" and ch != "`" and j + 1 < n:
                    buf.append(sql[j + 1])
                    j += 2
                elif c == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # doubled quote
                        buf.append(ch)
                        j += 2
                    else:
                        break
                else:
                    buf.append(c)
                    j += 1
            kind = "quoted" if ch == "`" else "string"
            out.append(Token(kind, "".join(buf), i, j + 1))
            i = j + 1
        elif ch in _PUNCT:
            out.append(Token("punct", ch, i, i + 1))
            i += 1
        else:
            j = i
            while j < n and not sql[j].isspace() and sql[j] not in _PUNCT + "'\"`":
                j += 1
            text = sql[i:j]
            bare = text.replace(".", "", 1).lstrip("+-")
            kind = "number" if bare.isascii() and bare.isdigit() else "word"
            out.append(Token(kind, text, i, j))
            i = j
    return out


class Cursor:
    """A position in a statement's tokens, with the steps a small grammar takes."""

    def __init__(self, sql: str, tokens: list[Token], pos: int = 0) -> None:
        self.sql, self.tokens, self.pos = sql, tokens, pos

    def peek(self) -> Optional[Token]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise InvalidArguments(f"unexpected end of statement: {self.sql.strip()!r}")
        self.pos += 1
        return tok

    def keyword(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.upper in words:
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text.upper() != text.upper() or tok.kind not in ("punct", "word"):
            raise InvalidArguments(f"expected {text!r} at position {tok.start}, got {tok.text!r}")

    def identifier(self, what: str) -> str:
        tok = self.take()
        if tok.kind not in ("word", "quoted"):
            raise InvalidArguments(f"expected a {what} at position {tok.start}, got {tok.text!r}")
        return tok.text

    def end(self) -> None:
        tok = self.peek()
        if tok is not None and tok.text == ";":
            self.pos += 1
            tok = self.peek()
        if tok is not None:
            raise InvalidArguments(f"unexpected {tok.text!r} at position {tok.start}")


def split_statements(text: str) -> list[str]:
    """Statements of a SQL script, split at top-level ';' (not inside quotes or comments)."""
    out, start = [], 0
    for tok in tokenize(text):
        if tok.kind == "punct" and tok.text == ";":
            out.append(text[start:tok.start])
            start = tok.end
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]
