"""server.json: where the ZooKeeper started from a state directory listens.

``zklock server start`` (a standalone server or an ensemble) writes it; clients with no
``hosts`` setting read it to find that server; ``zklock server stop`` removes it. This
module is the only reader and writer of the file, so its format has one owner.

The state directory is relative (``.zklock``) by default, so the start also leaves a
pointer to it in the user's home (``~/.zklock-last-server``, or ``$ZKLOCK_POINTER``): a
client started from any other directory finds the last server started, as long as it
still answers to its server.json.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import ServerError

FILE_NAME = "server.json"


class NoServerInfo(ServerError):
    """No (readable) server.json in the state directory: nothing was started there."""


@dataclass(frozen=True)
class ServerInfo:
    """The connect string of a server started from a state directory, its pid (standalone)
    or its size (an ensemble)."""

    connect: str
    pid: Optional[int] = None
    ensemble: Optional[int] = None

    @property
    def port(self) -> int:
        """The client port of the first server."""
        return int(self.connect.split(",")[0].rsplit(":", 1)[1])


def path(state_dir: Path | str) -> Path:
    return Path(state_dir) / FILE_NAME


#: The setting naming the pointer file (a row of zklock/config.py's table, server_pointer).
POINTER_ENV = "ZKLOCK_POINTER"


def pointer() -> Path:
    """The file naming the state directory of the last server started by this user."""
    return Path(os.environ.get(POINTER_ENV) or Path.home() / ".zklock-last-server")


def write(state_dir: Path | str, info: ServerInfo) -> None:
    data = {"connect": info.connect}
    if info.pid is not None:
        data["pid"] = info.pid
    if info.ensemble is not None:
        data["ensemble"] = info.ensemble
    path(state_dir).write_text(json.dumps(data))
    try:
        pointer().write_text(str(Path(state_dir).resolve()))
    except OSError:  # a read-only home: only the state directory knows
        pass


def read(state_dir: Path | str) -> ServerInfo:
    """The state directory's ServerInfo; raises :class:`NoServerInfo` when there is none."""
    try:
        data = json.loads(path(state_dir).read_text())
        return ServerInfo(str(data["connect"]), data.get("pid"), data.get("ensemble"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NoServerInfo(f"no server started from {state_dir} ({exc})") from None


def read_here_or_last(state_dir: Path | str) -> ServerInfo:
    """The server of ``state_dir``, else the last one this user started (its pointer);
    raises :class:`NoServerInfo` when neither has one."""
    try:
        return read(state_dir)
    except NoServerInfo:
        try:
            last = Path(pointer().read_text().strip())
        except OSError:
            raise NoServerInfo(f"no server started from {state_dir}") from None
        return read(last)


def remove(state_dir: Path | str) -> None:
    path(state_dir).unlink(missing_ok=True)
