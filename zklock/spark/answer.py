"""The planner's answer, read: what crosses from zklock's JVM planner to Python.

LockPlanner.java answers every question (a statement, a DataFrame, a write) with one
versioned JSON document, LockAnswer.java, the same over py4j (a classic session) and over
Spark Connect (the plugin)::

    {"version": 1, "kind": "command" | "query",
     "targets": [{"db": "sales", "table": "orders", "partition": [["ds", "1"]],
                  "mode": "X"}],
     "notes": [...], "recheck": true, "whole": true}
    {"version": 1, "kind": "refused",
     "refusal": "unsupported" | "invalid_arguments" | "incompatible", "message": "..."}

:func:`read` turns it into a :class:`PlannedLocks` or raises the refusal as zklock's error.
The targets become lock objects here, so that naming, escaping and validation stay those of
:mod:`zklock.locks.objects` (a name no lock object can have is the refusal "invalid object":
:class:`~zklock.errors.InvalidLockObject`), and the list is normalised by
:func:`zklock.locks.lockrequest.normalize` (parents in S, duplicates merged, acquisition order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import InvalidArguments, SparkConnectError, UnsupportedStatement
from ..locks.lockrequest import LockTarget, normalize
from ..locks.mode import Mode
from ..locks.objects import LockObject
from .protocol import Field, Kind, Refusal, Version

#: The answer format this zklock reads (LockAnswer.VERSION).
VERSION = Version.ANSWER


@dataclass(frozen=True)
class PlannedLocks:
    """A planned statement or DataFrame: its locks in acquisition order, whether Spark runs
    it as a command (eagerly, in ``sql()``) rather than lazily as a query, and what the
    planner noted (a statement the analyzer rejects, the policy for unknown commands)."""

    targets: list[LockTarget]
    is_command: bool
    notes: list[str] = field(default_factory=list)
    #: a SQL script: Spark runs it statement by statement, with no hook around the whole, so
    #: its caller holds these locks for all of it
    whole: bool = False


def read(text: str) -> PlannedLocks:
    """The answer ``text``; raises its refusal (UnsupportedStatement, InvalidArguments,
    InvalidLockObject, SparkConnectError for an incompatible plugin)."""
    try:
        doc = json.loads(text)
        version = doc[Field.VERSION]
    except (ValueError, TypeError, KeyError):
        raise SparkConnectError(f"zklock's planner gave an unreadable answer: {text[:200]!r}"
                                ) from None
    if version != VERSION:
        raise SparkConnectError(f"zklock's planner answered in format {version}, and this"
                                f" zklock reads format {VERSION}: use one zklock version on"
                                " both sides")
    kind = doc[Field.KIND]
    if kind == Kind.REFUSED:
        raise _refusal(doc[Field.REFUSAL], doc[Field.MESSAGE])
    specs = [(_object(t), Mode(t[Field.MODE])) for t in doc[Field.TARGETS]]
    return PlannedLocks(normalize(specs), kind == Kind.COMMAND,
                        list(doc.get(Field.NOTES, [])), whole=bool(doc.get(Field.WHOLE, False)))


def write(targets: list[LockTarget]) -> str:
    """An answer asking for ``targets``, as the planner writes one (:func:`read` reads it
    back): what a block Python holds asks the engine for (EngineCalls.hold)."""
    return json.dumps({Field.VERSION: VERSION, Field.KIND: Kind.QUERY, Field.TARGETS: [
        {Field.DB: t.obj.db, Field.TABLE: t.obj.table,
         Field.PARTITION: [[k, v] for k, v in t.obj.partition], Field.MODE: t.mode.value}
        for t in targets]})


def _object(target: dict) -> LockObject:
    partition = tuple((k, v) for k, v in target[Field.PARTITION])
    return LockObject(target[Field.DB], target[Field.TABLE], partition)


def _refusal(kind: str, message: str) -> Exception:
    if kind == Refusal.UNSUPPORTED:
        return UnsupportedStatement(message)
    if kind == Refusal.INVALID_ARGUMENTS:
        return InvalidArguments(message)
    return SparkConnectError(message)  # incompatible: another plugin build or Spark
