"""What zklock's Python and its JVM module agree on, read from the one file that defines it.

``protocol.properties`` (beside this module) is written once; the build copies it into the
jar, where Protocol.java reads it. Versions of the documents that cross between the two,
the local properties and tags a locked statement's jobs carry, and the conditions of the
engine's refusals.
"""

from __future__ import annotations

from pathlib import Path

from ..config import (
    CARRIED_KEYS,
    FALSE_WORDS,
    SETTINGS,
    TRUE_WORDS,
    Choice,
    parse_bool,
    spark_key,
)

#: The file, as the jar's build copies it.
FILE = Path(__file__).with_name("protocol.properties")
#: Where the jar holds it.
JAR_ENTRY = "zklock/protocol.properties"


def _load() -> dict[str, str]:
    values = {}
    for line in FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


_VALUES = _load()


def jar_text() -> str:
    """The file as the jar holds it, with what the JVM module reads of zklock's settings
    appended from the one settings table: each setting's Spark conf key
    (``setting.<name>=<key>``), and for each the JVM reads itself (an engine or JVM
    setting), its environment variable, default and choices; and the session conf keys the
    engine carries with each lock request (``carried.keys``: config.CARRIED_KEYS)."""
    rows = []
    for s in SETTINGS:
        if s.spark:
            rows.append(f"setting.{s.name}={s.spark}")
        if s.engine or s.jvm:
            rows.append(f"env.{s.name}={s.env}")
            default = "" if s.default is None else s.default
            rows.append(f"default.{s.name}="
                        + (str(default).lower() if isinstance(default, bool) else str(default)))
            if isinstance(s.parse, Choice):
                rows.append(f"choices.{s.name}={','.join(s.parse.options)}")
            elif s.parse is parse_bool:
                rows.append(f"boolean.{s.name}=true")
    rows.append(f"carried.keys={','.join(CARRIED_KEYS)}")
    rows.append(f"boolean.true={','.join(TRUE_WORDS)}")
    rows.append(f"boolean.false={','.join(FALSE_WORDS)}")
    return (FILE.read_text() + "\n# appended by the build from zklock/config.py\n"
            + "".join(row + "\n" for row in rows))


def message(name: str, **fields: str) -> str:
    """The message ``message.<name>`` with its ``{field}``s filled in (Protocol.message in
    the JVM fills the same text)."""
    text = _VALUES[f"message.{name}"]
    for key, value in fields.items():
        text = text.replace("{" + key + "}", value)
    return text


ENGINE_VERSION = int(_VALUES["engine.version"])
ANSWER_VERSION = int(_VALUES["answer.version"])
CONNECT_PROTOCOL = int(_VALUES["connect.protocol"])
FENCE_ZOOKEEPER = _VALUES["property.fence_zookeeper"]
FENCE_NODES = _VALUES["property.fence_nodes"]
QUERY_ID = _VALUES["property.query_id"]
STREAM = _VALUES["property.stream"]
FENCE_TAG = _VALUES["tag.fence"]
FENCE_REFUSED = _VALUES["fence.refused"]
REFUSED = _VALUES["condition.refused"]
DENIED = _VALUES["condition.denied"]
LOST = _VALUES["condition.lost"]
UNAVAILABLE = _VALUES["condition.unavailable"]
WRITE_FAILED = _VALUES["condition.write_failed"]
UNKNOWN_STATEMENTS = spark_key("unknown_statements")
ISOLATE_COMMITS = spark_key("isolate_commits")
LOCK_CLIENT_STATUS_FILE = spark_key("lock_client_status_file")
COMMIT_PROTOCOL = _VALUES["conf.commit_protocol"]
COMMIT_PROTOCOL_CLASS = _VALUES["class.commit_protocol"]
CHECKPOINT_MANAGER = _VALUES["conf.checkpoint_manager"]
CHECKPOINT_MANAGER_CLASS = _VALUES["class.checkpoint_manager"]


class Call:
    """The lock client's calls, by the JVM (py4j) or over the child's pipe."""

    ACQUIRE = _VALUES["call.acquire"]
    VERIFY = _VALUES["call.verify"]
    RELEASE = _VALUES["call.release"]
    PARSE = _VALUES["call.parse"]


class Outcome:
    """The outcomes of the lock client's answers (EngineLockClient.java lists which call
    answers which)."""

    GRANTED = _VALUES["outcome.granted"]
    UNLOCKED = _VALUES["outcome.unlocked"]
    DENIED = _VALUES["outcome.denied"]
    REFUSED = _VALUES["outcome.refused"]
    UNAVAILABLE = _VALUES["outcome.unavailable"]
    COVERED = _VALUES["outcome.covered"]
    RELEASED = _VALUES["outcome.released"]
    LOST = _VALUES["outcome.lost"]
    PARSED = _VALUES["outcome.parsed"]


class Statement:
    """What a session's own statement is, as the lock client parses it for the engine."""

    LOCK = _VALUES["statement.lock"]
    UNLOCK = _VALUES["statement.unlock"]


