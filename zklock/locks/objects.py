"""Lock objects: databases, tables and partitions, and their znode names.

A lock object is named the way Hive names it: ``db``, ``db.table`` or
``db.table/k1=v1/k2=v2`` (Hive's partition-name form, any depth). Hive's
display form ``db@table@k1=v1/k2=v2`` is accepted as well. A bare table name
with a partition (``t/ds=1``) means ``default.t``; a bare name alone is a
database, and :meth:`LockObject.table` reads a bare name as ``default.<name>``.

Every part of the name becomes one znode component under the lock root, so
this module is the only place that turns user text into path components, and
it refuses anything that could leave its znode. Partition keys and values are
escaped as Hive escapes path names (``FileUtils.escapePathName``), extended
to the characters ZooKeeper itself refuses in a path, so every value
round-trips.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Union

from ..errors import InvalidLockObject

DEFAULT_DATABASE = "default"
MAX_IDENTIFIER = 128  # Hive's limit on database, table and column names
MAX_COMPONENT = 767  # Hive's limit on a partition name, per k=v component here
MAX_DEPTH = 64


def _zk_forbidden(ch: str) -> bool:
    """Characters ZooKeeper's PathUtils refuses (Java chars, so astral code points too)."""
    c = ord(ch)
    return (
        c == 0
        or 0x01 <= c <= 0x1F
        or 0x7F <= c <= 0x9F
        or 0xD800 <= c <= 0xF8FF
        or c >= 0xFFF0
    )


