"""make demo: a small warehouse pipeline on PySpark and a shared Hive Metastore, checked.

Uses ZKLOCK_ZK when set; otherwise starts the embedded ZooKeeper in .zklock/ (and stops it
at the end unless ZKLOCK_DEMO_KEEP=1). It starts a Hive Metastore (``zklock metastore``)
in .zklock/demo/, rebuilt on every run, and every job below is a Spark application of its
own on that metastore, as on a platform: a partition one job adds is in every catalog at
once. Five PySpark jobs, a Spark Connect job and a scheduler process run concurrently:

1. ``setup`` builds sales.orders (partitioned by ds), the sales.customers dimension, a
   compact copy and a summary table, and creates two scheduled queries in SQL;
2. ``zklock scheduler run`` runs them: a compaction (INSERT OVERWRITE, every 10 s) and a
   summary rebuild (every 15 s);
3. ``backfill`` overwrites ds=2024-01-01 slowly (X on that partition), while ``ingest``
   adds three new partitions beside it;
4. ``report`` reads the whole fact table joined with the dimension: it waits for the
   backfill's X lock; ``schema`` adds a column to the dimension: it waits for the report;
5. ``connect`` runs the same kind of pipeline code over Spark Connect: a local Connect
   server with zklock's plugin plans its locks, the client takes them;
6. an operator takes a maintenance lease on the compacted table: the scheduled compaction
   waits (``zklock waits`` shows on whom) until the lease is dropped.

It prints `zklock show` and `zklock waits` snapshots at moments of contention, each with a
line saying what to look for, a summary of grants, denials, retries and waits per job, and
the scheduler's executions. Then it checks each claim of its conclusion against the lock
event log (scripts/demo_claims.py), prints each with the figure that proves it, and exits
1 when one does not hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from demo_claims import BACKFILLED, check  # noqa: E402
from zklock.cli.connect_server import ConnectServer  # noqa: E402
from zklock.cli.metastore import Metastore  # noqa: E402

from zklock import LockManager  # noqa: E402
from zklock.observe.events import read_events  # noqa: E402
from zklock.servers.ports import free_port  # noqa: E402
from zklock.servers.zookeeper import ZkServer  # noqa: E402

ZKLOCK = [str(Path(sys.executable).parent / "zklock")]
#: the demo's state: the metastore (Derby, warehouse), the event log, the jobs' logs
STATE = Path(".zklock/demo")


def zklock(hosts: str, *args: str, env: Optional[dict[str, str]] = None) -> None:
    print(f"$ zklock {' '.join(args)}", flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", *args], check=False,
                   env={**os.environ, "ZKLOCK_SCHEDULER_NAMESPACE": "demo", **(env or {})})


def snapshot(hosts: str, look_for: str, *commands: tuple[str, ...]) -> None:
    """`zklock show` / `zklock waits` now, after one line saying what they show."""
    print(f"-- {look_for}:", flush=True)
    for command in commands:
        zklock(hosts, *command)


def start_job(role: str, hosts: str, state: Path, metastore: dict[str, str]) -> subprocess.Popen:
    errors = open(state / f"{role}.log", "w")  # noqa: SIM115 (the process writes to it)
    proc = subprocess.Popen([sys.executable, str(HERE / "demo_job.py"), role, hosts,
                             str(state), json.dumps(metastore)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=errors, text=True)
    proc.role = role  # type: ignore[attr-defined]
    proc.errors = Path(errors.name)  # type: ignore[attr-defined]
    proc.ready = threading.Event()  # type: ignore[attr-defined]
    proc.lines = []  # type: ignore[attr-defined]

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            proc.lines.append(line)  # type: ignore[attr-defined]
            print(line, end="", flush=True)
            if "ready" in line:
                proc.ready.set()  # type: ignore[attr-defined]
    threading.Thread(target=pump, daemon=True).start()
    return proc


def wait_until(what: str, cond: Callable[[], Any], procs: Iterable[subprocess.Popen] = (),
               timeout: float = 180.0) -> None:
    """Poll ``cond`` until it holds; stop the demo (one line) when a job in ``procs``
    exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not cond():
        for proc in procs:
            if proc.poll() is not None:
                raise SystemExit(f"the {proc.role} job exited (code {proc.returncode}) before"  # type: ignore[attr-defined]
                                 f" {what}; see {proc.errors}")  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def go(proc: subprocess.Popen) -> None:
    wait_until(f"the {proc.role} job's Spark was up", proc.ready.is_set, [proc])  # type: ignore[attr-defined]
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]


