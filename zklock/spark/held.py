"""A block whose locks zklock's engine holds for Python: the one way a Python block is locked
in a classic session, as a statement is.

Spark runs some work in pieces no engine hook sees whole: a SQL script statement by
statement, an RDD's jobs after the call that made it (``LockingSession.holding``), Spark 3.5
and 4.0's ``saveAsTable``, which drops an overwritten table before any command. For those,
Python asks the engine to hold the locks (EngineCalls.hold, EngineCalls.lockSaveAsTable):
the session's lock client takes them as it takes a statement's, under the engine's job tag
and fence, and the statements the block runs are covered where its locks cover them
(EngineEntry.enterBlock). :func:`run_held` runs the block and releases them, raising what
the engine says became of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .lock_client import lock_error, refusal_error


@contextmanager
def run_held(held: Any, objects: list[str]) -> Iterator[None]:
    """Run the block under ``held`` (an EngineCalls.Held), then release it. A block that
    raised raises, instead of its own error, the loss of ``objects`` or a failed write, as
    the engine tells them (zklock's exceptions, the block's error as cause); a block that
    completed raises the loss of its locks while it ran."""
    try:
        yield
    except Exception as exc:
        instead = held.close(first_line(exc))
        if instead is None:
            raise
        raise refusal_error(instead, objects) from exc
    except BaseException:
        held.close("interrupted")
        raise
    try:
        held.close(None)  # the loss, as a statement's
    except Exception as exc:
        error = lock_error(exc)
        if error is exc:
            raise
        raise error from None


def first_line(exc: BaseException) -> str:
    """What Spark said, in one line: the first line of its Java exception, and of the root
    cause under it where that says something else (a task's own error); else Python's."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return str(exc).strip().split("\n", 1)[0] or type(exc).__name__
    root = java
    while root.getCause() is not None:
        root = root.getCause()

    def line(e: Any) -> str:
        return str(e.getMessage() or e.getClass().getName()).strip().split("\n", 1)[0]
    outer, inner = line(java), line(root)
    return outer if inner in outer else f"{outer} (caused by: {inner})"
