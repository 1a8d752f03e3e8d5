"""The engine's lock client: takes the locks of every statement Spark's engine runs.

zklock's session extension (EngineLocks.java, installed by :func:`zklock.spark.configure`)
puts every statement Spark executes under its locks, whatever sent it: the plain session,
``SparkSession.active()``, a library's own ``getOrCreate()``, pandas-on-Spark, a Spark
Connect client, a LockingSession. The extension plans the statement with the one planner and
asks a lock client, :class:`EngineLockClient`, to take the locks, through PySpark's py4j
callback server (what ``foreachBatch`` uses). So the one lock client zklock has, a
:class:`~zklock.manager.LockManager`, takes them: there is no second implementation of the
lock protocol in the JVM to keep equal to this one.

Which client: a LockingSession binds one to the SparkSession it wraps (:meth:`bind`: its
manager, settings and SET apply to every statement that session runs, from
any API); every other session's statements go to the process's client (:func:`enforce`, or
the first LockingSession's). Without either, the extension refuses every statement that
needs locks, in one line (reads: ``spark.zklock.engine.reads``); so does
``spark.zklock.engine.mode=refuse`` for what no LockingSession runs. The request and the
answers are versioned JSON (EngineLockClient.java lists them; docs/spark.md documents them).

A refusal, denial or loss reaches Python as PySpark's ``QueryExecutionException`` whose
condition names it (EngineRefusal.java); :func:`lock_error` gives zklock's exception for it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Optional

from ..config import (
    ENGINE_SETTINGS,
    HADOOP_PREFIX,
    HIVE_ALIASES,
    SETTINGS,
    Level,
    Settings,
)
from ..errors import (
    InvalidArguments,
    LockLost,
    LockNotAcquired,
    LockRequestCancelled,
    UnsupportedStatement,
    WriteFailed,
    ZkLockError,
    ZooKeeperUnavailable,
)
from ..locks import pending
from ..locks.lockset import LockSet
from ..locks.mode import Mode
from ..manager import LockManager
from ..observe import metrics
from . import answer, protocol
from .jvm import JvmModuleError
from .locked_statement import fence_refusal, new_query_id
from .protocol import Condition, Field, Outcome

log = logging.getLogger(__name__)

#: The format of the requests and answers exchanged with EngineGuard.java.
VERSION = protocol.Version.ENGINE
#: What :func:`zklock.spark.configure` puts in ``spark.sql.extensions``.
EXTENSION_CLASS = protocol.JvmClass.EXTENSION
#: EngineRefusal.java's conditions (Spark's error-class field), and zklock's exception for each.
CONDITIONS = {Condition.REFUSED: UnsupportedStatement, Condition.DENIED: LockNotAcquired,
              Condition.LOST: LockLost, Condition.UNAVAILABLE: ZooKeeperUnavailable,
              Condition.WRITE_FAILED: WriteFailed}
#: The exception EngineRefusal.java throws, as a Spark Connect client names it.
REFUSAL_CLASS = protocol.JvmClass.REFUSAL


def lock_error(exc: BaseException) -> BaseException:
    """zklock's exception (UnsupportedStatement, LockNotAcquired, LockLost) for an error Spark
    raised because zklock's engine refused, denied or lost a statement; ``exc`` itself when
    zklock was not its cause. PySpark raises the engine's refusal as its
    ``QueryExecutionException`` with the condition ``ZKLOCK_*`` (both kinds of session).
    zklock's own exception is returned as it is (a script's LockLost keeps its objects)."""
    if isinstance(exc, ZkLockError):
        return exc
    condition, message, parameters = _refusal(exc)
    if condition is None:
        refused = fence_refusal(exc)
        if refused is not None:  # the fenced commit refused a job zklock did not lock here
            return LockLost([], refused)
        return exc
    return _error(condition, message, parameters)


def refusal_error(java: Any, objects: list[str]) -> ZkLockError:
    """zklock's exception for the engine's refusal ``java`` (a py4j EngineRefusal, as a
    block's close answers it); a loss names its set's objects, else ``objects``."""
    parameters = {str(k): str(v) for k, v in java.getMessageParameters().items()}
    if not parameters.get(Field.OBJECTS):
        parameters[Field.OBJECTS] = "\n".join(objects)
    return _error(str(java.getCondition()), str(java.getMessage()), parameters)


def _error(condition: str, message: str, parameters: dict[str, str]) -> ZkLockError:
    """The one mapping of the engine's conditions to zklock's exceptions."""
    if CONDITIONS[condition] is LockLost:
        objects = [o for o in parameters.get(Field.OBJECTS, "").split("\n") if o]
        return LockLost(objects, message)
    return CONDITIONS[condition](message)


def _refusal(exc: BaseException) -> tuple[Optional[str], str, dict[str, str]]:
    """(condition, message, parameters) of the EngineRefusal behind ``exc``; (None, "", {})
    without one. PySpark's exception names the condition and carries the parameters; a Java
    error (py4j's, or one PySpark did not convert) holds the exception and its causes."""
    seen = 0
    while exc is not None and seen < 5:
        condition = _condition(exc)
        if condition in CONDITIONS:
            return condition, _message(exc), _parameters(exc)
        java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
        while java is not None:
            if str(java.getClass().getName()) == REFUSAL_CLASS:
                return (str(java.getCondition()), str(java.getMessage()),
                        {str(k): str(v) for k, v in java.getMessageParameters().items()})
            java = java.getCause()
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None, "", {}


def _parameters(exc: BaseException) -> dict[str, str]:
    get = getattr(exc, "getMessageParameters", None)
    try:
        return {str(k): str(v) for k, v in (get() or {}).items()} if callable(get) else {}
    except Exception:  # PySpark asks the JVM, which may be gone
        return {}


def _condition(exc: BaseException) -> Optional[str]:
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        return str(get()) if callable(get) else None
    except Exception:  # PySpark asks the JVM, which may be gone
        return None


def _message(exc: BaseException) -> str:
    get = getattr(exc, "getMessage", None)
    try:
        text = str(get()) if callable(get) else str(exc)
    except Exception:
        text = str(exc)
    return text.strip().split("\n", 1)[0]


class EngineLockClient:
    """Takes and releases the locks of the statements Spark's engine runs.

    A lock set the engine holds has its own job tag (its query id): when the set is lost,
    the statement's Spark jobs are cancelled, and it fails with the loss when it ends.
    """

    def __init__(self, spark: Any, manager: LockManager | Callable[[], LockManager],
                 settings: Optional[Callable[[], Settings]] = None,
                 on_lost: Optional[Callable[[str], None]] = None) -> None:
        """``on_lost(query_id)`` is called when a set it granted is lost: by default the
        statement's Spark jobs (tagged with its query id) are cancelled through ``spark``;
        a lock client in a process of its own (lock_process.py) tells the JVM instead."""
        self.spark = spark
        self._on_lost = on_lost or self._cancel
        # a LockingSession's manager connects on first use: it is asked for, not given
        self._manager = manager if callable(manager) else (lambda: manager)
        # the settings it locks with: those of the LockingSession or enforce() that made it
        # (their own over the manager's, SET included), else the manager's
        self._settings = settings or (lambda: self.manager.settings)
        self._held: dict[str, LockSet] = {}  # by handle
        self._streams: dict[str, str] = {}  # a micro-batch's stream label, by handle
        self._waiting: dict[str, threading.Event] = {}  # a request's cancel, by handle
        self._statements: set[str] = set()  # the waiting requests that are statements'
        # (not a stream's micro-batch: the stream stops with its query)
        # cancels that came before their request (kept for it; at most this many)
        self._cancelled: collections.deque[str] = collections.deque(maxlen=1024)
        self._lock = threading.Lock()
        self._previous: Any = None
        self._installed = False
        self._bound: Any = None  # the Java SparkSession this client is bound to

    # ---- called by the JVM (py4j callback server) ------------------------------------
    def acquire(self, request: str) -> str:
        lockset: Optional[LockSet] = None
        try:
            doc = json.loads(request)
            if doc.get(Field.VERSION) != VERSION:
                return _answer(Outcome.REFUSED, message=f"zklock: a lock request in format"
                               f" {doc.get('version')}, where this client reads {VERSION}")
            for done in doc.get(Field.RELEASES) or ():  # completed statements' (Releases.java)
                self.release(str(done))
            # how this statement waits, as its session's conf says (a Connect client's SET)
            settings = self.settings.for_statement(doc.get(Field.CONF) or {})
            if not settings.support_concurrency:  # (or SET so), as Hive
                return _answer(Outcome.UNLOCKED)
            planned = answer.read(json.dumps(doc[Field.ANSWER]))
            query_id = str(doc.get(Field.QUERY_ID) or new_query_id())
            handle = str(doc.get(Field.HANDLE) or query_id)
            data = self.manager.lock_data(query_id, doc.get(Field.STATEMENT) or "", "implicit",
                                          settings)
            data = dataclasses.replace(data, app=str(doc.get(Field.APPLICATION) or ""))
            if doc.get(Field.USER):  # a Spark Connect client's user, not the server's
                data = dataclasses.replace(data, user=str(doc[Field.USER]))
            asked = time.monotonic()
            try:
                lockset = self.manager.acquire_targets(
                    planned.targets, data, explicit=False, query_id=query_id,
                    settings=settings,
                    cancelled=self._cancellable(handle, statement=Field.STREAM not in doc))
            finally:
                with self._lock:
                    self._waiting.pop(handle, None)
                    self._statements.discard(handle)
            with self._lock:
                self._held[handle] = lockset
            if Field.STREAM in doc:  # a streaming query's micro-batch (MicroBatch.java)
                label = metrics.stream_label(str(doc[Field.STREAM]))
                metrics.STREAM_BATCHES.labels(label).inc()
                metrics.STREAM_BATCH_WAIT.labels(label).observe(time.monotonic() - asked)
                with self._lock:
                    self._streams[handle] = label
        except LockRequestCancelled as exc:
            return _answer(Outcome.CANCELLED, message=f"zklock: {exc}")
        except LockNotAcquired as exc:
            return _answer(Outcome.DENIED, message=f"zklock: {exc}")
        except ZooKeeperUnavailable as exc:
            return _answer(Outcome.UNAVAILABLE, message=f"zklock: {exc}")
        except Exception as exc:  # fail closed: the statement does not run, nothing stays held
            log.debug("engine lock request failed", exc_info=True)
            if lockset is not None:
                lockset.release(wait=False)
            return _answer(Outcome.REFUSED, message=f"zklock: {exc}")
        lockset.on_lost(lambda _set: self._on_lost(query_id))
        return _answer(Outcome.GRANTED, fields={
            Field.HANDLE: handle, Field.QUERY_ID: query_id,
            Field.TOKEN: str(lockset.fencing_token), Field.ATTEMPTS: lockset.attempts,
            Field.WAITED_FOR: lockset.waited_for,
            Field.ZOOKEEPER: lockset.connect_string or "", Field.NODES: lockset.node_paths,
            Field.SOLE: [[obj.db, obj.table, v.path, v.czxid, v.cversion]
                         for obj, v in lockset.sole.items()]})

    def cancel(self, handle: str) -> str:
        """Give up ``handle``'s request if it still waits (its streaming query stopped:
        GrantAhead.java): it answers cancelled, holding nothing. One granted first answers
        its grant, which the JVM releases; a cancel that comes before its request (another
        thread sends that) is kept for it."""
        with self._lock:
            cancelled = self._waiting.get(handle)
            if cancelled is None:
                self._cancelled.append(handle)
            else:
                cancelled.set()
        return _answer(Outcome.CANCELLED)

    def cancel_statements(self) -> None:
        """Give up every statement's request of this client that still waits (an interrupt:
        see :func:`cancel_waits_on_interrupt`); a stream's batches wait on. Takes no lock:
        it runs in a signal handler, whose thread may hold this client's."""
        for handle in list(self._statements):  # (a copy made whole: C code, under the GIL)
            cancelled = self._waiting.get(handle)
            if cancelled is not None:
                cancelled.set()

    def _cancellable(self, handle: str, statement: bool) -> threading.Event:
        """The event that cancels ``handle``'s request while it waits (set already where
        its cancel came first); a ``statement``'s, an interrupt's too."""
        cancelled = threading.Event()
        with self._lock:
            if handle in self._cancelled:
                self._cancelled.remove(handle)
                cancelled.set()
            self._waiting[handle] = cancelled
            if statement:
                self._statements.add(handle)
        return cancelled

    def parse(self, request: str) -> str:
        """A session's own statement, LOCK or UNLOCK TABLE (or DATABASE), read by zklock's
        one parser (zklock/sql/parser.py) for the engine, which holds such a lock for the
        session that ran it (SessionLocks.java): its kind, the table (as Spark SQL names it)
        or database, the partition spec and the mode. Any other statement of zklock's runs
        in a LockingSession only."""
        from ..sql.parser import LockTable, UnlockTable, parse_extension

        try:
            doc = json.loads(request)
            if doc.get(Field.VERSION) != VERSION:
                return _answer(Outcome.REFUSED, message="zklock: a statement in an unknown format")
            sql = str(doc[Field.STATEMENT])
            statement = parse_extension(sql)
            if isinstance(statement, LockTable) and statement.seconds is not None:
                return _answer(Outcome.REFUSED, message="zklock: a session's LOCK TABLE is held"
                               " until UNLOCK TABLE or the session's end; FOR <n> <unit> is a"
                               " LockingSession's lease (docs/leases.md)")
            if not isinstance(statement, (LockTable, UnlockTable)):
                words = " ".join(sql.split()[:2])
                return _answer(Outcome.REFUSED, message=f"zklock: {words} runs in a"
                               " LockingSession (docs/spark.md, \"zklock's SQL\")")
            target = statement.target
            table = (".".join("`" + p.replace("`", "``") + "`" for p in target.table)
                     if target.table else None)
            fields: dict[str, Any] = {
                Field.KIND: (protocol.Statement.LOCK if isinstance(statement, LockTable)
                             else protocol.Statement.UNLOCK),
                Field.TABLE: table, Field.DATABASE: target.database,
                Field.PARTITION: dict(target.partition)}
            if isinstance(statement, LockTable):
                fields[Field.MODE] = Mode.parse(statement.mode).value
        except Exception as exc:  # noqa: BLE001 (a statement that does not parse: refused)
            return _answer(Outcome.REFUSED, message=f"zklock: {exc}")
        return _answer(Outcome.PARSED, fields=fields)

    def release(self, handle: str, failed: bool = False) -> str:
        with self._lock:
            lockset = self._held.pop(handle, None)
            stream = self._streams.pop(handle, None)
        if lockset is None:
            return _answer(Outcome.RELEASED)
        if failed:  # its statement failed, perhaps for a node another client deleted a moment
            # ago: the answer (and a stream's count of lost batches) says so, not only the JVM
            try:
                lockset.confirm()
            except Exception:  # noqa: BLE001 (ZooKeeper out of reach: the session's watch judges)
                log.debug("could not confirm a failed statement's locks", exc_info=True)
        lost = not lockset.is_valid
        reason = lockset.lost_reason or protocol.Message.UNKNOWN_LOSS
        lockset.release(wait=False)
        if lost and stream is not None:
            metrics.STREAM_BATCHES_LOST.labels(stream).inc()
        if lost:
            return _answer(Outcome.LOST, reason, {Field.OBJECTS: lockset.objects})
        return _answer(Outcome.RELEASED, fields={Field.OBJECTS: lockset.objects})

    class Java:
        implements = [protocol.JvmClass.LOCK_CLIENT]

    def held_set(self, handle: Optional[str]) -> LockSet:
        """The set this client holds under ``handle`` (a block the engine holds for Python:
        EngineCalls.Held.handle); an empty set when it holds none."""
        with self._lock:
            lockset = self._held.get(handle) if handle is not None else None
        return lockset if lockset is not None else LockSet.empty()

    # ---- in Python --------------------------------------------------------------------
    @property
    def manager(self) -> LockManager:
        """The LockManager that takes the engine's locks."""
        return self._manager()

    @property
    def settings(self) -> Settings:
        """The settings the engine's locks are taken with (docs/configuration.md)."""
        return self._settings()

    def install(self, own_policy: bool = False) -> EngineLockClient:
        """Make this the lock client of the Spark application's JVM (of every session no
        LockingSession wraps). ``own_policy``: the engine plans its statements with this
        client's unknown_statements (enforce()'s, fixed for its life) by the documented
        precedence; else with the session's conf, where a LockingSession publishes its
        own."""
        from pyspark.java_gateway import ensure_callback_server_started

        engine = engine_of(self.spark)
        ensure_callback_server_started(self.spark.sparkContext._gateway)
        owes_releases(self.spark)
        # from the settings, not the manager: building it connects, which waits for the
        # first statement (a ZooKeeper out of reach fails that, not this)
        self._previous = engine.install(self, client_profile(
            self.settings, self.settings if own_policy else None), _callbacks(self.spark))
        self._installed = True
        cancel_waits_on_interrupt(self)
        return self

    def bind(self) -> EngineLockClient:
        """Make this the lock client of every statement of ``spark`` (its SparkSession),
        whatever API runs it, until :meth:`close`. Raises InvalidArguments when the
        SparkSession has one already: a second would silently take the first one's
        statements."""
        from pyspark.java_gateway import ensure_callback_server_started

        engine = engine_of(self.spark)
        ensure_callback_server_started(self.spark.sparkContext._gateway)
        owes_releases(self.spark)
        if not engine.bind(self.spark._jsparkSession, self,
                           client_profile(self.settings, None), _callbacks(self.spark)):
            raise InvalidArguments(
                "this SparkSession is wrapped by a LockingSession already (the lock client of"
                " its statements): close that one, or wrap another SparkSession"
                " (session.newSession(), or spark.newSession()) for other settings")
        self._bound = self.spark._jsparkSession
        cancel_waits_on_interrupt(self)
        return self

    def close(self) -> None:
        """Stop being a lock client (the previous one, if any, is again)."""
        try:
            if self._bound is not None:
                engine_of(self.spark).bind(self._bound, None, None, None)
            elif self._installed:
                engine_of(self.spark).install(self._previous, None, None)
        except Exception:  # Spark stopped: nothing left to uninstall
            pass
        self._bound, self._installed = None, False

    def __enter__(self) -> EngineLockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _cancel(self, query_id: str) -> None:
        """Cancel the lost statement's jobs, now and as they start (LostJobs.java: a loss
        before its first job must reach that job too)."""
        try:
            engine_of(self.spark).cancelLost(self.spark.sparkContext._jsc.sc(), query_id)
        except Exception:  # Spark already stopped: nothing left to cancel
            pass


#: The lock clients of this process's classic sessions, whose waits an interrupt gives up,
#: by id: a dict, whose values a signal handler copies whole, however other threads add.
_INTERRUPTIBLE: dict[int, weakref.ref[EngineLockClient]] = {}
#: The IPython shells whose interrupted cells give them up (registered once each).
_SHELLS: weakref.WeakSet[Any] = weakref.WeakSet()


def cancel_waits_on_interrupt(client: EngineLockClient) -> None:
    """An interrupt gives up the statements ``client`` keeps waiting for their locks. A
    classic statement runs on the JVM thread serving its Python caller's py4j connection,
    which no interrupt reaches:

    - PySpark's SIGINT handler (a classic SparkContext's, in the main thread) cancels the
      application's jobs, calling the JVM over that same connection, and raises
      KeyboardInterrupt; a statement still waiting for its locks (no job yet) would run
      once granted, after its caller was told it was interrupted. zklock's handler,
      chained before PySpark's (from the main thread, over a Python handler only: a
      process that ignores SIGINT keeps doing so), gives up every statement's request the
      process's lock clients keep waiting, then raises KeyboardInterrupt as PySpark 4's
      does (PySpark 3.5's lets out the error of its call over the busy connection);
    - a Jupyter notebook's kernel runs each cell under Python's default handler instead, so
      a cell that ends in KeyboardInterrupt does the same as it ends (IPython's
      ``post_run_cell``; on PySpark 4, py4j also interrupts the abandoned call's JVM
      thread, which gives the request up: GrantAhead.now).

    Each such statement fails at once, having written nothing. A stream's micro-batches
    wait on: a stream stops with its query."""
    key = id(client)
    _INTERRUPTIBLE[key] = weakref.ref(client, lambda _ref: _INTERRUPTIBLE.pop(key, None))
    _after_interrupted_cells()
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or getattr(previous, "cancels_lock_waits", False):
        return

    def interrupted(signum: int, frame: Any) -> Any:
        try:
            _cancel_statements()
        except Exception:  # noqa: BLE001 (never in the way of the interrupt itself)
            log.debug("giving up the waits on an interrupt failed", exc_info=True)
        try:
            return previous(signum, frame)
        except Exception:  # (PySpark 3.5's handler: its call over the busy connection)
            raise KeyboardInterrupt from None

    interrupted.cancels_lock_waits = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, interrupted)


def _cancel_statements() -> None:
    for ref in list(_INTERRUPTIBLE.values()):
        client = ref()
        if client is not None:
            client.cancel_statements()


def _after_interrupted_cells() -> None:
    """Give up the waits as a cell of the running IPython shell ends interrupted; nothing
    outside IPython (it is not imported here)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or shell in _SHELLS:
        return

    def cell_ended(result: Any) -> None:
        if isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt):
            _cancel_statements()

    shell.events.register("post_run_cell", cell_ended)
    _SHELLS.add(shell)


def settings_of(spark: Any, overrides: dict[str, Any]) -> Settings:
    """zklock's settings for an application: ``overrides`` (a LockingSession's or
    enforce()'s keyword arguments, at Level.SESSION), then its Spark conf (``spark.zklock.*``
    and the Hive names zklock honours), then the environment. Hive's names are also read
    where Spark users keep them: ``spark.hadoop.hive.*`` and, in a classic session, Spark's
    Hadoop conf (hive-site.xml)."""
    jsc = getattr(spark, "_jsc", None)  # a classic session's; a Connect client has none
    hadoop = jsc.hadoopConfiguration() if jsc is not None else None
    return settings_from(lambda key: spark.conf.get(key, None), overrides,
                         hadoop=hadoop.get if hadoop is not None else None)


def settings_from(conf: Callable[[str], Optional[str]], overrides: dict[str, Any],
                  hadoop: Optional[Callable[[str], Optional[str]]] = None) -> Settings:
    """:func:`settings_of` for a Spark conf read through ``conf(key)`` (None: unset), and
    Spark's Hadoop conf through ``hadoop(key)``. A Hive name is taken from the Spark conf
    as written (``SET hive.lock.numretries=3``), else as ``spark.hadoop.<name>`` (which
    spark-submit passes, where it drops a bare ``--conf hive.*``), else from the Hadoop
    conf."""
    found = {}
    for key in [key for s in SETTINGS for key in s.spark_keys]:
        value = conf(key)
        if value is not None:
            found[key] = value
    for key in HIVE_ALIASES:
        value = conf(key)
        if value is None:
            value = conf(HADOOP_PREFIX + key)
        if value is None and hadoop is not None:
            value = hadoop(key)
        if value is not None:
            found[key] = value
    return Settings.resolve(overrides, spark_conf=found, level=Level.SESSION)


def client_profile(where: Settings, policy: Optional[Settings]) -> str:
    """What a lock client tells the engine of itself (ClientProfile.java): where it locks
    (``where``'s lock space), and, from ``policy`` (None: the session's conf decides), its
    value of each setting the engine reads from a session's conf (config.ENGINE_SETTINGS):
    one set above the Spark conf, which beats the session's conf, or else what the
    environment or the default say, which the session's conf overrides."""
    settings = {}
    if policy is not None:
        below = Settings.resolve(spark_conf={})  # the environment's, else the default
        for setting in ENGINE_SETTINGS:
            over = policy.level(setting.name) > Level.SPARK_CONF
            value = getattr(policy if over else below, setting.name)
            settings[setting.spark] = {
                Field.VALUE: str(value).lower() if isinstance(value, bool) else str(value),
                Field.OVER_SPARK_CONF: over}
    return json.dumps({Field.VERSION: VERSION, Field.SPACE: where.lock_space(),
                       Field.SETTINGS: settings})


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
    return bool(engine_of(spark).guards(spark._jsparkSession))


