"""A local Spark Connect server with zklock's plugin, for development, demos and tests.

``zklock spark connect-server start`` runs PySpark's own Spark Connect service in a
process of its own (:mod:`zklock.cli.connect_host`): a Python process whose JVM has
zklock's jar, its plugin (``spark.connect.extensions.relation.classes``, which plans locks
for LockingSession clients) and its engine extension, and whose LockManager takes the locks
of every command a client sends that no LockingSession locked. Its pid, port, log and the
jar it runs live in ``<state dir>/connect-server/`` (``.zklock/`` by default), like the
ZooKeeper of ``zklock server start``.

A Connect server started otherwise (Spark's start-connect-server.sh) has no lock client:
with zklock's extension it refuses the commands that need locks; see docs/spark.md,
"Spark Connect: the server side".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from zklock.errors import SparkConnectError
from zklock.process import pid_alive, terminate
from zklock.spark.jvm import has_connect_server, jar_info, module_jar

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default


def pyspark_home() -> Path:
    """The Spark distribution PySpark ships (bin/spark-submit, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_home_version(home: Path) -> Optional[str]:
    """The Spark version of a distribution, from its spark-core jar's name; None if unknown."""
    for jar in sorted((home / "jars").glob("spark-core_*.jar")):
        name = jar.name[:-len(".jar")]
        return name.split("-", 2)[-1] if name.count("-") >= 2 else None
    return None


def _port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class ConnectServer:
    """One Spark Connect server process with zklock's plugin, state under ``state_dir``."""

    state_dir: Path
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    warehouse: Optional[str] = None
    conf: dict[str, str] = field(default_factory=dict)
    spark_home: Optional[Path] = None
    jar: Optional[Path] = None
    #: the zklock settings of the server's lock client, as Spark conf (spark.zklock.*)
    locks: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir).resolve() / "connect-server"

    @property
    def info_file(self) -> Path:
        return self.state_dir / "connect-server.json"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "connect-server.log"

    @property
    def remote(self) -> str:
        """The address a client gives ``SparkSession.builder.remote``."""
        return f"sc://{self.host}:{self.port}"

    # ---- state ------------------------------------------------------------------------
    def info(self) -> dict:
        """What ``start`` recorded (port, pid, jar, spark, log), or {} when nothing runs."""
        try:
            return json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return {}

    def status(self) -> dict:
        """running, port, pid, plugin jar, Spark version and log of the server started here."""
        info = self.info()
        pid = info.get("pid")
        alive = bool(pid) and pid_alive(int(pid))
        port = int(info.get("port", self.port))
        return {"running": alive and _port_open(info.get("host", self.host), port),
                "pid": pid if alive else None, "port": port,
                "remote": f"sc://{info.get('host', self.host)}:{port}",
                "jar": info.get("jar"), "spark": info.get("spark"),
                "log": str(self.log_file), "state_dir": str(self.state_dir)}

    # ---- start / stop -------------------------------------------------------------------
    def start(self, wait: float = 120.0) -> str:
        """Start the server and return its ``sc://`` address once it accepts connections.

        Raises :class:`~zklock.errors.SparkConnectError` (one line) when one already runs
        here, the port is taken, the plugin was built for another Spark than the server's,
        or the server exits or does not answer within ``wait`` seconds.
        """
        current = self.status()
        if current["pid"]:
            if current["running"]:
                raise SparkConnectError(
                    f"a Spark Connect server started from {self.state_dir} already runs (pid"
                    f" {current['pid']}, {current['remote']}); stop it first")
            raise SparkConnectError(
                f"a Spark Connect server started from {self.state_dir} (pid {current['pid']})"
                " is not answering; run `zklock spark connect-server stop` first")
        if _port_open(self.host, self.port):
            raise SparkConnectError(f"port {self.host}:{self.port} is already in use; pick"
                                    " another with --port")
        home = Path(self.spark_home) if self.spark_home else pyspark_home()
        submit = home / "bin" / "spark-submit"
        if not submit.exists():
            raise SparkConnectError(f"no bin/spark-submit under {home}: not a Spark"
                                    " distribution")
        if not has_connect_server(home / "jars"):
            raise SparkConnectError(
                f"the Spark under {home} ({spark_home_version(home) or 'of unknown version'})"
                " has no Spark Connect server (pip's PySpark 3.5 ships none): zklock's Connect"
                " server needs PySpark 4.0 or newer")
        jar = Path(self.jar) if self.jar else module_jar()
        built_for = jar_info(jar).get("spark")
        if built_for is None:
            raise SparkConnectError(f"{jar} is not zklock's Spark Connect plugin jar")
        server_version = spark_home_version(home)
        if server_version != built_for:
            raise SparkConnectError(
                f"zklock's plugin {jar.name} is built for Spark {built_for} but the Spark"
                f" Connect server under {home} is Spark {server_version or 'of unknown version'};"
                " build the plugin against that Spark's jars (a PySpark of the same version)")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "zklock.cli.connect_host", "--port", str(self.port),
               "--host", self.host]
        if self.warehouse:
            cmd += ["--warehouse", str(Path(self.warehouse).resolve())]
        from zklock.spark import SPARK_DEFAULTS  # sysdb views need the global temp database "sysdb"

        conf = {**SPARK_DEFAULTS, **self.locks, **self.conf}
        if self.jar:
            conf["spark.jars"] = str(jar)
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_CONNECT_MODE="0")
        env.pop("SPARK_REMOTE", None)
        try:
            with open(self.log_file, "ab") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        cwd=self.state_dir, env=env)
        except OSError as exc:
            raise SparkConnectError(f"cannot run {cmd[0]}: {exc}") from None
        self._proc = proc
        self.info_file.write_text(json.dumps({
            "pid": proc.pid, "port": self.port, "host": self.host, "jar": str(jar),
            "spark": server_version, "warehouse": self.warehouse, "started_at": time.time()}))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._forget()
                raise SparkConnectError(f"the Spark Connect server exited with code"
                                        f" {proc.returncode}: {self._last_error()}"
                                        f" (log: {self.log_file})")
            if _port_open(self.host, self.port):
                return self.remote
            time.sleep(0.2)
        self.stop()
        raise SparkConnectError(f"the Spark Connect server did not listen on {self.remote}"
                                f" within {wait:g}s; see {self.log_file}")

    def stop(self, wait: float = 30.0) -> bool:
        """Stop the server started here; False when none was running."""
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

    def _last_error(self) -> str:
        """The last line of the log that looks like an error (for a one-line message)."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        for line in reversed(lines):
            if "Exception" in line or "Error" in line or "error:" in line:
                return line.strip()[:300]
        return (lines[-1].strip()[:300] if lines else "no output")
