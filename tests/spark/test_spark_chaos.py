"""Spark under fire: real Spark applications writing and reading shared tables through
zklock while a 3-node ensemble, the applications' connections, their lock nodes, their lock
client and their drivers are broken, judged by the data (tests/spark/soak_app.py runs each
application and records every statement's outcome).

Applications: a writer (a LockingSession overwriting numbered generations, another
appending batches with unique ids), two threads of one LockingSession appending to their
own partitions (on ``local-cluster``: executors in JVMs of their own), a plain-session
reader under ``enforce()``, a spark-submit application locked by the engine's child lock
client, a plain Spark Connect client of ``zklock spark connect-server``, a JDBC client
(PyHive, as dbt's ``thrift`` method connects) of ``zklock spark thrift-server`` (each
appending and reading); the reader's application also streams files into a table whose
other partition a backfill overwrites (the stream restarted from its checkpoint when it
fails).

Faults, one at a time: the ensemble's leader or a follower SIGKILLed (restarted 2 s later)
or paused past the session timeout; an application cut off from ZooKeeper past its session
timeout (blackhole; a server's connection for the Connect and JDBC clients); a lock node
deleted by another client; the child lock client SIGKILLed; the writer's driver SIGKILLed in
the middle of its writes (and started again); an executor JVM SIGKILLed.

Checked from the data: every acknowledged append is present exactly once; no batch whose
statement raised is present; no reader sees a mixed or partial generation, a file that is
gone, or a generation older than one it saw; no generation whose statement raised is ever
seen (no commit after a loss); every streamed file's batch is in the table whole and once
(all of them, once the stream's last run caught up), and the backfilled partition holds one
whole generation; afterwards no lock node is left, and no staging but what a
killed driver's write in flight left; every application recovers after each fault within
RECOVERY_S (a restarted driver's clock starts once it is ready again: Spark's own start is
reported apart).

ZKLOCK_CHAOS_SECONDS sets the length (150 s here, the run CI makes with `make soak-spark`;
docs/reliability.md has an hour's figures).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PROJECT, PYTHON, lock_nodes, wait_for
from kazoo.client import KazooClient
from polling import sessions_expired, sessions_left
from soak_app import BATCH_ROWS, GEN_ROWS, LOCK_TIMEOUT
from staging import leftover_staging

from zklock.spark.jvm import module_jar
from zklock.testing.proxy import FaultProxy

pytestmark = pytest.mark.soak

SECONDS = float(os.environ.get("ZKLOCK_CHAOS_SECONDS", "150"))
#: What the applications are given to start (six Spark applications on two cores took most of
#: 150 s): they run until STARTUP_S + SECONDS after the first launch, and the faults come for
#: SECONDS - 15 from the moment every one has run a statement, not from the launch (a window
#: counted from the launch was all but spent on Spark's starts: one fault, or none, a run).
STARTUP_S = 180.0
SESSION_TIMEOUT = 4.0
#: The bound on a fault's condition (sessions expired or moved): many session timeouts.
FAULT_WAIT = 15 * SESSION_TIMEOUT
#: How soon after a fault ends each application must complete a statement again (a killed
#: driver's, from when its new driver is ready).
RECOVERY_S = 120.0
APP = PROJECT / "tests" / "spark" / "soak_app.py"
ROLES = {"writer": "writer", "parts": "parts", "reader": "reader", "child": "child",
         "connect": "connect", "jdbc": "jdbc"}
#: The servers the Connect and JDBC clients go through, by role: the `zklock spark` group.
SERVERS = {"connect": "connect-server", "jdbc": "thrift-server"}
#: Errors a statement may meet under faults; anything else (a missing file above all) fails.
EXPECTED = {"LockNotAcquired", "LockLost", "ZooKeeperUnavailable", "UnsupportedStatement"}


class Apps:
    """The applications, each through fault proxies of its own to every ensemble member."""

    def __init__(self, ens, root: str, work: Path) -> None:
        self.ens, self.root, self.work = ens, root, work
        self.proxies = {n: [FaultProxy(("127.0.0.1", m.port)) for m in ens.members]
                        for n in ROLES}
        self.procs: dict[str, subprocess.Popen] = {}
        self.servers: dict[str, Path] = {}  # role -> the state dir of its server
        self.started = time.monotonic()
        (work / "out").mkdir(parents=True, exist_ok=True)

    def hosts(self, name: str) -> str:
        return ",".join(p.connect for p in self.proxies[name])

    def start(self, name: str) -> None:
        left = str(max(10.0, STARTUP_S + SECONDS - (time.monotonic() - self.started)))
        log = (self.work / f"{name}.log").open("a")
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
        args = [ROLES[name], self.hosts(name), self.root, str(self.work), left, name]
        if name in SERVERS:  # its server first, its ZooKeeper through the role's proxies
            args[1] = self.start_server(name)
        if name == "child":
            from zklock.cli.connect_server import pyspark_home

            cmd = [str(pyspark_home() / "bin" / "spark-submit"), "--master", "local[2]",
                   "--jars", str(module_jar()),
                   "--conf", "spark.sql.extensions=zklock.EngineLocks",
                   "--conf", "spark.plugins=zklock.EnginePlugin",
                   "--conf", f"spark.zklock.zookeeper.quorum={self.hosts(name)}",
                   "--conf", f"spark.zklock.root={self.root}",
                   "--conf", f"spark.zklock.session.timeout={SESSION_TIMEOUT}",
                   "--conf", f"spark.zklock.lock.timeout={LOCK_TIMEOUT}",
                   "--conf", "spark.zklock.lock.retryInterval=0.1",
                   "--conf", f"spark.sql.warehouse.dir={self.work / 'catalog-child'}",
                   "--conf", "spark.sql.hive.manageFilesourcePartitions=false",
                   "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=512m",
                   str(APP), *args]
            env["PYSPARK_PYTHON"] = PYTHON
        else:
            cmd = [PYTHON, str(APP), *args]
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=self.work,
                                            env=env)

    def start_server(self, name: str) -> str:
        """Start the role's zklock server; its address for the client."""
        from zklock.servers.ports import free_port

        state, port = self.work / f"{name}-server", free_port()
        self.servers[name] = state
        out = subprocess.run(
            [PYTHON, "-m", "zklock.cli.main", "--zk", self.hosts(name), "--root", self.root,
             "--state-dir", str(state), "spark", SERVERS[name], "start", "--port", str(port),
             "--warehouse", str(self.work / f"catalog-{name}"),
             "--conf", f"spark.zklock.session.timeout={SESSION_TIMEOUT}",
             "--conf", f"spark.zklock.lock.timeout={LOCK_TIMEOUT}",
             "--conf", "spark.zklock.lock.retryInterval=0.1",
             "--conf", "spark.sql.hive.manageFilesourcePartitions=false",
             "--conf", "spark.driver.memory=768m"],
            capture_output=True, text=True, timeout=300, cwd=self.work)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip() if name == "connect" else f"127.0.0.1:{port}"

    def executor(self) -> int | None:
        """The pid of an executor JVM of the partition writers' application."""
        app = self.procs["parts"].pid
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if "CoarseGrainedExecutorBackend" not in cmdline.read_text():
                    continue
                pid = int(cmdline.parent.name)
                parent = ppid(pid)
                if app in (parent, ppid(parent)):
                    return pid
            except (OSError, ValueError):
                continue
        return None

    def writing(self, name: str) -> bool:
        """Is a write of the running process of ``name`` in flight (started, not ended)?"""
        pid = self.procs[name].pid
        open_writes: set[str] = set()
        for r in records(self.work):
            if r["app"] == name and r["pid"] == pid and r.get("what") in ("gen", "batches"):
                (open_writes.add if r["kind"] == "start" else open_writes.discard)(r["key"])
        return bool(open_writes)

    def child_lock_client(self) -> int | None:
        """The pid of the child app's lock client: a process of its driver JVM's."""
        driver = self.procs["child"].pid
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmdline = (stat.parent / "cmdline").read_text()
            except OSError:
                continue
            if int(fields[1]) == driver and "zklock.spark.lock_process" in cmdline:
                return int(stat.parent.name)
        return None

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(30)
        for name, state in self.servers.items():
            subprocess.run([PYTHON, "-m", "zklock.cli.main", "--state-dir", str(state),
                            "spark", SERVERS[name], "stop"], capture_output=True, timeout=120)
        for ps in self.proxies.values():
            for p in ps:
                p.close()


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def records(work: Path) -> list[dict]:
    out = []
    for path in sorted((work / "out").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line its application is writing now
                continue
    return out


def table_batches(path: Path) -> dict[str, int]:
    """Rows per batch in a table's files, as any reader sees them (pyarrow skips `_`
    and `.` paths, as Spark does)."""
    import pyarrow.dataset as ds

    if not path.exists():
        return {}
    dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
    if not dataset.files:  # created, never written (an application whose start took the run)
        return {}
    table = dataset.to_table(columns=["batch"])
    counts: dict[str, int] = {}
    for batch in table.column("batch").to_pylist():
        counts[batch] = counts.get(batch, 0) + 1
    return counts


def test_spark_under_chaos(ensemble, tmp_path):
    ens = ensemble
    rng = random.Random(int(os.environ.get("ZKLOCK_CHAOS_SEED", "11")))
    root = f"/spark-chaos-{rng.randrange(1 << 30):x}"
    apps = Apps(ens, root, tmp_path)
    for name in ROLES:
        apps.start(name)
    faults: list[dict] = []
    operator = KazooClient(hosts=ens.connect)
    operator.start(timeout=30)
    kinds = ["kill-leader", "kill-follower", "pause-member", "blackhole-app", "delete-node",
             "kill-child", "kill-driver", "kill-executor"]
    try:
        # the faults start once every application has run a statement (Spark is up)
        assert wait_for(lambda: {r["app"] for r in records(tmp_path)
                                 if r.get("kind") == "end" and r.get("ok")} >= set(ROLES),
                        timeout=240), "an application never ran a statement"
        ready = time.monotonic()
        window_end = min(ready + SECONDS, apps.started + STARTUP_S + SECONDS) - 15
        while time.monotonic() < window_end:
            kind = rng.choice(kinds)
            fault = {"kind": kind, "at": time.time()}
            leader = ens.leader()
            if kind in ("kill-leader", "kill-follower"):
                i = leader if kind == "kill-leader" and leader is not None else rng.choice(
                    [m for m in range(3) if m != leader])
                ens.kill(i)
                time.sleep(2)  # pacing: the fault itself, a member down for 2 s
                ens.restart(i)
            elif kind == "pause-member":
                i = rng.randrange(3)
                stalled = ens.connected_sessions(i)
                ens.pause(i)
                # stalled past the session timeout: its clients' sessions moved or expired
                assert wait_for(lambda i=i, s=stalled: sessions_left(ens, i, s),
                                timeout=FAULT_WAIT)
                ens.resume(i)
                ens.wait_serving(60)
            elif kind == "blackhole-app":
                name = rng.choice(list(ROLES))
                fault["app"] = name
                for p in apps.proxies[name]:
                    p.blackhole = True
                cut = set().union(*(set(p.sessions) for p in apps.proxies[name]))
                assert wait_for(lambda cut=cut: sessions_expired(ens, cut), timeout=FAULT_WAIT)
                for p in apps.proxies[name]:
                    p.blackhole = False
                    p.drop_all()
            elif kind == "delete-node":
                held = lock_nodes(operator, root)
                if not held:
                    continue
                node = rng.choice(held)
                try:
                    operator.delete(node)
                except Exception:  # released meanwhile: no fault
                    continue
                fault["node"] = node
            elif kind in ("kill-child", "kill-executor"):
                # the child lock client (the next statement starts another), or an executor
                # JVM of the partition writers (Spark runs its tasks again elsewhere)
                app, pid = (("child", apps.child_lock_client()) if kind == "kill-child"
                            else ("parts", apps.executor()))
                if pid is None:
                    continue
                os.kill(pid, signal.SIGKILL)
                fault["app"] = app
            elif kind == "kill-driver":  # in the middle of a write
                if not wait_for(lambda: apps.writing("writer"), timeout=30, step=0.02):
                    continue
                apps.procs["writer"].send_signal(signal.SIGKILL)
                apps.procs["writer"].wait(30)
                fault["app"] = "writer"
                apps.start("writer")
            fault["end"] = time.time()
            faults.append(fault)
            time.sleep(rng.uniform(2.0, 5.0))  # pacing: the harness's cadence of faults
        for p in apps.procs.values():
            p.wait(timeout=STARTUP_S + SECONDS + 300)
    finally:
        apps.stop()
        operator.stop()
        operator.close()
    zk = KazooClient(hosts=ens.connect)
    zk.start(timeout=30)
    try:
        orphans = wait_for(lambda: not lock_nodes(zk, root), timeout=60) or lock_nodes(zk, root)
    finally:
        zk.stop()
        zk.close()
    summary = judge(records(tmp_path), faults, tmp_path)
    summary["orphans"] = [] if orphans is True else orphans
    print("SPARK-CHAOS", json.dumps(summary))
    if os.environ.get("ZKLOCK_CHAOS_REPORT"):
        report = Path(os.environ["ZKLOCK_CHAOS_REPORT"])
        report.parent.mkdir(parents=True, exist_ok=True)
        # with every fault's times, to set beside the applications' records (out/*.jsonl)
        # when a check fails
        report.write_text(json.dumps({**summary, "fault_log": faults}, indent=2))
    # (every application ran a statement before the faults began; most of a short run on two
    # cores goes to starting seven Spark JVMs and two servers)
    assert summary["statements"] > 20, summary
    # the stream wrote: its last run caught up with every file the feeder wrote (one at least)
    assert summary["stream_caught_up"] and summary["stream_files"] > 0, summary
    for check in ("missing_acked", "duplicated", "raised_present", "partial_batches",
                  "mixed_generations", "older_generations", "raised_generations_seen",
                  "unexpected_errors", "orphans", "unexplained_staging", "unrecovered",
                  "stream_partial_or_doubled", "stream_files_missing", "backfill_mixed"):
        assert not summary[check], (check, summary[check])


def judge(lines: list[dict], faults: list[dict], work: Path) -> dict:
    """Every check, from the records and the tables' files."""
    starts = {(r["app"], r["pid"], r["what"], r["key"]) for r in lines if r.get("kind") == "start"}
    ends = {(r["app"], r["pid"], r["what"], r["key"]): r for r in lines if r.get("kind") == "end"}
    acked, raised, unknown = {}, set(), set()
    for what in ("batches", "parts"):
        acked[what] = {k[3] for k, r in ends.items() if k[2] == what and r["ok"]}
        raised |= {k[3] for k, r in ends.items() if k[2] == what and not r["ok"]}
        unknown |= {k[3] for k in starts - set(ends) if k[2] == what}
    data = work / "data"
    present = {**table_batches(data / "batches"), **table_batches(data / "parts")}
    all_acked = acked["batches"] | acked["parts"]
    out = {
        "statements": len(ends),
        "faults": {k: sum(1 for f in faults if f["kind"] == k)
                   for k in sorted({f["kind"] for f in faults})},
        "acked_appends": len(all_acked),
        "raised_appends": len(raised),
        "unknown_appends": len(unknown),
        "missing_acked": sorted(b for b in all_acked if b not in present),
        "duplicated": sorted(b for b, n in present.items() if n > BATCH_ROWS),
        "raised_present": sorted(b for b in raised if b in present),
        "partial_batches": sorted(b for b, n in present.items() if n != BATCH_ROWS),
    }
    raised_gens = {k[3] for k, r in ends.items() if k[2] == "gen" and not r["ok"]}
    mixed, older, raised_seen = [], [], []
    newest: dict[tuple, int] = {}
    for r in sorted((r for r in lines if r.get("kind") == "end" and r.get("ok")
                     and r["what"] in ("read-gen", "read-batches")), key=lambda r: r["t"]):
        who = (r["app"], r["pid"])
        if r["what"] == "read-gen":
            gens = r.get("seen") or []
            if len(gens) > 1 or any(n != GEN_ROWS for _, n in gens):
                mixed.append(gens)
            for g, _ in gens:
                if g < newest.get(who, 0):
                    older.append((who, g, newest[who]))
                newest[who] = max(newest.get(who, 0), g)
                if str(g) in raised_gens:
                    raised_seen.append(g)
        else:
            seen = r.get("seen") or {}
            out["partial_batches"] += [b for b, n in seen.items() if n != BATCH_ROWS]
            out["raised_present"] += [b for b in seen if b in raised]
    out["mixed_generations"] = mixed[:5]
    out["older_generations"] = older[:5]
    out["raised_generations_seen"] = raised_seen[:5]
    errors: dict[str, int] = {}
    unexpected = []
    for r in ends.values():
        if not r["ok"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
            if r["error"] not in EXPECTED:
                unexpected.append(f"{r['app']} {r['what']}: {r['error']}: {r['message']}")
    out["errors"] = errors
    out["unexpected_errors"] = unexpected[:10]
    # a driver SIGKILLed in the middle of a write leaves that write's staging (the writer's
    # tables); nothing else may be left
    killed_in_flight = sum(1 for f in faults if f["kind"] == "kill-driver")
    left = leftover_staging(data) if data.exists() else []
    out["staging_left"] = left
    writers = [p for p in left if p.split("/")[0] in ("gen", "batches")]
    out["unexplained_staging"] = ([p for p in left if p not in writers]
                                  + (writers if len(writers) > killed_in_flight else []))
    # an application has recovered when it next runs a statement. Where its driver was
    # killed and started again meanwhile, the clock starts when the new driver is ready:
    # Spark's own start (a JVM, the catalog) is not zklock's recovery, and is reported apart
    readies = sorted((r["t"], r["app"]) for r in lines if r.get("kind") == "ready")
    launched = {(r["app"], r["pid"]): r["t"] for r in lines if r.get("kind") == "launch"}
    first_pid, last_pid = {}, {}
    for r in sorted(lines, key=lambda r: r["t"]):
        first_pid.setdefault(r["app"], r["pid"])
        last_pid[r["app"]] = r["pid"]
    restarts = sorted(r["t"] - launched[(r["app"], r["pid"])] for r in lines
                      if r.get("kind") == "ready" and (r["app"], r["pid"]) in launched
                      and r["pid"] != first_pid[r["app"]])
    out["driver_restarts"] = len(restarts)
    out["max_driver_restart_s"] = round(max(restarts, default=0.0), 1)
    recovery = []
    unrecovered = []
    oks = sorted((r["t"], r["app"]) for r in lines if r.get("kind") == "end" and r.get("ok"))
    last_t = max((r["t"] for r in lines), default=0)
    # an application's chance to recover ends with its run (its deadline passed, it wrote
    # "done"): a driver restarted late may be ready only as its run ends. One that never
    # wrote "done" (it died) is judged to the last record of all
    done = {r["app"]: r["t"] for r in lines if r.get("kind") == "done"
            and r["pid"] == last_pid[r["app"]]}
    for f in faults:
        for app in ({f["app"]} if "app" in f else set(ROLES)):
            ended = done.get(app, last_t)
            after = next((t for t, a in oks if a == app and t > f["end"]), None)
            since = max([f["end"]] + [t for t, a in readies if a == app
                                      and f["end"] < t < (after or ended)])
            if after is None:
                if ended - since > RECOVERY_S:
                    unrecovered.append((f["kind"], app))
                continue
            recovery.append(after - since)
            if after - since > RECOVERY_S:
                unrecovered.append((f["kind"], app, round(after - since, 1)))
    out["max_recovery_s"] = round(max(recovery, default=0.0), 1)
    out["unrecovered"] = unrecovered
    out.update(judge_stream(lines, work))
    return out


def judge_stream(lines: list[dict], work: Path) -> dict:
    """The streamed table: every source file's batch whole and once (all of them once the
    last availableNow run completed), and the backfilled partition one whole generation."""
    import pyarrow.dataset as ds

    events = work / "data" / "events"
    present = table_batches(events)
    files = sorted(int(f.stem) for f in (work / "source").glob("*.json"))
    caught_up = any(r.get("what") == "stream-final" and r.get("kind") == "end" and r["ok"]
                    for r in lines)
    streamed = {b: n for b, n in present.items() if b.startswith("file-")}
    old = []
    if (events / "p=old").exists():
        old = ds.dataset(str(events / "p=old"), format="parquet").to_table(
            columns=["batch"]).column("batch").to_pylist()
    return {
        "stream_files": len(files), "stream_batches_present": len(streamed),
        "stream_runs_failed": sum(1 for r in lines if r.get("what") == "stream"
                                  and r.get("kind") == "end" and not r["ok"]),
        "stream_caught_up": caught_up,
        "stream_partial_or_doubled": sorted(b for b, n in streamed.items() if n != BATCH_ROWS),
        "stream_files_missing": sorted(n for n in files if f"file-{n}" not in streamed)
        if caught_up else [],
        "backfill_mixed": sorted(set(old)) if len(set(old)) > 1 or (
            old and len(old) != BATCH_ROWS) else [],
    }
