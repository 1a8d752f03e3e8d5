"""An embedded ZooKeeper: a real server from Debian's `zookeeper` package jars.

Used by ``zklock server start``, ``make demo`` (when no ZooKeeper is
configured) and the test suite. It runs QuorumPeerMain on loopback with its
config, data, log and pid under a state directory, waits for ``ruok`` to
answer ``imok`` and for ``srvr`` to report that it serves, and refuses
cleanly when the port is taken. The same class
runs one member of a loopback ensemble (see zklock.testing.ensemble).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import ServerError
from . import serverinfo
from .java import jdk_tool
from .ports import port_free
from .process import pid_alive, terminate

#: The setting naming the directory of ZooKeeper's jars (a row of zklock/config.py's table,
#: zookeeper_jars), and its default: Debian's zookeeper package.
JARS_ENV = "ZKLOCK_ZK_JARS"
DEFAULT_JAR_DIR = "/usr/share/java"
JAR_DIR = Path(os.environ.get(JARS_ENV) or DEFAULT_JAR_DIR)
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = ("ZooKeeper jars not found under {d}: install Debian's zookeeper package"
                f" (apt-get install -y zookeeper) or set {JARS_ENV} to a directory of"
                " ZooKeeper's jars (such as PySpark's jars/)")


def classpath() -> str:
    """ZooKeeper's server classes under JAR_DIR, in either layout: Debian's
    (``zookeeper.jar``, whose manifest names its dependencies, plus a simple slf4j binding)
    or a Spark distribution's ``jars/`` (``zookeeper-<version>.jar`` beside the jars it
    needs: PySpark 4's carry ZooKeeper 3.9.5, server classes included)."""
    jar = JAR_DIR / "zookeeper.jar"
    if jar.exists():
        parts = [str(jar)]
        for extra in ("slf4j-simple.jar",):
            if (JAR_DIR / extra).exists():
                parts.append(str(JAR_DIR / extra))
        return ":".join(parts)
    if any(JAR_DIR.glob("zookeeper-[0-9]*.jar")):
        return f"{JAR_DIR}/*"  # the JVM's wildcard: every jar of the directory
    raise ServerError(INSTALL_HINT.format(d=JAR_DIR))


def four_letter(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (ruok, srvr, mntr...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            try:
                data = s.recv(4096)
            except TimeoutError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


@dataclass
class ZkServer:
    """One ZooKeeper server process with its own state directory.

    ``peers`` (id -> (quorum port, election port)) turns it into an ensemble
    member; without it, the server runs standalone.
    """

    state_dir: Path
    port: int = 2181
    host: str = "127.0.0.1"
    tick_time_ms: int = 2000
    force_sync: bool = True
    server_id: int = 0
    peers: dict = field(default_factory=dict)
    client_ports: dict = field(default_factory=dict)
    heap_mb: int = 256
    extra_config: dict = field(default_factory=dict)
    jvm_flags: list = field(default_factory=list)  # e.g. a JAAS file for SASL
    container_check_ms: int = 5000

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve()

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "zookeeper.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "zookeeper.log"

    @property
    def info_file(self) -> Path:
        return serverinfo.path(self.state_dir)

    def config_text(self) -> str:
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={(self.state_dir / 'data').resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "maxClientCnxns=0",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            f"maxSessionTimeout={40 * self.tick_time_ms}",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,conf,wchs,dump,isro",
            "admin.enableServer=false",
            f"forceSync={'yes' if self.force_sync else 'no'}",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        if self.peers:
            lines += ["initLimit=10", "syncLimit=5", "standaloneEnabled=false",
                      "reconfigEnabled=false"]
            for sid, (qport, eport) in sorted(self.peers.items()):
                lines.append(f"server.{sid}={self.host}:{qport}:{eport}")
        lines += [f"{k}={v}" for k, v in self.extra_config.items()]
        return "\n".join(lines) + "\n"

    # ---- state ----------------------------------------------------------
    def pid(self) -> Optional[int]:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def ruok(self, timeout: float = 1.0) -> bool:
        try:
            return four_letter(self.host, self.port, "ruok", timeout) == "imok"
        except OSError:
            return False

    def mode(self) -> str:
        """leader, follower or standalone (from ``srvr``); '' when not serving."""
        try:
            text = four_letter(self.host, self.port, "srvr")
        except OSError:
            return ""
        for line in text.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def status(self) -> dict:
        pid = self.pid()
        return {"running": bool(pid) and self.ruok(), "pid": pid, "connect": self.connect,
                "state_dir": str(self.state_dir), "mode": self.mode() if pid else ""}

    # ---- start / stop ---------------------------------------------------
    def start(self, wait: float = 60.0, ready: bool = True) -> str:
        """Start the server and return its connect string once it answers ``imok``."""
        if self.pid():
            if self.ruok():
                return self.connect
            raise ServerError(f"a ZooKeeper started from {self.state_dir} (pid {self.pid()})"
                              " is not answering; run `zklock server stop` first")
        if not port_free(self.host, self.port):
            raise ServerError(f"port {self.host}:{self.port} is already in use; pick another"
                              " with --port or point ZKLOCK_ZK at the server using it")
        cp = classpath()
        data = self.state_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        if self.peers:
            (data / "myid").write_text(f"{self.server_id}\n")
        cfg = self.state_dir / "zoo.cfg"
        cfg.write_text(self.config_text())
        java = jdk_tool("java")
        if java is None:
            raise ServerError("java not found: install a Java runtime (17+) or set JAVA_HOME")
        cmd = [java, f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               # how often empty object (container) nodes are swept
               f"-Dznode.container.checkIntervalMs={self.container_check_ms}",
               *self.jvm_flags, "-cp", cp, MAIN, str(cfg)]
        try:
            log = open(self.log_file, "ab")
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=self.state_dir)
        except FileNotFoundError:
            raise ServerError("java not found: install a Java runtime (17+)") from None
        finally:
            log.close()
        self.pid_file.write_text(f"{proc.pid}\n")
        serverinfo.write(self.state_dir, serverinfo.ServerInfo(self.connect, pid=proc.pid))
        self._proc = proc
        if not ready:
            return self.connect
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = self.log_file.read_text(errors="replace")[-2000:]
                self._forget()
                raise ServerError(f"ZooKeeper exited with code {proc.returncode}:\n{tail}")
            # ruok answers before the server serves; srvr reports a mode only once it does
            if self.ruok(timeout=0.5) and self.mode() in ("standalone", "leader", "follower"):
                return self.connect
            time.sleep(0.1)
        self.stop()
        raise ServerError(f"ZooKeeper did not answer imok within {wait:g}s; see {self.log_file}")

    def _forget(self) -> None:
        for f in (self.pid_file, self.info_file):
            try:
                f.unlink()
            except OSError:
                pass

    def stop(self, wait: float = 15.0) -> bool:
        """Stop the server; False when none was running."""
        pid = self.pid()
        if not pid:
            self._forget()
            return False
        terminate(pid, wait, getattr(self, "_proc", None))
        self._forget()
        return True
