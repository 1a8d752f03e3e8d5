"""Normalisation of a lock request before anything touches ZooKeeper.

As in Hive: every object's parents are locked in S, duplicates merge with X
winning, and the result is sorted lexicographically by canonical name so that
every client takes objects in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from ..errors import InvalidArguments
from .mode import Mode
from .objects import LockObject

LockSpec = Union[tuple[Union[str, LockObject], Union[str, Mode]], "LockTarget"]


@dataclass(frozen=True)
class LockTarget:
    """One object of a normalised request, with the mode to take on it."""

    obj: LockObject
    mode: Mode

    @property
    def name(self) -> str:
        return self.obj.name


def normalize(locks: Iterable[LockSpec]) -> list[LockTarget]:
    """Validate, add parents in S, merge duplicates (X wins) and sort by name."""
    wanted: dict[LockObject, Mode] = {}

    def add(obj: LockObject, mode: Mode) -> None:
        if mode is Mode.EXCLUSIVE or obj not in wanted:
            wanted[obj] = mode

    seen_parents: set = set()
    if isinstance(locks, (str, bytes)):
        raise InvalidArguments("locks must be a list of (object, mode) pairs, not a string")
    for item in locks:
        if isinstance(item, LockTarget):
            obj, mode = item.obj, item.mode
        else:
            try:
                raw_obj, raw_mode = item
            except (TypeError, ValueError):
                raise InvalidArguments(
                    f"each lock is an (object, mode) pair, got {item!r}"
                ) from None
            obj = LockObject.parse(raw_obj)
            try:
                mode = Mode.parse(raw_mode)
            except ValueError as exc:
                raise InvalidArguments(str(exc)) from None
        if obj.table is not None:
            # parents of many partitions of one table are the same few objects
            key = (obj.db, obj.table, obj.partition[:-1])
            if key not in seen_parents:
                seen_parents.add(key)
                for parent in obj.parents():
                    add(parent, Mode.SHARED)
        add(obj, mode)
    return sorted((LockTarget(o, m) for o, m in wanted.items()), key=lambda t: t.obj.name)
