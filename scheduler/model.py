"""ScheduledQuery and Execution: Hive's SCHEDULED_QUERIES and SCHEDULED_EXECUTIONS rows.

Each is one znode holding JSON; the znode's version is what every
read-modify-write checks, so the dataclasses carry the version they were
read at. Times are epoch milliseconds (ZooKeeper's and Hive's unit).
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from zklock.errors import InvalidArguments

from .schedule import Schedule

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")


def check_name(text: str) -> str:
    """A scheduled query's name, lower-cased; it becomes a znode name, so it is strict."""
    name = text.strip().lower()
    if not _NAME.match(name):
        raise InvalidArguments(
            f"bad scheduled query name {text!r}: use 1-128 letters, digits or '_',"
            " not starting with a digit")
    return name


class State(str, enum.Enum):
    """Execution states, as in Hive's scheduled_executions."""

    INITED = "INITED"          # claimed by the leader, waiting for an executor
    EXECUTING = "EXECUTING"    # an executor runs it
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"    # missed its deadline; fenced, its Spark jobs cancelled
    AUTO_DISABLED = "AUTO_DISABLED"  # failed, and the failure disabled the query

    @property
    def active(self) -> bool:
        return self in (State.INITED, State.EXECUTING)


def iso(ms: Optional[int]) -> Optional[str]:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


@functools.cache
def _stored_fields(cls: type) -> tuple[str, ...]:
    """The fields a record keeps in its znode: all but the version it was read at.

    Computed once per class: ``dataclasses.fields`` walks the class on every call, which
    was a tenth of an executor's CPU per run (bench/scheduler.py)."""
    return tuple(f.name for f in fields(cls) if f.name != "version")


def _load(cls: Any, raw: bytes, version: int) -> Any:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidArguments(f"corrupt {cls.__name__} node: {exc}") from None
    obj = cls(**{k: data[k] for k in _stored_fields(cls) if k in data})
    obj.version = version
    return obj


def _dump(record: Any) -> bytes:
    """A record's znode data: its fields as JSON, without the version it was read at.

    The fields are read as they are, not through ``dataclasses.asdict``, which deep-copies
    every value: that copy was most of the leader's and the executors' CPU per run
    (bench/scheduler.py), and JSON needs no copy."""
    data = {name: getattr(record, name) for name in _stored_fields(type(record))}
    return json.dumps(data, separators=(",", ":")).encode()


@dataclass
class ScheduledQuery:
    """One scheduled query of a namespace."""

    name: str
    namespace: str
    schedule: dict                    # Schedule.to_dict()
    query: str
    owner: str
    executed_as: str
    enabled: bool = True
    next_execution: Optional[int] = None   # the earliest trigger time not yet claimed
    run_requested: Optional[int] = None    # ALTER ... EXECUTE (run now) asked at this time
    active_execution: Optional[str] = None
    consecutive_failures: int = 0
    created: int = 0
    version: int = field(default=-1, compare=False)

    @property
    def parsed_schedule(self) -> Schedule:
        return Schedule.from_dict(self.schedule)

    @property
    def timezone(self) -> str:
        return self.schedule.get("timezone", "UTC")

    def due_at(self) -> Optional[int]:
        """When the leader should claim a run: the earlier of the schedule and a run-now."""
        times = [t for t in (self.next_execution if self.enabled else None,
                             self.run_requested) if t is not None]
        return min(times) if times else None

    @classmethod
    def from_bytes(cls, raw: bytes, version: int = -1) -> ScheduledQuery:
        return _load(cls, raw, version)

    def to_bytes(self) -> bytes:
        return _dump(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule_name": self.name, "namespace": self.namespace, "enabled": self.enabled,
            "schedule": self.parsed_schedule.describe(), "timezone": self.timezone,
            "user": self.executed_as, "owner": self.owner, "query": self.query,
            "next_execution": iso(self.next_execution) if self.enabled else None,
            "active_execution_id": self.active_execution,
        }


@dataclass
class Execution:
    """One run of a scheduled query, for one trigger time (or a run-now)."""

    id: str
    query_name: str
    namespace: str
    trigger_time: int                  # the earliest trigger this run stands for
    last_trigger: int                  # the latest trigger it covers (merged missed triggers)
    merged: int = 1                    # how many schedule trigger times it covers
    manual: bool = False               # started by ALTER ... EXECUTE
    query: str = ""
    executed_as: str = ""
    state: str = State.INITED.value
    executor: Optional[str] = None
    executor_query_id: Optional[str] = None   # the Spark job group
    start: Optional[int] = None
    end: Optional[int] = None
    last_update: Optional[int] = None
    next_deadline: Optional[int] = None
    error_message: Optional[str] = None
    fencing_token: Optional[int] = None
    created: int = 0
    version: int = field(default=-1, compare=False)

    @property
    def status(self) -> State:
        return State(self.state)

    @classmethod
    def from_bytes(cls, raw: bytes, version: int = -1) -> Execution:
        return _load(cls, raw, version)

    def to_bytes(self) -> bytes:
        return _dump(self)

    @property
    def elapsed_s(self) -> Optional[float]:
        if self.start is None:
            return None
        end = self.end if self.end is not None else self.last_update
        return None if end is None else round((end - self.start) / 1000, 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheduled_execution_id": self.id, "schedule_name": self.query_name,
            "namespace": self.namespace, "trigger_time": iso(self.trigger_time),
            "merged_triggers": self.merged, "manual": self.manual,
            "executor": self.executor, "executor_query_id": self.executor_query_id,
            "user": self.executed_as, "state": self.state,
            "start_time": iso(self.start), "end_time": iso(self.end),
            "last_update_time": iso(self.last_update),
            "next_deadline": iso(self.next_deadline), "error_message": self.error_message,
            "elapsed": self.elapsed_s, "fencing_token": self.fencing_token,
        }


def execution_id(name: str, trigger_ms: int) -> str:
    """``<query>-<trigger ms>``: unique per trigger time, and its age readable from the name."""
    return f"{name}-{trigger_ms}"


def trigger_of(exec_id: str) -> Optional[int]:
    _, _, tail = exec_id.rpartition("-")
    return int(tail) if tail.isascii() and tail.isdigit() else None
