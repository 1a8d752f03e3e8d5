"""LockManager: Hive's all-or-none S/X protocol in a constant number of round trips.

One attempt at a set of N objects costs, whatever N is:

1. on retries, or when an object node is missing, a pipelined getChildren of
   every object node (the pre-read): a visible conflict denies at once,
   before anything is written, and it tells which object nodes to create;
2. one multi that creates the missing object nodes and every lock node
   (``create2``, so each reply carries the node's czxid);
3. a getChildren (multiRead) of the object nodes that already existed (nodes
   this multi created cannot have older siblings), to apply the grant rule,
   sent right behind the multi without waiting for it: ZooKeeper serves a
   session's requests in order, so 2 and 3 cost one round trip together;
4. on denial, one multi that deletes what the attempt created.

Object nodes are ZooKeeper containers, created in the same multi when
missing, so release is one multi deleting the lock nodes and the server
removes object nodes left empty. Hive makes three sequential calls per object per attempt and keeps
earlier objects while it retries later ones; this never holds a partial set.

Where things are: :meth:`LockManager.acquire_targets` is the acquire loop, a ``match``
over what each :meth:`LockManager._attempt` comes to (zklock/locks/attempt.py: Granted,
Denied, Retry). The sets it hands out belong to its
:class:`~zklock.locks.watcher.SessionWatcher`, which moves them as the session comes and
goes and releases them; the manager gives the watcher only callables (delete nodes, finish
what failed deletes left behind). :class:`~zklock.leases.lease.Leases` and
:class:`~zklock.locks.waits.Waits` state what they need from the manager as protocols, so
neither imports this module.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, Union

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry, RetryFailedError

from .config import Settings
from .errors import LockNotAcquired, LockRequestCancelled, ZooKeeperUnavailable
from .handler import PollingHandler
from .leases.lease import Lease, Leases, process_holder
from .locks import pending
from .locks.attempt import Conflict, Denied, Granted, Outcome, Retry, describe_conflicts
from .locks.intents import Request, View, defers_to, judge
from .locks.leftovers import Leftovers
from .locks.listing import LockRecord, holders_behind_intents, ms_to_iso, walk
from .locks.locknode import HIVE_PREFIX, PROTOCOL, LockData, LockNodeName
from .locks.lockrequest import LockSpec, LockTarget, normalize
from .locks.lockset import HeldLock, LockSet, sole_versions
from .locks.notice import WaitNotice, to_stderr
from .locks.objects import LockObject
from .locks.retry import RetryPolicy
from .locks.waits import Waits
from .locks.watcher import SessionWatcher, dispatch
from .observe import metrics
from .observe.events import LockEvents
from .zk import (
    CONNECTION_ERRORS,
    EPHEMERAL,
    PERSISTENT,
    SEQUENTIAL,
    ChunkedMultiFailed,
    MultiFailed,
    ZkOps,
    chunk_ops,
)

log = logging.getLogger(__name__)

#: How long an attempt keeps re-trying races with object nodes appearing or vanishing under it.
#: ZooKeeper's container sweep deletes empty object nodes at up to 10,000 a minute
#: (znode.container.maxPerMinute), so a large set can race it for seconds: a fixed count of
#: immediate re-tries gave up on 1,000-object sets while the sweep ran.
RACE_WINDOW_S = 60.0


class _Races:
    """The undecided tries (:class:`Retry`) of one attempt: retried at once, then with a short
    growing backoff, for up to :data:`RACE_WINDOW_S`; a denial or a fresh attempt starts anew."""

    def __init__(self) -> None:
        self.count = 0
        self.until = time.monotonic() + RACE_WINDOW_S

    def another(self) -> None:
        """Count one; raise :class:`LockNotAcquired` past the window, else wait a moment after
        the first few (past a blip: let the sweep, or the other creator, move on)."""
        self.count += 1
        if time.monotonic() >= self.until:
            raise LockNotAcquired(
                f"gave up after {self.count} races in {RACE_WINDOW_S:g}s with concurrent"
                " object node creation/removal")
        if self.count >= 3:
            time.sleep(min(0.5, 0.01 * 2 ** (self.count - 3)) * random.uniform(0.5, 1.0))


def _created_path(result: Any) -> str:
    """A create's path from a multi result (a plain path, or (path, stat) for create2)."""
    return result[0] if isinstance(result, tuple) else result


