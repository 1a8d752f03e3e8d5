"""Normalisation of a lock request before anything touches ZooKeeper.

Seed 001: every object's parents are locked in S, duplicates merge with X
winning, and the result is sorted lexicographically by canonical name so that
every client takes objects in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from .errors import InvalidArguments
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
        if wanted.get(obj) is not Mode.EXCLUSIVE:
            wanted[obj] = mode if obj not in wanted else (
                Mode.EXCLUSIVE if Mode.EXCLUSIVE in (mode, wanted[obj]) else Mode.SHARED
            )

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
        for parent in obj.parents():
            add(parent, Mode.SHARED)
        add(obj, mode)
    return sorted((LockTarget(o, m) for o, m in wanted.items()), key=lambda t: t.obj.name)
