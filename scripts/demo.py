"""make demo: a small warehouse pipeline on PySpark, every job through LockingSession.

Uses ZKLOCK_ZK when set; otherwise starts the embedded ZooKeeper in .zklock/ (and stops it
at the end unless ZKLOCK_DEMO_KEEP=1). The warehouse lives in .zklock/demo-warehouse and
is rebuilt on every run. Five PySpark jobs and a scheduler process run concurrently:

1. ``setup`` builds sales.orders (partitioned by ds), the sales.customers dimension and a
   summary table, and creates two scheduled queries in SQL;
2. ``zklock scheduler run`` runs them: a compaction (INSERT OVERWRITE, every 10 s) and a
   summary rebuild (every 15 s);
3. ``backfill`` overwrites ds=2024-01-01 slowly (X on that partition), while ``ingest``
   adds three new partitions beside it;
4. ``report`` reads the whole fact table joined with the dimension: it waits for the
   backfill's X lock; ``schema`` adds a column to the dimension: it waits for the report;
5. an operator takes a maintenance lease on the compacted table: the scheduled compaction
   waits (``zklock waits`` shows on whom) until the lease is dropped;
6. ``connect`` runs the same kind of pipeline code over Spark Connect: a local Connect
   server with zklock's plugin plans its locks, the client takes them.

It prints `zklock show` and `zklock waits` snapshots taken during the run, a summary of
grants, denials, retries and waits per job (from the lock event log), the
scheduler's executions (``sysdb.scheduled_executions``) and the path of a timeline picture.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from zklock import LockManager  # noqa: E402
from zklock.server import ZkServer  # noqa: E402

ZKLOCK = [str(Path(sys.executable).parent / "zklock")]


def show(hosts: str, *args: str) -> None:
    print(f"$ zklock show {' '.join(args)}".rstrip(), flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "show", *args], check=False)


def lease_cli(hosts: str, *args: str) -> None:
    print(f"$ zklock lease {' '.join(args)}", flush=True)
    events = Path(".zklock/demo-warehouse/events.jsonl").resolve()
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "lease", *args], check=False,
                   env=dict(os.environ, ZKLOCK_EVENT_LOG=str(events), ZKLOCK_JOB="ops"))


def start_job(role: str, hosts: str, warehouse: Path) -> subprocess.Popen:
    errors = open(warehouse / f"{role}.log", "w")  # noqa: SIM115 (the process writes to it)
    proc = subprocess.Popen([sys.executable, str(HERE / "demo_job.py"), role, hosts,
                             str(warehouse)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errors, text=True)
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


def wait_ready(proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not proc.ready.wait(0.2):  # type: ignore[attr-defined]
        if proc.poll() is not None:
            raise SystemExit(f"a demo job exited early (code {proc.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit(f"a demo job did not start within {timeout:.0f} s")


def go(proc: subprocess.Popen) -> None:
    wait_ready(proc)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]


def waits_cli(hosts: str) -> None:
    print("$ zklock waits", flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "waits"], check=False)


def start_scheduler(hosts: str, warehouse: Path, events: Path) -> subprocess.Popen:
    """`zklock scheduler run` on the demo's catalog (its tables come from --init-sql)."""
    sys.path.insert(0, str(HERE))
    from demo_job import tables

    init = warehouse / "scheduler-init.sql"
    init.write_text(";\n".join(tables(str(warehouse))) + ";\n")
    env = {**os.environ, "ZKLOCK_ZK": hosts, "ZKLOCK_ROOT": "/demo",
           "ZKLOCK_SCHEDULER_NAMESPACE": "demo", "ZKLOCK_USER": "scheduler",
           "ZKLOCK_JOB": "scheduler", "ZKLOCK_EVENT_LOG": str(events)}
    print("$ zklock scheduler run --namespace demo --executors 2 --quiet-period 0"
          " --init-sql scheduler-init.sql", flush=True)
    log = open(warehouse / "scheduler.log", "w")  # noqa: SIM115 (the process writes to it)
    return subprocess.Popen(
        ZKLOCK + ["scheduler", "run", "--executors", "2", "--quiet-period", "0",
                  "--init-sql", str(init), "--conf", "spark.master=local[1]",
                  "--conf", f"spark.sql.warehouse.dir={warehouse}/_catalog_scheduler"],
        env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def scheduler_cli(hosts: str, *args: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"$ zklock {' '.join(args)}", flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", *args], check=False,
                   env={**os.environ, "ZKLOCK_SCHEDULER_NAMESPACE": "demo",
                        "ZKLOCK_USER": "setup"})


def stop_scheduler(hosts: str, proc: subprocess.Popen) -> None:
    """Disable both queries, let running executions end, then stop the process."""
    from zklock.scheduler.store import SchedulerStore

    from zklock.config import Settings
    from zklock.manager import connect

    for name in ("compact_orders", "rebuild_summary"):
        scheduler_cli(hosts, "schedule", "alter", name, "--disable")
    settings = Settings.resolve({"hosts": hosts, "scheduler_namespace": "demo"})
    client = connect(settings)
    store = SchedulerStore(client, settings)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(q.active_execution
                                               for q in store.list_queries()):
        time.sleep(0.2)
    client.stop()
    client.close()
    proc.terminate()
    proc.wait(60)


def wait_for_lock(mgr: LockManager, obj: str, mode: str = "X", timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r.object == obj and r.mode.value == mode for r in mgr.show()):
            return
        time.sleep(0.05)
    raise SystemExit(f"no {mode} lock on {obj} within {timeout:.0f}s")


def wait_for_waiter(mgr: LockManager, job: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(w.job == job for w in mgr.waits.list()):
            return
        time.sleep(0.1)


def summary(events_file: Path) -> None:
    """Grants, denials, retries and wait times per job, from the lock event log."""
    from zklock.events import read_events

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
    from zklock.events import read_events
    from zklock.timeline import build, draw

    holds, marks = build(read_events([str(events_file)]))
    draw(holds, marks, str(out), title="make demo: who held what, when")
    print(f"timeline picture: {out}  (zklock timeline --events {events_file} -o ...)")


def main() -> int:
    t_start = time.monotonic()
    hosts = os.environ.get("ZKLOCK_ZK")
    server = None
    if not hosts:
        server = ZkServer(Path(".zklock"), port=int(os.environ.get("ZKLOCK_DEMO_PORT", "2181")))
        started = server.pid() is None
        hosts = server.start()
        print(f"embedded ZooKeeper at {hosts}")
        if not started or os.environ.get("ZKLOCK_DEMO_KEEP"):
            server = None  # someone else's, or asked to keep it: leave it running
    warehouse = Path(".zklock/demo-warehouse").resolve()
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    events = warehouse / "events.jsonl"
    jobs: list[subprocess.Popen] = []
    try:
        # the operator's lease goes into the event log too: the timeline draws it
        watcher = LockManager(hosts=hosts, root="/demo", event_log=str(events),
                              job="ops")
        # a fresh start: no locks, scheduled queries or executions left from an earlier demo
        watcher.client.delete("/zklock/scheduler/demo", recursive=True)
        watcher.client.delete("/demo", recursive=True)
        print("starting five PySpark jobs and a scheduler (local Spark sessions start in"
              " about 10 to 30 s on 2 cores) ...", flush=True)
        setup = start_job("setup", hosts, warehouse)
        others = {role: start_job(role, hosts, warehouse)
                  for role in ("backfill", "ingest", "report", "schema")}
        jobs = [setup, *others.values()]
        go(setup)
        for job in others.values():
            wait_ready(job)
        while not any("compact_orders" in ln for ln in setup.lines):  # type: ignore[attr-defined]
            time.sleep(0.1)
        time.sleep(1.0)
        scheduler = start_scheduler(hosts, warehouse, events)
        jobs.append(scheduler)
        go(others["backfill"])
        wait_for_lock(watcher, "sales.orders/ds=2024-01-01")
        go(others["ingest"])
        go(others["report"])
        wait_for_waiter(watcher, "report")
        time.sleep(1.0)
        show(hosts, "--extended")  # backfill and ingest write side by side; report waits
        waits_cli(hosts)
        wait_for_lock(watcher, "sales.customers", "S", timeout=180)  # the report reads now
        go(others["schema"])
        wait_for_waiter(watcher, "schema", timeout=20)
        show(hosts)  # the report holds S on the dimension; the schema change waits
        waits_cli(hosts)
        codes = [others[r].wait(300) for r in ("backfill", "ingest", "report", "schema")]
        print("a sixth job does its work over Spark Connect (a local Connect server with"
              " zklock's plugin) ...", flush=True)
        connect = start_job("connect", hosts, warehouse)
        jobs.append(connect)
        others["connect"] = connect
        wait_ready(connect, timeout=240)
        go(connect)
        codes.append(connect.wait(300))
        print("an operator takes a maintenance lease on sales.orders_compact; the scheduled"
              " compaction waits", flush=True)
        # wait_s: a compaction may be running right now; the operator waits for it to end
        lease_id = watcher.grab_lease([("sales.orders_compact", "X")], duration_s=600,
                                      wait_s=60, holder="ops-maintenance")
        print(f"$ zklock lease grab sales.orders_compact:X --duration 10m  ->  {lease_id}")
        wait_for_waiter(watcher, "scheduler", timeout=30)
        waits_cli(hosts)
        lease_cli(hosts, "drop", str(lease_id), "--holder", "ops-maintenance")
        time.sleep(3.0)
        scheduler_cli(hosts, "scheduler", "status")
        stop_scheduler(hosts, scheduler)
        setup.stdin.write("go\n")  # type: ignore[union-attr]
        setup.stdin.flush()  # type: ignore[union-attr]
        codes.append(setup.wait(120))
        show(hosts)
        watcher.close()
        time.sleep(0.5)
        watcher.events.flush()
        summary(events)
        timeline_picture(events, Path(".zklock/demo-timeline.png").resolve())
        if any(codes):
            print(f"a demo job failed: exit codes {codes}")
            for job, code in zip([*others.values(), setup], codes):
                if code:
                    tail = job.errors.read_text(errors="replace").strip().splitlines()[-15:]
                    print(f"--- {job.role} (exit {code}), the end of {job.errors}:")
                    print("\n".join(tail))
            return 1
        print(f"done in {time.monotonic() - t_start:.0f}s: the report never saw a half-written"
              " partition, the writers of different partitions never waited for each other,"
              " and every scheduled run took the same locks as the pipeline")
    finally:
        for job in jobs:
            if job.poll() is None:
                job.kill()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
