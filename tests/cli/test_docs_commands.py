"""Every command README.md and docs/deploy.md show runs, as written, against a real
ZooKeeper: those of their shell blocks, and those written inline (a code span that starts
with a command: ``zklock ...``, ``spark-submit ...``). The one README's first command
starts (``zklock server start``, in a state directory of the test's own) serves them.

The operator's commands (every ``zklock`` command that does not run Spark) run from
zklock's wheel in a venv without PySpark, as on an operator's host (docs/deploy.md); the
others from this suite's venv.

What the test changes, and why, is all in the rules below; nothing else is rewritten:
- the placeholder ensemble ``zk1:2181,zk2:2181,zk3:2181`` becomes the running server;
- ``<id>`` becomes the lease id the ``lease grab`` before it printed, ``<version>`` the
  installed Spark's, ``DIR`` and ``/data/warehouse`` a directory of the test's own,
  ``/usr/lib/spark/jars`` and ``$SPARK_HOME/jars`` a Spark ``jars/`` of the test's own;
- ``a|b|c`` alternatives run one after the other;
- a server started on a fixed port gets a free one where that port is taken;
- a command that runs until stopped (``show --watch``, ``scheduler run``, ``lease reap
  --every``, a Connect or Thrift server) runs until it shows it works, and is then stopped;
- ``make`` lines are CI's own commands (this suite is one of them), not run here, and so
  are the commands NOT_RUN names, each with its reason.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pyspark
import pytest
from conftest import PYTHON, wait_for
from venvs import build_wheel, operator_venv

from zklock import LockManager
from zklock.servers.ports import free_port

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "docs" / "deploy.md"]
PLACEHOLDER_ENSEMBLE = "zk1:2181,zk2:2181,zk3:2181"
#: commands that run until stopped: what shows each one works
LONG_RUNNING = ("show --watch", "scheduler run", "connect-server start", "thrift-server start",
                "lease reap --every", "metastore start")
#: The first word of an inline code span that is a command.
PROGRAMS = {"zklock", "spark-submit", "spark-sql", "pip", "beeline", "python", "export",
            "sbin/start-connect-server.sh", "make", "eval"}
#: The commands the docs show that this test does not run, and why.
NOT_RUN = {
    "spark-submit --master yarn --conf spark.jars=$(zklock spark jar) ...":
        "YARN: no cluster here (its `zklock spark jar` runs on its own)",
    "pip install zklock-<version>-py3-none-any.whl pyspark==<your Spark>":
        "fetches PySpark from the package registry; tests/scripts/test_build_dist.py"
        " installs the wheel as written, beside the suite's PySpark",
    "beeline -u jdbc:hive2://127.0.0.1:10000/default -n alice":
        "interactive; tests/cli/test_thrift_server.py runs beeline against zklock's Thrift"
        " server",
    "python scripts/demo_claims.py EVENTS": "checks a demo's event log: make demo runs it",
    "sbin/start-connect-server.sh": "names Spark's own script, which a Spark distribution has"
                                    " and PySpark's package has not",
    "zklock lease ...": "names the lease commands; deploy.md's block runs them",
    "zklock explain": "names the command; the blocks run it with a statement",
    "zklock": "names the command",
    "spark-sql": "names the program; tests/scripts/test_build_dist.py runs it as deployed",
    "spark-submit": "names the program; tests/scripts/test_build_dist.py runs it as deployed",
    "pip install": "names the program",
}
#: The fenced blocks of other languages that hold commands, and why they are not run here.
NOT_RUN_BLOCKS = {
    "yaml": "a dbt project's hooks: tests/cli/test_dbt_project.py runs a dbt project with"
            " them as written",
    "dockerfile": "Docker is not here: tests/scripts/test_build_dist.py runs the Dockerfile's"
                  " `zklock spark jar` step as written against a Spark distribution",
}
#: A zklock command that runs Spark (the rest are the operator's).
RUNS_SPARK = re.compile(r"zklock(\s+--\S+\s+\S+)*\s+(sql|explain|metastore|spark(?! jar"
                        r" --spark-version)|scheduler run|schedule (create|alter))\b")


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


def inline_commands(doc: Path) -> list[str]:
    """The commands of ``doc``'s inline code spans (outside fenced blocks; a span may break
    across lines): those that start with one of PROGRAMS."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text))
    return [span for span in spans if span.split()[0] in PROGRAMS]


