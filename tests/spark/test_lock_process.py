"""The lock client as a child process (lock_process.py, ChildLockClient.java), in a Spark
process that never imports zklock's Python: Spark's own ``spark-sql`` with zklock's jar and
extension configured, as spark-defaults.conf would give them.

A holder in the test keeps X to show the statement is locked (denied, nothing written); a
SIGKILL of the child while a command holds its locks shows the JVM treating the child's
death as the loss of those locks (the command fails, nothing is written).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import PYTHON, lock_nodes, wait_for
from zklock.cli.connect_server import pyspark_home

from zklock import LockManager, Mode
from zklock.locks.lockrequest import normalize
from zklock.spark import answer, lock_client
from zklock.spark.jvm import module_jar
from zklock.spark.protocol import Call, Event, Field, Outcome

SLOW_INSERT = ("INSERT INTO t SELECT CAST(id + 0 * length(coalesce(java_method("
               "'java.lang.Thread', 'sleep', 300L), '')) AS INT) FROM range(10, 60, 1, 1)")


def spark_sql(tmp_path: Path, zk_hosts: str, root: str, sql: str, python: str = PYTHON,
              retries: int = 200) -> subprocess.Popen:
    """Spark's spark-sql with zklock configured (and no zklock Python in it); ``python``
    runs its child lock client. ``retries`` (0.05 s apart) let a statement wait for the set
    of the one before it, which the engine releases in the background."""
    return subprocess.Popen(
        [*spark_command("spark-sql", tmp_path, zk_hosts, root, retries),
         "--conf", f"spark.zklock.lockClient.python={python}",
         "--conf", "spark.driver.memory=768m",
         # a failed statement does not end the session: the next one runs
         "--hiveconf", "hive.cli.errors.ignore=true",
         "-e", sql],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"})


def spark_command(tool: str, tmp_path: Path, zk_hosts: str, root: str,
                  retries: int) -> list[str]:
    """Spark's ``tool`` (spark-sql, spark-submit) with zklock's jar, extension and lock
    settings in its conf, as spark-defaults.conf would give them."""
    return [str(pyspark_home() / "bin" / tool), "--jars", str(module_jar()),
            "--conf", "spark.sql.extensions=zklock.EngineLocks",
            "--conf", "spark.plugins=zklock.EnginePlugin",
            "--conf", f"spark.zklock.zookeeper.quorum={zk_hosts}",
            "--conf", f"spark.zklock.root={root}",
            "--conf", f"spark.zklock.lock.retries={retries}",
            "--conf", "spark.zklock.lock.retryInterval=0.05",
            "--conf", f"spark.sql.warehouse.dir={tmp_path / 'wh'}",
            "--conf", "spark.ui.enabled=false"]


def spark_submit(tmp_path: Path, zk_hosts: str, root: str, app: str, *args: str,
                 retries: int) -> subprocess.CompletedProcess:
    """spark-submit of the PySpark application ``app`` (its text) with zklock in its conf
    only, as spark-defaults.conf gives it: its statements are locked by the child lock
    client, run by the driver's own Python (PYSPARK_PYTHON: no setting names it)."""
    script = tmp_path / "app.py"
    script.write_text(app)
    return subprocess.run(
        [*spark_command("spark-submit", tmp_path, zk_hosts, root, retries), str(script),
         *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**{k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"},
             "PYSPARK_PYTHON": PYTHON, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def finished(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


def table_rows(spark, tmp_path: Path) -> list[int]:
    """The table's rows, read from its files (a path read takes no table locks)."""
    return sorted(r.id for r in spark.read.parquet(str(tmp_path / "wh" / "t")).collect())


@pytest.fixture
def table(tmp_path, zk_hosts, root):
    code, out = finished(spark_sql(tmp_path, zk_hosts, root,
                                   "CREATE TABLE t (id INT) USING parquet;"
                                   " INSERT INTO t VALUES (1);"))
    assert code == 0, out[-3000:]
    return tmp_path


def test_spark_sql_statements_are_locked_by_the_child_lock_client(
        spark, table, zk_hosts, root) -> None:
    holder = LockManager(hosts=zk_hosts, root=root, retries=200, retry_interval=0.05)
    try:
        with holder.acquire([("default.t", "X")], query_id="holder"):
            code, out = finished(spark_sql(table, zk_hosts, root, "INSERT INTO t VALUES (2)",
                                           retries=0))
        assert code != 0, out[-3000:]
        assert "zklock: lock not acquired" in out and "default.t (X requested) is held in X" in out
    finally:
        holder.close()
    assert table_rows(spark, table) == [1]


def test_killing_the_child_lock_client_loses_the_commands_locks(
        spark, table, zk_hosts, root) -> None:
    watcher = LockManager(hosts=zk_hosts, root=root)
    proc = spark_sql(table, zk_hosts, root, SLOW_INSERT)
    try:
        held = wait_for(lambda: [r for r in watcher.show("default.t", extended=True)
                                 if r.mode.value == "X"], timeout=120)
        assert held, "the INSERT never held its X"
        child = held[0].data.pid
        assert "zklock.spark.lock_process" in Path(f"/proc/{child}/cmdline").read_text()
        # the node is in ZooKeeper before the child's grant reaches the JVM: a death in
        # between refuses the statement before it runs ("is gone"). The command holds its
        # locks once its task writes a file under its staging.
        assert wait_for(lambda: any(p.is_file() for p in (table / "wh" / "t").rglob(
            "_temporary/**/*")), timeout=120), "the INSERT's task never wrote"
        os.kill(child, signal.SIGKILL)
        code, out = finished(proc)
    finally:
        proc.kill()
        watcher.close()
    assert code != 0, out[-3000:]
    # cancelled (its jobs, as they run or start), or its commit refused (the fence): either
    # way the command fails naming the dead lock client, and nothing it wrote is visible
    assert "lock client" in out and "died" in out, out[-3000:]
    assert "it completed" not in out, out[-3000:]
    assert table_rows(spark, table) == [1]


SUBMITTED_APP = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()  # zklock comes from spark-submit's conf only
spark.sql("CREATE TABLE t (id INT) USING parquet")
spark.sql("INSERT INTO t VALUES (1)")
try:
    spark.sql("CREATE TABLE blocked (id INT) USING parquet")
    print("RAN")
except Exception as exc:
    print("REFUSED", str(exc).strip().splitlines()[0])
"""


def test_a_submitted_python_app_that_never_calls_enforce_is_locked(
        spark, tmp_path, zk_hosts, root) -> None:
    """spark-submit of a PySpark app that knows nothing of zklock, with zklock in its conf (as
    spark-defaults.conf gives it): its statements are locked by the child lock client, run
    by the driver's own Python (PYSPARK_PYTHON: no setting names it)."""
    holder = LockManager(hosts=zk_hosts, root=root)
    try:
        with holder.acquire([("default.blocked", "X")], query_id="holder"):
            out = spark_submit(tmp_path, zk_hosts, root, SUBMITTED_APP, retries=20)
    finally:
        holder.close()
    assert out.returncode == 0, out.stderr[-3000:]
    assert "REFUSED" in out.stdout and "default.blocked (X requested) is held in X" in out.stdout
    assert table_rows(spark, tmp_path) == [1]


def test_without_zklock_in_the_childs_python_a_statement_is_refused_in_one_line(
        tmp_path, zk_hosts, root) -> None:
    """The driver's host has no Python with zklock: the statement is refused, in a line that
    carries the child's own error, and nothing is created."""
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = tmp_path / "bare" / "bin" / "python"  # a Python without zklock
    tables = "tuvwxy"
    code, out = finished(spark_sql(tmp_path, zk_hosts, root, " ".join(
        f"CREATE TABLE {t} (id INT) USING parquet;" for t in tables), python=str(bare)))
    refused = [line for line in out.splitlines() if "no lock client runs in this process" in line]
    assert refused and "did not start" in refused[0] and "No module named" in refused[0], (
        out[-3000:])
    # the statements after it: not a start each in a tight loop, but refusals naming the last
    # error while the back-off lasts (2 s, doubling: ChildSupervisor.java). However slow
    # the machine, the doubling back-off outlasts the gaps between six statements.
    backoff = [line for line in out.splitlines() if "time(s) in a row" in line
               and "next start is in" in line]
    said = [line for line in out.splitlines() if "zklock" in line and "\tat " not in line]
    assert backoff and "No module named" in backoff[0], said
    starts = [line for line in out.splitlines() if "in a row; the next start waits" in line]
    assert 1 <= len(starts) < len(tables), said
    assert not any((tmp_path / "wh" / t).exists() for t in tables)


RESTART_APP = """
import json, os, signal, sys, threading
from polling import wait_for  # the suite's (spark_submit puts tests/ on the app's path)
from pyspark.sql import SparkSession
from zklock import LockManager

hosts, root = sys.argv[1:3]
spark = SparkSession.builder.getOrCreate()  # zklock comes from spark-submit's conf only
spark.sql("CREATE TABLE t (id INT) USING parquet")
watcher = LockManager(hosts=hosts, root=root)
rounds = []
for n in range(3):
    outcome = {}

    def slow():
        try:
            spark.sql(SLOW_INSERT)
            outcome["error"] = None
        except Exception as exc:
            outcome["error"] = str(exc).strip().splitlines()[0][:300]
    writer = threading.Thread(target=slow)
    writer.start()
    held = wait_for(lambda: [r for r in watcher.show("default.t", extended=True)
                             if r.mode.value == "X"], timeout=120)
    child = held[0].data.pid
    # the child creates the nodes before its grant reaches the JVM: a kill in between fails
    # the statement before it runs. Kill it once the statement's job runs under the grant.
    assert wait_for(lambda: spark.sparkContext.statusTracker().getActiveJobsIds(),
                    timeout=120)
    os.kill(child, signal.SIGKILL)
    writer.join(300)
    spark.sql(f"INSERT INTO t VALUES ({n})")  # the next statement: a new child locks it
    status = json.loads(str(spark._jvm.zklock.engine.EngineCalls.childStatus()))
    rounds.append({"killed": child, "error": outcome["error"], "status": status})
rows = sorted(r.id for r in spark.table("t").collect())
watcher.close()
print(json.dumps({"rounds": rounds, "rows": rows}))
""".replace("SLOW_INSERT", repr(SLOW_INSERT))


def test_the_child_lock_client_comes_back_after_each_death(spark, tmp_path, zk_hosts,
                                                           root) -> None:
    """In one JVM the child is SIGKILLed three times while a statement holds its locks:
    each time that statement fails, and the next statement runs under locks taken by a new
    child (the one the next round finds holding X, and kills)."""
    out = spark_submit(tmp_path, zk_hosts, root, RESTART_APP, zk_hosts, root, retries=400)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    killed = [r["killed"] for r in seen["rounds"]]
    assert len(set(killed)) == 3, seen  # a new child each round, each found holding X
    for n, r in enumerate(seen["rounds"]):
        assert r["error"] and "lock client" in r["error"] and "died" in r["error"], r
        assert r["status"]["up"] and r["status"]["restarts"] == n + 1, r
        assert r["status"]["pid"] not in killed[:n + 1], r
    assert seen["rows"] == [0, 1, 2]  # the failed writes left nothing
    assert out.stderr.count("zklock: the lock client") >= 3  # each death, in one line



ATTACHED = """
import os, sys, time
from pyspark import SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession
import zklock.spark

gateway = launch_gateway()  # the JVM of the process that started this one (its env names it)
jvm = gateway.jvm
jsc = jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(
    jvm.org.apache.spark.SparkContext.getOrCreate())
spark = SparkSession(SparkContext(gateway=gateway, jsc=jsc))
zklock.spark.enforce(spark, hosts=sys.argv[1], root=sys.argv[2])
print("enforced", flush=True)
time.sleep(600)  # the subject: a lock client alive until the test SIGKILLs it
"""

ATTACHING_APP = """
import json, os, signal, subprocess, sys, threading
from polling import wait_for  # the suite's (spark_submit puts tests/ on the app's path)
from pyspark.sql import SparkSession
from zklock import LockManager

hosts, root, attached = sys.argv[1:4]
spark = SparkSession.builder.getOrCreate()  # zklock comes from spark-submit's conf only
spark.sql("CREATE TABLE t (id INT) USING parquet")
watcher = LockManager(hosts=hosts, root=root)


def attach(lock_root):
    # a second Python on this JVM, as a notebook server's kernels share one, enforce()s
    proc = subprocess.Popen([sys.executable, attached, hosts, lock_root],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "enforced"
    return proc


def kill(proc):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def insert(n):
    try:
        spark.sql(f"INSERT INTO t VALUES ({n})")
        return None
    except Exception as exc:
        return " | ".join(str(exc).strip().splitlines()[:3])[:600]


outcome, go, connected = {}, threading.Event(), threading.Event()


def slow():
    spark._jvm.java.lang.System.nanoTime()  # py4j connects this thread before others attach
    connected.set()
    go.wait()
    try:
        spark.sql(SLOW_INSERT)
        outcome["error"] = None
    except Exception as exc:
        outcome["error"] = str(exc).strip().splitlines()[0][:300]


writer = threading.Thread(target=slow)
writer.start()
connected.wait()
same = attach(root)
go.set()
held = wait_for(lambda: [r for r in watcher.show("default.t", extended=True)
                         if r.mode.value == "X"], timeout=120)
holder = held[0].data.pid
# the node is in ZooKeeper before the grant reaches the JVM: a kill in between refuses the
# statement before it runs. Kill it once the statement's job runs under the grant.
assert wait_for(lambda: spark.sparkContext.statusTracker().getActiveJobsIds(), timeout=120)
kill(same)  # while the slow insert holds X through it
writer.join(300)
after = insert(1)  # goes to the child, which locks where the dead client did
elsewhere = attach(root + "/elsewhere")
kill(elsewhere)
found_dead = insert(2)  # the statement that finds it dead does not run
refused = insert(4)  # the child would lock elsewhere than the dead client did: refused
rows = sorted(r.id for r in spark.read.parquet("wh/t").collect())
watcher.close()
print(json.dumps({"attached": same.pid, "holder": holder, "inflight": outcome["error"],
                  "after": after, "found_dead": found_dead, "refused": refused, "rows": rows}))
""".replace("SLOW_INSERT", repr(SLOW_INSERT))


@pytest.mark.soak  # a minute of a loaded worker: `make soak-spark` runs it, with the faults
def test_a_dead_python_lock_client_hands_over_to_the_child(spark, tmp_path, zk_hosts,
                                                          root) -> None:
    """A Python process attached to the application's JVM enforce()s, and is SIGKILLed
    while a statement holds its locks: that statement is all or nothing (it raised and
    wrote none, or returned and wrote all), and later statements run under locks taken by
    the child, but only where it locks where the dead client did. (A later enforce() in
    the JVM's first Python is not shown: after other Pythons had attached, py4j answered
    some of its callbacks with "Object ID unknown", a limit of sharing one JVM.)"""
    attached = tmp_path / "attached.py"
    attached.write_text(ATTACHED)
    out = spark_submit(tmp_path, zk_hosts, root, ATTACHING_APP, zk_hosts, root,
                       str(attached), retries=400)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["holder"] == seen["attached"], seen  # the slow insert was locked through it
    slow_rows = list(range(10, 60))
    if seen["inflight"] is None:  # it committed while the dead Python's locks still held
        assert set(slow_rows) <= set(seen["rows"]), seen
    else:
        assert "lost" in seen["inflight"], seen
        assert not set(slow_rows) & set(seen["rows"]), seen
    assert seen["after"] is None, seen
    assert seen["found_dead"] and "did not answer" in seen["found_dead"], seen
    assert seen["refused"] and "call enforce() again" in seen["refused"], seen
    assert f"locked in {zk_hosts.split('/')[0]}{root}" in seen["refused"], seen
    assert [r for r in seen["rows"] if r < 10] == [1], seen
    assert "stopped answering" in out.stderr


STREAM_APP = """
import json, sys
from pyspark.sql import SparkSession
from zklock import LockManager

hosts, root, source, checkpoint = sys.argv[1:5]
spark = SparkSession.builder.getOrCreate()  # zklock comes from spark-submit's conf only
spark.sql("CREATE TABLE ev (id INT) USING parquet")


def start():
    return (spark.readStream.schema("id INT").option("maxFilesPerTrigger", 1).json(source)
            .writeStream.option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).toTable("ev"))


holder = LockManager(hosts=hosts, root=root)  # another holder, with a session of its own
with holder.acquire([("default.ev", "X")], query_id="backfill-3"):
    query = start()
    try:
        query.awaitTermination()
        print("RAN")
    except Exception as exc:
        print("DENIED", str(exc).strip().splitlines()[0][:400])
holder.close()
query = start()  # again, from the checkpoint, with the table free
query.awaitTermination()
print(json.dumps({"rows": sorted(r.id for r in spark.table("ev").collect())}))
"""


def test_a_submitted_stream_is_locked_per_batch_by_the_child_lock_client(
        spark, tmp_path, zk_hosts, root) -> None:
    """spark-submit of a streaming app that knows nothing of zklock: each micro-batch takes
    its locks through the child lock client (a holder's X on the table denies the first
    batch, which writes nothing), and restarted from its checkpoint the query writes every
    row once, through zklock's sink (its records, no Spark log)."""
    source = tmp_path / "source"
    source.mkdir()
    for f in range(3):
        (source / f"f{f}.json").write_text("".join(
            json.dumps({"id": f * 10 + r}) + "\n" for r in range(10)))
    out = spark_submit(tmp_path, zk_hosts, root, STREAM_APP, zk_hosts, root, str(source),
                       str(tmp_path / "checkpoint"), retries=20)
    assert out.returncode == 0, out.stderr[-3000:]
    denied = [line for line in out.stdout.splitlines() if line.startswith("DENIED")]
    assert denied and "default.ev (X requested) is held in X" in denied[0], out.stdout
    # it said it waited, on the driver's stderr, naming the batch and the holder
    # (the statement cut to the notice's width)
    assert re.search(r"zklock: micro-batch 0 of stream \(id [-0-9a-f]+\) into \S+"
                     r" waits for X on default\.ev: .*backfill-3", out.stderr), [
        line for line in out.stderr.splitlines() if "waits" in line or "micro-batch" in line]
    rows = json.loads(out.stdout.splitlines()[-1])["rows"]
    assert rows == list(range(30))
    table = tmp_path / "wh" / "ev"
    assert not (table / "_spark_metadata").exists()
    assert list((table / "_zklock" / "batches").iterdir())


class ChildOnPipe:
    """``python -m zklock.spark.lock_process`` spoken to as ChildLockClient.java speaks to
    it: one JSON document a line each way, answers by id."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "zklock.spark.lock_process"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[dict] = queue.Queue()
        self.replies: dict[int, dict] = {}  # read before they were asked for
        threading.Thread(target=self._read, daemon=True).start()
        self.send({Field.CONF: conf})
        assert self.next(lambda m: m.get(Field.EVENT) == Event.READY)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def send(self, doc: dict) -> None:
        self.proc.stdin.write(json.dumps({Field.VERSION: lock_client.VERSION, **doc}) + "\n")
        self.proc.stdin.flush()

    def next(self, wanted) -> dict:
        """The next message ``wanted`` accepts; replies passed over are kept for
        :meth:`reply`, other messages (a waiting line) dropped."""
        while True:
            message = self.lines.get(timeout=60)
            if wanted(message):
                return message
            if Field.ID in message:
                self.replies[message[Field.ID]] = message

    def reply(self, ident: int) -> dict:
        """The answer to call ``ident``, in whatever order the child answered."""
        if ident not in self.replies:
            self.replies[ident] = self.next(lambda m: m.get(Field.ID) == ident)
        return self.replies.pop(ident)[Field.REPLY]

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def test_the_child_lock_client_cancels_a_waiting_request_over_its_pipe(
        make_manager, zk, zk_hosts, root) -> None:
    """Over the child's pipe, a cancel (GrantAhead.java's, when a stream stops while its
    batch waits) is answered at once, beside the waiting acquire it names, which answers
    cancelled while the holder holds on; a cancel sent before its acquire is kept for it.
    The child releases nothing it did not take."""
    held = make_manager().acquire([("db.t", "X")])
    child = ChildOnPipe({"spark.zklock.zookeeper.quorum": zk_hosts, "spark.zklock.root": root,
                         "spark.zklock.lock.retries": "100000",
                         "spark.zklock.lock.retryInterval": "0.5"})
    try:
        def acquire(ident: int, handle: str) -> None:
            child.send({Field.ID: ident, Field.CALL: Call.ACQUIRE, Field.REQUEST: {
                Field.VERSION: lock_client.VERSION, Field.HANDLE: handle,
                Field.STATEMENT: "INSERT INTO db.t ...",
                Field.ANSWER: json.loads(answer.write(normalize([("db.t", Mode.EXCLUSIVE)])))}})

        def cancel(ident: int, handle: str) -> None:
            child.send({Field.ID: ident, Field.CALL: Call.CANCEL, Field.HANDLE: handle})

        acquire(1, "waits")
        assert wait_for(lambda: zk.exists(f"{root}/.waits") and zk.get_children(f"{root}/.waits"))
        cancel(2, "waits")
        assert child.reply(2)[Field.OUTCOME] == Outcome.CANCELLED
        waited = child.reply(1)
        assert waited[Field.OUTCOME] == Outcome.CANCELLED, waited
        assert "cancelled after" in waited[Field.MESSAGE] and "db.t" in waited[Field.MESSAGE]
        assert held.is_valid
        assert wait_for(lambda: not zk.get_children(f"{root}/.waits"))  # (deleted async)
        cancel(3, "early")
        assert child.reply(3)[Field.OUTCOME] == Outcome.CANCELLED
        acquire(4, "early")
        early = child.reply(4)
        assert early[Field.OUTCOME] == Outcome.CANCELLED and "after 0 attempt" in early[
            Field.MESSAGE], early
        assert wait_for(lambda: sorted(lock_nodes(zk, f"{root}/db")) == sorted(held.node_paths))
    finally:
        assert child.close() == 0
        held.release()
