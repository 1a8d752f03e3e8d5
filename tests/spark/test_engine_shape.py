"""The engine's Java stays split by job (docs/architecture.md): no class of
zklock/spark/java/engine over 400 lines, no method over 40. A class that grows past them
holds a second job: give it a file of its own."""

from __future__ import annotations

import re
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "zklock" / "spark" / "java" / "engine"
MAX_CLASS_LINES = 400
MAX_METHOD_LINES = 40
#: A method's first line: modifiers, a type, a name and its parameters' opening.
SIGNATURE = re.compile(r"^\s+(?:(?:public|private|protected|static|final|synchronized)\s+)*"
                       r"[\w<>\[\],.? ]+\s+(\w+)\s*\(")
NOT_METHODS = {"if", "for", "while", "switch", "catch", "return", "new", "throw", "else"}


def methods(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each method or constructor body in ``path``: from its
    signature to the brace that closes its body (braces in strings and comments aside)."""
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        match = SIGNATURE.match(lines[i])
        head = lines[i].split("(")[0]
        if not match or match.group(1) in NOT_METHODS or "=" in head:
            i += 1
            continue
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j == len(lines) or lines[j].rstrip().endswith(";"):  # abstract, or a call
            i = j + 1
            continue
        depth, k = 0, j
        while k < len(lines):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[k]).split("//")[0]
            depth += code.count("{") - code.count("}")
            if depth <= 0:
                break
            k += 1
        found.append((match.group(1), i + 1, k - i + 1))
        i = j + 1
    return found


def test_no_engine_class_is_over_400_lines():
    long = {p.name: n for p in ENGINE.glob("*.java")
            if (n := len(p.read_text().splitlines())) > MAX_CLASS_LINES}
    assert not long, long


def test_no_engine_method_is_over_40_lines():
    long = [f"{p.name}:{line} {name} ({n} lines)" for p in sorted(ENGINE.glob("*.java"))
            for name, line, n in methods(p) if n > MAX_METHOD_LINES]
    assert not long, long
    # (the scan finds the methods it is meant to)
    assert "exit" in {name for name, _, _ in methods(ENGINE / "EngineGuard.java")}
