"""SchedulerStore: the scheduler's state in ZooKeeper: every read and write of its znodes.

Three other places use the ZooKeeper client directly, for what is not the scheduler's
state: the election (election.py) deletes its own candidate node on resignation and checks
the connection, the service (service.py) listens to the connection state and removes its
own executor node when it stops, and the views (views.py) list the namespaces under the
scheduler root. Everything that reads or changes queries, executions, the queue or the
leader's fenced writes goes through this module.

Layout under ``<scheduler_root>/<namespace>``::

    queries/<name>          ScheduledQuery JSON (persistent)
    executions/<name>-<ms>  Execution JSON (persistent), one per claimed trigger time
    queue/<execution id>    an INITED execution waiting for an executor (persistent)
    executors/<id>          a live scheduler process (ephemeral: host, pid, pool)
    leader/c-<seq>          election candidates (ephemeral sequential; lowest leads)

Every read-modify-write carries the znode version it read. The leader's
writes are multis that begin with a version check on its own candidate
node: once its session is gone that node is gone, so a deposed leader
cannot write anything (fencing). A trigger is claimed by one multi that
creates the execution node (named after the trigger time, so a second
claim of the same trigger cannot exist) and moves the query's
``next_execution`` at the version it was read.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)

from zklock.config import Settings, check_namespace
from zklock.errors import ZkLockError
from zklock.zk import ZkOps

from .model import Execution, ScheduledQuery


class Fenced(ZkLockError):
    """A versioned write lost: someone else changed the node first (or we were deposed)."""

    def __init__(self, error: BaseException, index: int) -> None:
        self.error = error
        self.index = index
        super().__init__(f"{type(error).__name__} at operation {index}")


@dataclass(frozen=True)
class LeaderToken:
    """The candidate node a leader checks in each of its writes."""

    path: str
    version: int = 0


@dataclass
class ExecutorInfo:
    id: str
    host: str
    pid: int
    pool_size: int
    started: int
    quiet_until: int
    running: list = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> ExecutorInfo:
        data = json.loads(raw.decode())
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def local_executor_info(executor_id: str, pool_size: int, started: int,
                        quiet_until: int) -> ExecutorInfo:
    return ExecutorInfo(executor_id, socket.gethostname(), os.getpid(), pool_size, started,
                        quiet_until)


class SchedulerStore:
    """Reads and versioned writes of one namespace's queries, executions and processes."""

    def __init__(self, client: KazooClient, settings: Settings,
                 namespace: Optional[str] = None) -> None:
        self.client = client
        self.namespace = check_namespace(namespace or settings.scheduler_namespace)
        self.base = f"{settings.scheduler_root.rstrip('/')}/{self.namespace}"
        self.queries = f"{self.base}/queries"
        self.executions = f"{self.base}/executions"
        self.queue = f"{self.base}/queue"
        self.executors = f"{self.base}/executors"
        self.leader = f"{self.base}/leader"
        self.ops = ZkOps(client)
        self._ready = False

    def ensure(self) -> None:
        if not self._ready:
            for path in (self.queries, self.executions, self.queue, self.executors,
                         self.leader):
                self.client.ensure_path(path)
            self._ready = True

    # ---- reads ----------------------------------------------------------------
    def query_path(self, name: str) -> str:
        return f"{self.queries}/{name}"

    def execution_path(self, exec_id: str) -> str:
        return f"{self.executions}/{exec_id}"

    def get_query(self, name: str, watch: Any = None) -> Optional[ScheduledQuery]:
        try:
            raw, stat = self.client.get(self.query_path(name), watch=watch)
        except NoNodeError:
            return None
        return ScheduledQuery.from_bytes(raw, stat.version)

    def get_execution(self, exec_id: str) -> Optional[Execution]:
        try:
            raw, stat = self.client.get(self.execution_path(exec_id))
        except NoNodeError:
            return None
        return Execution.from_bytes(raw, stat.version)

    def query_names(self, watch: Any = None) -> list[str]:
        self.ensure()
        return sorted(self.client.get_children(self.queries, watch=watch))

    def list_queries(self, names: Optional[Iterable[str]] = None,
                     watch: Any = None) -> list[ScheduledQuery]:
        names = self.query_names() if names is None else list(names)
        out = []
        for got in self.get_many((self.query_path(n) for n in names), watch=watch):
            if got is not None:
                out.append(ScheduledQuery.from_bytes(*got))
        return out

    def execution_ids(self) -> list[str]:
        self.ensure()
        return self.client.get_children(self.executions)

    def list_executions(self, query: Optional[str] = None,
                        ids: Optional[Sequence[str]] = None) -> list[Execution]:
        if ids is None:
            ids = self.execution_ids()
            if query is not None:
                ids = [i for i in ids if i.rpartition("-")[0] == query]
        out = [Execution.from_bytes(*got)
               for got in self.get_many(self.execution_path(i) for i in ids) if got is not None]
        out.sort(key=lambda e: (e.trigger_time, e.id))
        return out

    def queued(self, watch: Any = None) -> list[str]:
        self.ensure()
        return sorted(self.client.get_children(self.queue, watch=watch),
                      key=lambda i: (int(i.rpartition("-")[2] or 0), i))

    def get_many(self, paths: Iterable[str], watch: Any = None
                 ) -> list[Optional[tuple[bytes, int]]]:
        """(data, version) of many nodes in one round trip, in order; None where missing.

        Without a watch this is zklock.zk's multiRead; a watch needs a getData each
        (multiRead sets none), pipelined."""
        paths = list(paths)
        if watch is None:
            got = self.ops.get_many(paths)
            return [None if (x := got.get(p)) is None else (x[0], x[1].version) for p in paths]
        pending = [self.client.get_async(p, watch=watch) for p in paths]
        out: list[Optional[tuple[bytes, Any]]] = []
        for p in pending:
            try:
                raw, stat = p.get()
                out.append((raw, stat.version))
            except NoNodeError:
                out.append(None)
        return out

    # ---- processes ------------------------------------------------------------
    def register_executor(self, info: ExecutorInfo) -> None:
        self.ensure()
        path = f"{self.executors}/{info.id}"
        try:
            self.client.create(path, info.to_bytes(), ephemeral=True)
        except NodeExistsError:  # our own node from before a reconnect
            self.client.set(path, info.to_bytes())

    def update_executor(self, info: ExecutorInfo) -> None:
        """Publish what this process runs (fire and forget)."""
        self.client.set_async(f"{self.executors}/{info.id}", info.to_bytes())

    def live_executors(self) -> dict[str, ExecutorInfo]:
        self.ensure()
        ids = self.client.get_children(self.executors)
        out = {}
        for i, got in zip(ids, self.get_many(f"{self.executors}/{i}" for i in ids)):
            if got is not None:
                try:
                    out[i] = ExecutorInfo.from_bytes(got[0])
                except (ValueError, TypeError, KeyError):  # not one of ours: skip it
                    continue
        return out

    def join_election(self, executor_id: str) -> str:
        self.ensure()
        return self.client.create(f"{self.leader}/c-", executor_id.encode(), ephemeral=True,
                                  sequence=True)

    def candidates(self, watch: Any = None) -> list[str]:
        """Candidate node names, the leader first."""
        self.ensure()
        kids = self.client.get_children(self.leader, watch=watch)
        kids = [k for k in kids  # ours only
                if k.startswith("c-") and k[2:].isascii() and k[2:].isdigit()]
        return sorted(kids, key=lambda k: int(k[2:]))

    def leader_id(self) -> Optional[str]:
        """The executor id of the current leader, or None."""
        for name in self.candidates():
            try:
                raw, _ = self.client.get(f"{self.leader}/{name}")
                return raw.decode()
            except NoNodeError:
                continue
        return None

    # ---- writes ---------------------------------------------------------------
    def _commit(self, build: Any) -> list[Any]:
        """Run a multi; raise :class:`Fenced` naming the operation that failed."""
        t = self.client.transaction()
        build(t)
        results = t.commit()
        for i, r in enumerate(results):
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise Fenced(r, i)
        return results

    def create_query(self, q: ScheduledQuery) -> None:
        self.ensure()
        self.client.create(self.query_path(q.name), q.to_bytes())

    def update_query(self, q: ScheduledQuery) -> None:
        """Write ``q`` at the version it was read (BadVersionError if it changed)."""
        stat = self.client.set(self.query_path(q.name), q.to_bytes(), version=q.version)
        q.version = stat.version

    def drop_query(self, q: ScheduledQuery, queued: Optional[Execution]) -> None:
        """Delete ``q`` at its version; a queued (INITED) execution is withdrawn with it, in
        the same multi, so no executor can take a run of a dropped query."""
        def build(t: Any) -> None:
            t.delete(self.query_path(q.name), version=q.version)
            if queued is not None:
                t.delete(f"{self.queue}/{queued.id}")
                t.set_data(self.execution_path(queued.id), queued.to_bytes(),
                           version=queued.version)
        self._commit(build)

    def claim_async(self, token: Optional[LeaderToken], q: ScheduledQuery,
                    e: Execution) -> Any:
        """:meth:`claim` without waiting: returns kazoo's async result of the multi."""
        t = self.client.transaction()
        if token is not None:
            t.check(token.path, token.version)
        t.create(self.execution_path(e.id), e.to_bytes())
        t.create(f"{self.queue}/{e.id}", b"")
        t.set_data(self.query_path(q.name), q.to_bytes(), version=q.version)
        return t.commit_async()

    def take_async(self, e: Execution) -> Any:
        """:meth:`take` without waiting (``e`` already says EXECUTING): kazoo's async result."""
        t = self.client.transaction()
        t.delete(f"{self.queue}/{e.id}")
        t.set_data(self.execution_path(e.id), e.to_bytes(), version=e.version)
        return t.commit_async()

    def update_execution(self, e: Execution, timeout: Optional[float] = None) -> int:
        """Versioned write of an execution; returns the new mzxid (BadVersionError if fenced).

        With ``timeout``, a write that ZooKeeper has not answered in time raises (kazoo
        would otherwise hold it until the connection is back)."""
        stat = self.client.set_async(self.execution_path(e.id), e.to_bytes(),
                                     version=e.version).get(timeout=timeout)
        e.version = stat.version
        return stat.mzxid

    def finish(self, token: Optional[LeaderToken], e: Execution,
               q: Optional[ScheduledQuery]) -> None:
        """Write the execution's end and free its query (``q`` at its read version)."""
        def build(t: Any) -> None:
            if token is not None:
                t.check(token.path, token.version)
            t.set_data(self.execution_path(e.id), e.to_bytes(), version=e.version)
            if q is not None:
                t.set_data(self.query_path(q.name), q.to_bytes(), version=q.version)
        self._commit(build)
        e.version += 1
        if q is not None:
            q.version += 1

    def dequeue(self, exec_ids: Sequence[str]) -> None:
        for i in exec_ids:
            try:
                self.client.delete(f"{self.queue}/{i}")
            except NoNodeError:
                pass

    def delete_executions(self, token: LeaderToken, exec_ids: Sequence[str]) -> int:
        """Trim executions, fenced, in multis of at most 500 deletes."""
        done = 0
        for start in range(0, len(exec_ids), 500):
            chunk = exec_ids[start:start + 500]

            def build(t: Any, chunk: Sequence[str] = chunk) -> None:
                t.check(token.path, token.version)
                for i in chunk:
                    t.delete(self.execution_path(i))
            try:
                self._commit(build)
                done += len(chunk)
            except Fenced as exc:
                if isinstance(exc.error, NoNodeError) and exc.index > 0:
                    # one of them was trimmed already: fall back to one by one
                    for i in chunk:
                        try:
                            self._commit(lambda t, i=i: (t.check(token.path, token.version),
                                                         t.delete(self.execution_path(i))))
                            done += 1
                        except Fenced as inner:
                            if not isinstance(inner.error, NoNodeError) or inner.index == 0:
                                raise
                else:
                    raise
        return done


__all__ = ["BadVersionError", "ExecutorInfo", "Fenced", "LeaderToken", "SchedulerStore"]
