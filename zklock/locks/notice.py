"""A waiting request says so, where its user looks.

Hive's lock manager retries in silence: a statement behind another's lock looks hung for as
long as it waits (``hive.lock.sleep.between.retries`` times ``hive.lock.numretries``).
zklock knows whom it waits for after every denial (the holders it read), so a request that
will retry says it in one line, by default on its process's stderr: after its first denial,
then at 5, 10, 20, 40 s... of waiting, each line with the time so far. A Spark driver's
stderr is where a pipeline's user looks; a child lock client sends its lines to its JVM,
which writes them on its own stderr (a Thrift server's log, a spark-sql terminal). The
``wait_notice`` setting turns it off; a request that gives up names its holders in its error
either way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: The first repeat, in seconds of waiting; each after doubles it.
FIRST_REPEAT_S = 5.0
#: How much of a statement's text a line shows.
STATEMENT_CHARS = 80


def to_stderr(line: str) -> None:
    """Write ``line`` on this process's stderr (closed or gone: the wait goes on, silent)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


@dataclass
class WaitNotice:
    """The lines of one request's wait: :meth:`denied` after each denial that will retry."""

    statement: str
    #: where each line goes: :func:`to_stderr`, or a child lock client's JVM
    say: Callable[[str], None] = to_stderr
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    _next: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.started = self.started or self.clock()

    def denied(self, blocked: list[tuple[str, str]], blockers: str) -> None:
        """Say whom the request waits for, if it is time to: at the first denial, then
        each time the wait has doubled since the last line (from 5 s on). ``blocked``: the
        (object, mode) it wants that the denial found held; ``blockers``: who holds them."""
        waited = self.clock() - self.started
        if waited < self._next:
            return
        self._next = max(FIRST_REPEAT_S, 2 * waited)
        self.say(self.text(blocked, blockers, waited))

    def text(self, blocked: list[tuple[str, str]], blockers: str, waited: float) -> str:
        """``zklock: <statement> waits for X on db.t: <holders>; 3 s so far``."""
        statement = " ".join(self.statement.split())
        if len(statement) > STATEMENT_CHARS:
            statement = statement[:STATEMENT_CHARS - 3] + "..."
        wanted = list(dict.fromkeys(blocked))
        wants = ", ".join(f"{mode} on {name}" for name, mode in wanted[:5])
        if len(wanted) > 5:
            wants += f" (+{len(wanted) - 5} more)"
        return (f"zklock: {statement or 'a request'} waits for {wants}: {blockers};"
                f" {waited:.0f} s so far")
