"""zklock's own SQL in a LockingSession: SHOW LOCKS, EXPLAIN LOCKS, SET, LOCK/UNLOCK TABLE,
SHOW LEASE, DROP FORCE LEASE, RECOVER LEASE.

Spark's parser does not know these statements; :func:`~.extensions.parse_extension` (the
one parser) recognises them, and :data:`HANDLER` runs them. The handler is registered in
:mod:`.registry` like the statements layers above add (the scheduler's DDL), so the session
has one way to route a statement that is not Spark's: ask the registry.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Optional, Protocol

from ..config import SET_KEYS, SETTABLE, Settings
from ..errors import InvalidArguments, LeaseNotFound
from ..locks.listing import LockRecord, hive_rows
from ..locks.objects import LockObject
from ..manager import LockManager
from ..sql.parser import (
    DropForceLease,
    ExplainLocks,
    LockTable,
    RecoverLease,
    SetZkLock,
    ShowLease,
    ShowLocks,
    Target,
    UnlockTable,
    parse_extension,
)
from . import registry
from .blocks import LockedExecution
from .planner import LockPlan, Planner, quoted_name, write_target

#: Columns of SHOW LOCKS, then the extra ones of SHOW LOCKS EXTENDED and sysdb.locks.
LOCK_COLUMNS = "object STRING, mode STRING"
EXTENDED_COLUMNS = (LOCK_COLUMNS + ", user STRING, host STRING, pid BIGINT, query_id STRING,"
                    " query STRING, acquired_at TIMESTAMP, lock_type STRING,"
                    " lease_id BIGINT, end_at TIMESTAMP, fencing_token BIGINT")
EXPLAIN_COLUMNS = "object STRING, mode STRING"
#: SHOW LOCKS with show_locks_format=hive: Hive's two columns (EXTENDED lines in the first)
HIVE_LOCK_COLUMNS = "tab_name STRING, mode STRING"
LEASE_COLUMNS = ("lease_id BIGINT, holder STRING, user STRING, objects STRING,"
                 " start_utc TIMESTAMP, end_utc TIMESTAMP")
#: LOCK TABLE without FOR lasts this long (renew it, or UNLOCK it sooner).
DEFAULT_LEASE_S = 3600.0


class SessionContext(Protocol):
    """The session behind a zklock statement: a LockingSession (session.py), seen only
    through this protocol, so that this module does not import the session that imports
    it."""

    execution: LockedExecution

    @property
    def settings(self) -> Settings:
        """The session's settings now (its own over its manager's, and what SET changed)."""

    def set(self, **changes: Any) -> Settings:
        """Change settings for the session's every path, as ``SET zklock.*`` does."""

    @property
    def spark(self) -> Any:
        """The wrapped SparkSession."""

    @property
    def planner(self) -> Planner:
        """The session's lock planner."""

    @property
    def manager(self) -> LockManager:
        """The session's LockManager."""

    def refresh_system_views(self, text: str) -> None:
        """Publish the sysdb views ``text`` names."""

    def explain_locks(self, sql: str) -> LockPlan:
        """The locks ``sql`` would take, without taking anything."""


def recognises(sql: str) -> bool:
    return parse_extension(sql) is not None


def run(session: SessionContext, sql: str) -> Any:
    """Run one of zklock's statements; a DataFrame of its result."""
    ext = parse_extension(sql)
    if isinstance(ext, ShowLocks):
        return show_locks(session, ext)
    if isinstance(ext, ExplainLocks):
        plan = session.explain_locks(ext.statement)
        return session.spark.createDataFrame(plan.rows(), EXPLAIN_COLUMNS)
    if isinstance(ext, SetZkLock):
        return set_option(session, ext)
    if isinstance(ext, LockTable):
        return lock_table(session, ext)
    if isinstance(ext, UnlockTable):
        return unlock_table(session, ext)
    if isinstance(ext, ShowLease):
        return show_lease(session, ext)
    if isinstance(ext, DropForceLease):
        objs = [target_object(session, t, strict=True) for t in ext.targets]
        n = session.manager.force_drop_lease(objs)
        return session.spark.createDataFrame([(n,)], "dropped_nodes BIGINT")
    if isinstance(ext, RecoverLease):
        obj = target_object(session, ext.target, strict=True)
        return session.spark.createDataFrame([(i,) for i in session.manager.recover_lease(obj)],
                                             "lease_id BIGINT")
    raise InvalidArguments(f"unsupported statement {ext!r}")


HANDLER = registry.StatementHandler("zklock SQL", recognises=recognises, run=run)


# ---- the statements ------------------------------------------------------------------
def show_locks(session: SessionContext, ext: ShowLocks) -> Any:
    obj = target_object(session, ext.target)
    records = session.manager.show(obj, extended=ext.extended)
    if session.settings.show_locks_format == "hive":
        return session.spark.createDataFrame(hive_rows(records, ext.extended),
                                             HIVE_LOCK_COLUMNS)
    return lock_rows(session, records, ext.extended)


