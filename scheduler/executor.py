"""Executor: takes queued executions and runs them, reporting progress until they end.

An executor learns of work through a watch on the queue folder, so a run
starts as soon as the leader claims it. Taking is one multi that deletes
the queue entry and moves the execution from INITED to EXECUTING at the
version it was read: of all executors racing for it, exactly one wins.
The winning multi's zxid is the execution's fencing token.

While a run goes on, its executor moves ``next_deadline`` forward every
``scheduler_progress_interval`` with a versioned write. If the leader has
timed the run out meanwhile, that write fails: the executor knows it has
been fenced and cancels the run's Spark job group at once. The final write
(FINISHED, FAILED or AUTO_DISABLED, with the error's first line) frees the
query in the same multi.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from kazoo.exceptions import BadVersionError, NoNodeError

from zklock.config import Settings
from zklock.observe import metrics
from zklock.zk import CONNECTION_ERRORS

from .model import Execution, State
from .runner import Runner
from .store import ExecutorInfo, Fenced, SchedulerStore

# every state's series from the start, at 0 (zklock/observe/metrics.py says why)
for _state in State:
    metrics.EXECUTIONS.labels(_state.value)

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def new_executor_id() -> str:
    return f"ex-{uuid.uuid4().hex[:12]}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {line}"[:1000] if line else type(exc).__name__


@dataclass
class Running:
    execution: Execution
    group: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    fenced: bool = False
    stopping: bool = False
    done: bool = False
    last_ok: float = field(default_factory=time.monotonic)  # last progress ZooKeeper took


class Executor:
    """Runs up to ``pool_size`` executions at once, after its quiet period."""

    def __init__(self, store: SchedulerStore, settings: Settings, runner: Runner,
                 info: ExecutorInfo) -> None:
        self.store = store
        self.settings = settings
        self.runner = runner
        self.info = info
        self.pool_size = max(0, info.pool_size)  # 0: a coordinator that runs nothing
        self._pool = ThreadPoolExecutor(max(1, self.pool_size), thread_name_prefix="zklock-run")
        self._running: dict[str, Running] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._connected = True
        self._publish_due = False  # runs ended since what runs here was last published
        self._dispatcher = threading.Thread(target=self._dispatch, name="zklock-dispatch",
                                            daemon=True)
        self._progress = threading.Thread(target=self._report, name="zklock-progress",
                                          daemon=True)
        self.started_runs = 0

    @property
    def id(self) -> str:
        return self.info.id

    def start(self) -> Executor:
        self._wake.set()  # the first look at the queue also arms its watch
        self._dispatcher.start()
        self._progress.start()
        return self

    def stop(self, wait: bool = True, timeout: float = 30.0) -> None:
        """Take nothing more; cancel what runs (recorded FAILED: the process stopped).

        Waits at most ``timeout`` for the runs to record their end (ZooKeeper may be
        unreachable: then the leader times them out instead).
        """
        self._stopped.set()
        self._wake.set()
        with self._lock:
            runs = list(self._running.values())
        for run in runs:
            run.stopping = True
            self.runner.cancel(run.group)
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        while wait and self.running() and time.monotonic() < deadline:
            time.sleep(0.05)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def set_connected(self, connected: bool) -> None:
        self._connected = connected
        if connected:
            self._wake.set()

    # ---- learning of work --------------------------------------------------------
    def _on_queue(self, _event: Any) -> None:
        self._wake.set()

    def _dispatch(self) -> None:
        while not self._stopped.is_set():
            quiet_left = (self.info.quiet_until - now_ms()) / 1000
            self._wake.wait(timeout=quiet_left if quiet_left > 0 else None)
            self._wake.clear()
            if self._stopped.is_set():
                return
            if self._publish_due:  # what runs changed: said once for all the changes
                self._publish_due = False
                self._publish()
            if not self._connected or now_ms() < self.info.quiet_until:
                continue
            try:
                self._take_some()
            except Exception as exc:
                log.warning("executor %s could not read the queue: %s", self.id, exc)
                time.sleep(0.2)
                self._wake.set()

    def _take_some(self) -> None:
        """Take as many queued executions as there are free slots, in one round trip."""
        if self.pool_size == 0:
            return
        queued = self.store.queued(watch=self._on_queue)
        with self._lock:
            free = self.pool_size - len(self._running)
            queued = [i for i in queued if i not in self._running]
        if free <= 0 or not queued:
            return
        if len(queued) > free:
            # executors racing for a burst spread over it instead of all fighting for the head
            queued = random.sample(queued, free)
        now = now_ms()
        offers = []
        for e in self.store.list_executions(ids=queued):
            if e.status is not State.INITED:
                self.store.dequeue([e.id])  # a stale queue entry: taken or ended
                continue
            e.state = State.EXECUTING.value
            e.executor = self.id
            e.executor_query_id = f"zklock-sq-{e.namespace}-{e.id}"
            e.start = e.last_update = now
            e.next_deadline = self._deadline(e, now)
            offers.append((e, self.store.take_async(e)))
        lost = launched = 0
        for e, result in offers:
            try:
                results = result.get(timeout=30)
            except Exception as exc:
                log.warning("take of %s failed: %s", e.id, exc)
                continue
            if any(isinstance(r, Exception) for r in results):
                lost += 1  # another executor took it
                continue
            e.version += 1
            e.fencing_token = getattr(results[1], "mzxid", None)
            metrics.EXECUTIONS.labels(State.EXECUTING.value).inc()
            if not e.manual:
                metrics.TRIGGER_TO_START.observe(max(0.0, (e.start - e.trigger_time) / 1000))
            launched += self._launch(e)
        if launched:
            self._publish()
        if lost:
            self._wake.set()  # look again: what the others left may still be queued

    def _launch(self, e: Execution) -> int:
        """Start a taken run; how many started (0: taken as this executor stopped)."""
        if self._stopped.is_set():
            return 0  # the leader times it out (its executor is gone)
        run = Running(e, e.executor_query_id or e.id)
        with self._lock:
            self._running[e.id] = run
            self.started_runs += 1
        self._pool.submit(self._execute, run)
        return 1

    def _deadline(self, e: Execution, now: int) -> int:
        deadline = now + int(self.settings.scheduler_progress_timeout * 1000)
        if self.settings.scheduler_max_runtime > 0 and e.start is not None:
            deadline = min(deadline, e.start + int(self.settings.scheduler_max_runtime * 1000))
        return deadline

    # ---- running -------------------------------------------------------------------
    def _execute(self, run: Running) -> None:
        e = run.execution
        error: Optional[BaseException] = None
        try:
            self._first_progress(run)  # records the fencing token before any work
            if not run.fenced and not run.stopping:
                self.runner.run(copy.copy(e), run.group)
        except BaseException as exc:  # the run's failure is data, not our crash
            error = exc
        finally:
            with self._lock:
                self._running.pop(e.id, None)
            try:
                self._finish(run, error)
            except Exception as exc:
                log.warning("could not record the end of %s: %s", e.id, exc)
            # published by the dispatcher, once for every run that ended meanwhile: one
            # write per run, in this session ahead of the next take, made a burst's last
            # runs wait behind the first runs' writes (bench/scheduler.py)
            self._publish_due = True
            self._wake.set()

    def _finish(self, run: Running, error: Optional[BaseException]) -> None:
        e = run.execution
        with run.lock:
            run.done = True  # no progress write may land after the end
            if run.fenced:
                log.warning("execution %s was fenced (timed out by the leader); its end is not"
                            " recorded", e.id)
                return
            for _ in range(50):
                q = self.store.get_query(e.query_name)
                now = now_ms()
                e.end = e.last_update = now
                e.next_deadline = None
                e.state = State.FINISHED.value if error is None else State.FAILED.value
                e.error_message = None if error is None else first_line(error)
                if error is not None and run.stopping:
                    e.error_message = f"scheduler process stopped; {e.error_message}"[:1000]
                if q is not None and q.active_execution == e.id:
                    q.active_execution = None
                    if error is None:
                        q.consecutive_failures = 0
                    else:
                        q.consecutive_failures += 1
                        limit = self.settings.scheduler_auto_disable_after
                        if limit and q.consecutive_failures >= limit and q.enabled:
                            q.enabled = False
                            e.state = State.AUTO_DISABLED.value
                            e.error_message = (f"{e.error_message} (query disabled after"
                                               f" {q.consecutive_failures} consecutive"
                                               " failures)")[:1000]
                else:
                    q = None
                try:
                    self.store.finish(None, e, q)
                    metrics.EXECUTIONS.labels(e.state).inc()
                    return
                except Fenced as exc:
                    if exc.index == 0 and not self._still_ours(e):
                        run.fenced = True
                        log.warning("execution %s was fenced before it could end", e.id)
                        return
                    continue  # the query changed meanwhile (or our own late write): again

    # ---- progress --------------------------------------------------------------------
    def _report(self) -> None:
        """Progress of every run; after a fence or a stop, keep cancelling until it ends
        (a job the statement starts after the cancel must die too)."""
        interval = max(0.05, self.settings.scheduler_progress_interval)
        while True:
            stopped = self._stopped.wait(interval)
            with self._lock:
                runs = list(self._running.values())
            if stopped and not runs:
                return
            for run in runs:
                if run.stopping:
                    self.runner.cancel(run.group)
                    continue
                try:
                    self._write_progress(run)
                except Exception as exc:
                    log.warning("progress of %s not recorded: %s", run.execution.id, exc)

    def _first_progress(self, run: Running) -> None:
        """The run's first progress write, before any work: retried through a connection
        loss (a ZooKeeper server failing over), as the progress loop retries later writes.
        It ends written, or the run fenced (by the leader, or by ourselves once cut off
        for longer than the leader would wait): a failover alone never fails a run."""
        pause = max(0.05, min(0.5, self.settings.scheduler_progress_interval))
        while True:
            try:
                self._write_progress(run)
                return
            except CONNECTION_ERRORS as exc:  # anything else fails the run, with its cause
                if run.stopping or self._stopped.is_set():
                    raise
                log.info("first progress of %s not recorded yet: %s", run.execution.id, exc)
                time.sleep(pause)

    def _write_progress(self, run: Running) -> None:
        e = run.execution
        with run.lock:
            if run.done:
                return
            if run.fenced:
                # keep cancelling: a job the statement starts after the fence must die too
                self.runner.cancel(run.group)
                return
            now = now_ms()
            e.last_update = now
            e.next_deadline = self._deadline(e, now)
            try:
                zxid = self.store.update_execution(
                    e, timeout=max(1.0, 2 * self.settings.scheduler_progress_interval))
            except (BadVersionError, NoNodeError):
                if not self._still_ours(e):
                    run.fenced = True
                else:
                    return  # an earlier write of ours that timed out landed after all
            except Exception:
                # cut off from ZooKeeper: once the leader may have timed us out, stop
                # ourselves (a local lease) rather than overlap the next run
                if time.monotonic() - run.last_ok < self._self_fence_after():
                    raise
                run.fenced = True
                log.warning("execution %s: no progress reached ZooKeeper for %.1fs; fencing"
                            " it ourselves", e.id, time.monotonic() - run.last_ok)
            else:
                run.last_ok = time.monotonic()
                if e.fencing_token is None:
                    e.fencing_token = zxid
                return
        log.warning("execution %s was fenced by the leader (timed out); cancelling its Spark"
                    " jobs (group %s)", e.id, run.group)
        self.runner.cancel(run.group)

    def _still_ours(self, e: Execution) -> bool:
        """After a version mismatch: is the run still EXECUTING here? Then take its version
        (our own timed-out write landed late); otherwise the leader fenced it."""
        try:
            now = self.store.get_execution(e.id)
        except Exception:
            return False
        if now is None or now.status is not State.EXECUTING or now.executor != self.id:
            return False
        e.version = now.version
        return True

    def _self_fence_after(self) -> float:
        return max(0.5, 0.8 * self.settings.scheduler_progress_timeout)

    def _publish(self) -> None:
        self.info.running = self.running()
        try:
            self.store.update_executor(self.info)
        except Exception:
            pass