def start_scheduler(hosts: str, state: Path, metastore: dict[str, str]) -> subprocess.Popen:
    """`zklock scheduler run` on the shared metastore."""
    env = {**os.environ, "ZKLOCK_ZK": hosts, "ZKLOCK_ROOT": "/demo",
           "ZKLOCK_SCHEDULER_NAMESPACE": "demo", "ZKLOCK_USER": "scheduler",
           "ZKLOCK_JOB": "scheduler", "ZKLOCK_EVENT_LOG": str(state / "events.jsonl")}
    conf = [arg for key, value in {"spark.master": "local[1]", **metastore}.items()
            for arg in ("--conf", f"{key}={value}")]
    print("$ zklock scheduler run --namespace demo --executors 2 --quiet-period 0"
          " --conf spark.hadoop.hive.metastore.uris=... ", flush=True)
    log = open(state / "scheduler.log", "w")  # noqa: SIM115 (the process writes to it)
    proc = subprocess.Popen(ZKLOCK + ["scheduler", "run", "--executors", "2",
                                      "--quiet-period", "0", *conf],
                            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    proc.role = "scheduler"  # type: ignore[attr-defined]
    proc.errors = Path(log.name)  # type: ignore[attr-defined]
    return proc


def stop_scheduler(hosts: str, proc: subprocess.Popen) -> None:
    """Disable both queries, let running executions end, then stop the process."""
    from zklock.scheduler.store import SchedulerStore

    from zklock.config import Settings
    from zklock.manager import connect

    for name in ("compact_orders", "rebuild_summary"):
        zklock(hosts, "schedule", "alter", name, "--disable", env={"ZKLOCK_USER": "setup"})
    settings = Settings.resolve({"hosts": hosts, "scheduler_namespace": "demo"})
    client = connect(settings)
    store = SchedulerStore(client, settings)
    wait_until("the scheduled executions ended",
               lambda: not any(q.active_execution for q in store.list_queries()), [proc], 60)
    client.stop()
    client.close()
    proc.terminate()
    proc.wait(60)


def holds(mgr: LockManager, obj: str, mode: str) -> bool:
    return any(r.object == obj and r.mode.value == mode for r in mgr.show())


def waits(mgr: LockManager, job: str) -> bool:
    return any(w.job == job for w in mgr.waits.list())


def granted_after(events: Path, job: str, obj: str, since_ms: int) -> bool:
    """Whether the event log has a grant to ``job`` holding ``obj`` stamped after since_ms."""
    return any(e["event"] == "grant" and e.get("job") == job and e["ts"] >= since_ms
               and any(o == obj for o, _ in e["locks"]) for e in read_events([str(events)]))


def summary(events_file: Path) -> None:
    """Grants, denials, retries and wait times per job, from the lock event log."""
    per: dict[str, dict[str, float]] = {}
    for e in read_events([str(events_file)]):
        row = per.setdefault(e.get("job", "?"), {"grants": 0, "denials": 0, "retries": 0,
                                                  "waited": 0, "wait_s": 0.0, "max_s": 0.0,
                                                  "losses": 0})
        if e["event"] == "grant":
            row["grants"] += 1
            wait = e.get("wait_ms", 0) / 1000
            row["wait_s"] += wait
            row["max_s"] = max(row["max_s"], wait)
            row["waited"] += e.get("attempts", 1) > 1
        elif e["event"] in ("denial", "retry", "loss"):
            row[{"denial": "denials", "retry": "retries", "loss": "losses"}[e["event"]]] += 1
    print("lock summary per job (from the event log):")
    print(f"  {'JOB':10} {'GRANTS':>6} {'DENIALS':>7} {'RETRIES':>7} {'WAITED':>6}"
          f" {'TOTAL WAIT':>10} {'LONGEST':>8} {'LOSSES':>6}")
    for job, r in sorted(per.items()):
        print(f"  {job:10} {r['grants']:6.0f} {r['denials']:7.0f} {r['retries']:7.0f}"
              f" {r['waited']:6.0f} {r['wait_s']:9.1f}s {r['max_s']:7.1f}s {r['losses']:6.0f}")


def timeline_picture(events_file: Path, out: Path) -> None:
    from zklock.observe.timeline import build, draw

    holds, marks = build(read_events([str(events_file)]))
    draw(holds, marks, str(out), title="make demo: who held what, when")
    print(f"timeline picture: {out}  (zklock timeline --events {events_file} -o ...)")


def run(hosts: str, state: Path, jobs: list[subprocess.Popen]) -> int:
    """The story; returns the exit code."""
    t_start = time.monotonic()
    metastore = Metastore(state, port=free_port())
    print(f"$ zklock metastore start  ->  {metastore.start()}", flush=True)
    conf = metastore.spark_conf()
    events = state / "events.jsonl"
    # the operator's lease goes into the event log too: the timeline draws it
    watcher = LockManager(hosts=hosts, root="/demo", event_log=str(events), job="ops")
    try:
        # a fresh start: no locks, scheduled queries or executions left from an earlier demo
        watcher.client.delete("/zklock/scheduler/demo", recursive=True)
        watcher.client.delete("/demo", recursive=True)
        print("starting six Spark applications on the shared metastore and a scheduler"
              " (each Spark starts in 10 to 40 s on 2 cores) ...", flush=True)
        job = {role: start_job(role, hosts, state, conf)
               for role in ("setup", "backfill", "ingest", "report", "schema", "connect")}
        jobs += job.values()
        go(job["setup"])
        wait_until("the setup job's scheduled queries",
                   lambda: any("rebuild_summary" in ln for ln in job["setup"].lines),
                   [job["setup"]])
        scheduler = start_scheduler(hosts, state, conf)
        jobs.append(scheduler)
        go(job["backfill"])
        wait_until("the backfill's X lock", lambda: holds(watcher, BACKFILLED, "X"),
                   [job["backfill"]])
        go(job["ingest"])
        go(job["report"])
        wait_until("the report's wait", lambda: waits(watcher, "report"), [job["report"]])
        snapshot(hosts, "the backfill holds X on ds=2024-01-01 and the ingest writes a new"
                        " partition beside it; in zklock waits, the report (and any scheduled"
                        " run) waits for the backfill", ("show", "--extended"), ("waits",))
        wait_until("the report's read", lambda: holds(watcher, "sales.customers", "S"),
                   [job["report"]])
        go(job["schema"])
        wait_until("the schema change's wait", lambda: waits(watcher, "schema"),
                   [job["schema"]])
        snapshot(hosts, "the report holds S on sales.customers while it reads; the schema"
                        " change waits for it", ("show",), ("waits",))
        go(job["connect"])
        codes = {role: job[role].wait(300) for role in ("backfill", "ingest", "report",
                                                          "schema", "connect")}
        print("an operator takes a maintenance lease on sales.orders_compact; the scheduled"
              " compaction waits", flush=True)
        # wait_s: a compaction may be running right now; the operator waits for it to end
        lease_id = watcher.grab_lease([("sales.orders_compact", "X")], duration_s=600,
                                      wait_s=60, holder="ops-maintenance")
        print(f"$ zklock lease grab sales.orders_compact:X --duration 10m  ->  {lease_id}")
        wait_until("the compaction's wait", lambda: waits(watcher, "scheduler"), [scheduler],
                   30)
        snapshot(hosts, "the scheduled compaction waits; BLOCKED_BY names the operator's"
                        " lease", ("waits",))
        dropped_ms = int(time.time() * 1000)
        zklock(hosts, "lease", "drop", str(lease_id), "--holder", "ops-maintenance",
               env={"ZKLOCK_EVENT_LOG": str(events), "ZKLOCK_JOB": "ops"})
        wait_until("the compaction's run after the lease",
                   lambda: granted_after(events, "scheduler", "sales.orders_compact",
                                         dropped_ms), [scheduler], 60)
        zklock(hosts, "scheduler", "status")
        stop_scheduler(hosts, scheduler)
        job["setup"].stdin.write("go\n")  # type: ignore[union-attr]
        job["setup"].stdin.flush()  # type: ignore[union-attr]
        codes["setup"] = job["setup"].wait(120)
        zklock(hosts, "show")
    finally:
        watcher.close()
        watcher.events.flush()
    summary(events)
    timeline_picture(events, state / "timeline.png")
    failed = {role: code for role, code in codes.items() if code}
    for role, code in failed.items():
        tail = job[role].errors.read_text(errors="replace").strip().splitlines()[-15:]  # type: ignore[attr-defined]
        print(f"--- the {role} job exited with code {code}; the end of its log:")
        print("\n".join(tail))
    explained = json.loads((state / "explain-locks.json").read_text()) \
        if (state / "explain-locks.json").exists() else {}
    claims = check(read_events([str(events)]), explained)
    print(f"what the event log shows ({events}):")
    for claim in claims:
        print(claim.line())
    elapsed = time.monotonic() - t_start
    if failed or not all(c.held for c in claims):
        print(f"the demo FAILED after {elapsed:.0f} s: "
              + ("a job failed" if failed else "a claim does not hold"))
        return 1
    print(f"done in {elapsed:.0f} s: every claim above holds")
    return 0


def main() -> int:
    hosts = os.environ.get("ZKLOCK_ZK")
    server = None
    if not hosts:
        server = ZkServer(Path(".zklock"), port=int(os.environ.get("ZKLOCK_DEMO_PORT", "2181")))
        started = server.pid() is None
        hosts = server.start()
        print(f"embedded ZooKeeper at {hosts}")
        if not started or os.environ.get("ZKLOCK_DEMO_KEEP"):
            server = None  # someone else's, or asked to keep it: leave it running
    state = STATE.resolve()
    Metastore(state).stop()  # an earlier demo's, if it was killed
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    jobs: list[subprocess.Popen] = []
    try:
        return run(hosts, state, jobs)
    finally:
        for proc in jobs:
            if proc.poll() is None:
                proc.kill()
        ConnectServer(state / "connect").stop()  # the connect job's, if it was killed
        Metastore(state).stop()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
