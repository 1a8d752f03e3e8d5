"""Hooks of the Spark layer: statements, system views and session methods added from above.

Dependencies run one way (zklock < zklock.spark < zklock.scheduler < zklock.cli), so the
Spark layer knows nothing of the scheduler. The scheduler adds what it brings to a
LockingSession (its ``CREATE/ALTER/DROP SCHEDULED QUERY`` statements, the
``sysdb.scheduled_queries`` and ``sysdb.scheduled_executions`` views, and
``session.scheduled_queries()``) by registering here when it is imported.

So that ``from zklock.spark import LockingSession`` alone knows them, a LockingSession
calls :func:`load_plugins` once: it runs every function registered under the entry-point
group ``zklock.spark.plugins`` (setup.cfg lists the scheduler's). This is the same
mechanism pytest and Spark's own Python packaging use for plugins; nothing is imported
by name from below.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

log = logging.getLogger(__name__)

PLUGIN_GROUP = "zklock.spark.plugins"


@dataclass(frozen=True)
class StatementHandler:
    """SQL that a layer above adds: ``recognises(sql)`` says whether a statement is its own,
    ``run(session, sql)`` runs it in a LockingSession and returns a DataFrame."""

    name: str
    recognises: Callable[[str], bool]
    run: Callable[[Any, str], Any]


_statements: list[StatementHandler] = []
_views: dict[str, Callable[[Any], Any]] = {}
_methods: dict[str, Callable[..., Any]] = {}
_loaded = False
_lock = threading.Lock()


def register_statement(handler: StatementHandler) -> None:
    """Add SQL statements (tried, in registration order, before Spark's parser)."""
    with _lock:
        if all(h.name != handler.name for h in _statements):
            _statements.append(handler)


def register_view(name: str, build: Callable[[Any], Any]) -> None:
    """Serve ``sysdb.<name>`` from ``build(session)`` (a DataFrame), rebuilt when referenced."""
    with _lock:
        _views[name.lower()] = build


def register_session_method(name: str, method: Callable[..., Any]) -> None:
    """Offer ``session.<name>(...)``, called as ``method(session, ...)``."""
    with _lock:
        _methods[name] = method


def statements() -> list[StatementHandler]:
    return list(_statements)


def views() -> dict[str, Callable[[Any], Any]]:
    return dict(_views)


def session_methods() -> dict[str, Callable[..., Any]]:
    return dict(_methods)


def load_plugins() -> None:
    """Run every ``zklock.spark.plugins`` entry point once per process."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()()
        except Exception as exc:  # a broken plugin must not stop locking itself
            log.warning("zklock: plugin %s not loaded: %s", ep.name, exc)
