"""Settings: the one home of zklock's configuration.

Each setting has a default, a ``ZKLOCK_*`` environment variable and, where a
pipeline would set it, a ``spark.zklock.*`` Spark conf key. Every value remembers the
:class:`Level` it was set at, and when two sources meet (a LockingSession over a shared
LockManager, a ``SET`` over both, an argument of the call over all) the stronger level wins
setting by setting, so a value a user set is never overridden by a default: see
:meth:`Settings.over` and :meth:`Settings.wait`. docs/configuration.md is the reference
page; a test keeps it in step with :data:`SETTINGS`.
"""

from __future__ import annotations

import enum
import functools
import getpass
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Optional

from .connectstring import ConnectString
from .errors import InvalidArguments
from .servers import ports, serverinfo, zookeeper


class Level(enum.IntEnum):
    """Where a setting's value came from, weakest first. A stronger level wins; the order is
    docs/configuration.md's "Precedence"."""

    DEFAULT = 0
    ENVIRONMENT = 1   # ZKLOCK_*
    SPARK_CONF = 2    # spark.zklock.* and Hive's names, in the application's Spark conf
    MANAGER = 3       # LockManager(retries=...), the CLI's flags
    SESSION = 4       # LockingSession(spark, retries=...), enforce(spark, retries=...)
    SESSION_SET = 5   # SET zklock.lock.retries=... in a LockingSession
    CALL = 6          # manager.acquire(..., retries=...)


#: The words a boolean setting takes, any case (the JVM module reads the same ones:
#: zklock/spark/protocol.py, java_source).
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise InvalidArguments(f"not a boolean: {value!r}")