def _client_ip() -> str:
    """This host's address, as Hive's lock data records its client IP (Hive takes
    InetAddress.getLocalHost())."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def connect(settings: Settings) -> KazooClient:
    """Start a KazooClient, failing within the connect timeout with a clear error."""
    from .auth import Identity

    hosts = settings.connect_string()
    identity = Identity.from_settings(settings)
    client = KazooClient(
        hosts=hosts, timeout=settings.session_timeout,
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
        default_acl=identity.acl(), handler=PollingHandler(), **identity.client_args(),
    )
    client.zklock_identity = identity  # type: ignore[attr-defined]
    try:
        client.start(timeout=settings.connect_timeout)
    except (KazooTimeoutError, OSError, ValueError) as exc:
        client.stop()
        client.close()
        raise ZooKeeperUnavailable(
            f"cannot reach ZooKeeper at {hosts} within {settings.connect_timeout:g}s"
            f" ({type(exc).__name__}); start one with `zklock server start` or set ZKLOCK_ZK"
        ) from None
    return client


class _Acquiring:
    """One acquire's progress: what it wants, its denials so far, who held what it wanted at
    the last (described: who holds it, since when), its published wait and its notice."""

    def __init__(self, wanted: list[list[str]], query_id: str) -> None:
        self.wanted = wanted
        self.query_id = query_id
        self.started = time.monotonic()
        self.denied = 0
        self.waited_for = ""  # whom a grant after a wait waited for
        self.notice: Optional[WaitNotice] = None
        self.published: Any = None  # its record in zklock waits, once it waits
        self._blockers: list[Conflict] = []
        self._nodes: frozenset[str] = frozenset()  # their nodes, as the denial listed them

    def described(self, conflicts: list[Conflict], describe: Callable[[list[Conflict]], None],
                  final: bool) -> list[Conflict]:
        """``conflicts``, with who holds them (one pipelined read, ``describe``): while it
        waits, read again only when the blockers changed or were not read; fresh at the
        give-up (``final``)."""
        nodes = frozenset(c.holder_node for c in conflicts)
        if final or nodes != self._nodes or any(
                b.readable and b.record is None for b in self._blockers):
            describe(conflicts)
            self._blockers, self._nodes = conflicts, nodes
        else:
            conflicts = self._blockers  # the same holders, described already
        self.waited_for = describe_conflicts(conflicts)
        return conflicts


class LockManager:
    """Takes, lists and releases hierarchical S/X locks on a real ZooKeeper."""

    def __init__(self, hosts: Optional[str] = None, root: Optional[str] = None,
                 retries: Optional[int] = None, retry_interval: Optional[float] = None,
                 support_concurrency: Optional[bool] = None,
                 client: Optional[KazooClient] = None,
                 settings: Optional[Settings] = None, **more: Any) -> None:
        overrides = dict(hosts=hosts, root=root, retries=retries, retry_interval=retry_interval,
                         support_concurrency=support_concurrency, **more)
        if settings is None:
            settings = Settings.resolve(overrides)
        else:
            settings = settings.with_(**{k: v for k, v in overrides.items() if v is not None})
        self.settings = settings
        self.root = settings.root
        self._own_client = client is None
        self.client = client if client is not None else connect(settings)
        self.ops = ZkOps(self.client, timeout=settings.outage_deadline)
        #: what failed deletes left in a live session, deleted until gone
        self.leftovers = Leftovers(
            self.client, self.delete_nodes,
            lambda paths, attempt_id: self.ops.with_retry(self._sweep_attempt, paths,
                                                          attempt_id),
            self.ops.exists_many)
        self._root_ready = False
        self._host = socket.gethostname()
        self._client_ip = _client_ip()
        self.events = LockEvents(settings.event_log, settings.job or settings.effective_user,
                                 settings.effective_user)
        #: owns the implicit sets this manager hands out and their session transitions
        self.watcher = SessionWatcher(
            self.client, self.ops, self.events, settings.lose_on_suspend,
            self._session_label(), release_nodes=self._let_go,
            delete_nodes=self.delete_nodes, after_reconnect=self.leftovers.on_reconnect)
        #: the Spark application whose statements this manager locks (zklock.spark sets
        #: it): recorded in implicit lock nodes, so that `zklock show --extended` names it
        self.application = ""
        self.leases = Leases(self)
        self.waits = Waits(self)
        #: where a waiting request's lines go (zklock/locks/notice.py): this process's
        #: stderr, unless the layer above sends them elsewhere (the child lock client)
        self.say_waiting: Callable[[str], None] = to_stderr
        if settings.metrics_port:
            metrics.serve(settings.metrics_port, settings.metrics_bind)
        metrics.session_state(self._session_label(), "CONNECTED")

    # ---- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        """Release nothing implicitly held elsewhere; stop the client if we started it."""
        self.watcher.close()
        self.leftovers.close()
        if self._own_client:
            try:
                self.client.stop()
            finally:
                self.client.close()

    def __enter__(self) -> LockManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def session_id(self) -> Optional[int]:
        cid = self.client.client_id
        return cid[0] if cid else None

    # ---- acquire ------------------------------------------------------------
    def acquire(self, locks: Iterable[LockSpec], query_id: Optional[str] = None,
                query: Optional[str] = None, retries: Optional[int] = None,
                retry_interval: Optional[float] = None,
                timeout: Optional[float] = None,
                settings: Optional[Settings] = None,
                cancelled: Optional[threading.Event] = None) -> LockSet:
        """Take every lock of the request or none; raise :class:`LockNotAcquired` if denied.

        A denied attempt deletes what it created, sleeps and retries the whole set:
        ``retries`` more times ``retry_interval`` apart (Hive's way), or, with no count
        (the default), backing off from ``retry_interval`` until ``timeout`` has passed.
        ``settings``: the caller's, layered over this manager's (a LockingSession's,
        :meth:`Settings.over`); the arguments of the call are stronger than both
        (:meth:`Settings.wait` says which of ``retries`` and ``timeout`` decides).
        Setting ``cancelled`` (from another thread) gives the request up while it waits:
        :class:`~zklock.errors.LockRequestCancelled`, nothing held.
        """
        settings = self.settings if settings is None else settings
        targets = normalize(locks)
        if not settings.support_concurrency or not targets:
            return LockSet.empty()
        pending.settle()  # this process's completed statements' releases go first
        data = self.lock_data(query_id, query, kind="implicit", settings=settings,
                              app=self.application)
        return self.acquire_targets(targets, data, explicit=False, retries=retries,
                                     retry_interval=retry_interval, query_id=query_id or "",
                                     timeout=timeout, settings=settings, cancelled=cancelled)

    def acquire_targets(self, targets: list[LockTarget], data: LockData, explicit: bool,
                         retries: Optional[int] = None, retry_interval: Optional[float] = None,
                         query_id: str = "", deadline: Optional[float] = None,
                         error: type[LockNotAcquired] = LockNotAcquired,
                         timeout: Optional[float] = None,
                         settings: Optional[Settings] = None,
                         cancelled: Optional[threading.Event] = None) -> LockSet:
        """Acquire normalised ``targets`` with ``data`` in their nodes (``explicit``: a
        lease's persistent nodes), retrying ``retries`` times, or until ``deadline`` (a
        monotonic time), or as ``settings`` (default: this manager's) and the call's
        ``retries``/``timeout`` say (:class:`~zklock.locks.retry.RetryPolicy`). Set,
        ``cancelled`` ends a waiting request before its next attempt, and at once when it
        sleeps: LockRequestCancelled, nothing held (a JVM caller, as Hive's Driver, would
        interrupt the waiting thread; a Python thread cannot be interrupted).

        Each try is one :meth:`_attempt`, which comes to Granted, Denied or Retry
        (zklock/locks/attempt.py says what the loop below does with each).
        """
        settings = self.settings if settings is None else settings
        policy = RetryPolicy.of(settings, retries, retry_interval, timeout, deadline)
        self.ensure_root()
        # a lease keeps the recipe's names, whose attempt id groups its nodes (docs/hive.md)
        naming = "recipe" if explicit else settings.node_naming
        req = Request(targets, {t: t.obj.znode(self.root) for t in targets}, explicit, data,
                      naming=naming, client_ip=self._client_ip)
        acquiring = _Acquiring([[t.obj.name, t.mode.value] for t in targets], query_id)
        races = _Races()  # undecided tries of the current attempt
        pre_read = False  # the first attempt is optimistic: every object node exists
        granted = False
        try:
            while True:
                if cancelled is not None and cancelled.is_set():
                    self.events.cancel(acquiring.wanted, query_id, acquiring.denied)
                    raise LockRequestCancelled(
                        f"lock request cancelled after {acquiring.denied} attempt(s)"
                        + (f": {acquiring.waited_for}" if acquiring.waited_for else ""))
                req.leave_intents = policy.will_retry(acquiring.denied) and settings.intents
                match self._try(req, pre_read, acquiring.wanted):
                    case Granted(lockset):
                        granted = self._hand_out(lockset, req, explicit, acquiring)
                        if granted:
                            return lockset
                        # the connection dropped since the check: the set is released
                        # again; try afresh, as a new attempt
                        races, pre_read = _Races(), acquiring.denied > 0
                    case Retry(reason=reason, pre_read=again_pre_read):
                        log.debug("acquire of %d object(s) retried: %s", len(targets), reason)
                        races.another()
                        pre_read = again_pre_read
                    case Denied(conflicts):
                        self._wait_after(conflicts, req, policy, settings, acquiring, error,
                                         cancelled)
                        # a retry reads first: denies early, once it has a ticket
                        races, pre_read = _Races(), True
        finally:
            if acquiring.published is not None:
                self.waits.withdraw(acquiring.published)
            leftover = req.intent_nodes()
            if leftover and (not granted or explicit):
                self._withdraw_intents(leftover)
            if req.unsure_intents and not granted:
                self._sweep_intents(req)

    def _try(self, req: Request, pre_read: bool, wanted: list[list[str]]) -> Outcome:
        """One :meth:`_attempt`; ZooKeeperUnavailable when ZooKeeper is lost meanwhile."""
        try:
            return self._attempt(req, pre_read)
        except (*CONNECTION_ERRORS, RetryFailedError) as exc:
            raise ZooKeeperUnavailable(
                f"lost ZooKeeper at {self.settings.connect_string()} while acquiring"
                f" {', '.join(o for o, _ in wanted[:5])} ({type(exc).__name__});"
                " nothing is held: what the attempt created goes with its session or"
                " is deleted when the session returns") from None

    def _hand_out(self, lockset: LockSet, req: Request, explicit: bool,
                  acquiring: _Acquiring) -> bool:
        """Give the caller ``lockset``, granted after ``acquiring``'s denials, and record
        the grant; False when the connection dropped since the attempt's check (the set was
        released again, and the acquire goes on)."""
        data = req.data
        lockset.query_id = acquiring.query_id
        lockset.attempts = acquiring.denied + 1
        lockset.waited_for = acquiring.waited_for
        # a lease's events name it by its id, whichever process ends it
        lockset.set_id = (f"lease:{lockset.fencing_token}" if explicit
                          else secrets.token_hex(8))
        lockset.counted = not explicit
        until = (int(time.time() * 1000 + data.duration_s * 1000)
                 if explicit and data.duration_s else None)
        self.events.grant(lockset.set_id, acquiring.wanted, acquiring.query_id,
                          time.monotonic() - acquiring.started, acquiring.denied + 1,
                          lockset.fencing_token, lease=explicit, holder=data.holder,
                          until_ms=until)
        if explicit:  # a lease outlives the session: never "lost" with it
            return True
        # the set keeps its intents until it releases (zklock/locks/intents.py)
        lockset.intents = req.intent_nodes()
        req.intents.clear()
        return self.watcher.hand_out(lockset)

    def _wait_after(self, conflicts: list[Conflict], req: Request, policy: RetryPolicy,
                    settings: Settings, acquiring: _Acquiring,
                    error: type[LockNotAcquired],
                    cancelled: Optional[threading.Event]) -> None:
        """After a denial by ``conflicts``: ``error`` naming who holds them when
        ``policy`` gives up; else the wait published (zklock waits), its user told, and
        the policy's pause slept (until ``cancelled``, if set meanwhile)."""
        acquiring.denied += 1
        pause = policy.after(acquiring.denied)
        conflicts = acquiring.described(conflicts, self._describe, pause.exhausted)
        self.events.denial(acquiring.wanted, acquiring.query_id, acquiring.denied,
                           [c.to_event() for c in conflicts], final=pause.exhausted)
        if pause.exhausted:
            raise error(f"lock not acquired after {acquiring.denied} attempt(s):"
                        f" {acquiring.waited_for}", conflicts=conflicts)
        acquiring.published = self.waits.publish(
            acquiring.published, acquiring.wanted, req.data, conflicts, acquiring.denied,
            acquiring.started, settings.intents)
        if settings.wait_notice:
            if acquiring.notice is None:  # made at the first denial: most never wait
                acquiring.notice = WaitNotice(req.data.query, self.say_waiting,
                                              started=acquiring.started)
            acquiring.notice.denied([(c.target.obj.name, c.target.mode.value)
                                     for c in conflicts], acquiring.waited_for)
        policy.sleep(pause, cancelled)

    def _sweep_intents(self, req: Request) -> None:
        """Delete every intent of ``req`` by its ticket, listed or not: a request that ends
        after a multi leaving intents lost its reply. Connected, at once (one listing, one
        delete); else, or should that fail, as a leftover of this session."""
        paths = list(req.paths.values())
        marker = req.intent_marker()
        if self.client.state == KazooState.CONNECTED:
            try:
                self._sweep_attempt(paths, marker)
                return
            except Exception as exc:
                log.debug("could not sweep a request's intents now: %s", exc)
        self._leave_behind(attempt=(paths, marker))

    def _withdraw_intents(self, nodes: list[str]) -> None:
        """Delete a request's intents when it is granted a lease or gives up; they are
        ephemeral, so a failure here only leaves them until the session ends (or the next
        reconnect's clean-up)."""
        self._let_go(nodes, wait=False)

    def _attempt(self, req: Request, pre_read: bool) -> Outcome:
        """One try at the whole set: :class:`Granted`, :class:`Denied` or :class:`Retry`.

        Without ``pre_read`` (the first, optimistic attempt) the multi assumes
        every object node exists; a NoNode makes it a Retry with the pre-read,
        which finds what to create and, once the request holds a ticket, denies
        visible conflicts early. (Without a ticket it goes on to the create
        multi, whose zxid becomes its ticket if it is denied.) Whatever a try
        that does not grant created is deleted before it returns.
        """
        targets, paths, explicit = req.targets, req.paths, req.explicit
        self.ensure_root()  # again after a NoNode: the root itself may have been removed
        flags = SEQUENTIAL | (PERSISTENT if explicit else EPHEMERAL)
        attempt_id = secrets.token_hex(12)
        missing: list[str] = []
        if pre_read:
            pre = self.ops.with_retry(self.ops.children_many, paths.values())
            if req.ticket:
                conflicts = self._pre_conflicts(req, pre)
                if conflicts:
                    self._queue(req, [])
                    return Denied(conflicts)
            missing = sorted((p for p in paths.values() if pre[p] is None),
                             key=lambda p: p.count("/"))
        ops = [self.ops.container_op(p) for p in missing]
        raw = req.node_data(attempt_id)
        ops += [self.ops.create_op(
            f"{paths[t]}/{LockNodeName.prefix(t.mode, explicit, attempt_id, req.naming)}", raw,
            flags) for t in targets]
        session = self.session_id
        created = set(missing)
        existing = [paths[t] for t in targets if paths[t] not in created]
        tables = [paths[t] for t in targets if t.obj.kind == "table" and paths[t] not in created]
        try:
            results, zxids, post, stats = self.ops.multi_and_children(ops, existing, tables)
        except MultiFailed as exc:
            if isinstance(exc.error, (NodeExistsError, NoNodeError)):
                # what this client believes exists is wrong (another client removed object
                # nodes, or the whole root): believe nothing, read again, create what is gone
                self._root_ready = False
                return Retry("an object node is missing, or raced with its removal",
                             pre_read=True)
            raise
        except ChunkedMultiFailed as exc:
            self._cleanup_attempt(paths, attempt_id)
            if isinstance(exc.error, NoNodeError):
                self._root_ready = False
            if isinstance(exc.error, (NodeExistsError, NoNodeError, *CONNECTION_ERRORS)):
                return Retry(f"a chunk of the create multi failed ({type(exc.error).__name__})",
                             pre_read=True)
            raise exc.error from None
        except CONNECTION_ERRORS as exc:
            # The multi may or may not have been applied: find our own nodes by attempt id.
            self._cleanup_attempt(paths, attempt_id)
            return Retry(f"connection lost during the create multi ({type(exc).__name__})",
                         pre_read=pre_read)
        except BaseException:
            self._cleanup_attempt(paths, attempt_id)
            raise
        try:
            n = len(missing)
            held = [HeldLock(t, paths[t], _created_path(node), czxid)
                    for t, node, czxid in zip(targets, results[n:], zxids[n:])]
            conflicts = self._check_grant(req, set(missing), held, attempt_id, post)
            if conflicts:
                req.take_ticket(min((h.czxid for h in held if h.czxid), default=0))
                self._queue(req, [h.node_path for h in held])
                return Denied(conflicts)
            if session != self.session_id or self.client.state != KazooState.CONNECTED:
                self._cleanup_attempt(paths, attempt_id)
                return Retry("the session changed during the attempt", pre_read=pre_read)
        except BaseException:
            self._cleanup_attempt(paths, attempt_id)
            raise
        return Granted(LockSet(self.watcher, held, session_id=session,
                               sole=sole_versions(held, stats())))

    def _view(self, req: Request, t: LockTarget, kids: Optional[list[str]],
              mine: Optional[int], attempt_id: str, own_name: str = "") -> View:
        """Judge one object's listing and note which of our intents it shows."""
        view = judge(kids, req.levels[t], t.mode, mine, attempt_id, req.ticket,
                     req.may_disregard, own_name)
        if view.own or req.intents:
            req.saw(req.paths[t], view.own)
        return view

    def _pre_conflicts(self, req: Request, listing: dict[str, Optional[list[str]]]
                       ) -> list[Conflict]:
        """Conflicts visible before creating anything. Conflicting zklock nodes behind our
        intents are left to the check after the create, which may disregard them."""
        out = []
        for t in req.targets:
            p = req.paths[t]
            if listing.get(p) is None:
                req.gone(p)
                continue
            view = self._view(req, t, listing.get(p), None, "")
            out += [Conflict.of(t, p, c) for c in view.conflicts]
        return self._live(out, req)

    def _check_grant(self, req: Request, created: set[str], held: list[HeldLock],
                     attempt_id: str, prefetched: Any = None) -> list[Conflict]:
        """Apply the grant rule, the intent rule and the fail-closed rule to the siblings of
        every node we just made: the conflicts that deny the set (none: granted).

        ``prefetched()`` gives the siblings read right behind the create
        multi; if that read failed (connection loss) they are read again.
        """
        targets, paths = req.targets, req.paths
        existing = [paths[t] for t in targets if paths[t] not in created]
        post: dict = {}
        if existing:
            try:
                post = prefetched() if prefetched is not None else None
            except CONNECTION_ERRORS:
                post = None
            if post is None:
                post = self.ops.with_retry(self.ops.children_many, existing)
        conflicts: list[Conflict] = []
        behind: list[Conflict] = []
        mine = {h.object_path: h for h in held}
        for t in targets:
            p = paths[t]
            if p in created:
                req.gone(p)  # a node this multi created has no older children, no intents
                continue
            own = mine[p].node_path.rsplit("/", 1)[1]
            name = LockNodeName.parse(own)
            assert name is not None
            view = self._view(req, t, post.get(p), name.seq, attempt_id, own)
            conflicts += [Conflict.of(t, p, c) for c in view.conflicts]
            behind += [Conflict.of(t, p, c) for c in view.behind]
        conflicts = self._live(conflicts, req)
        if behind and not conflicts:  # only then is it worth reading who is behind us
            conflicts = self._live(self._not_deferring(req, behind), req)
        return conflicts

    def _not_deferring(self, req: Request, behind: list[Conflict]) -> list[Conflict]:
        """Of the conflicting nodes created after our intents, those whose writers do not
        defer to us (one pipelined read, only on a would-be denial): a legacy writer that
        does not know intents, or an older ticket. A node gone since was undone."""
        try:
            got = self.ops.get_many(c.holder_node for c in behind)
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:  # unreadable (another identity's ACL, say): fail closed
            log.debug("cannot read nodes behind our intents: %s", exc)
            return behind
        out = []
        for c in behind:
            item = got.get(c.holder_node)
            if item is None:
                continue
            if not defers_to(LockData.from_bytes(item[0]), req.ticket, PROTOCOL):
                out.append(c)
        return out

    def _queue(self, req: Request, undo: list[str]) -> None:
        """Undo a denied attempt (delete ``undo``) and, if the request will retry, leave
        the intents it lacks, in the same multi."""
        creates: list[LockTarget] = []
        if req.leave_intents and req.ticket:
            creates = req.missing_intents()
        if not creates:
            if undo:
                self.delete_nodes(undo)
            return
        ops = [self.ops.delete_op(n) for n in undo]
        ops += [self.ops.create_op(req.intent_prefix(t), req.raw, EPHEMERAL | SEQUENTIAL)
                for t in creates]
        try:
            results, _ = self.ops.multi_chunked(ops)
        except (MultiFailed, ChunkedMultiFailed) as exc:
            # an object node swept meanwhile (pre-read path), say: undo alone; intents
            # that a partly applied chunk made are found by ticket at the next listing,
            # or when the request ends
            log.debug("could not leave intents: %s", exc)
            req.unsure_intents = True
            if undo:
                self.delete_nodes(undo)
            return
        except CONNECTION_ERRORS:
            # the reply is lost, not necessarily the multi: intents it made are ours, though
            # unlisted. Left behind, each would queue every later conflicting request behind
            # a request that is gone, for as long as this session lives.
            req.unsure_intents = True
            raise
        for t, r in zip(creates, results[len(undo):]):
            req.intents.setdefault(req.paths[t], []).append(_created_path(r))

    def _live(self, conflicts: list[Conflict], req: Request) -> list[Conflict]:
        """Conflicts that still count: a lease past its soft limit is treated as absent, and
        so, for an implicit request, is a lease this manager took itself (its own statements
        do not wait for its own explicit locks, as a Hive session's do not)."""
        explicit = [c.holder_node for c in conflicts
                    if (n := LockNodeName.parse(c.holder_node.rsplit("/", 1)[1])) and n.explicit]
        if not explicit:
            return conflicts
        if not req.explicit:
            conflicts = [c for c in conflicts if not self.leases.covers(c.holder_node)]
            explicit = [n for n in explicit if not self.leases.covers(n)]
            if not explicit:
                return conflicts
        live = self.leases.live(explicit)
        return [c for c in conflicts if c.holder_node not in explicit or c.holder_node in live]

    # ---- leases (the lease API of docs/leases.md; see leases/lease.py) --------------------
    def grab_lease(self, objs: Iterable[LockSpec], duration_s: Union[float, str],
                   wait_s: Union[float, str] = 0, holder: Optional[str] = None) -> int:
        """Take every object for ``duration_s`` (all or none) and return the lease id.

        Waits up to ``wait_s`` for conflicts to clear; raises LeaseAlreadyExists
        naming the holder, InvalidArguments on bad input, ExceedsMaxLeaseTime
        past ``max_lease_s``.
        """
        pending.settle()  # this process's completed statements' releases go first
        lease_id = self.leases.grab(objs, duration_s, wait_s, holder)
        metrics.LEASE_OPS.labels("grab").inc()
        return lease_id

    def list_lease(self, objs: Optional[Sequence[Union[str, LockObject]]] = None,
                   include_expired: bool = False) -> list[Lease]:
        """Leases with a node at or below ``objs`` (all leases when None or empty).

        As the lease API's SHOW LEASE does (``end_utc >= now``), leases past their end
        are left out unless ``include_expired`` (they stay until taken over, recovered or
        reaped).
        """
        return self.leases.list(objs or None, include_expired=include_expired)

    def extend_lease(self, lease_id: int,
                     objs: Optional[Sequence[Union[str, LockObject]]] = None,
                     holder: Optional[str] = None) -> Lease:
        """Push the lease's end to ZooKeeper's now + its duration (its holder only:
        ``holder`` or this process's :attr:`lease_holder`; else NotLeaseHolder)."""
        lease = self.leases.extend(lease_id, objs, holder)
        metrics.LEASE_OPS.labels("extend").inc()
        return lease

    def drop_lease(self, lease_id: int,
                   objs: Optional[Sequence[Union[str, LockObject]]] = None,
                   holder: Optional[str] = None) -> Lease:
        """Release a lease (its holder only, as :meth:`extend_lease`)."""
        lease = self.leases.drop(lease_id, objs, holder)
        metrics.LEASE_OPS.labels("drop").inc()
        return lease

    @property
    def lease_holder(self) -> str:
        """Whom this process's leases belong to: the ``lease_holder`` setting, else
        ``user@host:pid:random``, unique per process."""
        return self.settings.lease_holder or process_holder(self.settings.effective_user)

    def force_drop_lease(self, objs: Optional[Sequence[Union[str, LockObject]]] = None,
                         include_implicit: bool = False) -> int:
        """Admin break-lock: drop leases at or below ``objs`` (every lease when empty)."""
        self.identity.require_admin("force-drop")
        dropped = self.leases.force_drop(objs or [], include_implicit)
        metrics.LEASE_OPS.labels("force_drop").inc(dropped)
        return dropped

    def recover_lease(self, obj: Union[str, LockObject]) -> list[int]:
        """HDFS's recoverLease: drop the leases on ``obj`` past their soft limit, whoever
        holds them; returns their ids."""
        recovered = self.leases.recover(obj)
        metrics.LEASE_OPS.labels("recover").inc(len(recovered))
        return recovered

    def reap_leases(self, hard_limit_s: Optional[float] = None) -> list[int]:
        self.identity.require_admin("reaping leases")
        reaped = self.leases.reap(hard_limit_s)
        metrics.LEASE_OPS.labels("reap").inc(len(reaped))
        return reaped

    @property
    def identity(self) -> Any:
        """The process's ZooKeeper identities (:class:`zklock.auth.Identity`)."""
        from .auth import Identity

        found = getattr(self.client, "zklock_identity", None)
        return found if found is not None else Identity.from_settings(self.settings)

    # ---- release and cleanup -----------------------------------------------
    def _let_go(self, nodes: list[str], wait: bool) -> None:
        """Delete a released set's nodes (or a request's intents); ``wait=False`` sends the
        multi without waiting for its reply when it fits in one."""
        self.leftovers.released(self.session_id, nodes)
        if not wait and self._release_async(nodes):
            return
        self._release_nodes(nodes)

    def _release_nodes(self, nodes: list[str]) -> None:
        """Delete released nodes; should that fail, they are leftovers (deleted as soon
        as the session is connected: zklock/locks/leftovers.py)."""
        try:
            self.delete_nodes(nodes)
        except Exception as exc:
            self._leave_behind(nodes=nodes)
            log.warning("release of %d lock(s) failed (retried while the session lives): %s",
                        len(nodes), exc)

    def _leave_behind(self, nodes: Sequence[str] = (),
                             attempt: Optional[tuple[list[str], str]] = None) -> None:
        """Hand nodes (or an attempt's nodes, by object paths and attempt id) that a failed
        delete left behind to :class:`~zklock.locks.leftovers.Leftovers`.

        Kazoo keeps a request issued while disconnected queued and sends it once the
        connection is back, even after its caller gave up waiting: a create from a timed
        out attempt may land then. If the session survived, those nodes are held by a
        live session that no longer knows them, a stuck lock until the process exits.
        """
        owner = self.session_id or self.watcher.last_session  # None while disconnected
        self.leftovers.leave(owner, nodes, attempt)

    def _release_async(self, nodes: list[str]) -> bool:
        """Send the release multi without waiting for its reply.

        ZooKeeper applies one session's requests in order, so anything this
        client asks next already sees the locks gone; others see them gone
        one round trip later, and this process's direct requests in other sessions
        wait for the reply first (zklock/locks/pending.py). Should the multi fail, the
        synchronous path (with its lenient fallback) runs on a helper thread.
        """
        ops = [self.ops.delete_op(n) for n in nodes]
        if len(chunk_ops(ops)) != 1 or self.client.state != KazooState.CONNECTED:
            return False
        try:
            reply = self.ops.multi_async(ops)
        except Exception:
            return False

        def done(result: Any) -> None:
            try:
                self.ops.check_multi(result.get())
            except Exception:
                dispatch(self._release_nodes, nodes)
        reply.rawlink(done)
        pending.sent(reply)
        return True

    def delete_nodes(self, nodes: Sequence[str]) -> None:
        """One multi deleting the lock nodes; lenient one-by-one deletes if that fails.

        Object nodes are containers: ZooKeeper removes them once empty.
        """
        try:
            self.ops.multi_chunked([self.ops.delete_op(n) for n in nodes])
            return
        except (MultiFailed, ChunkedMultiFailed, ConnectionLoss, SessionExpiredError):
            pass
        self.ops.with_retry(self.ops.delete_many, list(nodes))

    def _sweep_attempt(self, paths: Sequence[str], attempt_id: str) -> None:
        """Delete every node under ``paths`` carrying this attempt's id (in its name, or,
        named for Hive, in its data); also a request's intents, by its intent marker."""
        listing = self.ops.children_many(paths)
        mine = [f"{p}/{k}" for p, kids in listing.items() for k in kids or ()
                if attempt_id in k]
        hive = [f"{p}/{k}" for p, kids in listing.items() for k in kids or ()
                if k.startswith(HIVE_PREFIX)]
        if hive:
            got = self.ops.get_many(hive)
            mine += [n for n, item in got.items() if item is not None
                     and LockData.from_bytes(item[0]).extra.get("attempt") == attempt_id]
        self.ops.delete_many(mine)

    def _cleanup_attempt(self, paths: dict[LockTarget, str], attempt_id: str) -> None:
        """Delete every node carrying this attempt's id, riding out connection loss."""
        try:
            self.ops.with_retry(self._sweep_attempt, list(paths.values()), attempt_id)
        except Exception as exc:
            self._leave_behind(attempt=(list(paths.values()), attempt_id))
            log.error("could not clean up attempt %s (retried while the session lives): %s",
                      attempt_id, exc)
            raise

    def ensure_root(self) -> None:
        if not self._root_ready:
            self.ops.ensure_path(self.root)
            self._root_ready = True

    # ---- describing holders -----------------------------------------------
    def _describe(self, conflicts: list[Conflict]) -> None:
        """Fill each conflict's holder record (one pipelined read)."""
        readable = [c for c in conflicts if c.readable]
        try:
            got = self.ops.get_many(c.holder_node for c in readable)
        except Exception:
            return
        for c in readable:
            item = got.get(c.holder_node)
            if item is None:
                continue
            raw, stat = item
            name = LockNodeName.parse(c.holder_node.rsplit("/", 1)[1])
            origin = {"lock": "zklock"}.get(c.kind, c.kind)
            c.record = LockRecord(c.target.obj.name, c.holder_mode, c.holder_node,
                                  bool(name and name.explicit), name.seq if name else 0,
                                  LockData.from_bytes(raw), stat.ctime, stat.mtime, stat.czxid,
                                  bool(stat.ephemeralOwner), origin=origin)
        self._name_holders(conflicts)

    def _name_holders(self, conflicts: list[Conflict]) -> None:
        """An intent whose request holds its lock already is that holder: say so, once."""
        try:
            held = holders_behind_intents(self.ops, [c.holder_node for c in conflicts
                                                     if c.kind == "intent"])
        except Exception:
            return
        for c in conflicts:
            if c.holder_node in held:
                node, mode, data, stat = held[c.holder_node]
                name = LockNodeName.parse(node.rsplit("/", 1)[1])
                c.kind, c.holder_node, c.holder_mode = "lock", node, mode
                c.record = LockRecord(c.target.obj.name, mode, node, False,
                                      name.seq if name else 0, data, stat.ctime, stat.mtime,
                                      stat.czxid, bool(stat.ephemeralOwner))
        seen: set[tuple[str, str]] = set()
        unique = []
        for c in conflicts:
            key = (c.target.obj.name, c.holder_node)
            if key not in seen:
                seen.add(key)
                unique.append(c)
        conflicts[:] = unique

    def lock_data(self, query_id: Optional[str], query: Optional[str], kind: str,
                  settings: Optional[Settings] = None, **extra: Any) -> LockData:
        """What this process's lock nodes say about their holder (user, host, pid, query);
        ``settings``: the caller's (a LockingSession's user and job), else this manager's."""
        settings = self.settings if settings is None else settings
        q = query or ""
        limit = settings.query_max_length
        if len(q) > limit:
            q = q[:limit] + "..."
        sid = self.session_id
        return LockData(
            user=settings.effective_user, job=settings.job or "",
            host=self._host, pid=os.getpid(),
            session=f"0x{sid:x}" if sid else "", query_id=query_id or "", query=q,
            acquired_at=ms_to_iso(int(time.time() * 1000)), kind=kind, protocol=PROTOCOL,
            **extra,
        )

    # ---- listing ------------------------------------------------------------
    def show(self, obj: Union[str, LockObject, None] = None, extended: bool = False,
             intents: bool = False) -> list[LockRecord]:
        """Held locks at or below ``obj`` (a table includes its partitions).

        Recipe followers' locks (kind ``foreign``) and nodes zklock cannot interpret
        (kind ``unknown``, listed as X) are included; ``intents`` adds the intents of
        waiting requests (kind ``intent``).
        """
        start = LockObject.parse(obj) if obj is not None else None
        pending.settle()  # never list a statement of this process that has returned
        return self.ops.with_retry(walk, self.ops, self.root, start, extended, False, None,
                                   intents)

    # ---- the session (transitions of live sets: zklock/locks/watcher.py) ----------
    def _session_label(self) -> str:
        return f"{self.settings.job or self.settings.effective_user}@{id(self):x}"
