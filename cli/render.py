"""Aligned text tables for human output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    """A value as a person reads it: yes/no for a flag, nothing for none."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    return text.replace("\n", " ").replace("\t", " ")


#: How much of a statement's text a table shows (--json gives all of it).
QUERY_WIDTH = 100


def brief(value: Any, width: int = QUERY_WIDTH) -> str:
    """``value`` as :func:`cell` writes it, on one line, cut to ``width`` characters (an
    ellipsis where it was cut): a node's data is another client's too, any JSON."""
    one = " ".join(cell(value).split())
    return one if len(one) <= width else one[:width - 1] + "\u2026"


def table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """Left-aligned columns under an upper-case header."""
    body = [[cell(r.get(c)) for c in columns] for r in rows]
    header = [c.upper() for c in columns]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(lines)
