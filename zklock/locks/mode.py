"""Lock modes and Hive's compatibility matrix (S with S only).

Only two modes exist (no intent locks): many shared holders may coexist, an
exclusive holder excludes everyone else.
"""

from __future__ import annotations

import enum
from typing import Union


class Mode(str, enum.Enum):
    """A lock mode: ``Mode.SHARED`` ("S") or ``Mode.EXCLUSIVE`` ("X")."""

    SHARED = "S"
    EXCLUSIVE = "X"

    @classmethod
    def parse(cls, value: Union[Mode, str]) -> Mode:
        """Accept a Mode, "S"/"X" or "SHARED"/"EXCLUSIVE" in any case."""
        if isinstance(value, Mode):
            return value
        if isinstance(value, str):
            text = value.strip().upper()
            for mode in cls:
                if text in (mode.value, mode.name):
                    return mode
        raise ValueError(f"unknown lock mode {value!r}: use S, X, SHARED or EXCLUSIVE")

    @property
    def node_prefix(self) -> str:
        """The lock node prefix of ZooKeeper's shared-lock recipe: ``read`` or ``write``."""
        return "read" if self is Mode.SHARED else "write"

    @classmethod
    def from_node_prefix(cls, prefix: str) -> Mode:
        return Mode.SHARED if prefix == "read" else Mode.EXCLUSIVE

    def compatible_with(self, held: Mode) -> bool:
        """Hive's matrix: only S with S is compatible."""
        return self is Mode.SHARED and held is Mode.SHARED

    def __str__(self) -> str:
        return self.value