def fenced_blocks(doc: Path) -> list[str]:
    """The language of each fenced block of ``doc``."""
    return re.findall(r"```(\w+)\n", doc.read_text())


def alternatives(command: str) -> list[str]:
    """``zklock x start|status|stop`` as the commands it stands for, in order."""
    match = re.search(r"(\S+\|\S+)", command)
    if match is None:
        return [command]
    return [command.replace(match.group(1), word) for word in match.group(1).split("|")]


def without_comment(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command)


@pytest.fixture(scope="module")
def operator_bin(tmp_path_factory) -> Path:
    """The bin/ of a venv with zklock's wheel and no PySpark: an operator's host."""
    base = tmp_path_factory.mktemp("operator")
    return operator_venv(base, build_wheel(base / "dist")).parent


@pytest.fixture
def shell(tmp_path, operator_bin):
    """run(command) -> CompletedProcess: bash in a working directory of the test's own,
    with the zklock of this suite first on PATH where the command runs Spark, the wheel's
    in a venv without PySpark where it does not, and its embedded server's state there."""
    bin_dir = Path(PYTHON).parent
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("ZKLOCK_", "SPARK_REMOTE", "SPARK_HOME"))
              or k == "ZKLOCK_ZK_JARS"},
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "ZKLOCK_STATE_DIR": str(tmp_path / ".zklock"),
           # what `zklock timeline` reads without --events (README: ZKLOCK_EVENT_LOG)
           "ZKLOCK_EVENT_LOG": str(tmp_path / "events.jsonl")}

    def environment(command: str) -> dict[str, str]:
        if "$SPARK_HOME" in command:  # a Spark distribution's home of the test's own
            return {**venv(command), "SPARK_HOME": str(tmp_path / "spark")}
        return venv(command)

    def venv(command: str) -> dict[str, str]:
        if "zklock auth digest" in command:  # the identities it prints (README, "Security")
            return {**env, "PATH": f"{operator_bin}{os.pathsep}{os.environ['PATH']}",
                    "ZKLOCK_AUTH": "etl:secret", "ZKLOCK_ADMIN_AUTH": "admin:secret"}
        if RUNS_SPARK.search(command) or "zklock spark jar" in command and (
                "--spark-version" not in command):
            return env
        return {**env, "PATH": f"{operator_bin}{os.pathsep}{os.environ['PATH']}"}

    def run(command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                              cwd=tmp_path, env=environment(command), timeout=timeout)

    run.env = env
    run.environment = environment
    run.cwd = tmp_path
    yield run
    run("zklock server stop", timeout=120)


