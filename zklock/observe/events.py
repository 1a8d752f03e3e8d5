"""Lock events: every grant, denial, retry, release, loss and force-drop.

Each event is counted in the Prometheus metrics (:mod:`zklock.observe.metrics`) and,
when ``event_log`` names a file, appended to it as one JSON line. The lock
path only puts a dict on a queue; a daemon thread of the process writes and
flushes the lines, so a slow disk never slows a lock request. ``zklock
timeline`` and the demo's summary read these files.

An event line::

    {"ts": 1795342985123, "event": "grant", "job": "backfill", "user": "backfill",
     "host": "vm", "pid": 4242, "query_id": "zklock-...", "set": "a1b2...",
     "locks": [["sales.orders", "S"], ["sales.orders/ds=1", "X"]],
     "wait_ms": 13.5, "attempts": 1, "token": 92}
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

from . import metrics

KINDS = ("grant", "denial", "retry", "release", "loss", "force-drop")


class EventLog:
    """Appends JSON lines to one file from a background thread (one per file per process).

    The thread wakes at most every ``BATCH_S`` and writes what piled up in one go, so a
    busy lock path pays a queue put per event, not a wake-up, an encode and a write.
    """

    BATCH_S = 0.05
    _logs: dict[str, EventLog] = {}
    _guard = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="zklock-events", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    @classmethod
    def for_path(cls, path: str) -> EventLog:
        key = os.path.abspath(path)
        with cls._guard:
            log = cls._logs.get(key)
            if log is None:
                Path(key).parent.mkdir(parents=True, exist_ok=True)
                log = cls._logs[key] = cls(key)
            return log

    def write(self, event: dict[str, Any]) -> None:
        self._queue.put(event)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until what was written so far is on disk (at exit, in tests)."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            while True:
                batch = [self._queue.get()]
                time.sleep(self.BATCH_S)
                while not self._queue.empty():
                    batch.append(self._queue.get())
                fh.write("".join(json.dumps(e, separators=(",", ":"), default=str) + "\n"
                                 for e in batch if isinstance(e, dict)))
                fh.flush()
                for e in batch:
                    if isinstance(e, threading.Event):
                        e.set()


def read_events(paths: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Events of one or more log files, skipping lines that are not events."""
    for path in paths:
        try:
            fh = open(path, encoding="utf-8")
        except OSError:
            continue
        with fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") in KINDS:
                    yield event


#: Labelled metric children, looked up once (``labels()`` costs more than the count itself).
_GRANTS = {m: metrics.GRANTS.labels(m) for m in "SX"}
_WAIT = {m: metrics.LOCK_WAIT.labels(m) for m in "SX"}
_HELD = {m: metrics.HELD.labels(m) for m in "SX"}


def strongest(locks: Sequence[Sequence[str]]) -> str:
    return "X" if any(m == "X" for _, m in locks) else "S"


class LockEvents:
    """What a LockManager reports; metrics always, the JSON log when configured."""

    def __init__(self, event_log: Optional[str], job: str, user: str) -> None:
        self.log = EventLog.for_path(event_log) if event_log else None
        self.base = {"job": job, "user": user, "host": socket.gethostname(),
                     "pid": os.getpid()}

    def _emit(self, event: str, **fields: Any) -> None:
        if self.log is not None:
            self.log.write({"ts": int(time.time() * 1000), "event": event, **self.base,
                            **fields})

    def grant(self, set_id: str, locks: list[list[str]], query_id: str, wait_s: float,
              attempts: int, token: int, lease: bool = False, holder: str = "",
              until_ms: Optional[int] = None) -> None:
        """A granted set; a lease's (``lease``) has its holder and the end it was granted
        with, so that the timeline can draw it as a hold of its holder."""
        mode = strongest(locks)
        _GRANTS[mode].inc()
        _WAIT[mode].observe(wait_s)
        if not lease:  # a lease outlives this process: not counted as held by it
            for _, m in locks:
                _HELD[m].inc()
        extra = {"holder": holder, "until": until_ms} if lease else {}
        self._emit("grant", set=set_id, locks=locks, query_id=query_id,
                   wait_ms=round(wait_s * 1000, 1), attempts=attempts, token=token,
                   lease=lease, **extra)

    def denial(self, locks: list[list[str]], query_id: str, attempt: int,
               blockers: list[dict[str, Any]], final: bool) -> None:
        mode = strongest(locks)
        metrics.DENIALS.labels(mode).inc()
        if not final:
            metrics.RETRIES.labels(mode).inc()
        self._emit("denial", locks=locks, query_id=query_id, attempt=attempt,
                   blockers=blockers[:10], final=final)
        if not final:
            self._emit("retry", locks=locks, query_id=query_id, attempt=attempt + 1)

    def cancel(self, locks: list[list[str]], query_id: str, attempts: int) -> None:
        """A waiting request its caller cancelled after ``attempts`` attempts: it ends
        here, holding nothing (the last denial was not final)."""
        self._emit("cancel", locks=locks, query_id=query_id, attempts=attempts)

    def release(self, set_id: str, locks: list[list[str]], query_id: str,
                counted: bool = True) -> None:
        """``counted``: the set's locks are still in the held gauge (not after a loss)."""
        if counted:
            for _, m in locks:
                _HELD[m].dec()
        self._emit("release", set=set_id, locks=locks, query_id=query_id)

    def loss(self, set_id: str, locks: list[list[str]], query_id: str, reason: str,
             counted: bool = True) -> None:
        metrics.LOSSES.labels(strongest(locks)).inc()
        if counted:
            for _, m in locks:
                _HELD[m].dec()
        self._emit("loss", set=set_id, locks=locks, query_id=query_id, reason=reason)

    def force_drop(self, locks: list[list[str]], nodes: int) -> None:
        self._emit("force-drop", locks=locks, nodes=nodes)

    def flush(self) -> None:
        if self.log is not None:
            self.log.flush()