_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any, positive: bool = False) -> float:
    """Seconds from a number or a string such as ``500ms``, ``30s``, ``10m``, ``1h``, ``2d``;
    ``positive``: more than 0 (a lease of no time is none)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        num = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(num):] or "s"
        if unit not in _UNITS:
            raise InvalidArguments(f"bad duration {value!r}: use e.g. 500ms, 30s, 10m, 1h, 2d")
        try:
            seconds = float(num) * _UNITS[unit]
        except ValueError:
            raise InvalidArguments(
                f"bad duration {value!r}: use e.g. 500ms, 30s, 10m, 1h, 2d"
            ) from None
    if positive and not seconds > 0:
        raise InvalidArguments(f"duration must be more than 0, got {value!r}")
    if seconds < 0 or seconds != seconds:
        raise InvalidArguments(f"duration must be 0 or more, got {value!r}")
    if seconds == float("inf"):
        raise InvalidArguments(f"duration must be finite, got {value!r}")
    return seconds


def _positive_duration(value: Any) -> float:
    return parse_duration(value, positive=True)


def _operation_timeout(value: Any) -> float:
    """At least 1 s: it is also the longest wait for any one reply, so less would fail
    calls on a server that is only slow."""
    seconds = parse_duration(value, positive=True)
    if seconds < 1:
        raise InvalidArguments(f"operation timeout must be at least 1s, got {value!r}")
    return seconds


def _int(value: Any) -> int:
    """A whole number >= 0, from an int or its digits (not a bool, not 1.5)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidArguments(f"not an integer: {value!r}")
    try:
        out = int(str(value).strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise InvalidArguments(f"not an integer: {value!r}") from None
    if out < 0:
        raise InvalidArguments(f"must be >= 0, got {value!r}")
    return out


def _names(value: Any) -> str:
    """A comma-separated list of user names, normalised (no blanks, no duplicates)."""
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    return ",".join(dict.fromkeys(parts))


def _scheme(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("digest", "sasl"):
        raise InvalidArguments(f"auth scheme must be digest or sasl, got {value!r}")
    return text


def check_namespace(value: Any) -> str:
    """A scheduler namespace: 1-64 letters, digits, '_' or '-' (it is a znode name)."""
    text = str(value).strip()
    if not text or len(text) > 64 or not all(c.isalnum() or c in "_-" for c in text):
        raise InvalidArguments(f"namespace must be 1-64 letters, digits, '_' or '-': {value!r}")
    return text


def _root(value: Any) -> str:
    text = str(value).strip()
    if not text.startswith("/") or "//" in text or text.endswith("/") and text != "/":
        raise InvalidArguments(f"root must be an absolute znode path such as /warehouse: {value!r}")
    if any(p in (".", "..") for p in text.split("/")):
        raise InvalidArguments(f"root may not contain '.' or '..': {value!r}")
    return text.rstrip("/") or "/"


class Choice:
    """A parser of a setting that is one of ``options`` (any case). The options also reach
    the JVM module, which checks the same ones (zklock/spark/protocol.py, java_source)."""

    def __init__(self, what: str, *options: str) -> None:
        self.what = what
        self.options = options

    def __call__(self, value: Any) -> str:
        text = str(value).strip().lower()
        if text not in self.options:
            *first, last = self.options
            raise InvalidArguments(f"{self.what} must be {', '.join(first)} or {last},"
                                   f" got {value!r}")
        return text


_unknown_policy = Choice("unknown statements policy", "refuse", "lock")
_show_format = Choice("SHOW LOCKS format", "zklock", "hive")
_node_naming = Choice("node naming", "recipe", "hive")


def _hosts(value: Any) -> str:
    """A ZooKeeper connect string, read by kazoo's rules (zklock/connectstring.py), so that a
    bad one is a one-line error before any connection is tried, not kazoo's traceback."""
    return ConnectString.parse(value).text


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    env: str
    spark: Optional[str]
    doc: str
    #: more Spark conf keys read as this one, after ``spark`` (which wins when both are set)
    spark_aliases: tuple[str, ...] = ()
    #: may a running session change it (``SET zklock.<key>``)? How a session locks may
    #: change; where it locks (the ensemble, the root, the ZooKeeper session) may not.
    settable: bool = False
    #: read by zklock's engine in the JVM from the session's Spark conf: a LockingSession
    #: publishes its value there, and enforce()'s client and the child tell the engine
    #: theirs (ClientProfile.java), which counts at its level of the precedence.
    engine: bool = False
    #: read only by zklock's JVM module, from the application's Spark conf, else the
    #: environment, else the default: the child lock client's settings, which the driver's
    #: JVM needs before any Python runs.
    jvm: bool = False
    #: how one statement waits for its locks: zklock's engine carries the statement's
    #: session's values with its lock request, and the lock client counts them at the Spark
    #: conf's level (:meth:`Settings.for_statement`), so a session's own SET reaches
    #: whichever client takes its locks (a Spark Connect server's, a Thrift server's child).
    carried: bool = False

    @property
    def spark_keys(self) -> tuple[str, ...]:
        return ((self.spark,) if self.spark else ()) + self.spark_aliases

    @property
    def set_keys(self) -> tuple[str, ...]:
        """Its names in ``SET``: each Spark conf key without ``spark.``, lower-case (SET
        also takes them with ``spark.``)."""
        return tuple(k[len("spark."):].lower() for k in self.spark_keys)


#: Hive's own setting names, accepted as aliases of zklock's keys in Spark conf and in
#: ``SET`` (a Hive user's ``SET hive.support.concurrency=false`` does what Hive does).
#: The zklock key wins when both are set. Hive's namespace is a znode name: it becomes
#: the root ``/<namespace>``.
HIVE_ALIASES: dict[str, str] = {
    "hive.support.concurrency": "support_concurrency",
    "hive.lock.numretries": "retries",
    "hive.lock.sleep.between.retries": "retry_interval",
    "hive.zookeeper.quorum": "hosts",
    "hive.zookeeper.namespace": "root",
}


#: Spark's prefix for Hadoop conf keys in its own conf (``spark.hadoop.hive.lock.numretries``
#: reaches the Hadoop conf as ``hive.lock.numretries``): where spark-submit users put Hive's
#: names, as it drops ``--conf`` keys outside ``spark.``.
HADOOP_PREFIX = "spark.hadoop."


def hive_value(alias: str, value: Any) -> Any:
    """A Hive setting's value in zklock's terms (the namespace becomes a root path)."""
    if HIVE_ALIASES[alias] == "root":
        text = str(value).strip()
        return text if text.startswith("/") else "/" + text
    return value


SETTINGS: list[Setting] = [
    Setting("hosts", None, _hosts, "ZKLOCK_ZK", "spark.zklock.zookeeper.quorum",
            "ZooKeeper connect string (host:port,...[/chroot], IPv6 as [::1]:2181), read by"
            " kazoo's rules. Unset: the server started by `zklock server start` in the state"
            " directory, else 127.0.0.1:2181. Spark conf also: spark.zklock.zookeeper.hosts.",
            spark_aliases=("spark.zklock.zookeeper.hosts",)),
    Setting("root", "/warehouse", _root, "ZKLOCK_ROOT", "spark.zklock.root",
            "Znode under which lock objects live (/<root>/<db>/<table>/<k=v>/...)."),
    Setting("timeout", 1800.0, _positive_duration, "ZKLOCK_LOCK_TIMEOUT",
            "spark.zklock.lock.timeout",
            "How long a request may wait in all before LockNotAcquired (while lock.retries is"
            " unset). Attempts start retry_interval apart and back off, doubling up to"
            " 5 s apart (never past the timeout); a waiting request's intents keep its place,"
            " so the backoff lets no later conflicting request pass it.",
            settable=True, carried=True),
    Setting("retries", None, _int, "ZKLOCK_RETRIES", "spark.zklock.lock.retries",
            "Hive's count instead of a timeout (hive.lock.numretries): extra attempts after a"
            " denied one, retry_interval apart; 0 means a single attempt. Unset: the request"
            " waits up to lock.timeout.",
            settable=True, carried=True),
    Setting("retry_interval", 1.0, parse_duration, "ZKLOCK_RETRY_INTERVAL",
            "spark.zklock.lock.retryInterval",
            "Sleep between attempts (jittered +-25% so contenders do not retry in lockstep);"
            " the first of a backoff under lock.timeout.",
            settable=True, carried=True),
    Setting("intents", True, parse_bool, "ZKLOCK_INTENTS", "spark.zklock.lock.intents",
            "A denied request that will retry leaves intents (ephemeral, ordered by its first"
            " denial) on the objects it wants, so later conflicting requests are denied until"
            " it acquires or gives up: neither writers nor readers starve. False: Hive's plain"
            " deny-and-retry (other requests' intents are still honoured)."),
    Setting("wait_notice", True, parse_bool, "ZKLOCK_WAIT_NOTICE",
            "spark.zklock.lock.waitNotice",
            "A request that waits says so on its process's stderr (a Spark driver's, a Thrift"
            " server's log): one line after its first denial naming whom it waits for, then"
            " again at 5, 10, 20, 40 s... of waiting. False: silent until it is granted or"
            " gives up (which names the holder either way).", settable=True, carried=True),
    Setting("support_concurrency", True, parse_bool, "ZKLOCK_SUPPORT_CONCURRENCY",
            "spark.zklock.support.concurrency",
            "Like hive.support.concurrency: false makes acquire a no-op returning an empty set.",
            settable=True),
    Setting("session_timeout", 10.0, parse_duration, "ZKLOCK_SESSION_TIMEOUT",
            "spark.zklock.session.timeout",
            "ZooKeeper session timeout: how long a dead holder's implicit locks survive."),
    Setting("connect_timeout", 5.0, parse_duration, "ZKLOCK_CONNECT_TIMEOUT",
            "spark.zklock.connect.timeout",
            "How long to wait for ZooKeeper before failing with a clear error."),
    Setting("operation_timeout", None, _operation_timeout, "ZKLOCK_OPERATION_TIMEOUT",
            "spark.zklock.operation.timeout",
            "How long a lock manager's ZooKeeper call (an acquire's creates, a release's deletes,"
            " a read) rides out a lost connection before it fails, and the longest wait for any"
            " one reply; at least 1s. A release that gives up is retried while its"
            " session lives. Unset: three session timeouts, at least 15 s. (The scheduler's"
            " store keeps its own 30 s.)"),
    Setting("query_max_length", 1000, _int, "ZKLOCK_QUERY_MAX_LENGTH",
            "spark.zklock.query.maxLength",
            "Query text stored in a lock node is truncated to this many characters."),
    Setting("lose_on_suspend", True, parse_bool, "ZKLOCK_LOSE_ON_SUSPEND",
            "spark.zklock.loseOnSuspend",
            "Declare held lock sets lost as soon as the connection is suspended (safe default);"
            " false waits for the session to be reported expired."),
    Setting("isolate_commits", True, parse_bool, "ZKLOCK_ISOLATE_COMMITS",
            "spark.zklock.isolateCommits",
            "Give each write job its own staging directory under a table (_temporary/<id>),"
            " so that concurrent writers of different partitions, which the locks let run"
            " together, do not publish or delete each other's staged files.",
            settable=True, engine=True),
    Setting("unknown_statements", "refuse", _unknown_policy, "ZKLOCK_UNKNOWN_STATEMENTS",
            "spark.zklock.unknown.statements",
            "What a LockingSession does with a statement holding a command or write it has no"
            " lock rule for: refuse (it does not run) or lock (X on every table it names, S on"
            " their databases). Never runs it unlocked.",
            settable=True, engine=True),
    Setting("engine_mode", "lock", Choice("engine mode", "lock", "refuse"), "ZKLOCK_ENGINE_MODE",
            "spark.zklock.engine.mode",
            "What zklock's engine extension does with a command that no LockingSession locked:"
            " lock (its lock client takes the command's locks) or refuse (it does not run)."
            " The Spark conf of the session running the command counts at the Spark conf"
            " level (a lock client's own arguments are stronger); without a lock client"
            " in the process such a command is refused either way.",
            engine=True),
    Setting("engine_reads", "lock", Choice("engine reads", "lock", "warn", "off"),
            "ZKLOCK_ENGINE_READS", "spark.zklock.engine.reads",
            "Whether zklock's engine locks the queries Spark executes, and what a query gets"
            " where no lock client runs: lock (refused), warn (runs, logged) or off (no read"
            " locks in the engine).",
            settable=True, engine=True),
    Setting("stream_lock_lost", "fail", Choice("stream lock lost", "fail", "retry"),
            "ZKLOCK_STREAM_LOCK_LOST", "spark.zklock.stream.lockLost",
            "What a streaming query's micro-batch whose locks were lost does: fail (the query"
            " fails with LockLost; restarted from its checkpoint, it writes the batch once) or"
            " retry (the batch takes its locks again and is written again, once, up to 3"
            " times, where the query keeps no state: a stateful query fails).",
            settable=True, engine=True),
    Setting("lock_client", "child", Choice("lock client", "child", "none"), "ZKLOCK_LOCK_CLIENT",
            "spark.zklock.lockClient",
            "Where no Python lock client runs in a Spark process (Spark's Thrift server,"
            " spark-sql, a spark-submit that never calls enforce(), start-connect-server.sh):"
            " child starts zklock's lock client as a child process of the driver's JVM, none"
            " starts nothing, and a statement that needs locks is then refused in one line."
            " Read by the driver's JVM.",
            jvm=True),
    Setting("lock_client_python", None, str, "ZKLOCK_PYTHON", "spark.zklock.lockClient.python",
            "The Python that runs the child lock client, with zklock installed. Unset: the"
            " driver's Python as Spark names it (spark.pyspark.driver.python,"
            " spark.pyspark.python, PYSPARK_DRIVER_PYTHON, PYSPARK_PYTHON), else python3."
            " Read by the driver's JVM.",
            jvm=True),
    Setting("lock_client_status_file", None, str, "ZKLOCK_LOCK_CLIENT_STATUS_FILE",
            "spark.zklock.lockClient.statusFile",
            "A file where the driver's JVM keeps its child lock client's state as JSON (up,"
            " pid, restarts, failures in a row, last error); unset: none. Read by the"
            " driver's JVM.",
            jvm=True),
    Setting("lock_client_ready_ms", 120000, _int, "ZKLOCK_LOCK_CLIENT_READY_MS",
            "spark.zklock.lockClient.readyMs",
            "Milliseconds the driver's JVM gives its child lock client to start (import,"
            " connect) before the statement waiting for it fails. Read by the driver's JVM.",
            jvm=True),
    Setting("fence_timeout_ms", 5000, _int, "ZKLOCK_FENCE_TIMEOUT_MS",
            "spark.zklock.fence.timeoutMs",
            "Milliseconds a job commit's fence waits for ZooKeeper to say whether the"
            " statement's lock nodes still exist; no answer in time refuses the commit (fail"
            " closed). Read by the driver's JVM.",
            jvm=True),
    Setting("node_naming", "recipe", _node_naming, "ZKLOCK_NODE_NAMING",
            "spark.zklock.lock.nodeNaming",
            "How zklock names its lock nodes: recipe (ZooKeeper's read-/write- recipe names)"
            " or hive (Hive's LOCK-SHARED-/LOCK-EXCLUSIVE- names and lock data, so that Hive's"
            " own lock manager on the same namespace honours them: docs/hive.md). Hive's lock"
            " nodes are read as locks in either mode.",
            settable=True),
    Setting("show_locks_format", "zklock", _show_format, "ZKLOCK_SHOW_LOCKS_FORMAT",
            "spark.zklock.showLocks.format",
            "How SHOW LOCKS prints in a LockingSession: zklock (columns object, mode, ...) or"
            " hive (Hive's db@table@part with SHARED/EXCLUSIVE, and with EXTENDED its"
            " LOCK_QUERYID, LOCK_TIME, LOCK_MODE, LOCK_QUERYSTRING lines).",
            settable=True),
    Setting("user", None, str, "ZKLOCK_USER", "spark.zklock.user",
            "User recorded in lock nodes; default: the OS user."),
    Setting("max_lease_s", 86400.0, parse_duration, "ZKLOCK_MAX_LEASE", "spark.zklock.lease.max",
            "Longest a lease may live in total, renewals included (ExceedsMaxLeaseTime past it)."),
    Setting("lease_holder", None, str, "ZKLOCK_LEASE_HOLDER", "spark.zklock.lease.holder",
            "Holder of the leases this process grabs; only the holder renews, extends, drops"
            " or UNLOCKs them. Default: unique per process, user@host:pid:random (as HDFS's"
            " DFSClient_<id>); set a name to let restarts of one job share its leases."),
    Setting("lease_hard_limit_s", 3600.0, parse_duration, "ZKLOCK_LEASE_HARD_LIMIT",
            "spark.zklock.lease.hardLimit",
            "The reaper deletes leases expired for longer than this (HDFS's hard limit)."),
    Setting("job", None, str, "ZKLOCK_JOB", "spark.zklock.job",
            "Job name recorded in lock nodes and lock events (the timeline's colours);"
            " default: the user."),
    Setting("event_log", None, str, "ZKLOCK_EVENT_LOG", "spark.zklock.eventLog",
            "File to append lock events to, one JSON line each (grant, denial, retry,"
            " cancel, release, loss, force-drop); unset: no log."),
    Setting("metrics_port", 0, _int, "ZKLOCK_METRICS_PORT", "spark.zklock.metrics.port",
            "Serve Prometheus metrics on <metrics_bind>:<port>/metrics from this process (0:"
            " off). A port already taken is one warning line, not a failure."),
    Setting("metrics_bind", "127.0.0.1", str, "ZKLOCK_METRICS_BIND", "spark.zklock.metrics.bind",
            "Address the metrics endpoint binds: 127.0.0.1 (this host only) or 0.0.0.0 (a"
            " Prometheus on another host can scrape it)."),
    Setting("auth_file", None, str, "ZKLOCK_AUTH_FILE", "spark.zklock.auth.file",
            "File holding user:password for ZooKeeper digest auth (or set ZKLOCK_AUTH);"
            " nodes zklock creates are then readable and writable only by that identity"
            " and the admin."),
    Setting("auth_scheme", "digest", _scheme, "ZKLOCK_AUTH_SCHEME", "spark.zklock.auth.scheme",
            "How the credentials authenticate: digest (ZooKeeper's built-in scheme) or sasl"
            " (DIGEST-MD5, for servers set up with SASLAuthenticationProvider)."),
    Setting("admin_auth_file", None, str, "ZKLOCK_ADMIN_AUTH_FILE", None,
            "File holding the admin identity's user:password (or set ZKLOCK_ADMIN_AUTH):"
            " needed for force-drop and the lease reaper once auth is in use."),
    Setting("acl_admin_digest", None, str, "ZKLOCK_ACL_ADMIN_DIGEST",
            "spark.zklock.acl.adminDigest",
            "The admin's public digest (user:base64-sha1, as `zklock auth digest` prints)"
            " that every node's ACL grants all permissions."),
    Setting("state_dir", ".zklock", str, "ZKLOCK_STATE_DIR", None,
            "Directory of the embedded ZooKeeper server (data, logs, pid, connect string)."),
    Setting("server_pointer", None, str, serverinfo.POINTER_ENV, None,
            "File where `zklock server start` names the state directory of the last server"
            " it started, for clients run elsewhere; unset: ~/.zklock-last-server."),
    Setting("zookeeper_jars", zookeeper.DEFAULT_JAR_DIR, str, zookeeper.JARS_ENV, None,
            "Directory of the ZooKeeper jars the embedded server runs (Debian's zookeeper"
            " package; PySpark's jars/ holds them too)."),
    Setting("port_reservations", ports.DEFAULT_RESERVATIONS, str, ports.RESERVATIONS_ENV,
            None,
            "Directory where the embedded servers' ports are reserved, one locked file a"
            " port, so that processes starting servers at once never take the same one."),
    Setting("cache_dir", None, str, "ZKLOCK_CACHE_DIR", None,
            "Absolute directory where zklock compiles its JVM module; unset:"
            " $XDG_CACHE_HOME/zklock, else ~/.cache/zklock, else <temp dir>/zklock-<uid>."),
    Setting("scheduler_root", "/zklock/scheduler", _root, "ZKLOCK_SCHEDULER_ROOT",
            "spark.zklock.scheduler.root",
            "Znode under which each scheduler namespace keeps its queries, executions,"
            " executors and leader election."),
    Setting("scheduler_namespace", "default", check_namespace, "ZKLOCK_SCHEDULER_NAMESPACE",
            "spark.zklock.scheduler.namespace",
            "Scheduler namespace: scheduled queries and scheduler processes of one namespace"
            " see only each other (Hive's hive.scheduled.queries.namespace)."),
    Setting("scheduler_admins", "", _names, "ZKLOCK_SCHEDULER_ADMINS",
            "spark.zklock.scheduler.admins",
            "Comma-separated users who may create scheduled queries and alter or drop any."
            " Empty: nobody may create one."),
    Setting("scheduler_impersonation", False, parse_bool, "ZKLOCK_SCHEDULER_IMPERSONATION",
            "spark.zklock.scheduler.impersonation",
            "Allow EXECUTED AS a user other than the one creating or altering the query."),
    Setting("scheduler_max_parallel", 8, _int, "ZKLOCK_SCHEDULER_MAX_PARALLEL",
            "spark.zklock.scheduler.maxParallel",
            "Most scheduled executions waiting or running at once across all executors of a"
            " namespace (0: no limit)."),
    Setting("scheduler_pool_size", 2, _int, "ZKLOCK_SCHEDULER_POOL_SIZE",
            "spark.zklock.scheduler.poolSize",
            "Executions one scheduler process runs at once (`zklock scheduler run --executors`)."),
    Setting("scheduler_quiet_period", 60.0, parse_duration, "ZKLOCK_SCHEDULER_QUIET_PERIOD",
            "spark.zklock.scheduler.quietPeriod",
            "A newly started scheduler process launches nothing for this long (Hive's"
            " meltdown switch); 0 turns it off."),
    Setting("scheduler_progress_interval", 2.0, parse_duration,
            "ZKLOCK_SCHEDULER_PROGRESS_INTERVAL", "spark.zklock.scheduler.progressInterval",
            "How often a running execution reports progress (moving its next_deadline)."),
    Setting("scheduler_progress_timeout", 20.0, parse_duration,
            "ZKLOCK_SCHEDULER_PROGRESS_TIMEOUT", "spark.zklock.scheduler.progressTimeout",
            "An execution that reports no progress for this long is TIMED_OUT and fenced."),
    Setting("scheduler_max_runtime", 0.0, parse_duration, "ZKLOCK_SCHEDULER_MAX_RUNTIME",
            "spark.zklock.scheduler.maxRuntime",
            "An execution running longer than this is TIMED_OUT, fenced and its Spark jobs"
            " cancelled (0: no limit)."),
    Setting("scheduler_execution_max_age", 604800.0, parse_duration,
            "ZKLOCK_SCHEDULER_EXECUTION_MAX_AGE", "spark.zklock.scheduler.executionMaxAge",
            "The leader trims finished executions whose trigger time is older than this."),
    Setting("scheduler_executions_kept", 1000, _int, "ZKLOCK_SCHEDULER_EXECUTIONS_KEPT",
            "spark.zklock.scheduler.executionsKept",
            "The leader also trims all but this many newest executions of each query."),
    Setting("scheduler_auto_disable_after", 0, _int, "ZKLOCK_SCHEDULER_AUTO_DISABLE_AFTER",
            "spark.zklock.scheduler.autoDisableAfter",
            "Disable a query after this many consecutive failed executions (0: never)."),
    Setting("scheduler_reap_interval", 60.0, parse_duration, "ZKLOCK_SCHEDULER_REAP_INTERVAL",
            "spark.zklock.scheduler.reapInterval",
            "How often the scheduler leader reaps leases past their hard limit (0: never)."),
]


_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: Every name ``SET`` knows, lower-case, to the setting it names: zklock's Spark conf keys
#: without ``spark.`` (``zklock.lock.retries``), and Hive's names.
SET_KEYS: dict[str, str] = {**{k: s.name for s in SETTINGS for k in s.set_keys},
                            **HIVE_ALIASES}
def spark_key(name: str) -> str:
    """The Spark conf key of the setting ``name``."""
    key = _BY_NAME[name].spark
    if key is None:
        raise KeyError(f"{name} has no Spark conf key")
    return key


#: The settings a running session may change (``SET``).
SETTABLE: frozenset[str] = frozenset(s.name for s in SETTINGS if s.settable)
#: The settings zklock's engine reads from a session's Spark conf (Setting.engine).
ENGINE_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.engine)
CARRIED_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.carried)
#: how long a request waits: a statement's session that names one names its whole wait
WAIT_BOUNDS = frozenset({"timeout", "retries"})
#: The session conf keys zklock's engine carries with a lock request: each carried
#: setting's Spark conf keys, then Hive's names of them.
CARRIED_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    [k for s in CARRIED_SETTINGS for k in s.spark_keys]
    # SET's short forms, as documented and lower-case (Spark keeps a key as it was SET)
    + [k[len("spark."):] for s in CARRIED_SETTINGS for k in s.spark_keys]
    + [k for s in CARRIED_SETTINGS for k in s.set_keys]
    + [alias for alias, name in HIVE_ALIASES.items()
       if name in {s.name for s in CARRIED_SETTINGS}]))
