"""How an acquire waits when it is denied: its retry policy, an object as kazoo's KazooRetry
is, so that the acquire's loop says what it does and the policy how long.

Three ways, from how the request was made:
- Hive's: ``retries`` more attempts ``interval`` apart (``hive.lock.numretries`` and
  ``hive.lock.sleep.between.retries``);
- a lease's: attempts ``interval`` apart until a deadline (its ``wait_s``);
- a Spark job's: attempts backing off from ``interval`` until a timeout. Hive's fixed pause
  wakes every waiter at once; a doubling pause spreads them, and the request's intents
  (zklock/locks/intents.py) keep its place meanwhile, so a longer pause costs it latency,
  never its turn.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Optional

from ..config import Settings

#: The longest pause between two attempts of a request backing off under a timeout.
MAX_BACKOFF_S = 5.0


@dataclass(frozen=True)
class Pause:
    """What follows a denial: sleep ``seconds`` and try again, or give up (``exhausted``)."""

    seconds: float
    exhausted: bool


@dataclass(frozen=True)
class RetryPolicy:
    """When a denied request tries again, and when it gives up."""

    interval: float
    #: Hive's count of retries; None when the request waits until ``deadline``.
    retries: Optional[int] = None
    #: A monotonic time; None when it counts retries.
    deadline: Optional[float] = None
    #: Whether the pause doubles with each denial (a wait by time, not a lease's).
    backoff: bool = False

    @classmethod
    def of(cls, settings: Settings, retries: Optional[int] = None,
           retry_interval: Optional[float] = None, timeout: Optional[float] = None,
           deadline: Optional[float] = None) -> RetryPolicy:
        """The policy of a request under ``settings`` with a call's own ``retries``,
        ``timeout`` and ``retry_interval`` (Settings.wait decides between a count and a
        time); or a lease's, attempts ``retry_interval`` apart until ``deadline``."""
        if deadline is not None:
            return cls(settings.wait(retries=retries, retry_interval=retry_interval).interval,
                       deadline=deadline)
        wait = settings.wait(retries=retries, timeout=timeout, retry_interval=retry_interval)
        if wait.counted:
            return cls(wait.interval, retries=wait.retries)
        return cls(wait.interval, deadline=time.monotonic() + wait.timeout, backoff=True)

    def will_retry(self, denied: int) -> bool:
        """Would a denial now, after ``denied`` earlier ones, be tried again? (An attempt
        that will be leaves intents: zklock/locks/intents.py.)"""
        if self.deadline is None:
            return denied + 1 <= self.retries
        if self.backoff:
            return time.monotonic() < self.deadline
        return time.monotonic() + self.interval <= self.deadline

    def after(self, denied: int) -> Pause:
        """What follows the ``denied``-th denial: the pause (``interval``, or under a timeout
        ``interval`` doubling with each denial up to MAX_BACKOFF_S, its last ending at the
        deadline), or giving up."""
        if self.deadline is None:
            return Pause(self.interval, denied > self.retries)
        if not self.backoff:
            return Pause(self.interval, time.monotonic() + self.interval > self.deadline)
        base = max(self.interval, 0.05)  # never a busy loop for the whole timeout
        pause = max(base, min(base * 2 ** min(max(denied - 1, 0), 20), MAX_BACKOFF_S))
        pause = min(pause, self.deadline - time.monotonic())
        return Pause(pause, pause <= 0)

    def sleep(self, pause: Pause, cancelled: Optional[threading.Event] = None) -> None:
        """Sleep ``pause``, jittered by a quarter either way (so that waiters denied together
        do not come back together), never past the deadline of a wait by time; woken early
        when ``cancelled`` is set."""
        seconds = pause.seconds * random.uniform(0.75, 1.25)
        if self.backoff:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
        if cancelled is None:
            time.sleep(seconds)
        else:
            cancelled.wait(seconds)
