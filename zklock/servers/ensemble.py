"""Ensemble: a ZooKeeper ensemble of N servers on loopback, to run and to break.

Each member is a :class:`~zklock.servers.zookeeper.ZkServer` (QuorumPeerMain from
Debian's jars) with its own data directory, myid and three ports. The
ensemble can SIGKILL, restart, pause (SIGSTOP) and resume any member, and
knows which member leads (the ``srvr`` four-letter word): what the chaos
tests need, and what `zklock server start --ensemble 3` offers users.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Optional

from ..errors import ServerError
from .ports import free_port
from .zookeeper import ZkServer, four_letter


class Ensemble:
    """``size`` ZooKeeper servers forming one ensemble, state under ``state_dir``."""

    def __init__(self, state_dir: Path, size: int = 3, tick_time_ms: int = 500,
                 force_sync: bool = False, host: str = "127.0.0.1",
                 ports: Optional[list[int]] = None) -> None:
        if size < 1:
            raise ServerError("an ensemble needs at least one server")
        self.state_dir = Path(state_dir).resolve()
        self.size = size
        info = self._load()
        if info is not None and ports is None:
            client_ports, peers = info["client_ports"], {int(k): tuple(v)
                                                          for k, v in info["peers"].items()}
        else:
            client_ports = ports or [free_port(host) for _ in range(size)]
            peers = {i + 1: (free_port(host), free_port(host)) for i in range(size)}
        self.members = [
            ZkServer(self.state_dir / f"server{i + 1}", port=client_ports[i], host=host,
                     tick_time_ms=tick_time_ms, force_sync=force_sync, server_id=i + 1,
                     peers=peers)
            for i in range(size)]

    @property
    def info_file(self) -> Path:
        return self.state_dir / "ensemble.json"

    def _load(self) -> Optional[dict]:
        try:
            return json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return None

    @property
    def connect(self) -> str:
        return ",".join(m.connect for m in self.members)

    def start(self, wait: float = 90.0) -> str:
        """Start every member and wait until the ensemble has a leader and all serve."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for m in self.members:
            if not m.pid():
                m.start(ready=False)
        self.info_file.write_text(json.dumps({
            "connect": self.connect, "client_ports": [m.port for m in self.members],
            "peers": {str(k): list(v) for k, v in self.members[0].peers.items()}}))
        self.wait_serving(wait)
        return self.connect

    def wait_serving(self, wait: float = 60.0, members: Optional[list[int]] = None) -> None:
        """Until every given member (default: all running ones) serves as leader or follower
        and opens a session. ``srvr`` alone is not enough: a leader resumed after a pause
        still says "leader" until it learns that the others elected another, and a member
        can answer ``srvr`` while its quorum cannot commit a new session."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            ids = members if members is not None else [
                i for i, m in enumerate(self.members) if m.pid()]
            modes = [self.members[i].mode() for i in ids]
            if modes and all(x in ("leader", "follower") for x in modes) \
                    and "leader" in modes + [self.members[i].mode()
                                             for i in range(self.size) if i not in ids] \
                    and all(self._opens_session(i, deadline) for i in ids):
                return
            time.sleep(0.1)
        raise ServerError(f"the ensemble did not serve within {wait:g}s ({self.modes()}); see"
                          f" {self.state_dir}/server*/zookeeper.log")

    def _opens_session(self, i: int, deadline: float) -> bool:
        """Does member ``i`` alone open a session (its quorum committing it) within 5 s?"""
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.members[i].connect, timeout=4.0)
        try:
            client.start(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            return True
        except (KazooTimeoutError, OSError):
            return False
        finally:
            client.stop()
            client.close()

    def modes(self) -> str:
        """Each member's mode, for a message: ``1 leader, 2 follower, 3 -``."""
        return ", ".join(f"{i + 1} {m.mode() or '-'}" for i, m in enumerate(self.members))

    def stop(self) -> None:
        for m in self.members:
            m.stop()
        try:
            self.info_file.unlink()
        except OSError:
            pass

    def leader(self) -> Optional[int]:
        """Index of the member that leads now, or None."""
        for i, m in enumerate(self.members):
            if m.mode() == "leader":
                return i
        return None

    def sessions(self) -> frozenset[int]:
        """The session ids the ensemble keeps, as its leader tracks them (the ``dump``
        four-letter word): a session expired once its id is gone from here. Raises
        ServerError when no member leads, as the answer would then be nobody's."""
        leader = self.leader()
        if leader is None:
            raise ServerError(f"no member of the ensemble leads ({self.modes()})")
        m = self.members[leader]
        tracker = four_letter(m.host, m.port, "dump").split("ephemeral nodes dump:")[0]
        return frozenset(int(word, 16) for word in tracker.split() if word.startswith("0x"))

    def connected_sessions(self, i: int) -> frozenset[int]:
        """The session ids of the clients connected to member ``i`` now (``cons``)."""
        m = self.members[i]
        try:
            text = four_letter(m.host, m.port, "cons")
        except OSError:
            return frozenset()
        return frozenset(int(part[4:], 16) for part in text.replace(")", ",").split(",")
                         if part.startswith("sid=0x"))

    def status(self) -> list[dict]:
        return [{"id": i + 1, "connect": m.connect, "pid": m.pid(), "mode": m.mode()}
                for i, m in enumerate(self.members)]

    # ---- faults ---------------------------------------------------------------
    def _signal(self, i: int, sig: int) -> None:
        pid = self.members[i].pid()
        if pid is None:
            raise ServerError(f"server {i + 1} is not running")
        os.kill(pid, sig)

    def kill(self, i: int) -> None:
        """SIGKILL member ``i`` (0-based)."""
        self._signal(i, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.members[i].pid() and time.monotonic() < deadline:
            time.sleep(0.02)

    def restart(self, i: int, wait: float = 60.0) -> None:
        m = self.members[i]
        if m.pid():
            m.stop()
        m.start(ready=False)
        self.wait_serving(wait, members=[i])

    def pause(self, i: int) -> None:
        """SIGSTOP member ``i``: it holds its sockets but answers nothing."""
        self._signal(i, signal.SIGSTOP)

    def resume(self, i: int) -> None:
        self._signal(i, signal.SIGCONT)
