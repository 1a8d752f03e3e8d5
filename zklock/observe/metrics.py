"""Prometheus metrics of locks, sessions and scheduled executions (prometheus_client).

Every process that uses zklock counts into the default registry; a process
serves them when ``metrics_port`` is set (any process, on demand), and
``zklock scheduler run --metrics-port`` serves the scheduler's. Names follow
Prometheus conventions: a ``zklock_`` prefix, base units (seconds), and
``_total`` on counters.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Optional, Protocol

from prometheus_client import Counter, Gauge, Histogram, start_http_server

WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

LOCK_WAIT = Histogram("zklock_lock_wait_seconds",
                      "Time from a lock request to its grant, by the request's strongest mode.",
                      ["mode"], buckets=WAIT_BUCKETS)
GRANTS = Counter("zklock_lock_grants_total", "Lock requests granted.", ["mode"])
DENIALS = Counter("zklock_lock_denials_total", "Lock attempts denied by a conflict.", ["mode"])
RETRIES = Counter("zklock_lock_retries_total", "Lock attempts retried after a denial.",
                  ["mode"])
LOSSES = Counter("zklock_lock_losses_total",
                 "Held lock sets lost (session suspended or expired, nodes gone).", ["mode"])
HELD = Gauge("zklock_locks_held", "Locks this process holds now.", ["mode"])
SESSION = Gauge("zklock_session_state",
                "1 for the ZooKeeper connection state each session of this process is in.",
                ["session", "state"])
EXECUTIONS = Counter("zklock_scheduled_executions_total",
                     "Scheduled executions that reached a state, by the process that moved"
                     " them there.", ["state"])
TRIGGER_TO_START = Histogram("zklock_scheduled_trigger_to_start_seconds",
                             "Time from a scheduled trigger to its execution's start.",
                             buckets=WAIT_BUCKETS)
OLDEST_HELD = Gauge("zklock_lock_oldest_held_seconds",
                    "Age of the oldest lock set this process holds now, by its strongest mode"
                    " (0 when it holds none).", ["mode"])
SCHEDULER_LEADER = Gauge("zklock_scheduler_leader",
                         "1 while this process leads the scheduler of its namespace, else 0.",
                         ["namespace"])
LEASE_OPS = Counter("zklock_lease_operations_total",
                    "Lease operations that succeeded, by operation (grab, extend, drop,"
                    " force_drop, recover, reap; for recover and reap, one per lease).", ["op"])
# Every series from the start, at 0: Prometheus's increase() and rate() count nothing for a
# series' first sample, so a counter born at its first loss would never fire an alert.
for _op in ("grab", "extend", "drop", "force_drop", "recover", "reap"):
    LEASE_OPS.labels(_op)
for _mode in "SX":
    for _counter in (GRANTS, DENIALS, RETRIES, LOSSES):
        _counter.labels(_mode)
STREAM_BATCHES = Counter("zklock_stream_batches_total",
                         "Micro-batches of streaming queries granted their locks, by query name"
                         " (the first 50 names a process sees; later ones count as \"other\").",
                         ["query"])
STREAM_BATCH_WAIT = Histogram("zklock_stream_batch_wait_seconds",
                              "Time a micro-batch waited for its locks, by query name.",
                              ["query"], buckets=WAIT_BUCKETS)
STREAM_BATCHES_LOST = Counter("zklock_stream_batches_lost_total",
                              "Micro-batches whose locks were lost before they committed (the"
                              " fence refused the commit, or the jobs were cancelled), by query"
                              " name.", ["query"])
#: How many query names the stream metrics label; more would make Prometheus's series grow
#: with every ad-hoc query a notebook starts.
STREAM_NAMES = 50
_stream_names: set[str] = set()
REAPER_ROUND = Gauge("zklock_lease_reaper_last_round_timestamp_seconds",
                     "When this process's lease reaper of a root last finished a round (Unix"
                     " time); only processes that run a reaper have it.", ["root"])

log = logging.getLogger("zklock")
_served: dict[int, object] = {}
_lock = threading.Lock()


def stream_label(name: str) -> str:
    """The label of query ``name`` in the stream metrics: the name itself for the first
    :data:`STREAM_NAMES` a process sees, then "other" (bounded series); "unnamed" for a
    query started without one."""
    name = name or "unnamed"
    with _lock:
        if name in _stream_names or len(_stream_names) < STREAM_NAMES:
            if name not in _stream_names:
                _stream_names.add(name)
                STREAM_BATCHES_LOST.labels(name)  # at 0 from the start, as the others
            return name
    return "other"


def serve(port: int, addr: str = "127.0.0.1") -> bool:
    """Serve /metrics on ``addr:port`` (once per port per process): whether this process
    serves it. A port another process holds (a second driver on the host, given the same
    spark-defaults) is one warning line, never a failed application: metrics are not worth
    a pipeline."""
    with _lock:
        if port not in _served:
            try:
                _served[port] = start_http_server(port, addr=addr)
            except OSError as exc:
                log.warning("zklock: metrics not served on %s:%s (%s); set metrics_port to"
                            " a free port, or 0", addr, port, exc.strerror or exc)
                return False
    return True


class Holder(Protocol):
    """A live lock holder (a SessionWatcher): the ages of its held sets by strongest mode."""

    def held_ages(self) -> dict[str, float]: ...


#: The live lock holders, read when Prometheus scrapes (nothing on the lock path); weakly,
#: so that a closed manager's watcher goes.
_holders: weakref.WeakSet[Holder] = weakref.WeakSet()


def track_holdings(owner: Holder) -> None:
    """Count ``owner``'s held sets into :data:`OLDEST_HELD` while ``owner`` lives."""
    _holders.add(owner)


def _oldest(mode: str) -> float:
    return max((h.held_ages().get(mode, 0.0) for h in list(_holders)), default=0.0)


for _mode in "SX":
    OLDEST_HELD.labels(_mode).set_function(lambda m=_mode: _oldest(m))


def session_state(session: str, state: Optional[str]) -> None:
    for s in ("CONNECTED", "SUSPENDED", "LOST"):
        SESSION.labels(session, s).set(1 if s == state else 0)
