"""server.json: where the ZooKeeper started from a state directory listens.

``zklock server start`` (a standalone server or an ensemble) writes it; clients with no
``hosts`` setting read it to find that server; ``zklock server stop`` removes it. This
module is the only reader and writer of the file, so its format has one owner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .errors import ServerError

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


def write(state_dir: Path | str, info: ServerInfo) -> None:
    data = {"connect": info.connect}
    if info.pid is not None:
        data["pid"] = info.pid
    if info.ensemble is not None:
        data["ensemble"] = info.ensemble
    path(state_dir).write_text(json.dumps(data))


def read(state_dir: Path | str) -> ServerInfo:
    """The state directory's ServerInfo; raises :class:`NoServerInfo` when there is none."""
    try:
        data = json.loads(path(state_dir).read_text())
        return ServerInfo(str(data["connect"]), data.get("pid"), data.get("ensemble"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NoServerInfo(f"no server started from {state_dir} ({exc})") from None


def remove(state_dir: Path | str) -> None:
    path(state_dir).unlink(missing_ok=True)
