"""The engine's lock client: locks for the commands Spark's engine runs outside a LockingSession.

zklock's session extension (EngineLocks.java, installed by :func:`zklock.spark.configure`)
puts every command Spark executes under its locks, whatever sent it: the plain session,
``SparkSession.active()``, a library's own ``getOrCreate()``, pandas-on-Spark, a Spark
Connect client. Inside a LockingSession statement the wrapper's locks cover the command;
otherwise the extension plans the command with the one planner and asks the process's lock
client, :class:`EngineLockClient`, to take the locks, through PySpark's py4j callback server
(what ``foreachBatch`` uses). So the one lock client zklock has, this process's
:class:`~zklock.manager.LockManager`, takes them: there is no second implementation of the
lock protocol in the JVM to keep equal to this one.

A LockingSession's own writes (``df.write``, ``df.writeTo``, ``df.mergeInto``, its catalog)
run here too, as the session's *owner*: the session names itself in a local property of the
thread (:data:`OWNER_PROPERTY`), and the client takes the locks with that session's manager,
retries and commit staging (:func:`register_owner`). When they are denied or lost, the
Python exception the client raised is kept, and :func:`python_error` gives it back to the
code that called Spark (the JVM carries only its id).

Without a client the extension refuses every command that needs locks, in one line; so does
``spark.zklock.engine.mode=refuse``. The request and the answers are versioned JSON
(EngineLockClient.java lists them; docs/spark.md documents them).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

from ..config import HIVE_ALIASES, SETTINGS, Level, Settings, engine_mode
from ..errors import LockLost, LockNotAcquired, UnsupportedStatement, ZkLockError
from ..locknode import LockNodeName
from ..lockset import LockSet
from ..manager import LockManager
from ..mode import Mode
from ..objects import LockObject
from . import answer
from .jvm import JvmModuleError
from .statement import fence_refusal, new_query_id

if TYPE_CHECKING:
    from .execution import LockedExecution

log = logging.getLogger(__name__)

#: The format of the requests and answers exchanged with EngineGuard.java.
VERSION = 1
#: What :func:`zklock.spark.configure` puts in ``spark.sql.extensions``.
EXTENSION_CLASS = "zklock.EngineLocks"
#: The local property naming the LockingSession a command runs for (EngineGuard.OWNER).
OWNER_PROPERTY = "zklock.owner"
#: The exception EngineGuard.java throws, and its subclasses: the outcome is the class.
REFUSAL_CLASS = "zklock.EngineRefusal"
OUTCOMES = {REFUSAL_CLASS: UnsupportedStatement, REFUSAL_CLASS + "$Denied": LockNotAcquired,
            REFUSAL_CLASS + "$Lost": LockLost}
#: How many Python exceptions the client keeps for :func:`python_error` to give back.
KEPT_ERRORS = 256

_owners: weakref.WeakValueDictionary[str, LockedExecution] = weakref.WeakValueDictionary()
_owner_ids = itertools.count(1)
_errors: OrderedDict[str, BaseException] = OrderedDict()
_errors_lock = threading.Lock()


def register_owner(execution: LockedExecution) -> str:
    """Let the engine take the locks of commands run as this LockingSession (its execution:
    manager, retries, commit staging). The id goes in :func:`as_owner`; the registration
    lasts as long as the execution does."""
    owner = f"owner-{next(_owner_ids)}"
    _owners[owner] = execution
    return owner


@contextmanager
def as_owner(spark: Any, owner: str) -> Iterator[None]:
    """Commands this thread runs in the block (a classic session's) are the owner's.

    A local property belongs to a JVM thread, which is this Python thread's only in PySpark's
    pinned-thread mode (the default). Without it the property could be set on one JVM thread
    and cleared on another, and a later command elsewhere be taken for the owner's: then the
    block names no owner, and the process's lock client locks its commands with its own
    settings."""
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
        yield
        return
    sc = spark.sparkContext
    previous = sc.getLocalProperty(OWNER_PROPERTY)
    sc.setLocalProperty(OWNER_PROPERTY, owner)
    try:
        yield
    finally:
        sc.setLocalProperty(OWNER_PROPERTY, previous)


def python_error(exc: BaseException) -> BaseException:
    """The zklock exception behind an error Spark raised for a command the engine refused,
    denied or lost: the very one the lock client raised when it ran in this process, else
    one of the outcome's type with the engine's message; ``exc`` itself when zklock's
    engine was not its cause."""
    refused = fence_refusal(exc)
    if refused is not None:  # the fenced commit refused the job: its locks were gone
        return LockLost([], refused)
    kind, message, error = _refusal(exc)
    if kind is None:
        return exc
    with _errors_lock:
        kept = _errors.pop(error, None) if error else None
    if kept is not None:
        return kept
    if OUTCOMES[kind] is LockLost:
        return LockLost([], message.removeprefix("zklock: "))
    return OUTCOMES[kind](message.removeprefix("zklock: "))


def _refusal(exc: BaseException) -> tuple[Optional[str], str, str]:
    """(class, message, error id) of the EngineRefusal in ``exc``; (None, "", "") without
    one. A classic session's error holds the Java exception (and its causes); a Spark Connect
    client's names the class as its reason: ``(zklock.EngineRefusal$Denied) message``."""
    # py4j's error holds the Java exception; PySpark's conversion of one keeps it as _origin
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    while java is not None:
        name = str(java.getClass().getName())
        if name in OUTCOMES:
            return name, str(java.getMessage()), str(java.error())
        java = java.getCause()
    text = str(exc).strip().split("\n", 1)[0]
    for name in sorted(OUTCOMES, key=len, reverse=True):
        if text.startswith(f"({name}) "):
            return name, text[len(name) + 3:], ""
    return None, "", ""


def _keep(error: BaseException) -> str:
    """Keep ``error`` for :func:`python_error`; its id."""
    error_id = f"error-{id(error):x}"
    with _errors_lock:
        _errors[error_id] = error
        while len(_errors) > KEPT_ERRORS:
            _errors.popitem(last=False)
    return error_id


class EngineLockClient:
    """Takes and releases the locks of commands the engine runs outside a LockingSession.

    A lock set the engine holds has its own job tag (its query id): when the set is lost,
    the command's Spark jobs are cancelled, and the command fails with the loss when it ends.
    """

    def __init__(self, spark: Any, manager: LockManager | Callable[[], LockManager],
                 settings: Optional[Callable[[], Settings]] = None) -> None:
        self.spark = spark
        # a LockingSession's manager connects on first use: it is asked for, not given
        self._manager = manager if callable(manager) else (lambda: manager)
        # the settings it locks with: those of the LockingSession or enforce() that made it
        # (their own over the manager's, SET included), else the manager's
        self._settings = settings or (lambda: self.manager.settings)
        self._held: dict[str, tuple[LockSet, Any]] = {}  # handle -> (set, staging)
        self._lock = threading.Lock()
        self._previous: Any = None
        self._installed = False

    # ---- called by the JVM (py4j callback server) ------------------------------------
    def acquire(self, request: str) -> str:
        lockset: Optional[LockSet] = None
        staging = None
        try:
            doc = json.loads(request)
            if doc.get("version") != VERSION:
                return _answer("refused", message=f"zklock: a lock request in format"
                               f" {doc.get('version')}, where this client reads {VERSION}")
            owner = _owners.get(str(doc.get("owner") or ""))
            settings = self.settings
            if not (owner.locking if owner is not None else settings.support_concurrency):
                return _answer("unlocked")  # support_concurrency=false (or SET so), as Hive
            mode = settings.engine_mode
            if doc.get("mode") and settings.level("engine_mode") <= Level.SPARK_CONF:
                mode = engine_mode(doc["mode"])  # the running session's Spark conf
            if mode == "refuse" and owner is None:  # a LockingSession's own writes still run
                return _answer("refused", message=f"zklock: refused {doc.get('command')} on"
                               f" {doc.get('objects')}: spark.zklock.engine.mode=refuse runs"
                               " only what a LockingSession locked")
            planned = answer.read(json.dumps(doc["answer"]))
            query_id = new_query_id()
            handle = str(doc.get("handle") or query_id)
            statement = doc.get("statement") or ""
            if owner is not None:  # a LockingSession's write: its manager, retries, staging
                lockset = owner.acquire(planned.targets, query_id, statement)
                staging = owner.commit_staging(lockset)
                staging.__enter__()
            else:
                data = self.manager.lock_data(query_id, statement, "implicit", settings)
                data = dataclasses.replace(data, app=str(doc.get("application") or ""))
                if doc.get("user"):  # a Spark Connect client's user, not the server's
                    data = dataclasses.replace(data, user=str(doc["user"]))
                lockset = self.manager.acquire_targets(planned.targets, data, explicit=False,
                                                       query_id=query_id, settings=settings)
            with self._lock:
                self._held[handle] = (lockset, staging)
        except LockNotAcquired as exc:
            return _answer("denied", message=f"zklock: {exc}", error=_keep(exc))
        except Exception as exc:  # fail closed: the command does not run, nothing stays held
            log.debug("engine lock request failed", exc_info=True)
            if lockset is not None:
                lockset.release(wait=False)
            refused = exc if isinstance(exc, ZkLockError) else UnsupportedStatement(str(exc))
            if refused is not exc:
                refused.__cause__ = exc
            return _answer("refused", message=f"zklock: {exc}", error=_keep(refused))
        lockset.on_lost(lambda _set: self._cancel(query_id))
        return _answer("granted", handle=handle, query_id=query_id,
                       token=str(lockset.fencing_token),
                       zookeeper=lockset.connect_string or "", nodes=lockset.node_paths)

    def verify(self, request: str) -> str:
        """Does a Spark Connect client's claim (its LockingSession statement's lock nodes,
        sent as an operation tag) cover the command's planned locks, and do the nodes still
        exist? A client could name any nodes: they must be lock nodes under this client's
        root, of the modes the command needs, and alive."""
        try:
            doc = json.loads(request)
            if doc.get("version") != VERSION:
                return _answer("refused", message="zklock: a claim in an unknown format")
            planned = answer.read(json.dumps(doc["answer"]))
            held = {}
            root = self.manager.root.rstrip("/")
            for path in doc.get("nodes", []):
                parts = str(path).split("/")
                name = LockNodeName.parse(parts[-1])
                if not str(path).startswith(root + "/") or name is None:
                    return _answer("refused", message=f"zklock: {path} is not a lock node"
                                   f" under {root}: the command does not run")
                obj = LockObject.from_znode_parts(str(path)[len(root) + 1:].split("/")[:-1])
                if held.get(obj) is not Mode.EXCLUSIVE:
                    held[obj] = name.mode
            missing = [t for t in planned.targets if t.obj not in held
                       or (t.mode is Mode.EXCLUSIVE and held[t.obj] is not Mode.EXCLUSIVE)]
            if missing:
                return _answer("refused", message=f"zklock: the statement's locks do not cover"
                               f" {missing[0].obj.name} in {missing[0].mode.value}: the command"
                               " does not run")
            client = self.manager.client
            asked = [(p, client.exists_async(p)) for p in doc.get("nodes", [])]  # one round
            gone = [p for p, reply in asked if reply.get(timeout=self.manager.settings
                                                         .connect_timeout) is None]
            if gone:
                return _answer("lost", message=f"zklock: locks lost before the command ran"
                               f" ({gone[0]} is gone)")
        except Exception as exc:  # fail closed
            return _answer("refused", message=f"zklock: {exc}")
        return _answer("covered")

    def release(self, handle: str, failed: bool = False) -> str:
        with self._lock:
            lockset, staging = self._held.pop(handle, (None, None))
        if lockset is None:
            return _answer("released")
        lost = not lockset.is_valid
        reason = lockset.lost_reason or "session lost"
        try:
            if staging is not None:  # a failed write's staging is removed again later
                error = RuntimeError("the command failed") if failed else None
                staging.__exit__(type(error) if error else None, error, None)
        finally:
            lockset.release(wait=False)
        if lost:
            error = LockLost(lockset.objects, reason)
            return _answer("lost", message=reason, error=_keep(error))
        return _answer("released")

    class Java:
        implements = ["zklock.EngineLockClient"]

    # ---- in Python --------------------------------------------------------------------
    @property
    def manager(self) -> LockManager:
        """The LockManager that takes the engine's locks."""
        return self._manager()

    @property
    def settings(self) -> Settings:
        """The settings the engine's locks are taken with (docs/configuration.md)."""
        return self._settings()

    def install(self) -> EngineLockClient:
        """Make this the lock client of the Spark application's JVM."""
        from pyspark.java_gateway import ensure_callback_server_started

        engine = _engine(self.spark)
        ensure_callback_server_started(self.spark.sparkContext._gateway)
        self._previous = engine.install(self)
        self._installed = True
        return self

    def close(self) -> None:
        """Stop being the application's lock client (the previous one, if any, is again)."""
        if not self._installed:
            return
        self._installed = False
        try:
            _engine(self.spark).install(self._previous)
        except Exception:  # Spark stopped: nothing left to uninstall
            pass

    def __enter__(self) -> EngineLockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _cancel(self, query_id: str) -> None:
        try:
            self.spark.sparkContext.cancelJobsWithTag(query_id)
        except Exception:  # Spark already stopped: nothing left to cancel
            pass


def enforce(spark: Any, manager: Optional[LockManager] = None,
            **settings: Any) -> EngineLockClient:
    """Make ``manager`` (default: one built from ``settings``, Spark conf and the
    environment) take the locks of every command this application's engine runs outside a
    LockingSession, with ``settings`` and the Spark conf over the manager's own, as a
    LockingSession's (docs/configuration.md, "Precedence"). The session must be built with
    :func:`zklock.spark.configure`. ``close()`` the returned client (or use it as a context
    manager) to stop."""
    own = settings_of(spark, settings)
    if manager is None:
        manager = LockManager(settings=own)
    layered = own.over(manager.settings)
    return EngineLockClient(spark, manager, settings=lambda: layered).install()


def settings_of(spark: Any, overrides: dict[str, Any]) -> Settings:
    """zklock's settings for an application: ``overrides`` (a LockingSession's or
    enforce()'s keyword arguments, at Level.SESSION), then its Spark conf (``spark.zklock.*``
    and the Hive names zklock honours), then the environment."""
    conf = {}
    for key in [key for s in SETTINGS for key in s.spark_keys] + list(HIVE_ALIASES):
        value = spark.conf.get(key, None)
        if value is not None:
            conf[key] = value
    return Settings.resolve(overrides, spark_conf=conf, level=Level.SESSION)


def local_connect_server(session: Any) -> Optional[Any]:
    """The classic session of the Spark Connect server that PySpark started in this process
    for a local Connect ``session`` (``remote("local")``, ``spark.api.mode=connect``); None
    for a remote server, which has its own lock client or none."""
    from pyspark.sql.session import SparkSession  # the classic one

    classic = SparkSession._instantiatedSession  # the session PySpark started it with
    if classic is None or not str(session.client.host).startswith(("localhost", "127.0.0.1")):
        return None
    return classic


def guards(spark: Any) -> bool:
    """Does this classic session plan its commands through zklock's engine extension? Raises
    JvmModuleError when zklock's jar is not on the application's class path."""
    return bool(_engine(spark).guards(spark._jsparkSession))


def save_as_table_drops_first(spark: Any) -> bool:
    """Does this Spark's saveAsTable drop an overwritten table before it runs any command
    (Spark 4.0), where the engine cannot lock the drop? Raises JvmModuleError as
    :func:`guards` does."""
    return bool(_engine(spark).saveAsTableDropsFirst())


def has_client(spark: Any) -> bool:
    """Has this application's engine extension a lock client? Raises JvmModuleError when
    the application was built without the extension."""
    return bool(_engine(spark).hasClient())


def _engine(spark: Any) -> Any:
    """EngineLocks.java on the application's class path (where Spark loaded it from)."""
    from py4j.java_gateway import JavaClass

    engine = spark._jvm.zklock.EngineLocks
    if not isinstance(engine, JavaClass):
        raise JvmModuleError("zklock's engine extension is not on this application's class"
                             " path: build the session with zklock.spark.configure(builder)")
    return engine


def _answer(outcome: str, **fields: Any) -> str:
    return json.dumps({"version": VERSION, "outcome": outcome, **fields})
