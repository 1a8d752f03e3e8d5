"""ScheduledQueries: the administration of scheduled queries, with Hive's security rules.

- Only users in ``scheduler_admins`` may create a scheduled query.
- ``EXECUTED AS`` someone else needs ``scheduler_impersonation``.
- The owner may alter and drop their own queries; admins may alter and drop any.

Every change is a versioned read-modify-write of the query's znode,
retried when a concurrent writer (the leader moving next_execution, an
executor freeing the query) got in first. The user is whoever the
settings name (``user``, else the OS user); until ZooKeeper authentication
lands (issue 6) these rules guard against mistakes, not against someone
who sets ZKLOCK_USER to an admin's name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zklock.config import Settings
from zklock.errors import InvalidArguments, NotAuthorized

from .ddl import AlterScheduledQuery, CreateScheduledQuery, DropScheduledQuery, ScheduledDdl
from .model import Execution, ScheduledQuery, State, check_name
from .store import Fenced, SchedulerStore

#: How many times a change is re-tried when its versioned write loses a race.
VERSION_RETRIES = 50


class ScheduledQueryNotFound(InvalidArguments):
    """No scheduled query of that name in the namespace."""


def now_ms() -> int:
    return int(time.time() * 1000)


class ScheduledQueries:
    """Create, alter, drop, run now, list: what SQL DDL and the CLI call."""

    def __init__(self, store: SchedulerStore, settings: Settings,
                 validate: Optional[Callable[[str], None]] = None) -> None:
        self.store = store
        self.settings = settings
        self.validate = validate  # Spark's parser, when a Spark session is at hand

    @property
    def user(self) -> str:
        return self.settings.effective_user

    # ---- DDL ------------------------------------------------------------------
    def apply(self, ddl: ScheduledDdl) -> ScheduledQuery | None:
        if isinstance(ddl, CreateScheduledQuery):
            return self.create(ddl)
        if isinstance(ddl, DropScheduledQuery):
            self.drop(ddl.name)
            return None
        return self.alter(ddl)

    def require_creator(self) -> None:
        """Raise NotAuthorized unless this user may create scheduled queries (the command
        line asks before it starts Spark to check the statement)."""
        user = self.user
        if user not in self.settings.admins:
            admins = (", ".join(sorted(self.settings.admins)) if self.settings.admins
                      else "")
            raise NotAuthorized(
                f"user {user!r} may not create scheduled queries: only scheduler admins may"
                f" ({'admins: ' + admins if admins else 'none are configured'}); set"
                " scheduler_admins (ZKLOCK_SCHEDULER_ADMINS or spark.zklock.scheduler.admins)")

    def create(self, ddl: CreateScheduledQuery) -> ScheduledQuery:
        self.require_creator()
        user = self.user
        executed_as = ddl.executed_as or user
        self._check_impersonation(executed_as)
        self._validate(ddl.statement)
        now = now_ms()
        q = ScheduledQuery(
            name=ddl.name, namespace=self.store.namespace, schedule=ddl.schedule.to_dict(),
            query=ddl.statement, owner=user, executed_as=executed_as, enabled=ddl.enabled,
            next_execution=ddl.schedule.next_after(now), created=now)
        try:
            self.store.create_query(q)
        except NodeExistsError:
            raise InvalidArguments(f"scheduled query {ddl.name!r} already exists in namespace"
                                   f" {self.store.namespace!r}") from None
        return q

    def alter(self, ddl: AlterScheduledQuery) -> ScheduledQuery:
        if ddl.action == "executed_as" and ddl.executed_as is not None:
            self._check_impersonation(ddl.executed_as)
        if ddl.action == "defined_as" and ddl.statement is not None:
            self._validate(ddl.statement)

        def change(q: ScheduledQuery) -> None:
            now = now_ms()
            if ddl.action == "schedule" and ddl.schedule is not None:
                q.schedule = ddl.schedule.to_dict()
                q.next_execution = ddl.schedule.next_after(now)
            elif ddl.action == "executed_as" and ddl.executed_as is not None:
                q.executed_as = ddl.executed_as
            elif ddl.action == "enable":
                if not q.enabled:  # no catch-up for the time it was off
                    q.next_execution = q.parsed_schedule.next_after(now)
                q.enabled = True
                q.consecutive_failures = 0
            elif ddl.action == "disable":
                q.enabled = False
            elif ddl.action == "defined_as" and ddl.statement is not None:
                q.query = ddl.statement
            elif ddl.action == "execute":
                q.run_requested = q.run_requested or now
            else:
                raise InvalidArguments(f"unknown ALTER action {ddl.action!r}")
        return self._modify(ddl.name, change)

    def run_now(self, name: str) -> ScheduledQuery:
        return self.alter(AlterScheduledQuery(check_name(name), "execute"))

    def drop(self, name: str) -> None:
        name = check_name(name)
        for _ in range(VERSION_RETRIES):
            q = self._get(name)
            self._check_owner(q, "drop")
            queued = self.store.get_execution(q.active_execution) \
                if q.active_execution else None
            if queued is not None and queued.status is State.INITED:
                queued.state = State.FAILED.value
                queued.end = queued.last_update = now_ms()
                queued.error_message = "the scheduled query was dropped before the run started"
            else:
                queued = None  # a running execution finishes; an ended one stays as it is
            try:
                self.store.drop_query(q, queued)
            except Fenced as exc:
                if exc.index == 0 and isinstance(exc.error, NoNodeError):
                    break
                continue
            return
        raise ScheduledQueryNotFound(f"scheduled query {name!r} changed under every attempt"
                                     " to drop it; try again")

    # ---- reads ----------------------------------------------------------------
    def get(self, name: str) -> ScheduledQuery:
        return self._get(check_name(name))

    def list(self) -> list[ScheduledQuery]:
        return self.store.list_queries()

    def executions(self, name: Optional[str] = None, limit: Optional[int] = None
                   ) -> list[Execution]:
        out = self.store.list_executions(check_name(name) if name else None)
        return out[-limit:] if limit else out

    # ---- helpers --------------------------------------------------------------
    def _get(self, name: str) -> ScheduledQuery:
        q = self.store.get_query(name)
        if q is None:
            raise ScheduledQueryNotFound(f"no scheduled query {name!r} in namespace"
                                         f" {self.store.namespace!r}")
        return q

    def _modify(self, name: str, change: Callable[[ScheduledQuery], None]) -> ScheduledQuery:
        for _ in range(VERSION_RETRIES):
            q = self._get(name)
            self._check_owner(q, "alter")
            change(q)
            try:
                self.store.update_query(q)
                return q
            except BadVersionError:
                continue
            except NoNodeError:
                break
        raise ScheduledQueryNotFound(f"scheduled query {name!r} vanished or kept changing;"
                                     " try again")

    def _check_owner(self, q: ScheduledQuery, what: str) -> None:
        user = self.user
        if user != q.owner and user not in self.settings.admins:
            raise NotAuthorized(f"user {user!r} may not {what} scheduled query {q.name!r}:"
                                f" it belongs to {q.owner!r} and {user!r} is not an admin")
        identity = getattr(self.store.client, "zklock_identity", None)
        if user != q.owner and identity is not None:
            identity.require_admin(f"to {what} another user's scheduled query")

    def _check_impersonation(self, executed_as: str) -> None:
        if executed_as != self.user and not self.settings.scheduler_impersonation:
            raise NotAuthorized(
                f"user {self.user!r} may not schedule a query EXECUTED AS {executed_as!r}:"
                " impersonation is off (set scheduler_impersonation=true to allow it)")

    def _validate(self, statement: str) -> None:
        from zklock.sql.parser import parse_extension

        from .ddl import is_scheduled_ddl

        if is_scheduled_ddl(statement):
            raise InvalidArguments("a scheduled query cannot itself be scheduled-query DDL")
        if parse_extension(statement) is not None:
            return  # zklock SQL (LOCK TABLE, SHOW LOCKS ...): parsed already
        if self.validate is not None:
            self.validate(statement)
