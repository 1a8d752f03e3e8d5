"""What a failed test's report carries, so that a CI failure can be diagnosed without a rerun.

For a failed test (set-up, call or tear-down) pytest prints these sections after its
traceback, and only then:

- the lock events of the test's time (every LockManager of the run, subprocesses
  included, logs to the worker's event log through ``ZKLOCK_EVENT_LOG``), which name the
  locks involved, their holders, denials and losses;
- the tail of the ZooKeeper server's log (the worker's own server, and any ensemble's);
- the tail of the test Spark driver's log (warnings and errors, log4j2-tests.properties).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

#: How much of each log a failed test's report shows.
TAIL_LINES = 60
EVENT_LINES = 80

_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
DIRECTORY = Path(tempfile.mkdtemp(prefix=f"zklock-diagnostics-{_worker}-"))
EVENT_LOG = DIRECTORY / "events.jsonl"
SPARK_LOG = DIRECTORY / "spark-driver.log"
#: Server logs to tail (the session's ZooKeeper, ensembles): registered by the fixtures.
SERVER_LOGS: list[Path] = []


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 200 * lines))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def events_since(start_ms: int) -> str:
    """The event log's lines from ``start_ms`` on, the last EVENT_LINES of them."""
    try:
        raw = EVENT_LOG.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = []
    for line in raw:
        try:
            if json.loads(line).get("ts", 0) >= start_ms:
                kept.append(line)
        except ValueError:
            continue
    return "\n".join(kept[-EVENT_LINES:])


def sections(start_ms: int) -> list[tuple[str, str]]:
    """The report sections of a test that started at ``start_ms`` and failed."""
    out = []
    events = events_since(start_ms)
    if events:
        out.append(("zklock lock events during the test", events))
    for log in SERVER_LOGS:
        text = tail(log)
        if text:
            out.append((f"ZooKeeper log tail ({log})", text))
    text = tail(SPARK_LOG)
    if text:
        out.append(("Spark driver log tail (warnings and errors)", text))
    return out


def now_ms() -> int:
    return int(time.time() * 1000)
