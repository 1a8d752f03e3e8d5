"""Every command README.md and docs/deploy.md show in their shell blocks runs, as written,
against a real ZooKeeper: the one README's first command starts (``zklock server start``,
in a state directory of the test's own).

What the test changes, and why, is all in SUBSTITUTIONS and the few rules below; nothing
else is rewritten:
- the placeholder ensemble ``zk1:2181,zk2:2181,zk3:2181`` becomes the running server;
- ``<id>`` becomes the lease id the ``lease grab`` before it printed;
- ``/data/warehouse`` becomes a directory of the test's own;
- a command that runs until stopped (``show --watch``, ``scheduler run``, a Connect server)
  runs until it shows it works, and is then stopped;
- ``make`` lines are CI's own commands (this suite is one of them), not run here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import PYTHON, wait_for

from zklock import LockManager
from zklock.servers.ports import free_port

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "docs" / "deploy.md"]
PLACEHOLDER_ENSEMBLE = "zk1:2181,zk2:2181,zk3:2181"
#: commands that run until stopped: what shows each one works
LONG_RUNNING = ("show --watch", "scheduler run", "connect-server start")


def shell_commands(doc: Path) -> list[str]:
    """The commands of ``doc``'s shell blocks, one per logical line (continuations joined),
    comments kept (bash ignores them)."""
    commands: list[str] = []
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", doc.read_text(), re.S):
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = (pending + line).strip()
            pending = ""
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def without_comment(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command)


@pytest.fixture
def shell(tmp_path):
    """run(command) -> CompletedProcess: bash in a working directory of the test's own,
    with the zklock of this suite first on PATH, and its embedded server's state there."""
    bin_dir = Path(PYTHON).parent
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("ZKLOCK_", "SPARK_REMOTE"))},
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "ZKLOCK_STATE_DIR": str(tmp_path / ".zklock")}

    def run(command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=timeout)

    run.env = env
    run.cwd = tmp_path
    yield run
    run("zklock server stop", timeout=120)


class Running:
    """A command that runs until stopped, its output collected as it comes."""

    def __init__(self, shell, command: str) -> None:
        self.proc = subprocess.Popen(["bash", "-c", without_comment(command)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=shell.cwd, env=shell.env,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.reader.join(30)
        return self.output


@pytest.mark.docs
def test_every_documented_command_runs_as_written(shell, tmp_path):
    server_port = 2181 if free_port_is(2181) else free_port()
    start = "zklock server start" + ("" if server_port == 2181 else f" --port {server_port}")
    started = shell(start)  # README's first command (another port where 2181 is taken)
    assert started.returncode == 0, started.stderr
    hosts = started.stdout.strip().splitlines()[-1]
    shell.env["ZKLOCK_ZK"] = hosts  # what README says to export next
    # an event log for `zklock timeline`, as an application writing one leaves it
    with LockManager(hosts=hosts, event_log=str(tmp_path / "events.jsonl")) as manager:
        with manager.acquire([("sales.orders", "S")], query="a reader"):
            pass
    (tmp_path / "tables.sql").write_text("CREATE DATABASE IF NOT EXISTS sales;\n")
    (tmp_path / "warehouse").mkdir()
    lease_id = None
    ran = []
    for doc in DOCS:
        for command in shell_commands(doc):
            if command.startswith("make "):
                continue
            if command == start.split(" --port")[0] or command.startswith(
                    "zklock server start "):
                continue  # started above
            text = command.replace(PLACEHOLDER_ENSEMBLE, hosts).replace(
                "/data/warehouse", str(tmp_path / "warehouse"))
            if "<id>" in text:
                assert lease_id, f"{command!r} needs the lease a grab before it printed"
                text = text.replace("<id>", lease_id)
            if "zklock server stop" in text:
                text = text.replace("zklock server stop", "true")  # the fixture stops it
            long_running = next((k for k in LONG_RUNNING if k in text), None)
            if long_running is not None:
                check_long_running(shell, text, long_running, hosts)
            else:
                out = shell(text)
                assert out.returncode == 0, (doc.name, command, out.stdout, out.stderr)
                if "lease grab" in text:
                    lease_id = out.stdout.strip().splitlines()[-1]
            ran.append(command)
    assert len(ran) >= 20, ran


def free_port_is(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_long_running(shell, text: str, kind: str, hosts: str) -> None:
    """Run a command that runs until stopped until it shows it works, then stop it."""
    if kind == "connect-server start":
        text = re.sub(r"--port \d+", f"--port {free_port()}", text)
        out = shell(text)
        try:
            assert out.returncode == 0, (text, out.stdout, out.stderr)
        finally:
            stopped = shell("zklock spark connect-server stop")
        assert stopped.returncode == 0, stopped.stderr
        return
    running = Running(shell, text)
    try:
        if kind == "scheduler run":
            assert wait_for(lambda: "leader (none)" not in shell(
                "zklock scheduler status").stdout, timeout=300), running.output
        else:  # show --watch: its first screen
            assert wait_for(lambda: "(none)" in running.output or "OBJECT" in running.output,
                            timeout=60), running.output
    finally:
        output = running.stop()
    assert "Traceback" not in output, output
