"""Leader: the time-keeping and housekeeping of one namespace, run by the elected scheduler.

Time-keeping: the leader caches every query (a data watch on each, a
children watch on the folder), sleeps until the earliest ``due_at`` or a
change, and claims what is due. There is no polling interval: a trigger is
claimed when its time comes, and a change (CREATE, ALTER ... EXECUTE, an
execution freeing its query) wakes the leader at once. Claims are sent
pipelined, so a burst of due queries costs one round trip, not one each.

Rules it applies when claiming (Hive's, and where Hive gets them wrong):

- a query whose previous run is still active is not claimed; its
  next_execution stays in the past, so exactly one follow-up run is owed;
- every trigger time between next_execution and now (missed while all
  schedulers were down, or while the previous run ran) is merged into one
  execution, which records the first and last trigger it covers and how many;
- at most ``scheduler_max_parallel`` executions are active (INITED or
  EXECUTING) at once; only the leader creates executions, so its count is
  exact.

Housekeeping (every second, on the active executions only): an EXECUTING run
past its next_deadline, or whose executor process is gone, becomes
TIMED_OUT; its executor's next versioned write fails and it cancels its
Spark jobs. Executions older than ``scheduler_execution_max_age`` are
trimmed (their age is in their name, so nothing is read). Leases past the
hard limit are reaped every ``scheduler_reap_interval``.
"""

from __future__ import annotations

import copy
import heapq
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from zklock.config import Settings
from zklock.observe import metrics

from .model import Execution, ScheduledQuery, State, execution_id, trigger_of
from .schedule import Schedule
from .store import Fenced, LeaderToken, SchedulerStore

log = logging.getLogger(__name__)

HOUSEKEEPING_S = 1.0
TRIM_EVERY_S = 60.0
#: A claim covering more missed trigger times than this stops counting them one by one.
MERGE_COUNT_LIMIT = 10000


def now_ms() -> int:
    return int(time.time() * 1000)


