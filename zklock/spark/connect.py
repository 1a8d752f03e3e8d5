"""zklock's lock planner for Spark Connect sessions: ask the server, where the plans are.

A Spark Connect client (``SparkSession.builder.remote("sc://host")``) has no parser,
analyzer or catalog of its own, so the classic planner (which reads them through py4j)
cannot run there. The Connect server runs zklock's plugin (ConnectLockPlugin.java, built
by :mod:`zklock.spark.connect_plugin`), which plans with LockPlanner.java: the rules of
``planner.py``, the node table of ``nodes.py``. This module sends it a request as a
relation extension and reads the answer::

    from zklock.spark.connect import plan_locks
    plan_locks(spark, sql="INSERT INTO sales.orders PARTITION (ds='1') SELECT * FROM s")
    plan_locks(spark, df=spark.table("sales.orders").where("ds = '1'"))
    plan_locks(spark, df=df, table="sales.orders", partition={"ds": "1"})   # a df write

The answer is the list ``LockPlanner.plan_sql(sql).rows()`` (or ``plan_dataframe``)
gives in a classic session. A statement zklock refuses raises UnsupportedStatement, as
there; Spark's own errors (ParseException, AnalysisException) are raised as Spark raised
them. A server without the plugin, with another version of it, or out of reach raises
:class:`~zklock.errors.SparkConnectError`, one line. An unreachable server is retried
by the session's own retry policy before that error (Spark Connect's default keeps
trying for about ten minutes).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from typing import Any, Optional

from ..errors import InvalidArguments, SparkConnectError, UnsupportedStatement
from .connect_plugin import (
    PLUGIN_CLASS,
    PLUGIN_SETTING,
    PROTOCOL,
    build_hash,
    invalid_object,
    zklock_version,
)

#: The type URL of zklock's requests (ConnectLockPlugin.TYPE_URL).
TYPE_URL = "type.googleapis.com/zklock.LockRequest"
_MARKER = re.compile(r"\[(ZKLOCK_[A-Z_]+)\] ?(.*)")
#: How Spark Connect says no plugin took an extension (error class, then its message).
_NO_PLUGIN = ("NO_HANDLER_FOR_EXTENSION", "No handler found for extension")


def plan_locks(session: Any, sql: Optional[str] = None, df: Any = None,
               unknown_statements: str = "refuse", *, strict: bool = True,
               table: Optional[str] = None, partition: Optional[dict[str, Any]] = None,
               paths: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The locks a statement or DataFrame of a Spark Connect ``session`` needs, as
    (object, mode) pairs in acquisition order, planned by zklock's plugin in the server.

    Give ``sql`` (a statement) or ``df`` (a Connect DataFrame: the S locks of an action on
    it, or, when its plan holds a command, that command's locks). For a DataFrame write,
    also give ``table`` (and a static ``partition`` prefix) or ``paths``: X on the target,
    the DataFrame's locks besides. ``strict=False`` plans a statement the analyzer rejects
    from its parsed form (EXPLAIN LOCKS) instead of raising Spark's AnalysisException.
    ``unknown_statements`` is ``refuse`` (a command without a lock rule raises
    UnsupportedStatement) or ``lock`` (X on every table it names).
    """
    _require_connect(session)
    if unknown_statements not in ("refuse", "lock"):
        raise InvalidArguments(f"unknown_statements is refuse or lock, not {unknown_statements!r}")
    if sql is not None and df is not None:
        raise InvalidArguments("plan_locks takes sql or df, not both")
    if isinstance(paths, str):
        raise InvalidArguments("paths is a list of paths, not a string")
    if sql is None and df is None and table is None and not paths:
        raise InvalidArguments("plan_locks needs sql, df, or a write target (table, paths)")
    request: dict[str, Any] = {"op": "plan", "unknown_statements": unknown_statements,
                               "strict": bool(strict)}
    if sql is not None:
        if table is not None or paths:
            raise InvalidArguments("a write target (table, paths) goes with df, not sql")
        request["sql"] = str(sql)
    if df is not None:
        request["relation"] = _relation(session, df)
    if table is not None:
        request["table"] = str(table)
        if partition:
            # a None value ends the static prefix, as in LockPlanner.plan_table_write
            request["partition"] = {str(k): str(v) for k, v in partition.items()
                                    if v is not None}
    if paths:
        request["paths"] = [str(p) for p in paths]
    rows = _ask(session, request)
    return [(str(r[0]), str(r[1])) for r in rows]