#: The shortest pause between attempts a statement's session may ask of its lock client: a
#: client's conf must not make a shared server's lock client retry in a tight loop.
MIN_CARRIED_INTERVAL = 0.01


@functools.lru_cache(maxsize=64)
def _carried(conf: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Any], ...]:
    """The carried settings a statement's session conf names, parsed as
    :meth:`Settings.resolve` parses the Spark conf (zklock's key over Hive's name), each
    bound of the wait included once one is named (:meth:`Settings.for_statement`). Kept for
    the confs seen last: a session's conf seldom changes between its statements, and
    resolving it is a tenth of a millisecond on every grant."""
    given = dict(conf)
    for key, value in conf:  # SET's short form (zklock.lock.retries): the full key wins
        if key.startswith("zklock.") and key.lower() in SET_KEYS:
            given.setdefault(spark_key(SET_KEYS[key.lower()]), value)
    carried = Settings.resolve(spark_conf=given, environ={})
    named = set(carried.sources)
    if named & WAIT_BOUNDS:
        named |= WAIT_BOUNDS
    values = {name: getattr(carried, name) for name in named}
    if "retry_interval" in values:
        values["retry_interval"] = max(values["retry_interval"], MIN_CARRIED_INTERVAL)
    return tuple(sorted(values.items()))