def lock_rows(session: SessionContext, records: list[LockRecord], extended: bool) -> Any:
    """SHOW LOCKS' rows (and sysdb.locks'), in zklock's columns."""
    rows = [_lock_row(r, extended) for r in records]
    return session.spark.createDataFrame(rows, EXTENDED_COLUMNS if extended else LOCK_COLUMNS)


def lock_table(session: SessionContext, ext: LockTable) -> Any:
    obj = target_object(session, ext.target, strict=True)
    seconds = ext.seconds if ext.seconds is not None else DEFAULT_LEASE_S
    # held by this process's lease holder (user@host:pid:random, or lease_holder)
    lease_id = session.manager.grab_lease([(obj, ext.mode)], duration_s=seconds)
    return session.spark.createDataFrame([(lease_id, obj.name, ext.mode)],
                                         "lease_id BIGINT, object STRING, mode STRING")


def unlock_table(session: SessionContext, ext: UnlockTable) -> Any:
    obj = target_object(session, ext.target, strict=True)
    manager = session.manager
    holder = manager.lease_holder  # only this process's own leases
    mine = [x for x in manager.list_lease([obj], include_expired=True)
            if x.holder == holder and obj.name in x.leaves]
    if not mine:
        raise LeaseNotFound(f"no lease of {holder} on {obj.name}")
    for x in mine:
        manager.drop_lease(x.lease_id, [obj])
    return session.spark.createDataFrame([(x.lease_id, obj.name) for x in mine],
                                         "lease_id BIGINT, object STRING")


def show_lease(session: SessionContext, ext: ShowLease) -> Any:
    objs = [target_object(session, t) for t in ext.targets] or None
    rows = [(x.lease_id, x.holder, x.user, " ".join(f"{o}:{m.upper()}" for o, m in x.objects),
             _ts(x.start_ms), _ts(x.end_ms)) for x in session.manager.list_lease(objs)]
    return session.spark.createDataFrame(rows, LEASE_COLUMNS)


def set_option(session: SessionContext, ext: SetZkLock) -> Any:
    """SET zklock.<key>[=<value>] (and Hive's names): change or show a session setting.
    A key no setting has, or one a running session cannot change, is refused in one line:
    none is handed to Spark, where it would change nothing."""
    key = ext.key.lower()
    name = SET_KEYS.get(key)
    if name is None:
        raise InvalidArguments(
            f"unknown zklock setting {ext.key!r}; a session can SET"
            f" {', '.join(sorted(k for k, n in SET_KEYS.items() if n in SETTABLE))}")
    if ext.value is not None and name not in SETTABLE:
        raise InvalidArguments(
            f"{ext.key} cannot change in a running session (it sets {name}: where or as whom"
            " the session locks); set it in the Spark conf, the environment or the"
            " LockingSession's arguments before the session starts")
    if ext.value is not None:
        # a timeout SET now governs the wait, a count SET now does: the later SET wins
        unset = {"timeout": {"retries": None}}.get(name, {})
        try:
            session.set(**{name: ext.value}, **unset)
        except InvalidArguments as exc:
            raise InvalidArguments(f"{ext.key}: {exc}") from None
    settings = session.settings
    current = {"retries": "unset" if settings.retries is None else settings.retries}.get(
        name, getattr(settings, name))
    return _key_value(session, ext.key,
                      str(current).lower() if isinstance(current, bool) else str(current))


def target_object(session: SessionContext, ext: Target,
                  strict: bool = False) -> Optional[LockObject]:
    """The object a zklock statement names (None: all). ``strict`` (UNLOCK, DROP FORCE
    LEASE) refuses a partition spec that does not match the table's partition columns
    exactly, so a typo can never widen a drop to the whole table."""
    if ext.database is not None:
        return LockObject(ext.database)
    if ext.table is None:
        return None
    name = quoted_name(ext.table)
    obj = write_target(session.planner, name)
    if obj is None:
        raise InvalidArguments(f"{'.'.join(ext.table)} is a temporary view, not a table")
    if not ext.partition:
        return obj
    found = write_target(session.planner, name, ext.partition)
    if found is None or (strict and len(found.partition) != len(ext.partition)):
        raise InvalidArguments(
            f"PARTITION ({', '.join(ext.partition)}) does not name a partition of"
            f" {obj.name} (keys must be its partition columns, leading ones first)")
    return found


def _key_value(session: SessionContext, key: str, value: str) -> Any:
    return session.spark.createDataFrame([(key, value)], "key STRING, value STRING")


def _ts(ms: Optional[int]) -> Optional[dt.datetime]:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


def _lock_row(r: LockRecord, extended: bool) -> tuple:
    if not extended:
        return (r.object, r.mode.value)
    d = r.data
    return (r.object, r.mode.value, d.user if d else None, d.host if d else None,
            d.pid if d else None, d.query_id if d else None, d.query if d else None,
            _ts(r.ctime_ms), r.kind, r.czxid if r.explicit else None, _ts(r.end_ms), r.czxid)
