"""A server process the command line starts for development, demos and tests.

``zklock spark connect-server`` and ``zklock metastore`` each run one such process: started
as a new session (so a Ctrl-C of the shell does not reach it), its pid, port and what it
was started with recorded in ``<state dir>/<name>/<name>.json``, its output in
``<name>.log`` beside it. ``status`` and ``stop`` work from any process that finds that
directory, like ``zklock server`` for ZooKeeper. Each kind of service says how it is run
(:meth:`LocalService.command`); this class owns the life cycle they share.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

from zklock.errors import ServerError, ZkLockError
from zklock.servers.process import pid_alive, terminate


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class LocalService:
    """One server process with its state under ``<state_dir>/<name>/``."""

    #: the directory and file stem of the service's state ("metastore")
    name: ClassVar[str] = "service"
    #: how messages name it ("the Hive Metastore")
    title: ClassVar[str] = "the service"
    #: the command that stops it, for messages
    stop_command: ClassVar[str] = ""
    #: the error class of its one-line failures
    error: ClassVar[type[ZkLockError]] = ServerError

    state_dir: Path
    port: int = 0
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve() / self.name

    @property
    def info_file(self) -> Path:
        return self.state_dir / f"{self.name}.json"

    @property
    def log_file(self) -> Path:
        return self.state_dir / f"{self.name}.log"

    # ---- state ------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What ``start`` recorded (pid, port, host and the service's own fields), or {}
        when nothing was started here."""
        try:
            info = json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def status(self) -> dict[str, Any]:
        """running, pid, port, host, log and state directory, with what ``start`` recorded."""
        info = self.info()
        pid = info.get("pid")
        alive = bool(pid) and pid_alive(int(pid))
        port = int(info.get("port", self.port))
        host = str(info.get("host", self.host))
        return {**info, "running": alive and port_open(host, port),
                "pid": pid if alive else None, "port": port, "host": host,
                "log": str(self.log_file), "state_dir": str(self.state_dir)}

    # ---- start / stop -------------------------------------------------------------------
    def check_startable(self) -> None:
        """Raise one line when a service started here still runs or the port is taken."""
        current = self.status()
        if current["pid"]:
            if current["running"]:
                raise self.error(f"{self.title} started from {self.state_dir} already runs"
                                 f" (pid {current['pid']}, port {current['port']}); stop it"
                                 " first")
            raise self.error(f"{self.title} started from {self.state_dir} (pid"
                             f" {current['pid']}) is not answering; run"
                             f" `{self.stop_command}` first")
        if port_open(self.host, self.port):
            raise self.error(f"port {self.host}:{self.port} is already in use; pick another"
                             " with --port")

    def launch(self, cmd: list[str], env: dict[str, str], record: dict[str, Any],
               wait: float) -> None:
        """Run ``cmd`` in the state directory, record it, and return once it listens.

        Raises the service's error (one line) when it cannot run, exits, or does not listen
        within ``wait`` seconds (then it is stopped)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.log_file, "ab") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        cwd=self.state_dir, env=env)
        except OSError as exc:
            raise self.error(f"cannot run {cmd[0]}: {exc}") from None
        self._proc: Optional[subprocess.Popen] = proc
        self.info_file.write_text(json.dumps({
            **record, "pid": proc.pid, "port": self.port, "host": self.host,
            "started_at": time.time()}))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._forget()
                raise self.error(f"{self.title} exited with code {proc.returncode}:"
                                 f" {self.last_error()} (log: {self.log_file})")
            if port_open(self.host, self.port):
                return
            time.sleep(0.2)
        self.stop()
        raise self.error(f"{self.title} did not listen on {self.host}:{self.port} within"
                         f" {wait:g}s; see {self.log_file}")

    def stop(self, wait: float = 30.0) -> bool:
        """Stop the service started here; False when none was running."""
        pid = self.info().get("pid")
        if not pid or not pid_alive(int(pid)):
            self._forget()
            return False
        terminate(int(pid), wait, getattr(self, "_proc", None))
        self._forget()
        return True

    def _forget(self) -> None:
        try:
            self.info_file.unlink()
        except OSError:
            pass

    def last_error(self) -> str:
        """The last line of the log that looks like an error (for a one-line message)."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        for line in reversed(lines):
            if "Exception" in line or "Error" in line or "error:" in line:
                return line.strip()[:300]
        return (lines[-1].strip()[:300] if lines else "no output")