class Running:
    """A command that runs until stopped, its output collected as it comes."""

    def __init__(self, shell, command: str) -> None:
        self.proc = subprocess.Popen(["bash", "-c", without_comment(command)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=shell.cwd, env=shell.environment(command),
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
    spark_home = tmp_path / "spark"  # a Spark distribution's layout, PySpark's jars in it
    (spark_home / "jars").mkdir(parents=True)
    for jar in (Path(pyspark.__file__).parent / "jars").iterdir():
        (spark_home / "jars" / jar.name).symlink_to(jar)
    (spark_home / "bin").symlink_to(Path(pyspark.__file__).parent / "bin")
    context = {"lease": None, "hosts": hosts, "tmp": tmp_path}
    ran, not_run = [], set()
    for doc in DOCS:
        for block in fenced_blocks(doc):
            assert block in ("sh", "python", "sql", "properties") or block in NOT_RUN_BLOCKS, (
                f"{doc.name}: a {block} block: run its commands, or say in NOT_RUN_BLOCKS why not")
        for command in [*shell_commands(doc), *inline_commands(doc)]:
            if command.startswith("make "):
                continue
            if command in NOT_RUN:
                not_run.add(command)
                continue
            if command == start.split(" --port")[0] or re.match(
                    r"zklock server start( --port \d+)?$", command):
                continue  # started above
            for one in alternatives(command):
                run_documented(shell, doc, one, context)
            ran.append(command)
    assert len(ran) >= 40, ran
    assert not_run == set(NOT_RUN), set(NOT_RUN) - not_run  # each still in the docs


def run_documented(shell, doc: Path, command: str, context: dict) -> None:
    """Run one documented command, as written but for the rules of the module's docstring."""
    tmp = context["tmp"]
    text = (command.replace(PLACEHOLDER_ENSEMBLE, context["hosts"])
            .replace("/data/warehouse", str(tmp / "warehouse"))
            .replace("--warehouse DIR", f"--warehouse {tmp / 'warehouse'}")
            .replace("/usr/lib/spark/jars", str(tmp / "spark" / "jars"))
            .replace("<version>", pyspark.__version__))
    if "<id>" in text:
        assert context["lease"], f"{command!r} needs the lease a grab before it printed"
        text = text.replace("<id>", context["lease"])
    if "zklock server stop" in text:
        text = text.replace("zklock server stop", "true")  # the fixture stops it
    if "--ensemble" in text:  # an ensemble of its own, beside the test's server
        own = f"ZKLOCK_STATE_DIR={tmp / 'ensemble-state'}"
        out = shell(f"{own} {text}; started=$?; {own} zklock server stop; exit $started")
        assert out.returncode == 0, (doc.name, command, out.stdout, out.stderr)
        return
    long_running = next((k for k in LONG_RUNNING if k in text), None)
    if long_running is not None:
        check_long_running(shell, text, long_running, context["hosts"])
        return
    out = shell(text)
    if text.split("#")[0].rstrip().endswith(" status") and out.returncode == 1:
        # a server's status says it does not run with exit 1 (documented)
        assert "not running" in out.stdout + out.stderr, (doc.name, command, out.stdout)
    else:
        assert out.returncode == 0, (doc.name, command, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, (doc.name, command, out.stderr)
    if "lease grab" in text:
        context["lease"] = out.stdout.strip().splitlines()[-1]


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
    servers = {"connect-server start": "zklock spark connect-server stop",
               "thrift-server start": "zklock spark thrift-server stop",
               "metastore start": "zklock metastore stop"}
    if kind in servers:  # a command that starts a server and returns
        if "--port" in text:
            text = re.sub(r"--port \d+", f"--port {free_port()}", text)
        elif kind == "thrift-server start" and not free_port_is(10000):
            text = text.replace("start", f"start --port {free_port()}", 1)
        out = shell(text)
        try:
            assert out.returncode == 0, (text, out.stdout, out.stderr)
            # its status says it runs (exit 0), as a documented status after a stop does not
            status = shell(servers[kind].replace(" stop", " status"))
            assert status.returncode == 0, (text, status.stdout, status.stderr)
        finally:
            stopped = shell(servers[kind])
        assert stopped.returncode == 0, stopped.stderr
        return
    if "--metrics-port" in text:
        text = re.sub(r"--metrics-port \d+", f"--metrics-port {free_port()}", text)
    running = Running(shell, text)
    try:
        if kind == "scheduler run":
            assert wait_for(lambda: "leader (none)" not in shell(
                "zklock scheduler status").stdout, timeout=300), running.output
        elif kind == "lease reap --every":  # its first round
            assert wait_for(lambda: "reap" in running.output, timeout=120), running.output
        else:  # show --watch: its first screen
            assert wait_for(lambda: "(none)" in running.output or "OBJECT" in running.output,
                            timeout=60), running.output
    finally:
        output = running.stop()
    assert "Traceback" not in output, output
