"""What zklock's SQL and the layers above need of their session.

A LockingSession (session.py) is what they get; they only see this protocol, so they do
not import the session that imports them.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..config import Settings
from ..manager import LockManager
from .blocks import LockedExecution
from .planner import LockPlan, Planner


class SessionContext(Protocol):
    """The session behind a zklock statement."""

    execution: LockedExecution

    @property
    def settings(self) -> Settings:
        """The session's settings now (its own over its manager's, and what SET changed)."""

    def set(self, **changes: Any) -> Settings:
        """Change settings for the session's every path, as ``SET zklock.*`` does."""

    @property
    def spark(self) -> Any:
        """The wrapped SparkSession."""

    @property
    def planner(self) -> Planner:
        """The session's lock planner."""

    @property
    def manager(self) -> LockManager:
        """The session's LockManager."""

    def refresh_system_views(self, text: str) -> None:
        """Publish the sysdb views ``text`` names."""

    def explain_locks(self, sql: str) -> LockPlan:
        """The locks ``sql`` would take, without taking anything."""