def save_as_table_drops_first(spark: Any) -> bool:
    """Does this Spark's saveAsTable drop an overwritten table before it runs any command
    (Spark 3.5, 4.0), where the engine cannot lock the drop? Raises JvmModuleError as
    :func:`guards` does. Asked once per SparkContext: it is the Spark line's."""
    found = _engine(spark)
    if found.drops_first is None:
        found.drops_first = bool(found.calls.saveAsTableDropsFirst())
    return found.drops_first


def has_client(spark: Any) -> bool:
    """Has this application's engine extension a lock client? Raises JvmModuleError when
    the application was built without the extension."""
    return bool(engine_of(spark).hasClient())


def owes_releases(spark: Any) -> None:
    """This process's direct requests (an acquire, a lease, a listing) first let the engine
    send the releases of the statements that returned (Releases.java, zklock/locks/pending.py):
    one py4j call each, and none on a statement's path."""
    engine = engine_of(spark)
    pending.register(id(engine), engine.flushReleases)


def _callbacks(spark: Any) -> Any:
    """py4j's client of this Python in the JVM (its callback connections): the engine calls
    the lock client through it from threads that keep their connection (PythonCalls.java)."""
    return spark.sparkContext._gateway.java_gateway_server.getCallbackClient()


def engine_of(spark: Any) -> Any:
    """What Python calls in the engine (EngineCalls.java), on the application's class path
    (where Spark loaded it from); JvmModuleError without it."""
    return _engine(spark).calls