def from_environment(name: str) -> Any:
    """Setting ``name`` as the environment alone gives it: its variable (an empty one is
    unset), parsed, else its default. For what is read before any Settings exist: where the
    JVM module is compiled, the embedded server's jars."""
    row = _BY_NAME[name]
    raw = os.environ.get(row.env, "")
    if raw == "":
        return row.default
    try:
        return row.parse(raw)
    except InvalidArguments as exc:
        raise InvalidArguments(f"{row.env}: {exc}") from None


def env_name(name: str) -> str:
    """The environment variable of setting ``name``, for messages."""
    return _BY_NAME[name].env


def _refuse_unknown(names: Iterable[str]) -> None:
    unknown = set(names) - set(_BY_NAME)
    if unknown:
        raise InvalidArguments(f"unknown setting(s): {', '.join(sorted(unknown))}")


def _spark_key_in(setting: Setting, spark_conf: Mapping[str, Any]) -> Optional[str]:
    for key in setting.spark_keys:
        if spark_conf.get(key) not in (None, ""):
            return key
    return None


def _hive_alias_in(name: str, spark_conf: Mapping[str, Any]) -> Optional[str]:
    for alias, target in HIVE_ALIASES.items():
        if target == name and spark_conf.get(alias) not in (None, ""):
            return alias
    return None