class Event:
    """What the child lock client says to the JVM unasked."""

    READY = _VALUES["event.ready"]
    LOST = _VALUES["event.lost"]
    WAITING = _VALUES["event.waiting"]


class AnswerKind:
    """The kinds of the planner's answer, and of its refusals."""

    COMMAND = _VALUES["kind.command"]
    QUERY = _VALUES["kind.query"]
    REFUSED = _VALUES["kind.refused"]
    UNSUPPORTED = _VALUES["refusal.unsupported"]
    INVALID_ARGUMENTS = _VALUES["refusal.invalid_arguments"]
    INCOMPATIBLE = _VALUES["refusal.incompatible"]


class JvmClass:
    """The JVM module's classes Python names."""

    EXTENSION = _VALUES["class.extension"]
    REFUSAL = _VALUES["class.refusal"]
    LOCK_CLIENT = _VALUES["class.lock_client"]
    CALLS = _VALUES["class.calls"]
    CONNECT_PLUGIN = _VALUES["class.connect_plugin"]
    MAPRED_COMMITTER = _VALUES["class.mapred_committer"]
    PLUGIN = _VALUES["class.plugin"]
    INSERT_ONCE = _VALUES["class.insert_once"]


CONNECT_TYPE_URL = _VALUES["connect.type_url"]


class Field:
    """The fields of the JSON documents that cross between Python and the JVM."""

    # the lock client's requests and answers (EngineLockClient.java, lock_client.py)
    VERSION = _VALUES["field.version"]
    OUTCOME = _VALUES["field.outcome"]
    MESSAGE = _VALUES["field.message"]
    HANDLE = _VALUES["field.handle"]
    QUERY_ID = _VALUES["field.query_id"]
    TOKEN = _VALUES["field.token"]
    ATTEMPTS = _VALUES["field.attempts"]
    WAITED_FOR = _VALUES["field.waited_for"]
    SOLE = _VALUES["field.sole"]
    ZOOKEEPER = _VALUES["field.zookeeper"]
    NODES = _VALUES["field.nodes"]
    RELEASES = _VALUES["field.releases"]
    OBJECTS = _VALUES["field.objects"]
    ANSWER = _VALUES["field.answer"]
    STATEMENT = _VALUES["field.statement"]
    USER = _VALUES["field.user"]
    APPLICATION = _VALUES["field.application"]
    COMMAND = _VALUES["field.command"]
    STREAM = _VALUES["field.stream"]
    DATABASE = _VALUES["field.database"]
    # the planner's answer and its targets (LockAnswer.java, answer.py)
    KIND = _VALUES["field.kind"]
    TARGETS = _VALUES["field.targets"]
    DB = _VALUES["field.db"]
    TABLE = _VALUES["field.table"]
    PARTITION = _VALUES["field.partition"]
    MODE = _VALUES["field.mode"]
    NOTES = _VALUES["field.notes"]
    RECHECK = _VALUES["field.recheck"]
    WHOLE = _VALUES["field.whole"]
    REFUSAL = _VALUES["field.refusal"]
    # what a lock client says of itself (ClientProfile.java, lock_client.py)
    SPACE = _VALUES["field.space"]
    SETTINGS = _VALUES["field.settings"]
    VALUE = _VALUES["field.value"]
    OVER_SPARK_CONF = _VALUES["field.over_spark_conf"]
    # the child lock client's pipe (ChildLockClient.java, lock_process.py)
    CONF = _VALUES["field.conf"]
    HADOOP = _VALUES["field.hadoop"]
    ABANDONED = _VALUES["field.abandoned"]
    ID = _VALUES["field.id"]
    CALL = _VALUES["field.call"]
    REQUEST = _VALUES["field.request"]
    FAILED = _VALUES["field.failed"]
    REPLY = _VALUES["field.reply"]
    EVENT = _VALUES["field.event"]
    PID = _VALUES["field.pid"]
    PROFILE = _VALUES["field.profile"]
    # the Spark Connect plugin's requests (ConnectLockPlugin.java, connect.py)
    PROTOCOL = _VALUES["field.protocol"]
    OP = _VALUES["field.op"]
    SQL = _VALUES["field.sql"]
    STRICT = _VALUES["field.strict"]
    UNKNOWN_STATEMENTS = _VALUES["field.unknown_statements"]
    RELATION = _VALUES["field.relation"]
    CLIENT = _VALUES["field.client"]
    BUILD = _VALUES["field.build"]
    # the child lock client's status, for operators (ChildSupervisor.java, cli/thrift_server.py)
    UP = _VALUES["field.up"]
    RESTARTS = _VALUES["field.restarts"]
    LAST_ERROR = _VALUES["field.last_error"]
    FAILURES_IN_A_ROW = _VALUES["field.failures_in_a_row"]
    UPDATED_MS = _VALUES["field.updated_ms"]


class Op:
    """The operations of the Spark Connect plugin's requests."""

    PLAN = _VALUES["op.plan"]
    WRITE = _VALUES["op.write"]
    VERSION = _VALUES["op.version"]