@dataclasses.dataclass
class _Engine:
    """EngineCalls of one SparkContext, found once: each lookup through py4j's JVM view is
    a round trip or two to the JVM, on every statement that asks."""

    jsc: Any  # kept, so that its id is not reused while this is cached
    calls: Any
    drops_first: Optional[bool] = None


_ENGINES: dict[int, _Engine] = {}


def _engine(spark: Any) -> _Engine:
    jsc = spark.sparkContext._jsc
    found = _ENGINES.get(id(jsc))
    if found is not None and found.jsc is jsc:
        return found
    found = _ENGINES[id(jsc)] = _Engine(jsc, engine_class(spark, protocol.JvmClass.CALLS))
    return found


def engine_class(spark: Any, name: str) -> Any:
    """The JVM module's class ``name`` (protocol.JvmClass), on the application's class path
    (where Spark loaded the engine from, so one copy of its state); JvmModuleError without
    it."""
    from py4j.java_gateway import JavaClass

    found = spark._jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise JvmModuleError("zklock's engine extension is not on this application's class"
                             " path: build the session with zklock.spark.configure(builder)")
    return found


def _answer(outcome: str, message: Optional[str] = None,
            fields: Optional[dict[str, Any]] = None) -> str:
    """The lock client's answer (EngineLockClient.java lists them): ``outcome``, the
    ``message`` saying why where there is one, and the call's ``fields``."""
    doc: dict[str, Any] = {Field.VERSION: VERSION, Field.OUTCOME: outcome}
    if message is not None:
        doc[Field.MESSAGE] = message
    return json.dumps({**doc, **(fields or {})})
