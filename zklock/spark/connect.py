"""zklock's lock planner for Spark Connect sessions: ask the server, where the plans are.

A Spark Connect client (``SparkSession.builder.remote("sc://host")``) has no parser,
analyzer or catalog of its own. The Connect server runs zklock's plugin
(ConnectLockPlugin.java, in zklock's JVM module), which plans with LockPlanner.java, the
one planner. This module sends it a request as a relation extension and reads its answer,
the same document a classic session gets over py4j (:mod:`.answer`)::

    from zklock.spark.connect import plan_locks
    plan_locks(spark, sql="INSERT INTO sales.orders PARTITION (ds='1') SELECT * FROM s")
    plan_locks(spark, df=spark.table("sales.orders").where("ds = '1'"))

A statement zklock refuses raises UnsupportedStatement; Spark's own errors
(ParseException, AnalysisException) are raised as Spark raised them. A server without the
plugin, with another build of it, or out of reach raises
:class:`~zklock.errors.SparkConnectError`, one line. An unreachable server is retried by
the session's own retry policy before that error (Spark Connect's default keeps trying for
about ten minutes).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Optional

from ..errors import InvalidArguments, SparkConnectError
from . import answer
from .answer import PlannedLocks
from .jvm import PROTOCOL, build_hash, zklock_version
from .protocol import Connect, Field, JvmClass, Op

#: Spark Connect's setting naming the relation plugins it loads (zklock's: JvmClass).
PLUGIN_SETTING = "spark.connect.extensions.relation.classes"
#: How Spark Connect says no plugin took an extension (error class, then its message).
_NO_PLUGIN = ("NO_HANDLER_FOR_EXTENSION", "No handler found for extension")


def plan_locks(session: Any, sql: Optional[str] = None, df: Any = None,
               unknown_statements: str = "refuse", *, strict: bool = True
               ) -> list[tuple[str, str]]:
    """The locks a statement or DataFrame of a Spark Connect ``session`` needs, as
    (object, mode) pairs in acquisition order, planned by zklock's plugin in the server.

    Give ``sql`` (a statement) or ``df`` (a Connect DataFrame: the S locks of an action on
    it, or, when its plan holds a command, that command's locks). ``strict=False`` plans a
    statement the analyzer rejects from its parsed form (EXPLAIN LOCKS) instead of raising
    Spark's AnalysisException. ``unknown_statements`` is ``refuse`` (a command without a
    lock rule raises UnsupportedStatement) or ``lock`` (X on every table it names).
    (A DataFrame write is planned where it runs, in the server's engine.)
    """
    if sql is not None and df is not None:
        raise InvalidArguments("plan_locks takes sql or df, not both")
    if sql is not None:
        planned = plan_statement(session, sql, unknown_statements, strict=strict)
    elif df is not None:
        planned = plan_dataframe(session, df, unknown_statements)
    else:
        raise InvalidArguments("plan_locks needs sql or df")
    return [(t.obj.name, t.mode.value) for t in planned.targets]


def plan_statement(session: Any, sql: str, unknown_statements: str = "refuse", *,
                   strict: bool = True) -> PlannedLocks:
    """The locks of a statement of a Spark Connect ``session``, and whether Spark runs it
    as a command (eagerly, in ``sql()``) rather than lazily as a query."""
    return ask(session, {Field.OP: Op.PLAN, Field.SQL: str(sql), Field.STRICT: bool(strict),
                         Field.UNKNOWN_STATEMENTS: unknown_statements})


def plan_dataframe(session: Any, df: Any, unknown_statements: str = "refuse"
                   ) -> PlannedLocks:
    """The locks of a Connect DataFrame: S on what an action on it reads (or, when its plan
    holds a command, that command's locks)."""
    return ask(session, {Field.OP: Op.PLAN, Field.RELATION: _relation(session, df),
                         Field.UNKNOWN_STATEMENTS: unknown_statements})


def plan_write(session: Any, table: str, partition: Optional[dict[str, Any]] = None
               ) -> PlannedLocks:
    """X on ``table``, or on its static ``partition`` prefix: the object zklock's own
    statements name (Spark's writes are planned in the server's engine)."""
    request: dict[str, Any] = {Field.OP: Op.WRITE, Field.TABLE: str(table)}
    if partition:  # a None value ends the static prefix
        request[Field.PARTITION] = {str(k): str(v) for k, v in partition.items() if v is not None}
    return ask(session, request)


def hold_block(session: Any, targets: list[Any], statement: str,
               ttl: float) -> tuple[str, list[str]]:
    """Have the server's engine hold ``targets`` for a block of ``session``, whose
    operations then name it (Tag.BLOCK), for ``ttl`` seconds unless renewed
    (:func:`renew_block`): (its id, its lock nodes); ("", []) when nothing is held (locking
    off). Denied or refused as a statement is: Spark's error carrying the engine's
    condition (lock_client.lock_error reads it)."""
    rows = _rows(session, {Field.OP: Op.HOLD, Field.ANSWER: json.loads(answer.write(targets)),
                           Field.STATEMENT: statement, Field.TTL_MS: int(ttl * 1000)})
    return (rows[0][0], [r[1] for r in rows if r[1]]) if rows else ("", [])


def renew_block(session: Any, block: str) -> None:
    """Its client still runs ``session``'s block ``block``: the server keeps it another time
    to live. Raises the engine's loss when it is no longer held."""
    _rows(session, {Field.OP: Op.RENEW, Field.BLOCK: block})


def release_block(session: Any, block: str) -> None:
    """Release ``session``'s block ``block``; raises the engine's loss (as Spark's error)
    when its locks were lost while it held them."""
    _rows(session, {Field.OP: Op.RELEASE, Field.BLOCK: block})


def plugin_version(session: Any) -> dict[str, Any]:
    """What zklock's plugin in the Connect server says of itself: ``plugin`` (zklock's
    version), ``protocol``, ``build`` (hash of its planner and node table), ``built_for``
    (the Spark it was compiled for), ``spark`` (the server's Spark) and ``nodes`` (how many
    plan node classes its table knows). Raises SparkConnectError without the plugin."""
    (row,) = _rows(session, {Field.OP: Op.VERSION})
    return dict(zip(["plugin", "protocol", "build", "built_for", "spark", "nodes"], row))


def _relation(session: Any, df: Any) -> str:
    """A Connect DataFrame's plan as the base64 of its ``spark.connect.Relation``."""
    from pyspark.sql.connect.dataframe import DataFrame

    if not isinstance(df, DataFrame):
        raise InvalidArguments(f"df must be a Spark Connect DataFrame, not {type(df).__name__}")
    relation = df._plan.plan(session.client)
    return base64.b64encode(relation.SerializeToString()).decode("ascii")


def _request_plan(payload: dict[str, Any]) -> Any:
    """A Connect LogicalPlan whose relation is zklock's request, as an extension."""
    from google.protobuf import any_pb2, wrappers_pb2
    from pyspark.sql.connect.plan import LogicalPlan

    body = wrappers_pb2.StringValue(value=json.dumps(payload)).SerializeToString()

    class LockRequest(LogicalPlan):
        """The relation ``ConnectLockPlugin`` answers with rows."""

        def __init__(self) -> None:
            super().__init__(None)

        def plan(self, session: Any) -> Any:
            rel = self._create_proto_relation()
            rel.extension.CopyFrom(any_pb2.Any(type_url=Connect.TYPE_URL, value=body))
            return rel

    return LockRequest()


def ask(session: Any, request: dict[str, Any]) -> PlannedLocks:
    """Send one plan request to the plugin and read its answer (raising its refusal)."""
    from pyspark.sql.connect.dataframe import DataFrame

    _require_connect(session)
    frame = DataFrame(_request_plan(_with_client(request)), session)
    try:
        # the answer is in the schema's metadata: Spark Connect's AnalyzePlan, no job
        text = frame.schema.fields[0].metadata.get("zklock", "")
    except Exception as exc:  # a missing plugin, an unreachable server; else Spark's own
        raise _translate(exc, session) from None
    return answer.read(text)


def _rows(session: Any, request: dict[str, Any]) -> list[tuple]:
    from pyspark.sql.connect.dataframe import DataFrame

    _require_connect(session)
    try:
        return [tuple(r) for r in DataFrame(_request_plan(_with_client(request)),
                                            session).collect()]
    except Exception as exc:
        raise _translate(exc, session) from None


def _require_connect(session: Any) -> None:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:  # pyspark without its connect extras (grpcio, pandas, pyarrow)
        raise SparkConnectError(f"Spark Connect's client is not installed ({exc}): install"
                                " zklock[connect]") from None
    if not isinstance(session, ConnectSession):
        raise InvalidArguments(
            "zklock.spark.connect plans for a Spark Connect session (SparkSession.builder"
            ".remote(...)); a classic session plans through LockingSession.planner")


def _with_client(request: dict[str, Any]) -> dict[str, Any]:
    """The request with the protocol and this zklock's version and build (the plugin
    refuses a client of another build)."""
    return dict(request, protocol=PROTOCOL,
                client={Field.VERSION: zklock_version(), Field.BUILD: build_hash()})


def _translate(exc: Exception, session: Any) -> Exception:
    """zklock's error for a missing plugin or an unreachable server; otherwise Spark's own
    exception unchanged."""
    text = _message(exc)
    where = _address(session)
    if any(hint in text for hint in _NO_PLUGIN):  # our request: no plugin took it
        return SparkConnectError(
            f"the Spark Connect server {where} has no zklock plugin: start it with --jars"
            f" \"$(zklock spark plugin-jar)\" --conf {PLUGIN_SETTING}={JvmClass.CONNECT_PLUGIN}"
            " (docs/spark.md, 'Spark Connect: the server side')")
    status = _unreachable(exc)
    if status:
        return SparkConnectError(f"the Spark Connect server {where} cannot be reached"
                                 f" ({status})")
    return exc


def _message(exc: BaseException) -> str:
    """The messages of an exception and its causes (a retry error wraps the last one)."""
    parts = []
    seen = 0
    while exc is not None and seen < 5:
        parts.append(str(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return "\n".join(p for p in parts if p)


def _unreachable(exc: BaseException) -> Optional[str]:
    """gRPC's status when the server could not be reached (UNAVAILABLE, a deadline), else
    None. The error may be the cause of the retry policy's RETRIES_EXCEEDED."""
    seen = 0
    while exc is not None and seen < 5:
        code, details = getattr(exc, "code", None), getattr(exc, "details", None)
        if callable(code) and callable(details):
            try:
                name = getattr(code(), "name", "")
                if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                    return f"{name}: {str(details()).splitlines()[0]}"
            except Exception:  # not grpc's code()/details()
                pass
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


def _address(session: Any) -> str:
    """The server a Connect session talks to, for messages (``host:port``)."""
    try:
        return f"sc://{session.client._builder.endpoint}"  # pyspark keeps it on the builder
    except AttributeError:
        return f"sc://{session.client.host}"