class Leader:
    """Runs while this process leads; :meth:`stop` returns once it has stopped writing."""

    def __init__(self, store: SchedulerStore, settings: Settings, token: LeaderToken,
                 reap: Optional[Callable[[], Any]] = None,
                 on_deposed: Optional[Callable[[], None]] = None) -> None:
        self.store = store
        self.on_deposed = on_deposed
        self._collided: set[str] = set()
        self._bad: set[str] = set()
        self.settings = settings
        self.token = token
        self.reap = reap
        self._cond = threading.Condition()
        self._stopped = False
        self._dirty: set[str] = set()
        self._children_changed = True
        self._cache: dict[str, ScheduledQuery] = {}
        # due times in a heap and active queries in a set: a pass costs O(log n) per due
        # query, not O(n) over every query (the leader's CPU with 1000 schedules)
        self._heap: list[tuple[int, str, int]] = []
        self._active: set[str] = set()
        self._schedules: dict[str, Schedule] = {}
        self._next_housekeeping = 0.0
        self._next_trim = 0.0
        self._next_reap = time.monotonic() + settings.scheduler_reap_interval
        self.claims = 0
        self._thread = threading.Thread(target=self._run, name="zklock-leader", daemon=True)

    # ---- lifecycle ------------------------------------------------------------
    def start(self) -> Leader:
        self._thread.start()
        return self

    def stop(self, wait: bool = True) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # ---- watches (kazoo's event thread: only mark and wake) --------------------
    def _on_query(self, event: Any) -> None:
        if self._stopped or not getattr(event, "path", None):
            return  # a session event, or a watch outliving this leader
        name = event.path.rsplit("/", 1)[1]
        with self._cond:
            self._dirty.add(name)
            self._cond.notify_all()

    def _on_children(self, _event: Any) -> None:
        with self._cond:
            self._children_changed = True
            self._cond.notify_all()

    # ---- the loop -------------------------------------------------------------
    def _run(self) -> None:
        leading = metrics.SCHEDULER_LEADER.labels(self.store.namespace)
        leading.set(1)  # the alert "no scheduler leads" reads the sum over processes
        try:
            self._lead()
        finally:
            leading.set(0)

    def _lead(self) -> None:
        backoff = 0.1
        while not self._stopped:
            try:
                self._refresh()
                self._claim_due()
                self._housekeeping()
                backoff = 0.1
                self._sleep()
            except _Deposed:
                log.warning("leader of %s fenced: its node is gone", self.store.namespace)
                if self.on_deposed is not None and not self._stopped:
                    self.on_deposed()
                return
            except Exception as exc:  # connection trouble: the election decides what next
                log.warning("leader loop error (retrying): %s: %s", type(exc).__name__, exc)
                with self._cond:
                    self._cond.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _sleep(self) -> None:
        with self._cond:
            if self._stopped or self._dirty or self._children_changed:
                return
            wake = time.monotonic() + self._until_next_event()
            while not (self._stopped or self._dirty or self._children_changed):
                left = wake - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def _until_next_event(self) -> float:
        limit = self.settings.scheduler_max_parallel
        room = not limit or len(self._active) < limit
        waits = [max(0.0, self._next_housekeeping - time.monotonic())]
        due = self._next_due()
        if due is not None and room:
            waits.append(max(0.0, (due - now_ms()) / 1000))
        return min(waits)

    # ---- the due heap -----------------------------------------------------------
    def _put(self, q: ScheduledQuery) -> None:
        """Cache ``q`` and index it: active, or due at some time."""
        self._cache[q.name] = q
        if q.active_execution:
            self._active.add(q.name)
            return
        self._active.discard(q.name)
        due = q.due_at()
        if due is not None:
            heapq.heappush(self._heap, (due, q.name, q.version))

    def _forget(self, name: str) -> None:
        self._cache.pop(name, None)
        self._active.discard(name)

    def _current(self, entry: tuple[int, str, int]) -> Optional[ScheduledQuery]:
        due, name, version = entry
        q = self._cache.get(name)
        if q is None or q.version != version or q.active_execution or q.due_at() != due:
            return None  # superseded by a later read or write of the query
        return q

    def _next_due(self) -> Optional[int]:
        while self._heap and self._current(self._heap[0]) is None:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    # ---- cache ----------------------------------------------------------------
    def _refresh(self) -> None:
        with self._cond:
            children_changed, self._children_changed = self._children_changed, False
            dirty, self._dirty = self._dirty, set()
        try:
            if children_changed:
                names = set(self.store.query_names(watch=self._on_children))
                for gone in set(self._cache) - names:
                    self._forget(gone)
                dirty |= names - set(self._cache)
            if dirty:
                names = sorted(dirty)
                got = self.store.get_many((self.store.query_path(n) for n in names),
                                          watch=self._on_query)
                for name, item in zip(names, got):
                    if item is None:
                        self._forget(name)
                    else:
                        self._remember(name, item)
        except Exception:
            with self._cond:  # nothing read is lost: the next pass reads it again
                self._children_changed |= children_changed
                self._dirty |= dirty
            raise

    def _remember(self, name: str, item: tuple[bytes, int]) -> None:
        """Cache a query read; one corrupt node is skipped (and said once), not fatal."""
        try:
            q = ScheduledQuery.from_bytes(*item)
            self._schedule(q)
        except Exception as exc:
            self._forget(name)
            if name not in self._bad:
                self._bad.add(name)
                log.error("scheduled query %s is unreadable and is skipped: %s", name, exc)
            return
        self._bad.discard(name)
        self._put(q)

    def _schedule(self, q: ScheduledQuery) -> Schedule:
        key = q.name
        s = self._schedules.get(key)
        if s is None or s.to_dict() != q.schedule:
            s = Schedule.from_dict(q.schedule)
            self._schedules[key] = s
        return s

    # ---- claiming -------------------------------------------------------------
    def _claim_due(self) -> None:
        now = now_ms()
        limit = self.settings.scheduler_max_parallel
        active = len(self._active)
        pending = []
        while self._heap and self._heap[0][0] <= now:
            if (limit and active >= limit) or self._stopped:
                break
            q = self._current(heapq.heappop(self._heap))
            if q is None:
                continue
            claim = self._build_claim(q, now)
            if claim is None:
                continue
            new_q, e = claim
            pending.append((q, new_q, e, self.store.claim_async(self.token, new_q, e)))
            active += 1
        for old, new_q, e, result in pending:
            try:
                results = result.get(timeout=30)
            except Exception as exc:
                log.warning("claim of %s failed: %s", e.id, exc)
                self._mark_dirty(old.name)
                continue
            failed = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)
                      and not isinstance(r, RolledBackError)]
            if not failed:
                new_q.version = old.version + 1
                self._put(new_q)
                self.claims += 1
                metrics.EXECUTIONS.labels(State.INITED.value).inc()
                continue
            index, error = failed[0]
            if index == 0 and isinstance(error, (NoNodeError, BadVersionError)):
                raise _Deposed()
            if isinstance(error, NodeExistsError):
                # an execution of that id exists: the trigger was claimed already, or a
                # run-now fell on the same millisecond as an earlier run (then it moves on)
                self._collided.add(e.id)
                log.warning("execution %s exists already; re-reading %s", e.id, old.name)
            self._mark_dirty(old.name)

    def _mark_dirty(self, name: str) -> None:
        with self._cond:
            self._dirty.add(name)

    def _build_claim(self, q: ScheduledQuery, now: int
                     ) -> Optional[tuple[ScheduledQuery, Execution]]:
        new_q = copy.copy(q)
        triggers: list[int] = []
        merged, last = 0, None
        manual = q.run_requested is not None and q.run_requested <= now
        if q.enabled and q.next_execution is not None and q.next_execution <= now:
            sched = self._schedule(q)
            fires = sched.fires_between(q.next_execution, now, limit=MERGE_COUNT_LIMIT)
            merged = len(fires)
            last = fires[-1] if fires and merged < MERGE_COUNT_LIMIT else now
            triggers.append(q.next_execution)
            new_q.next_execution = sched.next_after(now)
        if manual:
            triggers.append(q.run_requested)  # type: ignore[arg-type]
            new_q.run_requested = None
        if not triggers:
            return None
        trigger = min(triggers)
        if manual and len(triggers) == 1:
            while execution_id(q.name, trigger) in self._collided:
                trigger += 1
        e = Execution(
            id=execution_id(q.name, trigger), query_name=q.name, namespace=q.namespace,
            trigger_time=trigger, last_trigger=last if last is not None else trigger,
            merged=merged, manual=manual, query=q.query, executed_as=q.executed_as,
            state=State.INITED.value, created=now, last_update=now)
        new_q.active_execution = e.id
        return new_q, e

    # ---- housekeeping -----------------------------------------------------------
    def _housekeeping(self) -> None:
        mono = time.monotonic()
        if mono >= self._next_housekeeping:
            self._next_housekeeping = mono + HOUSEKEEPING_S
            self._time_out()
        if mono >= self._next_trim:
            self._next_trim = mono + TRIM_EVERY_S
            self._trim()
        if self.reap is not None and self.settings.scheduler_reap_interval > 0 \
                and mono >= self._next_reap:
            self._next_reap = mono + self.settings.scheduler_reap_interval
            try:
                reaped = self.reap()
                if reaped:
                    log.warning("reaped %d lease(s) past their hard limit", len(reaped))
            except Exception as exc:
                log.warning("lease reaper failed: %s", exc)

    def _time_out(self) -> None:
        active = {q.active_execution: q for n in self._active
                  if (q := self._cache[n]).active_execution}
        if not active:
            return
        executions = self.store.list_executions(ids=sorted(active))
        executing = [e for e in executions if e.status is State.EXECUTING]
        if not executing:
            return
        live = self.store.live_executors()
        now = now_ms()
        for e in executing:
            if e.next_deadline is not None and now > e.next_deadline:
                why = (f"no progress from executor {e.executor} since its deadline"
                       if e.last_update is None or self.settings.scheduler_max_runtime <= 0
                       or now - (e.start or now) < self.settings.scheduler_max_runtime * 1000
                       else f"ran longer than scheduler_max_runtime"
                            f" ({self.settings.scheduler_max_runtime:g}s)")
            elif e.executor not in live:
                why = f"executor {e.executor} is gone"
            else:
                continue
            self._finish_timed_out(active[e.id], e, now, why)

    def _finish_timed_out(self, q: ScheduledQuery, e: Execution, now: int, why: str) -> None:
        e.state = State.TIMED_OUT.value
        e.end = e.last_update = now
        e.error_message = f"TIMED_OUT: {why}"
        new_q = copy.copy(q)
        new_q.active_execution = None
        try:
            self.store.finish(self.token, e, new_q)
            self._put(new_q)
            metrics.EXECUTIONS.labels(State.TIMED_OUT.value).inc()
            log.warning("execution %s timed out: %s", e.id, why)
        except Fenced as exc:
            if exc.index == 0:
                raise _Deposed() from None
            self._mark_dirty(q.name)  # it finished meanwhile, or the query changed

    def _trim(self) -> None:
        cutoff = now_ms() - int(self.settings.scheduler_execution_max_age * 1000)
        keep = self.settings.scheduler_executions_kept
        active = {q.active_execution for q in self._cache.values()}
        per_query: dict[str, list[tuple[int, str]]] = {}
        for i in self.store.execution_ids():
            t = trigger_of(i)
            if t is not None:
                per_query.setdefault(i.rpartition("-")[0], []).append((t, i))
        old = []
        for runs in per_query.values():
            runs.sort()
            surplus = len(runs) - keep if keep else 0
            old += [i for n, (t, i) in enumerate(runs)
                    if (t < cutoff or n < surplus) and i not in active]
        if old:
            try:
                n = self.store.delete_executions(self.token, sorted(old))
            except Fenced as exc:
                if exc.index == 0:
                    raise _Deposed() from None
                raise
            log.info("trimmed %d execution(s) older than %gs", n,
                     self.settings.scheduler_execution_max_age)


class _Deposed(Exception):
    """A fenced write found our candidate node gone: we no longer lead."""