def plan_statement(session: Any, sql: str, unknown_statements: str = "refuse", *,
                   strict: bool = True) -> tuple[list[tuple[str, str]], bool]:
    """(locks, runs as a command) of a statement of a Spark Connect ``session``: the locks
    :func:`plan_locks` gives, and whether Spark runs the statement eagerly in ``sql()``
    (DDL, DML, scripts...) rather than lazily as a query, as the classic planner's
    ``LockPlan.is_command`` says. Raises as :func:`plan_locks` does."""
    _require_connect(session)
    if unknown_statements not in ("refuse", "lock"):
        raise InvalidArguments(f"unknown_statements is refuse or lock, not {unknown_statements!r}")
    rows = _ask(session, {"op": "plan", "sql": str(sql), "kind": True, "strict": bool(strict),
                          "unknown_statements": unknown_statements})
    kind = [r[1] for r in rows if r[0] == ""]
    if kind != ["command"] and kind != ["query"]:
        raise SparkConnectError("the zklock plugin of the Spark Connect server did not say"
                                " whether the statement is a command: an older plugin?")
    return [(str(r[0]), str(r[1])) for r in rows if r[0] != ""], kind == ["command"]


def plugin_version(session: Any) -> dict[str, Any]:
    """What zklock's plugin in the Connect server says of itself: ``plugin`` (zklock's
    version), ``protocol``, ``build`` (hash of its planner and node table), ``built_for``
    (the Spark it was compiled for), ``spark`` (the server's Spark) and ``nodes`` (how many
    plan node classes its table knows). Raises SparkConnectError without the plugin."""
    _require_connect(session)
    (row,) = _ask(session, {"op": "version"})
    return dict(zip(["plugin", "protocol", "build", "built_for", "spark", "nodes"], row))


def _require_connect(session: Any) -> None:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:  # pyspark without its connect extras (grpcio, pandas, pyarrow)
        raise SparkConnectError(f"Spark Connect's client is not installed ({exc}): install"
                                " zklock[connect]") from None
    if not isinstance(session, ConnectSession):
        raise InvalidArguments(
            "zklock.spark.connect plans for a Spark Connect session (SparkSession.builder"
            ".remote(...)); a classic session plans with zklock.spark.LockPlanner")


def _relation(session: Any, df: Any) -> str:
    """A Connect DataFrame's plan as the base64 of its ``spark.connect.Relation``."""
    from pyspark.sql.connect.dataframe import DataFrame

    if not isinstance(df, DataFrame):
        raise InvalidArguments(f"df must be a Spark Connect DataFrame, not {type(df).__name__}")
    relation = df._plan.plan(session.client)
    return base64.b64encode(relation.SerializeToString()).decode("ascii")


def _client() -> dict[str, str]:
    """This zklock's version and build (the plugin refuses a client of another build)."""
    return {"version": zklock_version(), "build": build_hash()}


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
            rel.extension.CopyFrom(any_pb2.Any(type_url=TYPE_URL, value=body))
            return rel

    return LockRequest()


def _ask(session: Any, request: dict[str, Any]) -> list[Any]:
    """Send one request to the plugin and return its rows (as tuples)."""
    from pyspark.sql.connect.dataframe import DataFrame

    payload = dict(request, protocol=PROTOCOL, client=_client())
    try:
        frame = DataFrame(_request_plan(payload), session)
        if request.get("op") != "plan":
            return [tuple(r) for r in frame.collect()]
        # a plan's answer is in the schema's metadata: Spark Connect's AnalyzePlan, no job
        lines = frame.schema.fields[0].metadata.get("zklock", "")
    except Exception as exc:  # turned into zklock's errors, or re-raised as Spark's own
        raise _translate(exc, session) from None
    return [_row(line) for line in lines.split("\n") if line]


def _row(line: str) -> tuple[str, str]:
    """``object<TAB>mode``; ``KIND<TAB>command|query`` is the statement's kind ("" object)."""
    if line.startswith("KIND\t"):
        return ("", line[len("KIND\t"):])
    obj, _, mode = line.rpartition("\t")
    return (obj, mode)


def _translate(exc: Exception, session: Any) -> Exception:
    """zklock's error for a refusal, a missing or mismatched plugin, an unreachable server;
    otherwise Spark's own exception unchanged."""
    text = _message(exc)
    found = _MARKER.search(text)
    if found:
        kind, message = found.group(1), found.group(2).strip()
        if kind == "ZKLOCK_REFUSED":
            return UnsupportedStatement(message)
        if kind == "ZKLOCK_INVALID":
            return InvalidArguments(message)
        if kind == "ZKLOCK_OBJECT":
            return invalid_object(message)
        return SparkConnectError(message)
    where = _address(session)
    if any(hint in text for hint in _NO_PLUGIN) and TYPE_URL in text:
        return SparkConnectError(
            f"the Spark Connect server {where} has no zklock plugin: start it with --jars"
            f" <zklock-connect jar> --conf {PLUGIN_SETTING}={PLUGIN_CLASS} (docs/spark.md,"
            " 'Spark Connect: the server side')")
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