_NEEDS_ESCAPE = re.compile(
    "[\x00-\x1f\"#%'*/:=?\\\\\x7f{\\[\\]^\x80-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def _escape_char(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"%{c:02X}" if c < 0x100 else f"%u{c:06X}"


def escape_path_name(value: str) -> str:
    """Escape a partition key or value like Hive, plus what ZooKeeper refuses.

    Characters below U+0100 use Hive's ``%XX``; characters above that which
    ZooKeeper cannot store use ``%uXXXXXX`` (six hex digits).
    """
    return _NEEDS_ESCAPE.sub(_escape_char, value)


_UNESCAPE = re.compile(r"%u([0-9A-Fa-f]{6})|%([0-9A-Fa-f]{2})")


def unescape_path_name(text: str) -> str:
    """Invert :func:`escape_path_name`; a ``%`` not followed by hex stays literal (as in Hive)."""

    def repl(m: re.Match[str]) -> str:
        code = int(m.group(1) or m.group(2), 16)
        if code > 0x10FFFF:
            return m.group(0)
        return chr(code)

    return _UNESCAPE.sub(repl, text)


_LOCK_NODE_LIKE = re.compile(r"^(read|write)-")


class _Bad(ValueError):
    """A reason, before it is tied to the whole name the user gave."""


def _identifier(text: str, part: str, whole: str) -> str:
    """Validate and lowercase one database, table or partition-key name."""
    try:
        return _checked_identifier(text, part)
    except _Bad as exc:
        raise InvalidLockObject(whole, str(exc)) from None


@functools.lru_cache(maxsize=8192)
def _checked_identifier(text: str, part: str) -> str:
    name = text.strip().strip("`").strip()
    if not name:
        raise _Bad(f"empty {part} name")
    if name in (".", ".."):
        raise _Bad(f"{part} name {name!r} is not allowed")
    if len(name) > MAX_IDENTIFIER:
        raise _Bad(f"{part} name is {len(name)} characters long (max {MAX_IDENTIFIER})"
        )
    for ch in name:
        if ch == "/":
            raise _Bad(f"'/' inside {part} name {name!r}")
        if _zk_forbidden(ch) or not ch.isprintable():
            raise _Bad(f"control character {ch!r} in {part} name {name!r}")
        if ch in ".@=%" or ch.isspace():
            raise _Bad(f"character {ch!r} not allowed in {part} name {name!r}")
    name = name.lower()
    if _LOCK_NODE_LIKE.match(name):
        raise _Bad(f"{part} name {name!r} may not start with 'read-' or 'write-' (lock node names)"
        )
    return name


@functools.lru_cache(maxsize=65536)
def is_object_component(name: str, level: int) -> bool:
    """Whether ``name`` is a znode zklock makes for an object ``level`` deep below the root
    (1: a database, 2: a table, 3 and more: a ``k=v`` partition component).

    Database and table nodes are canonical identifiers (lower case, no ``.``); partition
    components are an identifier key, ``=`` and an escaped value. Anything else under an
    object node is not an object: a lock, an intent, or a node zklock cannot interpret.
    """
    if level <= 2:
        try:
            return _checked_identifier(name, "table" if level == 2 else "database") == name
        except _Bad:
            return False
    key, eq, value = name.partition("=")
    if not eq or not value or len(name) > MAX_COMPONENT:
        return False
    try:
        return _checked_identifier(key, "partition key") == key
    except _Bad:
        return False


def _partition_value(value: str, key: str, whole: str) -> str:
    if value == "":
        raise InvalidLockObject(whole, f"empty value for partition key {key!r}")
    return value


PartitionSpec = tuple[tuple[str, str], ...]


@dataclass(frozen=True, order=True)
class LockObject:
    """A database, table or partition that can be locked.

    Partition values are stored unescaped; :attr:`name` and
    :meth:`znode_parts` escape them.
    """

    db: str
    table: str | None = None
    partition: PartitionSpec = ()
    _parts: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        whole = f"{self.db}.{self.table}" if self.table else self.db
        object.__setattr__(self, "db", _identifier(self.db, "database", whole))
        if self.table is not None:
            object.__setattr__(self, "table", _identifier(self.table, "table", whole))
        elif self.partition:
            raise InvalidLockObject(whole, "a partition needs a table")
        if len(self.partition) > MAX_DEPTH:
            raise InvalidLockObject(whole, f"partition deeper than {MAX_DEPTH} levels")
        spec = []
        for key, value in self.partition:
            k = _identifier(str(key), "partition key", whole)
            v = _partition_value(str(value), k, whole)
            component = f"{escape_path_name(k)}={escape_path_name(v)}"
            if len(component) > MAX_COMPONENT:
                raise InvalidLockObject(
                    whole, f"partition component {k}=... is {len(component)} characters escaped"
                    f" (max {MAX_COMPONENT})"
                )
            spec.append((k, v))
        object.__setattr__(self, "partition", tuple(spec))
        object.__setattr__(self, "_parts", _parts_of(self.db, self.table, self.partition))

    # ---- construction -------------------------------------------------
    @classmethod
    def database(cls, db: str) -> LockObject:
        return cls(db)

    @classmethod
    def of_table(cls, name: str, partition: Mapping[str, str] | PartitionSpec | None = None
                 ) -> LockObject:
        """A table (``db.t`` or bare ``t`` meaning ``default.t``), optionally a partition of it."""
        whole = name
        parts = name.split(".")
        if len(parts) == 1:
            db, table = DEFAULT_DATABASE, parts[0]
        elif len(parts) == 2:
            db, table = parts
        else:
            raise InvalidLockObject(whole, "a table name is 'table' or 'db.table'")
        items = tuple(partition.items()) if isinstance(partition, Mapping) else (partition or ())
        return cls(db, table, tuple((str(k), str(v)) for k, v in items))

    @classmethod
    def parse(cls, text: Union[str, LockObject]) -> LockObject:
        """Parse ``db``, ``db.t``, ``db.t/k=v/...``, ``db@t@k=v/...`` or ``t/k=v``."""
        if isinstance(text, LockObject):
            return text
        if not isinstance(text, str):
            raise InvalidLockObject(repr(text), "a lock object is a string such as 'db.table'")
        whole = text
        bad = _FORBIDDEN.search(text)
        if bad:
            raise InvalidLockObject(whole, f"control character {bad.group(0)!r}")
        if not text.strip():
            raise InvalidLockObject(whole, "empty name")
        if "@" in text.split("/", 1)[0]:
            pieces = text.split("@", 2)
            if len(pieces) < 2:
                raise InvalidLockObject(whole, "display form is db@table[@k=v/...]")
            db, table = pieces[0], pieces[1]
            spec_text = pieces[2] if len(pieces) == 3 else None
            if spec_text is not None and not spec_text:
                raise InvalidLockObject(whole, "empty partition after '@'")
            head = f"{db}.{table}"
        else:
            head, sep, rest = text.partition("/")
            if sep and not rest:
                raise InvalidLockObject(whole, "empty partition after '/'")
            spec_text = rest if sep else None
        spec = cls._parse_spec(spec_text, whole) if spec_text is not None else ()
        names = head.split(".")
        if len(names) == 1:
            if spec:
                return cls(DEFAULT_DATABASE, names[0], spec)
            return cls(names[0])
        if len(names) == 2:
            return cls(names[0], names[1], spec)
        raise InvalidLockObject(whole, "too many '.' (names are db, db.table or db.table/k=v)")

    @staticmethod
    def _parse_spec(spec_text: str, whole: str) -> PartitionSpec:
        spec = []
        for component in spec_text.split("/"):
            if not component:
                raise InvalidLockObject(whole, "empty partition component")
            key, eq, value = component.partition("=")
            if not eq:
                raise InvalidLockObject(whole, f"partition component {component!r} is not k=v")
            spec.append((unescape_path_name(key), unescape_path_name(value)))
        return tuple(spec)

    # ---- naming -------------------------------------------------------
    @property
    def kind(self) -> str:
        return "partition" if self.partition else ("table" if self.table else "database")

    @property
    def partition_name(self) -> str:
        """Hive's escaped partition name ``k1=v1/k2=v2`` (empty for db and table)."""
        return "/".join(self._parts[2:])

    @property
    def name(self) -> str:
        """The canonical name: ``db``, ``db.t`` or ``db.t/k=v/...`` (escaped)."""
        if self.table is None:
            return self.db
        base = f"{self.db}.{self.table}"
        return f"{base}/{self.partition_name}" if self.partition else base

    @property
    def display_name(self) -> str:
        """Hive's SHOW LOCKS form ``db@t@k=v/...``."""
        if self.table is None:
            return self.db
        base = f"{self.db}@{self.table}"
        return f"{base}@{self.partition_name}" if self.partition else base

    @property
    def table_name(self) -> str | None:
        return f"{self.db}.{self.table}" if self.table else None

    def znode_parts(self) -> list[str]:
        """The znode components below the lock root, one per level."""
        return list(self._parts)

    def znode(self, root: str) -> str:
        return root.rstrip("/") + "/" + "/".join(self._parts)

    @classmethod
    def from_znode_parts(cls, parts: Iterable[str]) -> LockObject:
        parts = list(parts)
        if len(parts) == 1:
            return cls(parts[0])
        spec = []
        for comp in parts[2:]:
            key, _, value = comp.partition("=")
            spec.append((unescape_path_name(key), unescape_path_name(value)))
        return cls(parts[0], parts[1], tuple(spec))

    # ---- hierarchy ----------------------------------------------------
    def parents(self) -> list[LockObject]:
        """The database, the table and each partition prefix, outermost first."""
        if self.table is None:
            return []
        out = [_trusted(self.db, None, ())]
        out += [_trusted(self.db, self.table, self.partition[:d])
                for d in range(len(self.partition))]
        return out

    def contains(self, other: LockObject) -> bool:
        """True when ``other`` is this object or lies below it."""
        mine, theirs = self.znode_parts(), other.znode_parts()
        return theirs[: len(mine)] == mine

    def __str__(self) -> str:
        return self.name


def _trusted(db: str, table: str | None, partition: PartitionSpec) -> LockObject:
    """Build a LockObject from parts already validated (parents of a valid object)."""
    obj = object.__new__(LockObject)
    object.__setattr__(obj, "db", db)
    object.__setattr__(obj, "table", table)
    object.__setattr__(obj, "partition", partition)
    object.__setattr__(obj, "_parts", _parts_of(db, table, partition))
    return obj


def _parts_of(db: str, table: str | None, partition: PartitionSpec) -> tuple:
    head = (db,) if table is None else (db, table)
    return head + tuple(f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in partition)