@dataclass(frozen=True)
class Wait:
    """How one request waits when denied: ``retries`` more attempts ``interval`` apart
    (Hive's count), or, when ``retries`` is None, attempts backing off from ``interval``
    until ``timeout`` seconds have passed."""

    interval: float
    retries: Optional[int] = None
    timeout: Optional[float] = None

    @property
    def counted(self) -> bool:
        return self.retries is not None


class SettingsBehaviour:
    """What resolved settings do: :data:`Settings` is this with a field per row of
    :data:`SETTINGS`, each defaulting to the row's default (no name or default is written
    twice), plus ``extra`` and ``sources`` (the Level each setting was set at; a name
    missing there is at its default). Build one with :meth:`resolve`."""

    @classmethod
    def resolve(cls, overrides: Optional[Mapping[str, Any]] = None,
                spark_conf: Optional[Mapping[str, Any]] = None,
                environ: Optional[Mapping[str, str]] = None,
                level: Level = Level.MANAGER) -> Settings:
        """Settings from ``overrides`` (set at ``level``: a LockManager's arguments by
        default), else the Spark conf (zklock's key, then Hive's name), else the
        environment, else the default; each value remembers where it came from."""
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        spark_conf = spark_conf or {}
        environ = os.environ if environ is None else environ
        _refuse_unknown(overrides)
        values: dict[str, Any] = {}
        sources: dict[str, Level] = {}
        for s in SETTINGS:
            if s.name in overrides:
                raw, source, sources[s.name] = overrides[s.name], s.name, level
            elif (key := _spark_key_in(s, spark_conf)) is not None:
                raw, source, sources[s.name] = spark_conf[key], key, Level.SPARK_CONF
            elif (alias := _hive_alias_in(s.name, spark_conf)) is not None:
                raw, source = hive_value(alias, spark_conf[alias]), alias
                sources[s.name] = Level.SPARK_CONF
            elif environ.get(s.env) not in (None, ""):
                raw, source, sources[s.name] = environ[s.env], s.env, Level.ENVIRONMENT
            else:
                values[s.name] = s.default
                continue
            try:
                values[s.name] = s.parse(raw)
            except InvalidArguments as exc:
                raise InvalidArguments(f"{source}: {exc}") from None
        return cls(**values, sources=sources)

    def with_(self, level: Level = Level.MANAGER, **changes: Any) -> Settings:
        """These settings with ``changes`` set at ``level``, each parsed and checked as
        :meth:`resolve` does (None: explicitly unset, as ``retries=None`` after a timeout
        is SET)."""
        _refuse_unknown(changes)
        parsed = {}
        for name, raw in changes.items():
            try:
                parsed[name] = raw if raw is None else _BY_NAME[name].parse(raw)
            except InvalidArguments as exc:
                raise InvalidArguments(f"{name}: {exc}") from None
        return self._set(level, parsed)

    def _set(self, level: Level, values: Mapping[str, Any]) -> Settings:
        """These settings with ``values`` (already parsed), each recorded at ``level``."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(values, sources={**self.sources, **{name: level for name in values}})
        return Settings(**data)

    def level(self, name: str) -> Level:
        """The level ``name`` was set at (DEFAULT when nothing set it)."""
        return self.sources.get(name, Level.DEFAULT)

    def over(self, weaker: Settings) -> Settings:
        """These settings layered over ``weaker``: setting by setting, the value set at the
        stronger level (this one's on a tie). A LockingSession's settings over its
        LockManager's: the manager's ``retries=1`` is kept unless the session sets a
        stronger value, and a default of the session never hides it."""
        layered = self
        for name in _BY_NAME:
            if weaker.level(name) > self.level(name):
                layered = layered._set(weaker.level(name), {name: getattr(weaker, name)})
        return layered

    def for_statement(self, conf: Mapping[str, Any]) -> Settings:
        """These settings (a lock client's) for one statement whose session's conf holds
        ``conf``: the carried settings' keys as zklock's engine sends them with the request.
        Each value there counts at the Spark conf's level (docs/configuration.md,
        "Precedence"): over what these settings have from the Spark conf, the environment or
        the default, under what was set above. A session that names how long to wait (a
        timeout or a count) names its whole wait: the other is unset for the statement, as a
        SET of one unsets the other. Only carried settings are read: a session's conf never
        turns a shared server's locking off."""
        named = _carried(tuple(sorted((k, str(v)) for k, v in conf.items()
                                      if k in CARRIED_KEYS)))
        taken = {name: value for name, value in named if self.level(name) <= Level.SPARK_CONF
                 and (self.level(name) < Level.SPARK_CONF or getattr(self, name) != value)}
        return self._set(Level.SPARK_CONF, taken) if taken else self

    def wait(self, retries: Optional[int] = None, timeout: Optional[float] = None,
             retry_interval: Optional[float] = None) -> Wait:
        """How a request waits under these settings, with a call's own ``retries``,
        ``timeout`` and ``retry_interval`` (each, when given, at Level.CALL).

        ``retries`` means Hive's count, ``timeout`` a wait by time: whichever was set at the
        stronger level decides. When both are set at one level, the count wins: it is the
        narrower instruction (Hive's ``hive.lock.numretries``, which Hive users carry in
        their configs), and Hive has no timeout to honour beside it.
        """
        settings = self
        call = {k: v for k, v in (("retries", retries), ("retry_interval", retry_interval))
                if v is not None}
        if call:
            settings = self.with_(Level.CALL, **call)
        if timeout is not None:  # a call may ask for one attempt: timeout=0
            try:
                seconds = parse_duration(timeout)
            except InvalidArguments as exc:
                raise InvalidArguments(f"timeout: {exc}") from None
            settings = settings._set(Level.CALL, {"timeout": seconds})
        interval = settings.retry_interval
        if settings.retries is not None and (settings.level("retries")
                                             >= settings.level("timeout")):
            return Wait(interval, retries=settings.retries)
        return Wait(interval, timeout=settings.timeout)

    @property
    def outage_deadline(self) -> float:
        """Seconds a ZooKeeper call rides out a lost connection: ``operation_timeout``, else
        three session timeouts (at least 15 s), long enough for a session that survives."""
        if self.operation_timeout is not None:
            return self.operation_timeout
        return max(self.session_timeout, 5.0) * 3

    @property
    def admins(self) -> frozenset[str]:
        return frozenset(u for u in self.scheduler_admins.split(",") if u)

    @property
    def effective_user(self) -> str:
        if self.user:
            return self.user
        try:
            return getpass.getuser()
        except Exception:  # no passwd entry in some containers
            return f"uid{os.getuid()}"

    def connect_string(self) -> str:
        """The configured hosts, else the embedded server's (of the state directory, or the
        last one started: zklock/servers/serverinfo.py), else 127.0.0.1:2181."""
        if self.hosts:
            return self.hosts
        try:
            return serverinfo.read_here_or_last(self.state_dir).connect
        except serverinfo.NoServerInfo:
            return "127.0.0.1:2181"

    def lock_space(self) -> str:
        """Where these settings take locks, as one comparable text: the ZooKeeper servers
        (sorted), the chroot and the root. Two lock clients lock the same objects against
        each other only when theirs are equal."""
        parsed = ConnectString.parse(self.connect_string())
        servers = ",".join(sorted(f"{host}:{port}" for host, port in parsed.servers))
        return f"{servers}{parsed.chroot}{self.root.rstrip('/') or '/'}"


#: Resolved settings: a frozen dataclass whose fields are the rows of :data:`SETTINGS`.
Settings = make_dataclass(
    "Settings",
    [(row.name, Any, field(default=row.default)) for row in SETTINGS]
    + [("extra", dict, field(default_factory=dict, compare=False)),
       ("sources", Mapping[str, Level], field(default_factory=dict, compare=False))],
    bases=(SettingsBehaviour,), frozen=True)
Settings.__module__ = __name__  # (pickled by name, as a class written here would be)
Settings.__doc__ = SettingsBehaviour.__doc__
